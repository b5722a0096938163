"""DRF authentication by account API key sent as `Authorization: Bearer mh_...`."""
from __future__ import annotations

from typing import TYPE_CHECKING

from rest_framework.authentication import BaseAuthentication, get_authorization_header
from rest_framework.exceptions import AuthenticationFailed

from .key_use import recorder as key_use
from .models import Account, ApiKey

if TYPE_CHECKING:   # DRF loads this class from its settings while rest_framework.views is importing
    from rest_framework.request import Request


INVALID_KEY_MESSAGE = "invalid or revoked API key"


class ApiPrincipal:
    """The `request.user` of an API request: the account a key belongs to, not a Django user."""

    is_authenticated = True
    is_anonymous = False

    def __init__(self, account: Account) -> None:
        self.account = account

    def __str__(self) -> str:
        return f"api:{self.account}"

    def __repr__(self) -> str:
        return f"<ApiPrincipal account={self.account.pk}>"


class ApiKeyAuthentication(BaseAuthentication):
    keyword = "Bearer"

    def authenticate(self, request: Request) -> tuple[ApiPrincipal, ApiKey] | None:
        parts = get_authorization_header(request).split()
        if not parts or parts[0].lower() != self.keyword.lower().encode():
            return None
        if len(parts) != 2:
            raise AuthenticationFailed(INVALID_KEY_MESSAGE)
        try:
            raw_key = parts[1].decode("ascii")
        except UnicodeDecodeError:
            raise AuthenticationFailed(INVALID_KEY_MESSAGE) from None

        api_key = ApiKey.lookup(raw_key)
        if api_key is None:
            raise AuthenticationFailed(INVALID_KEY_MESSAGE)
        key_use.note(api_key)
        return ApiPrincipal(api_key.account), api_key

    def authenticate_header(self, request: Request) -> str:
        # A WWW-Authenticate value makes DRF answer 401 rather than 403.
        return f'{self.keyword} realm="api"'
