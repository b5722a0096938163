"""What every endpoint package of the API builds on (as Sentry's `api/bases/`): the account-scoped view,
the paginated audit-style list, the page size rules, the body reader and the id field. Endpoint
packages import these from here, never from each other's views (a package may use another's
serializers: the chain answer is execution's, an installation's shape is plugins')."""

from collections.abc import Callable
from typing import Any, cast

from django.core.exceptions import FieldDoesNotExist
from django.db.models import QuerySet
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import extend_schema, extend_schema_field
from rest_framework import generics, serializers
from rest_framework.pagination import PageNumberPagination
from rest_framework.request import Request
from rest_framework.views import APIView

from accounts.models import Account, ApiKey
from plugins_app.api.dry_run import refuse_where_absent
from plugins_app.api.edge import check_request
from plugins_app.errors import NotFound


# No class docstrings on AccountView and Pagination: drf-spectacular describes an operation with the
# first docstring up its view's class tree, so one here would become the description of every view
# that has none of its own (and change the OpenAPI schema).
class AccountView(APIView):
    # The account of the request's API key; every query a view makes is scoped to it.

    @property
    def account(self) -> Account:
        # accounts.permissions.HasAccountKey lets no request reach a view without an ApiKey as its auth.
        return cast(ApiKey, self.request.auth).account

    def initial(self, request: Request, *args: Any, **kwargs: Any) -> None:
        super().initial(request, *args, **kwargs)
        check_request(self, request, kwargs)
        refuse_where_absent(self, request)


@extend_schema(exclude=True)
class UnknownPathView(AccountView):
    # The last route under /api/v1/: a path no endpoint has answers the API's JSON error (404), not
    # Django's HTML page, for any method and before the key is checked (no such path exists for anyone).

    def initial(self, request: Request, *args: Any, **kwargs: Any) -> None:
        raise NotFound(f"no API endpoint at {request.path}; the endpoints are listed at /api/docs/")


class Pagination(PageNumberPagination):
    # ?page=n&pageSize=m; the default size is REST_FRAMEWORK's PAGE_SIZE.
    page_size_query_param = "pageSize"
    max_page_size = 500


class AuditListView(AccountView, generics.ListAPIView):
    """A paginated, filtered, account-scoped list; `query(account, params)` does the filtering."""

    pagination_class = Pagination
    query: Callable[..., Any] | None = None

    def get_queryset(self) -> QuerySet[Any]:
        query = type(self).query
        assert query is not None, f"{type(self).__name__} sets `query` or overrides get_queryset"
        return query(self.account, self.request.query_params)


def validated(serializer_class: type[serializers.Serializer], data: Any) -> dict[str, Any]:
    """`data` checked by `serializer_class` (400 with the first bad field when it fails), as a dict of
    the fields it declares."""
    serializer = serializer_class(data=data)
    serializer.is_valid(raise_exception=True)
    return serializer.validated_data


@extend_schema_field(OpenApiTypes.STR)
class StrIdField(serializers.Field):
    """An id as a string; null (and documented as nullable) when its model field may be null, as an
    uninstalled plugin's installation in the change log or the cancel log."""

    def bind(self, field_name: str, parent: serializers.BaseSerializer) -> None:
        super().bind(field_name, parent)
        model = getattr(getattr(parent, "Meta", None), "model", None)
        source: str = self.source or field_name   # Field.bind has set it (to the field's name by default)
        name = source.removesuffix("_id")
        if model is not None and "." not in name:
            try:
                self.allow_null = model._meta.get_field(name).null
            except FieldDoesNotExist:   # "pk" and other names that are no field
                pass

    def to_representation(self, value: Any) -> str | None:
        return None if value is None else str(value)
