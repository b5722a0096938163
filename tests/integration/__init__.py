"""Tests that start real services (Redis, Celery workers and beat) in their own processes."""
