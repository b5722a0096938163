"""`manage.py add_member ACCOUNT USERNAME --role admin|auditor [--password P]`."""
import getpass
import sys
from argparse import ArgumentParser
from typing import Any

from django.contrib.auth import get_user_model
from django.contrib.auth.password_validation import validate_password
from django.core.exceptions import ValidationError
from django.core.management.base import BaseCommand, CommandError

from accounts import services
from accounts.models import Membership


class Command(BaseCommand):
    help = (
        "Give USERNAME a role in ACCOUNT, creating the account and the (staff) user if missing. "
        "A new user needs a password: --password, or a prompt when standard input is a terminal. "
        "Re-running for an existing member changes the role."
    )

    def add_arguments(self, parser: ArgumentParser) -> None:
        parser.add_argument("account_name")
        parser.add_argument("username")
        parser.add_argument("--role", required=True, choices=Membership.Role.values)
        parser.add_argument("--password", help="Set (or reset) the user's password.")

    def handle(self, *args: Any, account_name: str, username: str, role: str, password: str | None,
               **options: Any) -> None:
        user_exists = get_user_model().objects.filter(username=username).exists()
        if password is None and not user_exists:
            password = self._prompt_password(username)
        if password is not None:
            self._validate_password(password, username)

        try:
            user, created = services.add_member(account_name, username, role, password=password)
        except ValueError as exc:
            raise CommandError(str(exc)) from exc
        verb = "Created user" if created else "Updated user"
        self.stdout.write(f"{verb} {user.username!r}: {role} of account {account_name.strip()!r}.")

    def _prompt_password(self, username: str) -> str:
        if not sys.stdin.isatty():
            raise CommandError(f"user {username!r} does not exist: give --password (no terminal to prompt on)")
        first = getpass.getpass(f"Password for {username}: ")
        second = getpass.getpass("Password (again): ")
        if first != second:
            raise CommandError("passwords do not match")
        if not first:
            raise CommandError("password must not be empty")
        return first

    def _validate_password(self, password: str, username: str) -> None:
        user = get_user_model()(username=username)
        try:
            validate_password(password, user)
        except ValidationError as exc:
            raise CommandError("; ".join(exc.messages)) from exc
