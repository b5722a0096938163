"""An account's admission places shared by a machine's web processes (services.engine.machine_places)."""

import json
import os
import signal
import subprocess
import sys
import threading
from dataclasses import replace

import pytest

from plugins_app.runtime.engine.supervisor import Supervisor
from plugins_app.services.engine import admission
from plugins_app.services.engine.admission import FairGate
from plugins_app.services.engine.machine_places import MachinePlaces, Place

from ..conftest import PROMPT, appender
from ..serving import Served

HOLDER = """
import sys
from plugins_app.services.engine.machine_places import MachinePlaces, Place
places = MachinePlaces(sys.argv[1], capacity=int(sys.argv[2]))
place = places.take(int(sys.argv[3]))
print("held", flush=True)
if sys.stdin.readline() == "give back\\n":
    places.give_back(place)
    print("given back", flush=True)
sys.stdin.readline()
"""


class Holder:
    """Another process that takes one of an account's places and keeps it until told."""

    def __init__(self, path, account_id: int, capacity: int = 1):
        self.process = subprocess.Popen([sys.executable, "-c", HOLDER, str(path), str(capacity), str(account_id)],
                                        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
                                        cwd=os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(__file__)))))
        assert self.process.stdout.readline() == "held\n"

    def give_back(self):
        self.process.stdin.write("give back\n")
        self.process.stdin.flush()
        assert self.process.stdout.readline() == "given back\n"

    def stop(self):
        self.process.kill()
        self.process.wait(10)


class Taker(threading.Thread):
    """A thread that takes a place in `places` for `account_id`, notes the slot it got, and
    holds it until its test ends (a thread's places go with its open file when it ends)."""

    def __init__(self, places: MachinePlaces, account_id: int):
        super().__init__(daemon=True)
        self.places, self.account_id, self.slot, self.place = places, account_id, None, None
        self.took, self.done = threading.Event(), threading.Event()
        self.start()

    def run(self):
        self.place = place = self.places.take(self.account_id)
        self.slot = place.slot
        self.took.set()
        self.done.wait(30)
        self.places.give_back(place)

    def has_place(self, seconds: float) -> bool:
        return self.took.wait(seconds)


@pytest.fixture
def takers():
    made: list[Taker] = []

    def take(places: MachinePlaces, account_id: int) -> Taker:
        made.append(Taker(places, account_id))
        return made[-1]

    yield take
    for taker in made:
        taker.done.set()


@pytest.fixture
def lock_path(tmp_path):
    return tmp_path / "admission.lock"


def test_a_place_held_by_another_process_is_waited_for_and_other_accounts_are_not(lock_path, takers):
    holder = Holder(lock_path, account_id=7)
    places = MachinePlaces(lock_path, capacity=1)
    try:
        waiting = takers(places, 7)
        assert takers(places, 8).has_place(10)   # another account's place is free
        assert not waiting.has_place(0.3)   # still blocked on account 7's place
        holder.give_back()
        assert waiting.has_place(10) and waiting.slot == 7
    finally:
        holder.stop()


def test_a_dead_holders_place_is_freed_by_the_kernel(lock_path, takers):
    holder = Holder(lock_path, account_id=3)
    waiting = takers(MachinePlaces(lock_path, capacity=1), 3)
    assert not waiting.has_place(0.3)
    holder.process.send_signal(signal.SIGKILL)   # no give_back: the process just dies
    holder.process.wait(10)
    assert waiting.has_place(10)


def test_two_threads_of_one_process_do_not_share_a_place(lock_path, takers):
    # Each thread has its own open file description, so one thread's lock excludes the other's.
    places = MachinePlaces(lock_path, capacity=1)
    first = takers(places, 1)
    assert first.has_place(10)
    second = takers(places, 1)
    assert not second.has_place(0.3)
    first.done.set()
    assert second.has_place(10) and second.slot == first.slot


def test_a_forked_child_does_not_share_its_parents_description(lock_path):
    # gunicorn forks its workers: a description inherited from the parent would be the parent's
    # own, so the parent's places would look free to the child (GETLK ignores its own locks).
    places = MachinePlaces(lock_path, capacity=1)
    place = places.take(6)
    read_end, write_end = os.pipe()
    child = os.fork()
    if child == 0:   # pragma: no cover (the child reports through the pipe)
        os.write(write_end, str(places.accounts_running()).encode())
        os._exit(0)
    os.close(write_end)
    seen = os.read(read_end, 16)
    os.waitpid(child, 0)
    os.close(read_end)
    places.give_back(place)
    assert seen == b"1"


