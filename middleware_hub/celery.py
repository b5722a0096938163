"""Celery application for Middleware Hub, configured from Django settings (CELERY_*)."""
import os

from celery import Celery

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "middleware_hub.settings")

app = Celery("middleware_hub")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()
