"""DRF permissions for API-key-authenticated requests."""
from rest_framework.permissions import BasePermission

from .models import ApiKey


class HasAccountKey(BasePermission):
    """Allows requests authenticated with an (active) account API key."""

    def has_permission(self, request, view):
        return isinstance(request.auth, ApiKey)
