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


def test_an_account_whose_home_engine_frees_up_does_not_take_it_while_it_holds_another(tmp_path):
    """Routing alone keeps an account's calls off engines that run its own chain; the board also
    stops it taking its home engine back while its chain holds another one it was sent to."""
    supervisor = Supervisor(tmp_path / "engines", engines=3, lane=1).start()
    tier = tier_for(supervisor.describe())
    try:
        def handler(ms, n):
            source = (f"globalThis.middleware.systemPrompt = async (c) => {{"
                      f" await new Promise((r) => setTimeout(r, {ms})); return c.systemPrompt + ' slept'; }};")
            compiled = tier.compile(source, "javascript")
            assert not compiled["errors"], compiled["errors"]
            return Handler(str(n), f"p{n}", f"h{n}", compiled["code"], {})

        spec = HOOKS["systemPrompt"]
        home = tier.order("sleeper")[0]
        other = next(f"other-{i}" for i in range(1000) if tier.order(f"other-{i}")[0] == home)
        short, long = handler(600, 1), handler(2000, 2)
        results = []

        def call(account, h):
            results.append(run_chain(tier, account, spec, [h], PROMPT_CONTEXT))
            tier.shutdown()   # this thread's links

        def running(address):
            return tier.ping(address)["running"]

        def wait_for(condition, what):
            deadline = time.monotonic() + 10
            while not condition():
                assert time.monotonic() < deadline, f"never {what}: {[running(a) for a in tier.engines]}"
                time.sleep(0.01)

        threads = [threading.Thread(target=call, args=(other, short))]   # holds the sleeper's home engine
        threads[0].start()
        wait_for(lambda: running(home) == other, "ran the other account's call at home")
        threads.append(threading.Thread(target=call, args=("sleeper", long)))   # so it runs on the next one
        threads[1].start()
        wait_for(lambda: "sleeper" in (running(a) for a in tier.engines), "ran the sleeper's first call")
        threads[0].join(10)
        wait_for(lambda: running(home) is None, "freed the home engine")
        threads.append(threading.Thread(target=call, args=("sleeper", long)))
        threads[2].start()
        wait_for(lambda: running(tier.lane[0]) == "sleeper", "ran the sleeper's second call in the lane")
        shared = {address: tier.ping(address)["running"] for address in tier.engines}
        lane = tier.ping(tier.lane[0])["running"]
        for thread in threads:
            thread.join(30)
        assert shared[home] is None
        assert list(shared.values()).count("sleeper") == 1
        assert lane == "sleeper"
        assert sorted(r.value for r in results) == ["base slept"] * 3
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
