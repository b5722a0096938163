"""The chain pages: one account's one hook, reordered through sortable2's update view, and the very
next execute runs the new order."""

import json
import threading

import pytest
from django.db import connection
from django.urls import reverse

from plugins_app.models import ChainEntry
from plugins_app.services.plugins import admin_ops, chains

from ..conftest import PROMPT, appender

pytestmark = pytest.mark.django_db

CHANGELIST = reverse("admin:plugins_app_chainentry_changelist")
UPDATE = reverse("admin:plugins_app_chainentry_sortable_update")


def entries(account, hook="systemPrompt"):
    return list(ChainEntry.objects.filter(account=account, hook=hook).order_by("position", "id"))


def drag(client, moves):
    return client.post(UPDATE, json.dumps({"updatedItems": [[str(pk), pos] for pk, pos in moves]}),
                       content_type="application/json")


def execute(api_client):
    return api_client.post("/api/v1/hooks/systemPrompt/execute", {"context": PROMPT}, format="json").json()


def test_the_page_shows_one_chain_in_order(login, account, install):
    install(appender("1"), name="First"), install(appender("2"), name="Second")
    install("globalThis.middleware.todoAdded = async (c) => c.texts;", name="Todo only")
    client = login(account.name, "alice", "admin")
    page = client.get(CHANGELIST, {"account": account.pk, "hook": "systemPrompt"})
    assert page.status_code == 200
    html = page.content.decode()
    assert html.index("First") < html.index("Second")
    assert "Todo only" not in html
    assert 'class="drag handle"' in html
    assert "systemPrompt chain of acme" in html


def test_without_a_chosen_chain_the_page_redirects_to_the_first_used_hook(login, account, install):
    install("globalThis.middleware.todoAdded = async (c) => c.texts;")
    client = login(account.name, "alice", "admin")
    response = client.get(CHANGELIST)
    assert response.status_code == 302
    assert response["Location"] == f"{CHANGELIST}?account={account.pk}&hook=todoAdded"


def test_another_accounts_chain_is_never_shown(login, account, other_account, install):
    install(appender("x"), name="Theirs", target=other_account)
    client = login(account.name, "alice", "admin")
    response = client.get(CHANGELIST, {"account": other_account.pk, "hook": "systemPrompt"})
    assert response.status_code == 302
    assert response["Location"] == f"{CHANGELIST}?account={account.pk}&hook=systemPrompt"
    assert "Theirs" not in client.get(response["Location"]).content.decode()


def test_a_drag_reorders_and_the_next_execute_uses_the_new_order(login, account, install, api_client):
    first, second = install(appender("1")), install(appender("2"))
    assert execute(api_client)["value"] == "base12"   # warms the per-process chain cache
    version = type(account).objects.get(pk=account.pk).hooks_version
    a, b = entries(account)
    client = login(account.name, "alice", "admin")

    response = drag(client, [(b.pk, 0), (a.pk, 1)])
    assert response.status_code == 200, response.content
    assert [e.installation_id for e in entries(account)] == [second.pk, first.pk]
    assert type(account).objects.get(pk=account.pk).hooks_version > version
    assert execute(api_client)["value"] == "base21"


def test_positions_stay_a_total_order_after_partial_and_stale_updates(login, account, install):
    for i in range(4):
        install(appender(str(i)))
    a, b, c, d = entries(account)
    client = login(account.name, "alice", "admin")
    # A drag of d to the top, computed from a page that is stale: only two rows sent.
    assert drag(client, [(d.pk, 0), (a.pk, 1)]).status_code == 200
    after = entries(account)
    assert [e.pk for e in after] == [d.pk, a.pk, b.pk, c.pk]
    assert [e.position for e in after] == [0, 1, 2, 3]


