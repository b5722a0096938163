"""`manage.py sync_catalog`: create or upgrade the official plugins from plugins_app/catalog/."""

from typing import Any

from django.core.management.base import BaseCommand, CommandError

from plugins_app.services.plugins.catalog import sync_catalog
from plugins_app.services.plugins.settings import ManifestError


class Command(BaseCommand):
    help = "Create or upgrade the official plugins; installations keep their chain positions."

    def handle(self, *args: Any, **options: Any) -> None:
        try:
            results = sync_catalog()
        except ManifestError as exc:
            raise CommandError(f"the catalog is broken: {exc}") from None
        for result in results:
            self.stdout.write(str(result))
        self.stdout.write(self.style.SUCCESS(f"{len(results)} official plugins in sync"))
