"""?dryRun=true on the writes `hub apply` makes: the real view and service run and are rolled back, so a dry
run writes nothing, hands nothing on after a commit, and refuses exactly what the real call refuses."""

import pytest
import yaml
from django.apps import apps

from accounts.models import Account
from plugins_app.models import AccountChange, Installation
from plugins_app.services.execution.chain_cache import chain_cache
from plugins_app.services.plugins import chains
from plugins_app.services.rehearsal import rehearse, rehearsing

pytestmark = pytest.mark.django_db

APPEND = "globalThis.middleware.systemPrompt = async (c) => c.systemPrompt + {suffix!r};\n"
FETCHER = ("globalThis.middleware.systemPrompt = async (c) => { await host.fetch('http://127.0.0.1:1/'); "
           "return c.systemPrompt; };\n")
TYPO = "// greets\nglobalThis.middleware.systemPrompt = async (c) => {\n  return c.systemPrompt + c.systemPromt;\n};\n"


def snapshot() -> dict:
    """Every row of the hub's own tables, counted per model, and each account's change marker."""
    counts = {model.__name__: model.objects.count()
              for name in ("plugins_app", "accounts") for model in apps.get_app_config(name).get_models()}
    return {"counts": counts, "markers": dict(Account.objects.values_list("pk", "hooks_version")),
            "installations": list(Installation.objects.order_by("pk").values(
                "pk", "enabled", "mode", "granted_permissions", "settings", "live_version"))}


def send(client, method, path, body=None, dry=False):
    url = f"/api/v1/{path}" + ("?dryRun=true" if dry else "")
    return getattr(client, method.lower())(url, body, format="json")


def new_entries(since: int) -> list[dict]:
    return [{"action": a, "summary": s} for a, s in
            AccountChange.objects.filter(pk__gt=since).order_by("pk").values_list("action", "summary")]


def last_change() -> int:
    return AccountChange.objects.order_by("-pk").values_list("pk", flat=True).first() or 0


def rehearsed_then_made(client, capture, method, path, body=None, expect=200):
    """Dry run (nothing changes, nothing is handed on), then the real call: same status, and the dry run's
    `changes` are the change-log entries the real call writes. The real call's answer."""
    before, since = snapshot(), last_change()
    with capture(execute=False) as handed_on:
        dry = send(client, method, path, body, dry=True)
    assert dry.status_code == 200, dry.content
    answer = dry.json()
    assert answer["dryRun"] is True and answer["status"] == expect
    assert snapshot() == before and handed_on == []
    real = send(client, method, path, body)
    assert real.status_code == expect, real.content
    assert answer["changes"] == new_entries(since)
    if expect != 204:
        made = real.json()
        assert set(answer["result"]) == set(made)
        for key in ("hooks", "permissions", "granted", "settings", "enabled", "mode"):
            if key in made:
                assert answer["result"][key] == made[key], key
        return made
    assert answer["result"] is None
    return None


def test_every_dry_run_writes_nothing_and_answers_what_the_real_call_then_does(
        api_client, synced, django_capture_on_commit_callbacks):
    capture = django_capture_on_commit_callbacks
    tail = rehearsed_then_made(api_client, capture, "POST", "plugins",
                               {"name": "Tail", "source": APPEND.format(suffix=" A"), "language": "javascript"},
                               expect=201)
    fetcher = rehearsed_then_made(api_client, capture, "POST", "plugins",
                                  {"name": "Fetcher", "source": FETCHER, "language": "javascript"}, expect=201)
    caveman = rehearsed_then_made(api_client, capture, "POST", "plugins",
                                  {"catalog": "caveman", "settings": {"intensity": "ultra"}}, expect=201)
    rehearsed_then_made(api_client, capture, "PATCH", f"plugins/{caveman['installationId']}/settings",
                        {"settings": {"intensity": "lite"}})
    rehearsed_then_made(api_client, capture, "POST", f"plugins/{fetcher['installationId']}/grant",
                        {"grant": ["host:fetch"]})
    rehearsed_then_made(api_client, capture, "PATCH", f"plugins/{fetcher['installationId']}", {"enabled": False})
    rehearsed_then_made(api_client, capture, "PATCH", f"plugins/{fetcher['installationId']}", {"mode": "shadow"})
    order = [caveman["installationId"], fetcher["installationId"], tail["installationId"]]
    chain = rehearsed_then_made(api_client, capture, "PUT", "chains/systemPrompt", {"order": order})
    assert [e["installationId"] for e in chain["chain"]] == order
    tail_id = tail["installationId"]
    rehearsed_then_made(api_client, capture, "POST", f"plugins/{tail_id}/versions",
                        {"source": APPEND.format(suffix=" B"), "language": "javascript"}, expect=201)
    rehearsed_then_made(api_client, capture, "POST", f"plugins/{tail_id}/versions/2/deploy", {})
    rehearsed_then_made(api_client, capture, "POST", f"plugins/{tail_id}/rollback", {})
    rehearsed_then_made(api_client, capture, "DELETE", f"plugins/{tail_id}", expect=204)


