"""`manage.py create_api_key ACCOUNT [--name N]`: issue a key; the raw key is the last stdout line."""
from argparse import ArgumentParser
from typing import Any

from django.core.management.base import BaseCommand, CommandError

from accounts import services


class Command(BaseCommand):
    help = (
        "Issue an API key for ACCOUNT_NAME, creating the account if missing. "
        "The raw key is printed once, alone on the last line of standard output."
    )

    def add_arguments(self, parser: ArgumentParser) -> None:
        parser.add_argument("account_name")
        parser.add_argument("--name", default="", help="A label for the key, e.g. where it is used.")

    def handle(self, *args: Any, account_name: str, name: str, **options: Any) -> None:
        try:
            raw_key = services.create_api_key(account_name, key_name=name)
        except ValueError as exc:
            raise CommandError(str(exc)) from exc
        # Notes go to stderr so that `KEY=$(manage.py create_api_key acme)` captures only the key.
        self.stderr.write(f"API key issued for account {account_name.strip()!r}; it will not be shown again:")
        self.stdout.write(raw_key)
