"""API error handling (placeholder: DRF's default handler until the plugins engineer replaces it)."""
from rest_framework.views import exception_handler

__all__ = ["exception_handler"]
