"""`manage.py rotate_secrets_key`: re-encrypt every account secret with the current HUB_SECRETS_KEY."""

from typing import Any

from django.core.management.base import BaseCommand, CommandError

from plugins_app.services.secrets.store import rotate_all


class Command(BaseCommand):
    help = ("Re-encrypt every account secret with the key derived from HUB_SECRETS_KEY (or SECRET_KEY); "
            "afterwards the old key can leave HUB_SECRETS_KEY_FALLBACKS.")

    def handle(self, *args: Any, **options: Any) -> None:
        try:
            count = rotate_all()
        except ValueError as exc:   # a value no configured key decrypts: nothing was changed
            raise CommandError(str(exc)) from None
        self.stdout.write(self.style.SUCCESS(f"re-encrypted {count} secret(s) with the current key"))