def test_the_real_calls_hand_work_on_after_their_commit_that_a_dry_run_does_not(
        api_client, install, account, django_capture_on_commit_callbacks):
    installation = install(APPEND.format(suffix="!"))
    with django_capture_on_commit_callbacks(execute=False) as dry:
        assert send(api_client, "DELETE", f"plugins/{installation.pk}", dry=True).status_code == 200
    with django_capture_on_commit_callbacks(execute=False) as real:
        assert send(api_client, "DELETE", f"plugins/{installation.pk}").status_code == 204
    assert dry == [] and len(real) == 1   # the engines drop the uninstalled code's compartments


REFUSED = [
    ("a setting's value", "PATCH", "plugins/{caveman}/settings", {"settings": {"intensity": "caveman"}}),
    ("an unknown setting", "PATCH", "plugins/{caveman}/settings", {"settings": {"loudness": 3}}),
    ("a syntax error", "POST", "plugins", {"name": "Broken", "source": "const x = ;\n", "language": "typescript"}),
    ("a type error", "POST", "plugins", {"name": "Typo", "source": TYPO, "language": "typescript", "typecheck": True}),
    ("a name taken", "POST", "plugins", {"name": "Tail", "source": APPEND.format(suffix="?"),
                                         "language": "javascript"}),
    ("an unknown catalog slug", "POST", "plugins", {"catalog": "no-such-plugin"}),
    ("a bad catalog setting", "POST", "plugins", {"catalog": "caveman", "settings": {"intensity": "shout"}}),
    ("a grant not asked for", "POST", "plugins/{tail}/grant", {"grant": ["host:ssh"]}),
    ("a draft that does not compile", "POST", "plugins/{tail}/versions", {"source": "}{", "language": "javascript"}),
    ("a draft with a type error", "POST", "plugins/{tail}/versions", {"source": TYPO, "language": "typescript",
                                                                  "typecheck": True}),
    ("a version that does not exist", "POST", "plugins/{tail}/versions/9/deploy", {}),
    ("a deploy needing an ungranted permission", "POST", "plugins/{tail}/versions/2/deploy", {}),
    ("nothing to roll back to", "POST", "plugins/{caveman}/rollback", {}),
    ("a chain order missing one", "PUT", "chains/systemPrompt", {"order": ["{tail}"]}),
    ("a bad mode", "PATCH", "plugins/{tail}", {"mode": "sideways"}),
    ("an unknown installation", "DELETE", "plugins/99999999", None),
]


@pytest.mark.parametrize(("what", "method", "path", "body"), REFUSED, ids=[r[0] for r in REFUSED])
def test_a_dry_run_refuses_exactly_what_the_real_call_refuses(api_client, synced, what, method, path, body):
    tail = send(api_client, "POST", "plugins", {"name": "Tail", "source": APPEND.format(suffix="!"),
                                                "language": "javascript"}).json()["installationId"]
    caveman = send(api_client, "POST", "plugins", {"catalog": "caveman"}).json()["installationId"]
    # version 2 asks for host:fetch, which the installation has not been granted
    assert send(api_client, "POST", f"plugins/{tail}/versions",
                {"source": FETCHER, "language": "javascript"}).status_code == 201
    ids = {"tail": tail, "caveman": caveman}
    path = path.format(**ids)
    body = {**body, "order": [o.format(**ids) for o in body["order"]]} if body and "order" in body else body
    before = snapshot()
    dry = send(api_client, method, path, body, dry=True)
    assert snapshot() == before
    real = send(api_client, method, path, body)
    assert snapshot() == before
    assert 400 <= dry.status_code < 500 and dry.status_code == real.status_code, (dry.content, real.content)
    assert dry.json() == real.json()


