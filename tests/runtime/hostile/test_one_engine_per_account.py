"""One account holds at most one shared engine: its other long calls go to the lane, and a good
account always finds a shared engine free of it (the board of engine/board.py)."""

import os
import threading
import time

from plugins_app.runtime.engine import board
from plugins_app.runtime.engine.supervisor import Supervisor
from plugins_app.runtime.tables.hooks import HOOKS
from plugins_app.runtime.web.chain import Handler, run_chain
from plugins_app.runtime.web.tier import tier_for

from ..conftest import PROMPT_CONTEXT


def test_the_board_shows_another_engines_long_chain_of_the_account_and_not_its_own(tmp_path):
    fd = board.create(str(tmp_path / "b"), 3)
    try:
        first, second = board.Board(fd, 0), board.Board(fd, 1)
        first.hold("acct-a")
        assert not second.held_elsewhere("acct-a", 60)         # started just now: not yet long
        assert second.held_elsewhere("acct-a", 0)
        assert not second.held_elsewhere("acct-b", 0)          # another account: free to run
        assert not first.held_elsewhere("acct-a", 0)           # its own seat does not count
        first.release()
        assert not second.held_elsewhere("acct-a", 0)
        first.hold("acct-a")
        board.Board(fd, 0)                                     # a restarted engine takes the seat
        assert not second.held_elsewhere("acct-a", 0)          # ...and clears what the dead one left
    finally:
        os.close(fd)


def test_an_account_one_engine_found_keeping_memory_is_seen_by_every_engine_until_its_time_passes(tmp_path):
    fd = board.create(str(tmp_path / "b"), 3)
    try:
        first, second = board.Board(fd, 0), board.Board(fd, 1)
        first.hold("acct-a")
        first.keeper("acct-keeper", 0.3)
        assert second.keeps_memory("acct-keeper") and first.keeps_memory("acct-keeper")
        assert not second.keeps_memory("acct-a")
        assert second.held_elsewhere("acct-a", 0)              # the running half of the seat is untouched
        first.release()
        assert second.keeps_memory("acct-keeper")              # ...and releasing it keeps the keeper
        time.sleep(0.35)
        assert not second.keeps_memory("acct-keeper")          # its minute (here 0.3 s) is over
        first.keeper("acct-keeper", 60)
        board.Board(fd, 0)                                     # a restarted engine clears its whole seat
        assert not second.keeps_memory("acct-keeper")
    finally:
        os.close(fd)


def test_sleeping_chains_hold_no_engine_and_a_computing_one_is_shown_on_the_board(tmp_path):
    """Issue 38: a chain parked at an await holds nothing, so one account's many sleeping calls stay on
    its home engine (none is busy, nothing spreads to the others), and the board shows an account only
    while its turn computes."""
    supervisor = Supervisor(tmp_path / "engines", engines=3, lane=1).start()
    tier = tier_for(supervisor.describe())
    try:
        def handler(source, n):
            compiled = tier.compile(source, "javascript")
            assert not compiled["errors"], compiled["errors"]
            return Handler(str(n), f"p{n}", f"h{n}", compiled["code"], {})

        spec = HOOKS["systemPrompt"]
        sleeper = handler("globalThis.middleware.systemPrompt = async (c) => {"
                          " await new Promise((r) => setTimeout(r, 1500)); return c.systemPrompt + ' slept'; };", 1)
        burner = handler("globalThis.middleware.systemPrompt = async (c) => {"
                         " const t = Date.now(); while (Date.now() - t < 900) {} return c.systemPrompt + ' burnt'; };", 2)
        home = tier.order("sleeper")[0]
        results = []

        def call(account, h):
            results.append(run_chain(tier, account, spec, [h], PROMPT_CONTEXT))
            tier.shutdown()   # this thread's links

        threads = [threading.Thread(target=call, args=("sleeper", sleeper)) for _ in range(6)]
        for thread in threads:
            thread.start()
        deadline = time.monotonic() + 20
        # All six parked (a start that found the home engine's thread busy a moment went to the next).
        while sum((statuses := [tier.ping(a) for a in tier.engines])[i]["inFlight"] for i in range(3)) < 6:
            assert time.monotonic() < deadline, statuses
            time.sleep(0.02)
        assert tier.ping(home)["inFlight"] >= 1
        for status in statuses:   # parked chains hold no engine: none is busy, none shows on the board
            assert status["busy"] is False and status["running"] is None
        burning = threading.Thread(target=call, args=("burner", burner))
        burning.start()
        burner_home = tier.order("burner")[0]
        while tier.ping(burner_home)["running"] != "burner":   # its turn holds that engine's thread
            assert time.monotonic() < deadline + 10
            time.sleep(0.02)
        for thread in [*threads, burning]:
            thread.join(30)
        assert sorted(r.value for r in results) == ["base burnt"] + ["base slept"] * 6
        assert all(tier.ping(address)["running"] is None for address in tier.engines)
    finally:
        tier.shutdown()
        supervisor.stop()


def test_compiles_and_type_checks_run_in_the_compiler_engine_never_a_shared_one(tmp_path):
    """TypeScript's checker grows its process by hundreds of MiB: in a shared engine that would be
    counted against whichever chain ran there. The supervisor's compiler engine takes every compile."""
    supervisor = Supervisor(tmp_path / "engines", engines=2, lane=1).start()
    tier = tier_for(supervisor.describe())
    try:
        source = "globalThis.middleware.systemPrompt = async (c: { systemPrompt: string }) => c.systemPrompt;"
        for typecheck in (False, True):
            compiled = tier.compile(source, "typescript", typecheck=typecheck)
            assert not compiled["errors"], compiled["errors"]
        assert [tier.ping(address)["compiles"] for address in tier.compilers] == [2]
        assert [tier.ping(address)["compiles"] for address in tier.addresses] == [0, 0, 0]
    finally:
        tier.shutdown()
        supervisor.stop()
