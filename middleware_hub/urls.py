"""Root URL configuration: admin, the versioned API and its OpenAPI schema and docs."""
from django.contrib import admin
from django.urls import include, path
from django.views.generic import RedirectView
from drf_spectacular.views import SpectacularAPIView

from plugins_app.api.docs import ApiDocsView
from plugins_app.api.observability import views as ops_views

urlpatterns = [
    path("", RedirectView.as_view(pattern_name="admin:index", permanent=False)),
    path("admin/", admin.site.urls),
    path("api/v1/", include("plugins_app.api.urls")),
    path("api/schema/", SpectacularAPIView.as_view(), name="schema"),
    path("api/docs/", ApiDocsView.as_view(url_name="schema"), name="api-docs"),
    path("healthz", ops_views.HealthView.as_view(), name="healthz"),
    path("readyz", ops_views.ReadyView.as_view(), name="readyz"),
    path("metrics", ops_views.MetricsView.as_view(), name="metrics"),
]

# Refusals inside the admin's frame, with a way back (the API answers its own JSON errors).
handler403 = "plugins_app.admin.denied.permission_denied"