def test_a_lone_account_may_use_every_place_of_the_machine(lock_path, takers):
    places = MachinePlaces(lock_path, capacity=3)
    held = [takers(places, 5) for _ in range(3)]
    assert all(taker.has_place(10) for taker in held)   # nobody else runs: all three places
    assert sorted(taker.slot for taker in held) == [15, 16, 17]   # account 5's three bytes
    fourth = takers(places, 5)
    assert not fourth.has_place(0.3)   # but no more than the machine has
    next(taker for taker in held if taker.slot == 15).done.set()   # a waiter waits for the account's first place
    assert fourth.has_place(10) and fourth.slot == 15


def test_beside_other_accounts_an_account_gets_its_share_of_the_places(lock_path, takers):
    places = MachinePlaces(lock_path, capacity=4)
    holder = Holder(lock_path, account_id=2, capacity=4)
    try:
        first, second = takers(places, 1), takers(places, 1)
        assert first.has_place(10) and second.has_place(10)
        assert places.accounts_running() == 2 and places.accounts_running(besides=1) == 1
        # Account 1 runs beside account 2: 4 places // 2 accounts = 2 for it, and it holds both.
        assert sorted([first.slot, second.slot]) == [4, 5]
        third = takers(places, 1)
        assert not third.has_place(0.3)
        holder.stop()   # account 2 is done; account 1's next caller, alone now, may have the rest
        assert third.has_place(0.0) is False and takers(places, 1).has_place(10)
    finally:
        holder.stop()


def held_for(place, seconds: float):
    """The place as if taken `seconds` ago."""
    place.taken_at -= seconds
    return place


def test_a_call_that_waited_for_its_account_rests_the_place_only_beside_other_accounts(lock_path):
    places = MachinePlaces(lock_path, capacity=1, rest_factor=2, max_rest=0.05)
    first = places.take(1)
    assert not first.waited and places.rest_for(held_for(first, 10)) == 0   # it found the place free
    second = Taker(places, 1)
    assert not second.has_place(0.2)
    places.give_back(first)   # alone on the machine: no rest
    assert second.has_place(10)
    waited = second.place
    assert waited.waited and places.rest_for(held_for(waited, 10)) == 0   # account 1 runs alone
    holder = Holder(lock_path, account_id=2)
    try:
        assert places.rest_for(waited) == 0.05   # beside account 2: factor x held, at most max_rest
        assert places.rest_for(held_for(Place(1, 1, waited=True), 0.01)) == pytest.approx(0.02, abs=0.01)
        assert MachinePlaces(lock_path, capacity=1).rest_for(waited) == 0   # rest_factor 0: never
    finally:
        holder.stop()
        second.done.set()


def test_a_resting_place_keeps_its_accounts_next_call_waiting_and_no_other_account(lock_path, takers):
    places = MachinePlaces(lock_path, capacity=1, rest_factor=2, max_rest=0.6)
    holder = Holder(lock_path, account_id=2)   # another account runs, so a contended place rests
    took, rested = threading.Event(), []

    def contended_call():
        place = places.take(1)
        took.set()
        rested.append(places.give_back(held_for(place, 10)))   # rests 0.6 s, then unlocks

    try:
        blocker = places.take(1)
        call = threading.Thread(target=contended_call, daemon=True)
        call.start()
        assert not took.wait(0.2)
        places.give_back(blocker)
        assert took.wait(10)
        next_call = takers(places, 1)
        assert not next_call.has_place(0.3)   # account 1's next call waits while the place rests
        assert takers(places, 3).has_place(10)   # account 3's doesn't
        assert next_call.has_place(10) and next_call.slot == 1
        call.join(10)
        assert rested == [0.6]
    finally:
        holder.stop()


