"""Every admin page, with markup in every query parameter it reads: no 500, and the markup never comes back
unescaped (issue 39, item 8: the Live stream echoed `hook=<img ...>` as text/html)."""

from __future__ import annotations

import io
import re
from urllib.parse import urlencode

import pytest
from django.contrib import admin
from django.contrib.auth import get_user_model
from django.contrib.contenttypes.models import ContentType
from django.core.management import call_command
from django.core.signals import request_finished
from django.db import close_old_connections
from django.http import QueryDict
from django.test import RequestFactory
from django.urls import URLPattern, URLResolver

from accounts.models import Account
from plugins_app.models import Installation
from plugins_app.services.secrets import store
from tests.plugins_app.admin_support import PASSWORD

pytestmark = [pytest.mark.django_db, pytest.mark.slow]

MARKUP = "\"><script>alert(1)</script><img src=x onerror=alert(1)>'"
UNESCAPED = (b"<script>alert(1)", b"<img src=x onerror")
# Read by many pages, or by none: fed to every page whatever it reads.
COMMON = ("q", "account", "hook", "status", "plugin", "o", "p", "since")
# Fed with the others, at once.
OTHERS = ("e", "_popup", "_to_field", "_changelist_filters", "a", "b", "from", "line", "column", "term", "range",
          "next", "installation", "version")
# Django's own views that end the session or need a POST, and the catch-all that only redirects.
SKIPPED = {"logout", "password_change_done"}

_reads: list[set[str]] = []


class _RecordingQueryDict(QueryDict):
    """request.GET, noting every name a view asks for (get, getlist, [], in)."""

    def _note(self, key):
        if _reads and isinstance(key, str):
            _reads[-1].add(key)

    def __getitem__(self, key):
        self._note(key)
        return super().__getitem__(key)

    def get(self, key, default=None):
        self._note(key)
        return super().get(key, default)

    def getlist(self, key, default=None):
        self._note(key)
        return super().getlist(key, default)

    def __contains__(self, key):
        self._note(key)
        return super().__contains__(key)


class RecordReads:
    """Test middleware: swaps request.GET for the recording copy."""

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        request.GET = _RecordingQueryDict(request.META.get("QUERY_STRING", ""))
        return self.get_response(request)


def _patterns(resolvers, prefix=""):
    for entry in resolvers:
        if isinstance(entry, URLResolver):
            yield from _patterns(entry.url_patterns, prefix + str(entry.pattern))
        elif isinstance(entry, URLPattern):
            yield prefix + str(entry.pattern), entry


ARG = re.compile(r"<(?:(\w+):)?(\w+)>")


def _model_admin_of(pattern: URLPattern):
    owner = getattr(pattern.callback, "model_admin", None) or getattr(getattr(pattern.callback, "__wrapped__", None),
                                                                       "__self__", None)
    return owner if isinstance(owner, admin.ModelAdmin) else None


def _fill(route: str, model_admin, values: dict) -> str | None:
    """The route with its arguments filled from rows that exist (a model with none gets "1")."""
    if route.startswith("^"):
        if "app_label" in route:
            return "plugins_app/"
        return None   # the catch-all: it only redirects
    model = model_admin.model if model_admin is not None else None

    def value(match):
        name = match.group(2)
        if name == "object_id":
            row = model._default_manager.order_by("pk").first() if model is not None else None
            return str(row.pk) if row is not None else "1"
        return values.get(name, "1")
    return ARG.sub(value, route)


def _filter_parameters(model_admin, user) -> set[str]:
    request = RequestFactory().get("/")
    request.user = user
    try:
        changelist = model_admin.get_changelist_instance(request)
    except Exception:   # noqa: BLE001 — a changelist the user may not open reads no filters
        return set()
    names = {p for spec in changelist.filter_specs for p in spec.expected_parameters() if p}
    return names | {name for name in model_admin.get_list_display(request) if isinstance(name, str)}


def _ours(url: str) -> bool:
    """A page of the hub's own (its views read parameters by hand), not one of Django's or Celery beat's."""
    return not url.startswith(("/admin/auth/", "/admin/django_celery_beat/", "/admin/password_change/",
                               "/admin/login/", "/admin/jsi18n/"))


def _close(response) -> None:
    """Ends a streamed answer (a Live stream gives its place back) without closing the test's database
    connection, as the test client does for the answers it reads itself."""
    request_finished.disconnect(close_old_connections)
    try:
        response.close()
    finally:
        request_finished.connect(close_old_connections)


def _unescaped(response) -> bool:
    if getattr(response, "streaming", False):
        _close(response)
        return False
    return any(mark in response.content for mark in UNESCAPED)