def test_another_accounts_ids_are_still_404_with_dry_run(api_client, other_api_client, install):
    installation = install(APPEND.format(suffix="!"))
    before = snapshot()
    for method, path, body in [("DELETE", f"plugins/{installation.pk}", None),
                               ("PATCH", f"plugins/{installation.pk}", {"enabled": False}),
                               ("POST", f"plugins/{installation.pk}/grant", {"grant": []}),
                               ("PATCH", f"plugins/{installation.pk}/settings", {"settings": {}}),
                               ("POST", f"plugins/{installation.pk}/versions", {"source": APPEND.format(suffix="?")}),
                               ("POST", f"plugins/{installation.pk}/versions/1/deploy", {}),
                               ("PUT", "chains/systemPrompt", {"order": [str(installation.pk)]})]:
        dry = send(other_api_client, method, path, body, dry=True)
        real = send(other_api_client, method, path, body)
        expected = 400 if path.startswith("chains") else 404   # another account's chain holds none of ours
        assert dry.status_code == real.status_code == expected, (path, dry.content)
        assert dry.json() == real.json()
    assert snapshot() == before


def test_dry_run_takes_true_or_false_and_a_write_without_one_refuses_it(api_client, install):
    installation = install(APPEND.format(suffix="!"))
    bad = send(api_client, "PATCH", f"plugins/{installation.pk}?dryRun=maybe", {"enabled": False})
    assert bad.status_code == 400 and bad.json()["error"]["field"] == "dryRun"
    before = snapshot()
    release = api_client.post(f"/api/v1/plugins/{installation.pk}/release?dryRun=true", format="json")
    assert release.status_code == 400 and release.json()["error"]["field"] == "dryRun"
    assert snapshot() == before
    real = api_client.patch(f"/api/v1/plugins/{installation.pk}?dryRun=false", {"enabled": False}, format="json")
    assert real.status_code == 200 and real.json()["enabled"] is False
    assert Installation.objects.get(pk=installation.pk).enabled is False


def test_the_chain_cache_neither_serves_nor_keeps_what_a_dry_run_wrote(account, install):
    first, second = install(APPEND.format(suffix=" 1")), install(APPEND.format(suffix=" 2"))
    account.refresh_from_db()
    committed = [h.installation_id for h in chain_cache.handlers(account, "systemPrompt")]
    loads = chain_cache.loads
    with rehearse(account.pk):
        assert rehearsing()
        chains.set_order(account, "systemPrompt", [str(second.pk), str(first.pk)])
        # the rehearsed order, read fresh: the account object still holds the committed marker
        assert [h.installation_id for h in chain_cache.handlers(account, "systemPrompt")] == committed[::-1]
    assert not rehearsing()
    assert [h.installation_id for h in chain_cache.handlers(account, "systemPrompt")] == committed
    assert chain_cache.loads == loads   # served from what was cached before, untouched


def test_the_schema_documents_the_parameter_and_the_answer(client):
    schema = yaml.safe_load(client.get("/api/schema/").content)
    assert "DryRunAnswer" in schema["components"]["schemas"]
    rehearsable = {("/api/v1/plugins", "post"), ("/api/v1/plugins/{installation_id}", "patch"),
                   ("/api/v1/plugins/{installation_id}", "delete"), ("/api/v1/plugins/{installation_id}/grant", "post"),
                   ("/api/v1/plugins/{installation_id}/settings", "patch"), ("/api/v1/chains/{hook}", "put"),
                   ("/api/v1/plugins/{installation_id}/versions", "post"),
                   ("/api/v1/plugins/{installation_id}/versions/{number}/deploy", "post"),
                   ("/api/v1/plugins/{installation_id}/rollback", "post")}
    for path, method in rehearsable:
        op = schema["paths"][path][method]
        assert any(p["name"] == "dryRun" for p in op["parameters"]), (path, method)
        assert "DryRunAnswer" in str(op["responses"]["200"]), (path, method)
        assert not any(key.startswith("x-") for key in op), (path, method)
    others = [(path, method) for path, ops in schema["paths"].items() for method, op in ops.items()
              if isinstance(op, dict) and any(p["name"] == "dryRun" for p in op.get("parameters", []))]
    assert set(others) == rehearsable
