"""Account scoping for admin pages: querysets, permissions, choices and filters follow memberships."""

from __future__ import annotations

import functools
from collections.abc import Callable, Collection
from typing import TYPE_CHECKING, Any

from django.contrib import admin, messages
from django.core.exceptions import FieldDoesNotExist, PermissionDenied
from django.db.models import Model, QuerySet
from django.http import Http404, HttpRequest
from django.utils.text import capfirst

from accounts.models import Account, Membership

ADMIN = Membership.Role.ADMIN

# What the mixins below are mixed into, for the checker (at run time they derive from object).
if TYPE_CHECKING:
    _BaseAdmin = admin.options.BaseModelAdmin[Any]
    _ModelAdmin = admin.ModelAdmin[Any]
else:
    _BaseAdmin = _ModelAdmin = object


def roles(request) -> dict[int, str]:
    """{account id: role} of the requesting user, computed once per request."""
    cached = getattr(request, "_hub_account_roles", None)
    if cached is None:
        user = request.user
        if not (user.is_active and user.is_staff):
            cached = {}
        else:
            cached = dict(Membership.objects.filter(user=user).values_list("account_id", "role"))
        request._hub_account_roles = cached
    return cached


def is_operator(request: HttpRequest) -> bool:
    return request.user.is_active and request.user.is_superuser


def admin_account_ids(request: HttpRequest) -> set[int]:
    """Accounts the user administers through a membership (callers check operators first)."""
    return {account_id for account_id, role in roles(request).items() if role == ADMIN}


def member_account_ids(request: HttpRequest) -> set[int]:
    return set(roles(request))


def editable_accounts(request: HttpRequest) -> QuerySet[Account]:
    """The accounts a form may assign a row to."""
    if is_operator(request):
        return Account.objects.all()
    return Account.objects.filter(pk__in=admin_account_ids(request))


def _path_to_account(model, admin_site) -> str | None:
    """How rows of `model` reach their account, for limiting foreign-key choices."""
    if model is Account:
        return "pk"
    registered = admin_site._registry.get(model)
    path = getattr(registered, "account_field", None)
    if path:
        return path
    try:
        field = model._meta.get_field("account")
    except FieldDoesNotExist:
        return None
    return "account" if getattr(field, "related_model", None) is Account else None


def account_id_of(obj: Any, path: str) -> int | None:
    """Follow `path` ("account", "installation__account", "pk" for an Account) to an account id."""
    if path == "pk":
        return obj.pk
    *hops, last = path.split("__")
    for hop in hops:
        obj = getattr(obj, hop, None)
        if obj is None:
            return None
    return getattr(obj, f"{last}_id", None)


def permitted_rows(modeladmin: Any, request: HttpRequest, queryset: QuerySet[Any],
                   permission: str) -> tuple[QuerySet[Any], int]:
    """The selected rows the user may `permission` ("change", "delete"), each checked against its own
    account, and how many of the selection were refused."""
    check = getattr(modeladmin, f"has_{permission}_permission")
    allowed = [obj.pk for obj in queryset if check(request, obj)]
    return queryset.filter(pk__in=allowed), queryset.count() - len(allowed)


def per_object_action(permission: str = "change", **options):
    """@admin.action(permissions=[permission], ...) whose function gets only the selected rows the
    user may `permission` one by one. Django checks an action's permission without an object, and a
    member who administers one account and audits another sees rows of both in one changelist."""
    def decorate(func):
        @functools.wraps(func)
        def action(modeladmin, request, queryset):
            rows, refused = permitted_rows(modeladmin, request, queryset, permission)
            if refused:
                name = modeladmin.model._meta.verbose_name
                modeladmin.message_user(request, f"Refused {refused} {name}(s): only an admin of their account "
                                                 "may do that.", messages.ERROR)
            if rows.exists():
                return func(modeladmin, request, rows)
            return None
        return admin.action(permissions=[permission], **options)(action)
    return decorate