def test_a_resting_call_gives_its_web_process_place_away_first_and_the_rest_is_reported(lock_path):
    rests = []
    gate = FairGate(capacity=1, per_account=1, on_rest=rests.append,
                    machine=MachinePlaces(lock_path, capacity=1, rest_factor=1e6, max_rest=0.6))
    holder = Holder(lock_path, account_id=5)   # account 5 runs in another process
    outside = MachinePlaces(lock_path, capacity=1)
    in_turn, admitted = threading.Event(), []

    def account_call(account_id: int):
        with gate.turn(("account", account_id)):
            admitted.append(account_id)
            in_turn.set()

    try:
        taken = outside.take(1)   # account 1 runs elsewhere: its call here waits for the place
        first = threading.Thread(target=account_call, args=(1,), daemon=True)
        first.start()
        first.join(0.2)
        assert admitted == []
        outside.give_back(taken)
        assert in_turn.wait(10)   # account 1's call ran, and now rests its place for 0.6 s
        second = threading.Thread(target=account_call, args=(3,), daemon=True)
        second.start()
        second.join(0.3)
        assert admitted == [1, 3] and first.is_alive()   # the process's one place was free meanwhile
        first.join(10)
        assert rests == [0.6]
    finally:
        holder.stop()


def test_the_accounts_running_are_counted_wherever_their_bytes_lie(lock_path):
    # The kernel reports one conflicting lock per query, not necessarily the lowest; every held
    # place must still be found (ids far apart, in an order unlike their offsets).
    holders = [Holder(lock_path, account_id=n, capacity=8) for n in (900_000, 3, 77, 12_345)]
    try:
        assert MachinePlaces(lock_path, capacity=8).accounts_running() == 4
        assert MachinePlaces(lock_path, capacity=8).accounts_running(besides=77) == 3
        assert MachinePlaces(lock_path, capacity=2).accounts_running() == 2   # counting stops at capacity
    finally:
        for holder in holders:
            holder.stop()


def test_two_web_processes_gates_share_an_account_and_an_engine_wait_gives_it_away(lock_path):
    # Two gates on one file stand for two gunicorn workers of one machine.
    first, second = (FairGate(per_account=1, machine=MachinePlaces(lock_path, capacity=1)) for _ in range(2))
    line = ("account", 42)
    in_engine, answered, order = threading.Event(), threading.Event(), []

    def first_worker_call():
        with first.turn(line):
            with first.waiting():   # the chain runs on its engine: no Python work here meanwhile
                in_engine.set()
                answered.wait(10)
            order.append("first finished")

    with second.turn(line):
        caller = threading.Thread(target=first_worker_call, daemon=True)
        caller.start()
        caller.join(0.3)
        assert not in_engine.is_set()   # the other worker holds account 42's place
        order.append("second finished")
    in_engine.wait(10)
    with second.turn(line):   # free again while the first call waits on its engine
        order.append("second again")
        answered.set()
        caller.join(10)   # back from its engine, the first call finishes without the machine's place
        order.append("second still running")
    assert order == ["second finished", "second again", "first finished", "second still running"]


def test_lines_that_are_not_a_known_account_take_no_machine_place(lock_path):
    gate = FairGate(per_account=1, machine=MachinePlaces(lock_path, capacity=1))
    holder = Holder(lock_path, account_id=9)
    admitted = []

    def account_call():
        with gate.turn(("account", 9)):
            admitted.append("account 9")

    try:
        # An unlearnt key prefix isn't an account yet; only its own process counts it.
        with gate.turn(("key", "abc123")):
            admitted.append("key")
        with gate.turn(("unauthenticated",)):
            admitted.append("unauthenticated")
        blocked = threading.Thread(target=account_call, daemon=True)
        blocked.start()
        blocked.join(0.3)
        assert admitted == ["key", "unauthenticated"]   # account 9's place is the holder's
    finally:
        holder.stop()
    blocked.join(10)
    assert admitted == ["key", "unauthenticated", "account 9"]