def _walk(client, user, values, only_ours: bool = False) -> list[str]:
    client.raise_request_exception = False   # an exception is a 500 answer, noted like any other
    found = []
    for route, pattern in _patterns(admin.site.urls[0]):
        if pattern.name in SKIPPED:
            continue
        model_admin = _model_admin_of(pattern)
        url = _fill(route, model_admin, values)
        if url is None:
            continue
        url = "/admin/" + url
        if only_ours and not _ours(url):
            continue
        names, each = {*COMMON, *OTHERS}, set()
        kind = (pattern.name or "").rsplit("_", 1)[-1] if model_admin is not None else ""
        if kind == "changelist":   # a changelist stops at the first filter it can't read: each on its own
            each = _filter_parameters(model_admin, user)
        elif kind == "add":   # initial values, all read together
            names |= {f.name for f in model_admin.model._meta.get_fields() if f.concrete}
        if _ours(url) and kind not in ("change", "history", "delete"):
            each |= set(COMMON)
        read: set[str] = set()
        _reads.append(set())
        try:
            plain = client.get(url)
            if getattr(plain, "streaming", False):
                _close(plain)
            if plain.status_code >= 500:
                found.append(f"{url}: {plain.status_code} without parameters")
            read = _reads[-1] | each
        finally:
            _reads.pop()
        # All at once, then one at a time each the page reads (a page may refuse the first it reads).
        queries = [{name: MARKUP for name in sorted(names | read)}, *({name: MARKUP} for name in sorted(read))]
        for query in queries:
            address = f"{url}?{urlencode(query)}"
            response = client.get(address)
            if response.status_code >= 500:
                found.append(f"{address}: {response.status_code}")
            elif _unescaped(response):
                found.append(f"{address}: the markup came back unescaped ({response.get('Content-Type')})")
    return found


@pytest.fixture
def walked_hub(monkeypatch, settings, tmp_path):
    """The demo account (plugins, versions, a cancel, usage) and a secret; the Live stream on a file ring."""
    from dataclasses import replace

    from plugins_app.services.observability import tail, tail_channel
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
    settings.MIDDLEWARE = [*settings.MIDDLEWARE, "tests.plugins_app.admin.test_markup_walk.RecordReads"]
    settings.HUB_TAIL = replace(settings.HUB_TAIL, channel="file", directory=str(tmp_path), max_seconds=1)
    monkeypatch.setattr(tail_channel, "CHECK_CACHE_SECONDS", 0.0)
    tail.reset_channel()
    monkeypatch.setenv("DEMO_PASSWORD", PASSWORD)
    call_command("load_demo", stdout=io.StringIO())
    account = Account.objects.get(name="demo")
    store.set_secret(account, "TOKEN", value="value-0123456789", allowed_hosts=["api.example.com"])
    installation = Installation.objects.filter(account=account).order_by("pk").first()
    values = {"installation_id": str(installation.pk), "number": "1", "slug": "caveman",
              "content_type_id": str(ContentType.objects.get_for_model(Account).pk), "id": "1"}
    yield account, values
    tail.reset_channel()


def test_no_admin_page_answers_500_or_echoes_markup_for_an_operator(client, walked_hub):
    account, values = walked_hub
    user = get_user_model().objects.create_superuser("root", "root@example.com", PASSWORD)
    values = {**values, "id": str(user.pk)}
    assert client.login(username="root", password=PASSWORD)
    assert _walk(client, user, values) == []


def test_no_admin_page_answers_500_or_echoes_markup_for_members(client, walked_hub):
    account, values = walked_hub
    found = []
    for username in ("demo-admin", "demo-auditor"):
        user = get_user_model().objects.get(username=username)
        assert client.login(username=username, password=PASSWORD)
        # (Django's and Celery beat's own pages are walked as an operator: members get 403 there.)
        found += [f"{username}: {line}" for line in _walk(client, user, {**values, "id": str(user.pk)}, True)]
    assert found == []


def test_the_live_streams_refusal_is_json_with_the_markup_escaped(client, walked_hub):
    account, _ = walked_hub
    assert client.login(username="demo-auditor", password=PASSWORD)
    for name in ("hook", "status"):
        response = client.get(f"/admin/plugins_app/cancellog/live/stream?{urlencode({'account': account.pk, name: MARKUP})}")
        assert response.status_code == 400 and response["Content-Type"] == "application/json"
        assert not _unescaped(response) and b"\\u003cimg src=x onerror" in response.content
        assert response.json()["error"]["field"] == name