@pytest.mark.parametrize("body", [b"not json", b'{"updatedItems": [["x", 0]]}', b'{"other": 1}'])
def test_malformed_updates_are_rejected_and_change_nothing(login, account, install, body):
    install(appender("1")), install(appender("2"))
    before = [e.pk for e in entries(account)]
    client = login(account.name, "alice", "admin")
    response = client.post(UPDATE, body, content_type="application/json")
    assert response.status_code == 400
    assert [e.pk for e in entries(account)] == before


def test_entries_of_two_chains_or_another_account_cannot_be_moved(login, account, other_account, install):
    install(appender("1")), install(appender("2"))
    todo = install("globalThis.middleware.todoAdded = async (c) => c.texts;")
    theirs_a = install(appender("a"), target=other_account)
    install(appender("b"), target=other_account)
    a, b = entries(account)
    todo_entry = ChainEntry.objects.get(installation=todo)
    client = login(account.name, "alice", "admin")

    assert drag(client, [(b.pk, 0), (todo_entry.pk, 1)]).status_code == 400
    their_entries = entries(other_account)
    assert drag(client, [(their_entries[1].pk, 0), (their_entries[0].pk, 1)]).status_code == 400
    assert [e.installation_id for e in entries(other_account)][0] == theirs_a.pk
    assert [e.pk for e in entries(account)] == [a.pk, b.pk]


def test_an_auditor_can_neither_see_nor_reorder_chains(login, account, install):
    install(appender("1")), install(appender("2"))
    a, b = entries(account)
    client = login(account.name, "audrey", "auditor")
    assert client.get(CHANGELIST, {"account": account.pk, "hook": "systemPrompt"}).status_code == 403
    assert drag(client, [(b.pk, 0), (a.pk, 1)]).status_code == 403
    assert [e.pk for e in entries(account)] == [a.pk, b.pk]


def test_chain_entries_cannot_be_added_changed_or_deleted_one_by_one(login, account, install):
    install(appender("1"))
    entry = entries(account)[0]
    client = login(account.name, "alice", "admin")
    assert client.get(reverse("admin:plugins_app_chainentry_add")).status_code == 403
    assert client.post(reverse("admin:plugins_app_chainentry_delete", args=[entry.pk]), {"post": "yes"}).status_code == 403
    client.post(reverse("admin:plugins_app_chainentry_change", args=[entry.pk]), {"hook": "todoAdded", "position": 9})
    entry.refresh_from_db()
    assert (entry.hook, entry.position) == ("systemPrompt", 0)


@pytest.mark.django_db(transaction=True)
def test_concurrent_drags_leave_one_total_order(account, install):
    if connection.vendor == "sqlite":
        pytest.skip("SQLite serialises writers; the row lock matters on PostgreSQL")
    for i in range(5):
        install(appender(str(i)))
    pks = [e.pk for e in entries(account)]
    barrier = threading.Barrier(2)
    errors = []

    def drag_in_thread(moves):
        try:
            barrier.wait()
            admin_ops.apply_positions(account, "systemPrompt", dict(moves))
        except Exception as exc:   # noqa: BLE001 - reported below
            errors.append(exc)
        finally:
            connection.close()

    threads = [threading.Thread(target=drag_in_thread, args=([(pks[4], 0), (pks[0], 1)],)),
               threading.Thread(target=drag_in_thread, args=([(pks[1], 0), (pks[0], 1)],))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=30)
    assert not errors
    positions = [e.position for e in entries(account)]
    assert positions == list(range(5))
    assert sorted(e.pk for e in entries(account)) == sorted(pks)


def test_apply_positions_rejects_an_entry_of_another_chain(account, install):
    install(appender("1"))
    todo = install("globalThis.middleware.todoAdded = async (c) => c.texts;")
    entry = ChainEntry.objects.get(installation=todo)
    with pytest.raises(Exception) as info:
        admin_ops.apply_positions(account, "systemPrompt", {entry.pk: 0})
    assert "not in the systemPrompt chain" in str(info.value)
    assert chains.chain_entries(account, "todoAdded")[0].position == 0
