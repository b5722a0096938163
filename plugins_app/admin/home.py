"""The admin's home page: an account's chains, recent cancels and warnings, held plugins and usage."""

from __future__ import annotations

from django.contrib import admin
from django.urls import reverse

from accounts.models import Account
from plugins_app.services.observability import dashboard

from .scoping import ADMIN, is_operator, roles


def _accounts(request):
    """The accounts this user may open a home for, with the role they hold in each."""
    if is_operator(request):
        return [(a, ADMIN) for a in Account.objects.order_by("name")]
    held = roles(request)
    return [(a, held[a.pk]) for a in Account.objects.filter(pk__in=held).order_by("name")]


def _chosen(request, accounts):
    wanted = request.GET.get("account", "")
    for account, role in accounts:
        if str(account.pk) == wanted:
            return account, role
    if is_operator(request) and not roles(request):
        return None, None   # operators without memberships get the list of pages, and a chooser
    return accounts[0] if accounts else (None, None)


def home_context(request) -> dict:
    accounts = _accounts(request)
    account, role = _chosen(request, accounts)
    context = {"hub_accounts": [a for a, _ in accounts], "hub_account": account}
    if account is None:
        return context
    chains = reverse("admin:plugins_app_chainentry_changelist")
    try_page = reverse("admin:plugins_app_chainentry_try")
    context.update({
        "title": f"{account}",
        "hub_overview": dashboard.overview(account),
        "hub_may_change": role == ADMIN,
        "hub_chain_url": f"{chains}?account={account.pk}&hook=",
        "hub_try_url": f"{try_page}?account={account.pk}&hook=",
        "hub_account_filter": f"account__id__exact={account.pk}",
    })
    return context


def install(site: admin.AdminSite) -> None:
    """The site's index keeps its app list (at the bottom, folded) and gains the account's home."""
    default_index = site.index

    def index(request, extra_context=None):
        return default_index(request, {**home_context(request), **(extra_context or {})})

    site.index = index  # type: ignore[method-assign]  # wraps this instance's view: a subclass of AdminSite would need a custom admin AppConfig
    site.index_template = "admin/hub/home.html"
