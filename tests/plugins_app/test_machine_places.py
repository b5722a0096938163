"""An account's admission places shared by a machine's web processes (services.machine_places)."""

import json
import os
import signal
import subprocess
import sys
import threading

import pytest

from plugins_app.runtime.supervisor import Supervisor
from plugins_app.services import admission
from plugins_app.services.admission import FairGate
from plugins_app.services.machine_places import MachinePlaces

from .conftest import PROMPT, appender
from .serving import Served

HOLDER = """
import sys
from plugins_app.services.machine_places import MachinePlaces
places = MachinePlaces(sys.argv[1], int(sys.argv[2]))
slot = places.take(int(sys.argv[3]))
print("held", flush=True)
if sys.stdin.readline() == "give back\\n":
    places.give_back(slot)
    print("given back", flush=True)
sys.stdin.readline()
"""


class Holder:
    """Another process that takes one of an account's places and keeps it until told."""

    def __init__(self, path, account_id: int, per_account: int = 1):
        self.process = subprocess.Popen([sys.executable, "-c", HOLDER, str(path), str(per_account), str(account_id)],
                                        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
                                        cwd=os.path.dirname(os.path.dirname(os.path.dirname(__file__))))
        assert self.process.stdout.readline() == "held\n"

    def give_back(self):
        self.process.stdin.write("give back\n")
        self.process.stdin.flush()
        assert self.process.stdout.readline() == "given back\n"

    def stop(self):
        self.process.kill()
        self.process.wait(10)


class Taker(threading.Thread):
    """Takes a place in `places` for `account_id` and notes the slot it got."""

    def __init__(self, places: MachinePlaces, account_id: int):
        super().__init__(daemon=True)
        self.places, self.account_id, self.slot = places, account_id, None
        self.start()

    def run(self):
        self.slot = self.places.take(self.account_id)


@pytest.fixture
def lock_path(tmp_path):
    return tmp_path / "admission.lock"


def test_a_place_held_by_another_process_is_waited_for_and_other_accounts_are_not(lock_path):
    holder = Holder(lock_path, account_id=7)
    places = MachinePlaces(lock_path)
    try:
        waiting = Taker(places, 7)
        other = Taker(places, 8)
        other.join(10)
        assert other.slot is not None   # another account's place is free
        waiting.join(0.3)
        assert waiting.is_alive() and waiting.slot is None   # still blocked on account 7's place
        holder.give_back()
        waiting.join(10)
        assert waiting.slot is not None
    finally:
        holder.stop()


def test_a_dead_holders_place_is_freed_by_the_kernel(lock_path):
    holder = Holder(lock_path, account_id=3)
    waiting = Taker(MachinePlaces(lock_path), 3)
    waiting.join(0.3)
    assert waiting.is_alive()
    holder.process.send_signal(signal.SIGKILL)   # no give_back: the process just dies
    holder.process.wait(10)
    waiting.join(10)
    assert waiting.slot is not None


def test_two_threads_of_one_process_do_not_share_a_place(lock_path):
    # Each thread has its own open file description, so one thread's lock excludes the other's.
    places = MachinePlaces(lock_path)
    slot = places.take(1)
    second = Taker(places, 1)
    second.join(0.3)
    assert second.is_alive()
    places.give_back(slot)
    second.join(10)
    assert second.slot == slot


def test_an_account_may_hold_as_many_places_as_its_share(lock_path):
    holders = [Holder(lock_path, account_id=5, per_account=2) for _ in range(2)]
    try:
        third = Taker(MachinePlaces(lock_path, per_account=2), 5)
        third.join(0.3)
        assert third.is_alive()   # both of account 5's places are taken
        holders[1].give_back()
        third.join(10)
        assert third.slot in (10, 11)   # account 5's two bytes
    finally:
        for holder in holders:
            holder.stop()


def test_two_web_processes_gates_share_an_account_and_an_engine_wait_gives_it_away(lock_path):
    # Two gates on one file stand for two gunicorn workers of one machine.
    first, second = (FairGate(per_account=1, machine=MachinePlaces(lock_path)) for _ in range(2))
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
    caller.join(10)
    assert order == ["second finished", "second again", "first finished"]


def test_lines_that_are_not_a_known_account_take_no_machine_place(lock_path):
    gate = FairGate(per_account=1, machine=MachinePlaces(lock_path))
    holder = Holder(lock_path, account_id=9)
    try:
        # An unlearnt key prefix isn't an account yet; only its own process counts it.
        with gate.turn(("key", "abc123")):
            pass
        with gate.turn(("unauthenticated",)):
            pass
        blocked = threading.Thread(target=lambda: gate.turn(("account", 9)).__enter__(), daemon=True)
        blocked.start()
        blocked.join(0.3)
        assert blocked.is_alive()
    finally:
        holder.stop()
    blocked.join(10)
    assert not blocked.is_alive()


@pytest.mark.parametrize("scope, shared", [("machine", True), ("process", False)])
def test_the_gate_counts_an_account_machine_wide_only_under_a_shared_tier(settings, monkeypatch, tmp_path,
                                                                          scope, shared):
    settings.HUB_EXECUTE_PER_ACCOUNT_SCOPE = scope
    monkeypatch.setattr(admission, "_gate", None)
    monkeypatch.setenv("HUB_ENGINE_DIR", str(tmp_path))
    gate = admission.get_gate()
    assert (gate.machine is not None) is shared
    if shared:
        assert gate.machine.path == str(tmp_path / "admission.lock")
    monkeypatch.setattr(admission, "_gate", None)
    monkeypatch.delenv("HUB_ENGINE_DIR")
    assert admission.get_gate().machine is None   # a process with engines of its own is alone


@pytest.fixture
def served_on_shared_tier(tmp_path):
    """gunicorn on an engine tier it did not start, as when the operator runs the tier as a service:
    the test knows the directory, so it can take an account's place from outside the server."""
    supervisor = Supervisor(tmp_path / "engines", engines=1, lane=1).start()
    (supervisor.directory / "tier.json").write_text(json.dumps(supervisor.describe()))
    server = Served(workers=1, HUB_ENGINE_DIR=str(supervisor.directory))
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
    places = MachinePlaces(lock)
    slot = places.take(acme_id)
    acme_answers, beta_answers = [], []
    acme_call = threading.Thread(target=execute, args=("acme", acme_answers), daemon=True)
    acme_call.start()
    execute("beta", beta_answers)
    acme_call.join(0.5)
    assert beta_answers == [200] and acme_answers == []   # only acme waits for its place
    places.give_back(slot)
    acme_call.join(30)
    assert acme_answers == [200]
