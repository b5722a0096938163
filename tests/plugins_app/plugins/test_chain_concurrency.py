"""Admins writing one account's chains at once (issue 40, items 4 and 5): installs, uninstalls, reorders
and moves in real threads on the real database (PostgreSQL in CI's second run) end with no deadlock
and no error, and every chain's positions are 0..n-1, each once."""

from __future__ import annotations

import random
import threading
from collections import defaultdict
from functools import partial

import pytest
from django.db import IntegrityError, connection, transaction

from plugins_app.errors import HubError
from plugins_app.models import ChainEntry
from plugins_app.services.plugins import chains
from plugins_app.services.plugins import installations as plugins

pytestmark = pytest.mark.django_db(transaction=True)
HOOKS = ("systemPrompt", "todoAdded")
BOTH = ("globalThis.middleware.systemPrompt = async (c) => c.systemPrompt + {n!r};"
        "globalThis.middleware.todoAdded = async (c) => c.texts;")
INSTALLERS, REORDERERS, MOVERS = 2, 2, 1
ROUNDS = 8


def _positions(account) -> dict[str, list[int]]:
    found: dict[str, list[int]] = defaultdict(list)
    for hook, position in ChainEntry.objects.filter(account=account).order_by("hook", "position").values_list(
            "hook", "position"):
        found[hook].append(position)
    return dict(found)


class _Run:
    """Threads started together; what each write did: done, refused (the chain changed under a
    stale request: a 4xx), or failed (anything else: a deadlock, a duplicate, a 500)."""

    def __init__(self, account) -> None:
        self.account = account
        self.counts: dict[tuple[str, str], int] = defaultdict(int)
        self.failures: list[str] = []
        self._lock = threading.Lock()
        self._start = threading.Barrier(INSTALLERS + REORDERERS + MOVERS)

    def attempt(self, kind: str, write) -> None:
        try:
            write()
            outcome = "done"
        except HubError:
            outcome = "refused"
        except Exception as exc:   # noqa: BLE001 - every other failure is what the test counts
            outcome = "failed"
            with self._lock:
                self.failures.append(f"{kind}: {type(exc).__name__}: {exc}")
        with self._lock:
            self.counts[(kind, outcome)] += 1

    def thread(self, body, index: int) -> threading.Thread:
        def run() -> None:
            try:
                self._start.wait(60)
                body(index)
            finally:
                connection.close()
        return threading.Thread(target=run)

    def installer(self, index: int) -> None:
        mine: list[int] = []
        for k in range(ROUNDS):
            name = f"p{index}-{k}"
            self.attempt("install", lambda name=name: mine.append(plugins.install_plugin(
                self.account, name=name, source=BOTH.format(n=name), language="javascript").pk))
            if k % 2 and mine:
                self.attempt("uninstall", partial(plugins.uninstall, self.account, mine.pop(0)))

    def reorderer(self, index: int) -> None:
        rng = random.Random(index)
        for _ in range(ROUNDS * 2):
            hook = rng.choice(HOOKS)
            order = [str(e.installation_id) for e in chains.chain_entries(self.account, hook)]
            rng.shuffle(order)
            self.attempt("reorder", partial(chains.set_order, self.account, hook, order))

    def mover(self, index: int) -> None:
        rng = random.Random(100 + index)
        for _ in range(ROUNDS * 2):
            hook = rng.choice(HOOKS)
            ids = [str(e.installation_id) for e in chains.chain_entries(self.account, hook)]
            if ids:
                self.attempt("move", partial(chains.move_to, self.account, hook, rng.choice(ids),
                                             rng.randrange(len(ids))))


def test_concurrent_installs_uninstalls_reorders_and_moves_neither_deadlock_nor_share_a_position(account):
    for n in range(3):
        plugins.install_plugin(account, name=f"base {n}", source=BOTH.format(n=str(n)), language="javascript")
    run = _Run(account)
    threads = ([run.thread(run.installer, i) for i in range(INSTALLERS)]
               + [run.thread(run.reorderer, i) for i in range(REORDERERS)]
               + [run.thread(run.mover, i) for i in range(MOVERS)])
    for t in threads:
        t.start()
    for t in threads:
        t.join(300)
    assert not any(t.is_alive() for t in threads), "a writer is still waiting"
    assert run.failures == [], run.failures[:5]
    assert run.counts[("install", "done")] == INSTALLERS * ROUNDS
    assert run.counts[("uninstall", "done")] == INSTALLERS * (ROUNDS // 2)
    assert run.counts[("reorder", "done")] > 0 and run.counts[("move", "done")] > 0, dict(run.counts)
    installed = 3 + INSTALLERS * ROUNDS - INSTALLERS * (ROUNDS // 2)
    assert _positions(account) == {hook: list(range(installed)) for hook in HOOKS}


def test_the_database_refuses_two_entries_at_one_position(account, install):
    first = install(BOTH.format(n="1"))
    second = install(BOTH.format(n="2"))
    assert _positions(account) == {hook: [0, 1] for hook in HOOKS}
    with pytest.raises(IntegrityError), transaction.atomic():
        ChainEntry.objects.filter(installation=second, hook="systemPrompt").update(position=0)
    plugins.uninstall(account, first.pk)   # the chain it left closes up
    assert _positions(account) == {hook: [0] for hook in HOOKS}
