"""sync_catalog: creating the official plugins, upgrading them in place, and refusing a broken
catalog; the shipped manifests are checked too."""

import json
import shutil
from io import StringIO

import pytest
from django.core.management import CommandError, call_command

from accounts.models import Account
from plugins_app.models import ChainEntry, Installation, Plugin
from plugins_app.services.plugins import catalog, chains
from plugins_app.services.plugins.settings import ManifestError, check_schema

from ..catalog_support import execute, install_official
from ..conftest import PROMPT, appender

pytestmark = pytest.mark.django_db

INBOUND = {"sessionId": "1", "channelId": None, "mediaIds": [], "text": "hi"}


@pytest.fixture
def tmp_catalog(tmp_path, monkeypatch):
    """A writable copy of the catalog that sync_catalog reads instead of the real one."""
    root = tmp_path / "catalog"
    shutil.copytree(catalog.CATALOG_DIR, root)
    monkeypatch.setattr(catalog, "CATALOG_DIR", root)
    return root


def write_plugin(root, slug, source, version="1.0.0", settings=None):
    folder = root / slug
    folder.mkdir(exist_ok=True)
    (folder / "index.ts").write_text(source)
    (folder / "manifest.json").write_text(json.dumps({
        "name": slug.title(), "slug": slug, "description": f"{slug} for tests", "version": version,
        "settings": settings or {}}))


def version_of(account):
    return Account.objects.get(pk=account.pk).hooks_version


def test_the_shipped_manifests_are_valid_and_every_plugin_compiles():
    manifests = catalog.official_plugins()
    assert [m["slug"] for m in manifests] == ["agent-audit", "card-mask", "caveman", "maintenance-window",
                                              "rate-limit", "rm-guard", "secret-redactor"]
    results = catalog.sync_catalog()
    assert [(r.slug, r.action) for r in results] == [(m["slug"], "created") for m in manifests]
    for plugin in Plugin.objects.filter(account=None):
        asked = ["host:kv", "host:session"] if plugin.slug == "rate-limit" else []   # its counters live in host.kv
        assert plugin.language == "typescript" and plugin.permissions == asked and len(plugin.hooks) == 1
        assert plugin.settings_schema == next(m["settings"] for m in manifests if m["slug"] == plugin.slug)
    assert "function redactSecrets" in Plugin.objects.get(slug="agent-audit").source   # the include


def test_sync_twice_changes_nothing(account):
    catalog.sync_catalog()
    installed = catalog.install_official(account, "maintenance-window", {"start": "22:00", "end": "06:00"})
    before = version_of(account)
    stamps = dict(Plugin.objects.values_list("slug", "updated_at"))
    results = catalog.sync_catalog()
    assert {r.action for r in results} == {"unchanged"} and not any(r.settings_refreshed for r in results)
    assert dict(Plugin.objects.values_list("slug", "updated_at")) == stamps
    assert version_of(account) == before
    assert Installation.objects.get(pk=installed.pk).settings == installed.settings


def test_new_compiler_output_for_the_same_source_is_a_recompile_not_an_upgrade(account):
    """A compiler change (a source map appended to its output, say) changes every official plugin's
    compiled code: engines must load it, but no installation was upgraded."""
    from plugins_app.models import AccountChange

    catalog.sync_catalog()
    installed = catalog.install_official(account, "maintenance-window", {"start": "22:00", "end": "06:00"})
    fresh = Plugin.objects.get(slug="maintenance-window")
    Plugin.objects.filter(pk=fresh.pk).update(compiled_js="/* an older compiler's output */" + fresh.compiled_js,
                                              code_hash="0" * 64)
    changes, before = AccountChange.objects.count(), version_of(account)
    results = {r.slug: r.action for r in catalog.sync_catalog()}
    assert results["maintenance-window"] == "recompiled"
    assert set(results.values()) == {"unchanged", "recompiled"}
    recompiled = Plugin.objects.get(pk=fresh.pk)
    assert (recompiled.compiled_js, recompiled.code_hash) == (fresh.compiled_js, fresh.code_hash)
    assert AccountChange.objects.count() == changes   # no "catalog upgrade" rows
    assert Installation.objects.get(pk=installed.pk).live_version == installed.live_version
    assert version_of(account) != before   # the chains were marked changed: engines load the new code