class ScopedPermissionsMixin(_BaseAdmin):
    """Permission methods answered from memberships instead of Django's per-model permissions, so
    a staff user created by `add_member` needs nothing more. Operators keep Django's answers."""

    account_field = "account"
    auditor_visible = True

    def visible_account_ids(self, request: HttpRequest) -> set[int]:
        if self.auditor_visible:
            return member_account_ids(request)
        return admin_account_ids(request)

    def scope(self, request: HttpRequest, queryset: QuerySet[Any], path: str | None = None,
              account_ids: Collection[int] | None = None) -> QuerySet[Any]:
        """`queryset` limited to rows of accounts the user sees (or of `account_ids`)."""
        if is_operator(request):
            return queryset
        ids = self.visible_account_ids(request) if account_ids is None else account_ids
        return queryset.filter(**{f"{path or self.account_field}__in": ids})

    def _account_of(self, obj: Model) -> int | None:
        return account_id_of(obj, self.account_field)

    def has_module_permission(self, request: HttpRequest) -> bool:
        if is_operator(request):
            return super().has_module_permission(request)
        return bool(self.visible_account_ids(request))

    def has_view_permission(self, request: HttpRequest, obj: Model | None = None) -> bool:
        if is_operator(request):
            return super().has_view_permission(request, obj)
        if obj is None:
            return bool(self.visible_account_ids(request))
        return self._account_of(obj) in self.visible_account_ids(request)

    def _may_edit(self, request: HttpRequest, obj: Model | None) -> bool:
        ids = admin_account_ids(request)
        if obj is None:
            return bool(ids)
        return self._account_of(obj) in ids

    def has_add_permission(self, request: HttpRequest, *args: Any) -> bool:
        if is_operator(request):
            return super().has_add_permission(request, *args)
        return self._may_edit(request, None)

    def has_change_permission(self, request: HttpRequest, obj: Model | None = None) -> bool:
        if is_operator(request):
            return super().has_change_permission(request, obj)
        return self._may_edit(request, obj)

    def has_delete_permission(self, request: HttpRequest, obj: Model | None = None) -> bool:
        if is_operator(request):
            return super().has_delete_permission(request, obj)
        return self._may_edit(request, obj)


class ScopedChoicesMixin(_ModelAdmin):
    """Foreign-key choices, autocompletes and list filters limited to the user's accounts."""

    model: type[Model]   # the ModelAdmin this is mixed into sets it
    scope: Callable[..., QuerySet[Any]]   # ScopedPermissionsMixin, mixed in beside this, provides it

    def formfield_for_foreignkey(self, db_field, request, **kwargs):
        formfield = super().formfield_for_foreignkey(db_field, request, **kwargs)
        self._limit_choices(db_field, request, formfield)
        return formfield

    def formfield_for_manytomany(self, db_field, request, **kwargs):
        formfield = super().formfield_for_manytomany(db_field, request, **kwargs)
        self._limit_choices(db_field, request, formfield)
        return formfield

    def _limit_choices(self, db_field, request, formfield):
        if formfield is None or is_operator(request) or not hasattr(formfield, "queryset"):
            return
        path = _path_to_account(db_field.related_model, self.admin_site)
        if path is not None:
            # Only accounts the user administers: a form assigns rows, it does not just look.
            formfield.queryset = formfield.queryset.filter(**{f"{path}__in": admin_account_ids(request)})

    def get_search_results(self, request, queryset, search_term):
        queryset, may_have_duplicates = super().get_search_results(request, queryset, search_term)
        match = getattr(request, "resolver_match", None)
        if match is not None and match.url_name == "autocomplete" and not is_operator(request):
            # An autocomplete feeds an edit form of another model: offer only what may be assigned.
            queryset = self.scope(request, queryset, account_ids=admin_account_ids(request))
        return queryset, may_have_duplicates

    def get_list_filter(self, request):
        # A plain related-field filter lists every row of the related table; this one lists only
        # values present in the (scoped) changelist.
        filters = []
        for item in super().get_list_filter(request):
            if isinstance(item, str) and self._is_relation_path(item):
                item = (item, admin.RelatedOnlyFieldListFilter)
            filters.append(item)
        return filters

    def _is_relation_path(self, path: str) -> bool:
        model = self.model
        field = None
        for part in path.split("__"):
            try:
                field = model._meta.get_field(part)
            except FieldDoesNotExist:
                return False
            related = getattr(field, "related_model", None)
            if related is None:
                break
            model = related
        return bool(field is not None and field.is_relation)