@pytest.mark.parametrize("scope, shared", [("machine", True), ("process", False)])
def test_the_gate_counts_an_account_machine_wide_only_under_a_shared_tier(settings, monkeypatch, tmp_path,
                                                                          scope, shared):
    settings.HUB_ADMISSION = replace(settings.HUB_ADMISSION, per_account_scope=scope)
    settings.HUB_ADMISSION = replace(settings.HUB_ADMISSION, rest_factor=3, max_rest_ms=40)
    monkeypatch.setattr(admission, "_gate", None)
    monkeypatch.setenv("HUB_ENGINE_DIR", str(tmp_path))
    gate = admission.get_gate()
    assert (gate.machine is not None) is shared
    if shared:
        assert gate.machine.path == str(tmp_path / "admission.lock")
        assert gate.machine.capacity == len(os.sched_getaffinity(0))   # HUB_EXECUTE_MACHINE_PLACES=0: one per CPU
        assert (gate.machine.rest_factor, gate.machine.max_rest) == (3, 0.04)
    monkeypatch.setattr(admission, "_gate", None)
    monkeypatch.delenv("HUB_ENGINE_DIR")
    assert admission.get_gate().machine is None   # a process with engines of its own is alone


@pytest.fixture
def served_on_shared_tier(tmp_path):
    """gunicorn on an engine tier it did not start, as when the operator runs the tier as a service:
    the test knows the directory, so it can take an account's place from outside the server."""
    supervisor = Supervisor(tmp_path / "engines", engines=1, lane=1).start()
    (supervisor.directory / "tier.json").write_text(json.dumps(supervisor.describe()))
    server = Served(workers=1, HUB_ENGINE_DIR=str(supervisor.directory), HUB_EXECUTE_MACHINE_PLACES="1")
    try:
        yield server.start(), supervisor.directory / "admission.lock"
    finally:
        server.stop()
        supervisor.stop()


def test_a_served_call_waits_while_another_process_holds_its_accounts_place(served_on_shared_tier):
    server, lock = served_on_shared_tier
    auth = {}
    for name in ("acme", "beta"):
        key = server.manage("create_api_key", name).strip().splitlines()[-1]
        auth[name] = {"Authorization": f"Bearer {key}"}
        status, _, body = server.request("POST", "/api/v1/plugins", {
            "name": "shouter", "source": appender("!"), "language": "javascript"}, auth[name])
        assert status == 201, body
    acme_id = int(server.manage("shell", "-v", "0", "-c",
                                "from accounts.models import Account; print(Account.objects.get(name='acme').pk)").split()[-1])

    def execute(name: str, answers: list):
        answers.append(server.request("POST", "/api/v1/hooks/systemPrompt/execute", {"context": PROMPT}, auth[name])[0])

    execute("acme", [])   # the worker learns which account acme's key is
    places = MachinePlaces(lock, capacity=1)
    place = places.take(acme_id)
    acme_answers, beta_answers = [], []
    acme_call = threading.Thread(target=execute, args=("acme", acme_answers), daemon=True)
    acme_call.start()
    execute("beta", beta_answers)
    acme_call.join(0.5)
    assert beta_answers == [200] and acme_answers == []   # only acme waits for its place
    places.give_back(place)
    acme_call.join(30)
    assert acme_answers == [200]


def test_without_its_shared_file_the_gate_still_admits_and_says_so_once(tmp_path, caplog):
    gate = FairGate(per_account=1, machine=MachinePlaces(tmp_path / "gone" / "admission.lock", capacity=1))
    admitted = []
    for _ in range(3):
        with gate.turn(("account", 4)):
            admitted.append(gate.books.running)
    assert admitted == [1, 1, 1]   # the process's own place was still taken each time
    failures = [r for r in caplog.records if "machine-wide admission failed" in r.getMessage()]
    assert len(failures) == 1


@pytest.mark.parametrize("name, value, says", [
    ("HUB_EXECUTE_CONCURRENCY_PER_ACCOUNT", "-1", "must be 0 or more"),
    ("HUB_EXECUTE_MACHINE_PLACES", "two", "must be a whole number"),
    ("HUB_EXECUTE_PER_ACCOUNT_SCOPE", "cluster", "must be one of 'machine', 'process'"),
])
def test_an_admission_setting_it_could_not_use_is_refused_at_start(name, value, says):
    project = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(__file__))))
    started = subprocess.run([sys.executable, "-c", "import django; django.setup()"], cwd=project,
                             env=dict(os.environ, DJANGO_SETTINGS_MODULE="middleware_hub.settings", **{name: value}),
                             capture_output=True, text=True, timeout=60)
    assert started.returncode != 0
    assert f"{name} {says}" in started.stderr
