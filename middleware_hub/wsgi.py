"""WSGI entry point for Middleware Hub (e.g. `gunicorn middleware_hub.wsgi`)."""
import os

from django.core.wsgi import get_wsgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "middleware_hub.settings")

application = get_wsgi_application()