def test_the_management_command_reports_each_plugin(tmp_catalog):
    out = StringIO()
    call_command("sync_catalog", stdout=out)
    lines = out.getvalue().splitlines()
    assert "caveman 1.0.0: created" in lines and lines[-1] == "7 official plugins in sync"
    out = StringIO()
    call_command("sync_catalog", stdout=out)
    assert "caveman 1.0.0: unchanged" in out.getvalue().splitlines()


def test_an_upgrade_keeps_installations_chain_positions_and_settings(tmp_catalog, api_client, install, account):
    call_command("sync_catalog", stdout=StringIO())
    first = install(appender("|custom"), name="custom")
    caveman = install_official(api_client, "caveman", {"intensity": "lite"})
    chains.move_to(account, "systemPrompt", caveman["id"], 0)
    other_account = Account.objects.create(name="other")
    theirs = catalog.install_official(other_account, "caveman")
    assert "[caveman] Keep answers short." in execute(api_client, "systemPrompt", PROMPT)["value"]
    before = (version_of(account), version_of(other_account))

    write_plugin(tmp_catalog, "caveman", version="1.1.0", settings={
        "intensity": {"type": "enum", "choices": ["lite", "full"], "default": "full"},
        "sign": {"type": "string", "default": "ugh"}}, source="""
        globalThis.middleware.systemPrompt = async (c) =>
          c.systemPrompt + `|v2 ${host.config.intensity} ${host.config.sign}`;
        globalThis.middleware.userMessageInbound = async (c) => c.text + "|v2";
    """)
    out = StringIO()
    call_command("sync_catalog", stdout=out)
    assert "caveman 1.1.0: upgraded from 1.0.0 (2 installations kept)" in out.getvalue()

    assert Installation.objects.filter(plugin__slug="caveman").count() == 2
    chain = api_client.get("/api/v1/chains/systemPrompt").json()["chain"]
    assert [c["installationId"] for c in chain] == [caveman["id"], str(first.pk)]       # position kept
    inbound = api_client.get("/api/v1/chains/userMessageInbound").json()["chain"]
    assert [c["installationId"] for c in inbound] == [caveman["id"]]                   # new hook appended
    assert Installation.objects.get(pk=caveman["id"]).settings == {"intensity": "lite", "sign": "ugh"}
    assert version_of(account) > before[0] and version_of(other_account) > before[1]
    # The very next call runs the new code with the new settings.
    assert execute(api_client, "systemPrompt", PROMPT)["value"] == "base|v2 lite ugh|custom"
    assert execute(api_client, "userMessageInbound", INBOUND)["value"] == "hi|v2"
    assert Installation.objects.get(pk=theirs.pk).settings == {"intensity": "full", "sign": "ugh"}

    # A later version drops systemPrompt and the "lite" choice: its chain entries go, and a value
    # the schema no longer allows falls back to the default.
    write_plugin(tmp_catalog, "caveman", version="2.0.0", settings={
        "intensity": {"type": "enum", "choices": ["full"], "default": "full"}},
        source='globalThis.middleware.userMessageInbound = async (c) => c.text + "|v3";')
    call_command("sync_catalog", stdout=StringIO())
    assert not ChainEntry.objects.filter(installation_id=caveman["id"], hook="systemPrompt").exists()
    assert execute(api_client, "systemPrompt", PROMPT)["value"] == "base|custom"
    assert execute(api_client, "userMessageInbound", INBOUND)["value"] == "hi|v3"
    assert Installation.objects.get(pk=caveman["id"]).settings == {"intensity": "full"}


