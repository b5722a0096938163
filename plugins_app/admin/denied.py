"""The 403 page: says what happened in the admin's own frame, with a way back."""

from django.contrib import admin
from django.template.response import TemplateResponse

from .scoping import roles


def permission_denied(request, exception=None):
    context = {
        **admin.site.each_context(request),
        "title": "You can't open this page",
        "reason": str(exception) if exception and str(exception) else "",
        "is_auditor": bool(roles(request)) and all(role != "admin" for role in roles(request).values()),
        "back_url": request.META.get("HTTP_REFERER", ""),
    }
    response = TemplateResponse(request, "admin/hub/403.html", context, status=403)
    return response.render()
