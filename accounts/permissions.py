"""DRF permissions for API-key-authenticated requests."""
from __future__ import annotations

from typing import TYPE_CHECKING

from rest_framework.permissions import BasePermission

from .models import ApiKey

if TYPE_CHECKING:   # DRF loads this class from its settings while rest_framework.views is importing
    from rest_framework.request import Request
    from rest_framework.views import APIView



class HasAccountKey(BasePermission):
    """Allows requests authenticated with an (active) account API key."""

    def has_permission(self, request: Request, view: APIView) -> bool:
        return isinstance(request.auth, ApiKey)
