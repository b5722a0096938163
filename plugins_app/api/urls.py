"""API v1 routes (placeholder until the plugins engineer replaces it)."""
urlpatterns = []