class AccountScopedAdmin(ScopedChoicesMixin, ScopedPermissionsMixin, admin.ModelAdmin):
    """A ModelAdmin whose rows belong to accounts (through `account_field`). Operators see all;
    account admins add, change and delete their accounts' rows; auditors only view, and only
    models with `auditor_visible = True`. Another account's object answers 404."""

    def get_queryset(self, request: HttpRequest) -> QuerySet[Any]:
        return self.scope(request, super().get_queryset(request))

    def changelist_view(self, request, extra_context=None):
        # "Cron jobs", not Django's "Select cron job to change".
        title = capfirst(self.opts.verbose_name_plural)
        return super().changelist_view(request, {"title": title, **(extra_context or {})})

    def get_object(self, request, object_id, from_field=None):
        obj = super().get_object(request, object_id, from_field)
        if obj is None:
            # A 404 rather than Django's redirect, and the same answer whether the id exists in
            # another account or nowhere.
            raise Http404("no such object")
        return obj

    def get_fieldsets(self, request, obj=None):
        fieldsets = super().get_fieldsets(request, obj)
        if obj is None or self.has_change_permission(request, obj):
            return fieldsets
        # A view-only page renders every form field read-only by looking its name up on the object.
        # A form-only field (say a write-only secret) can share its name with a model method that
        # would reveal the secret, so only model fields and declared read-only fields are shown.
        shown = {f.name for f in self.model._meta.get_fields()} | set(self.get_readonly_fields(request, obj))

        def keep(names):
            kept = []
            for name in names:
                if isinstance(name, (list, tuple)):
                    row = keep(name)
                    if row:
                        kept.append(tuple(row))
                elif name in shown:
                    kept.append(name)
            return kept

        return [(title, {**options, "fields": keep(options.get("fields", ()))}) for title, options in fieldsets]

    def save_model(self, request: HttpRequest, obj: Any, form: Any, change: bool) -> None:
        if not is_operator(request):
            account_id = self._account_of(obj)
            if account_id is not None and account_id not in admin_account_ids(request):
                raise PermissionDenied
        super().save_model(request, obj, form, change)


class ReadOnlyAccountScopedAdmin(AccountScopedAdmin):
    """Audit trails: viewable within scope, never added, changed or deleted, not even by operators."""

    def has_add_permission(self, request: HttpRequest, *args: Any) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Model | None = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Model | None = None) -> bool:
        return False


class AccountScopedInlineMixin(ScopedChoicesMixin, ScopedPermissionsMixin):
    """For inlines: rows scoped like AccountScopedAdmin; `obj` in the permission methods is the
    parent, so edits follow the parent's account."""

    parent_account_field = "account"

    def get_queryset(self, request: HttpRequest) -> QuerySet[Any]:
        return self.scope(request, super().get_queryset(request))

    def _may_edit(self, request: HttpRequest, obj: Model | None) -> bool:
        ids = admin_account_ids(request)
        if obj is None:
            return bool(ids)
        return account_id_of(obj, self.parent_account_field) in ids

    def has_add_permission(self, request: HttpRequest, obj: Model | None = None) -> bool:
        if is_operator(request):
            return super().has_add_permission(request, obj)
        return self._may_edit(request, obj)

    def has_view_permission(self, request: HttpRequest, obj: Model | None = None) -> bool:
        if is_operator(request) or obj is None:
            return super().has_view_permission(request, None)
        return account_id_of(obj, self.parent_account_field) in self.visible_account_ids(request)


class AccountScopedTabularInline(AccountScopedInlineMixin, admin.TabularInline):
    pass


