"""The API's docs page: drf-spectacular's Swagger UI, with the execute examples keeping the path's hook in step."""

from drf_spectacular.views import SpectacularSwaggerView


class ApiDocsView(SpectacularSwaggerView):
    """Swagger UI served from this hub; static/hub_api/docs.js sets execute's `hook` to the example chosen."""

    template_name = "api/docs.html"