def test_an_upgrade_keeps_only_grants_the_plugin_still_asks_for(tmp_catalog, account):
    write_plugin(tmp_catalog, "fetcher", """
        globalThis.middleware.systemPrompt = async (c) => {
          if (c.systemPrompt === "x") await host.fetch("http://127.0.0.1:9/");
          return c.systemPrompt;
        };
    """)
    catalog.sync_catalog()
    installed = catalog.install_official(account, "fetcher", grant=["host:fetch"])
    assert installed.granted_permissions == ["host:fetch"]
    write_plugin(tmp_catalog, "fetcher", "globalThis.middleware.systemPrompt = async (c) => c.systemPrompt;",
                 version="1.0.1")
    catalog.sync_catalog()
    assert Installation.objects.get(pk=installed.pk).granted_permissions == []
    assert Plugin.objects.get(slug="fetcher").permissions == []


def test_time_zone_offsets_are_refreshed_by_sync(account):
    catalog.sync_catalog()
    installed = catalog.install_official(account, "maintenance-window", {"start": "22:00", "end": "06:00"})
    stale = dict(installed.settings, utcOffsets=[[0, 0]])
    Installation.objects.filter(pk=installed.pk).update(settings=stale)
    before = version_of(account)
    results = {r.slug: r for r in catalog.sync_catalog()}
    assert results["maintenance-window"].settings_refreshed == 1
    assert Installation.objects.get(pk=installed.pk).settings == installed.settings
    assert version_of(account) > before


@pytest.mark.parametrize("manifest, message", [
    ({"slug": "broken", "name": "B", "description": "d", "version": "1"}, "version must look like"),
    ({"slug": "other", "name": "B", "description": "d", "version": "1.0.0"}, "slug must equal the folder"),
    ({"slug": "broken", "name": "", "description": "d", "version": "1.0.0"}, "name must be"),
    ({"slug": "broken", "name": "B", "description": "d", "version": "1.0.0", "hooks": []}, "unknown manifest keys"),
    ({"slug": "broken", "name": "B", "description": "d", "version": "1.0.0",
      "settings": {"level": {"type": "enum", "choices": ["a"], "default": "b"}}}, "the default is invalid"),
    ({"slug": "broken", "name": "B", "description": "d", "version": "1.0.0", "include": ["../../etc/passwd"]},
     "is not a file in the catalog"),
])
def test_a_broken_manifest_stops_the_command(tmp_catalog, manifest, message):
    write_plugin(tmp_catalog, "broken", "globalThis.middleware.systemPrompt = (c) => c.systemPrompt;")
    (tmp_catalog / "broken" / "manifest.json").write_text(json.dumps(manifest))
    with pytest.raises(CommandError, match=message):
        call_command("sync_catalog", stdout=StringIO())


def test_a_plugin_that_does_not_compile_stops_the_command_naming_it(tmp_catalog):
    write_plugin(tmp_catalog, "broken", "globalThis.middleware.systemPrompt = (c) => c.systemPrompt +;")
    with pytest.raises(CommandError, match="broken: the plugin does not compile: line 1"):
        call_command("sync_catalog", stdout=StringIO())
    assert not Plugin.objects.filter(slug="broken").exists()


@pytest.mark.parametrize("schema, message", [
    ({"a": {"type": "text", "default": ""}}, "type must be one of"),
    ({"a": {"type": "enum", "default": "x"}}, "choices must be"),
    ({"a": {"type": "string"}}, "an optional setting needs a default"),
    ({"a": {"type": "string", "default": "x", "format": "regex"}}, "does not apply"),
    ({"a": {"type": "string", "default": "UTC", "offsets": "o"}}, "needs format timeZone"),
    ({"a": {"type": "string", "default": "x", "colour": "red"}}, "unknown keys"),
    ({"a": {"type": "integer", "default": 5, "maximum": 3}}, "the default is invalid"),
    ({"a": {"type": "string", "format": "time", "default": "24:00"}}, "the default is invalid"),
])
def test_schema_checks(schema, message):
    with pytest.raises(ManifestError, match=message):
        check_schema("p", schema)
