"""Fair admission of execute calls: turns go round the accounts, and engine waits give the place away."""

import threading
import time

import pytest

from accounts.models import KEY_SCHEME, PREFIX_LENGTH, SECRET_LENGTH, parse_key
from plugins_app.runtime.engine.supervisor import Supervisor
from plugins_app.runtime.tables.hooks import HOOKS
from plugins_app.runtime.web.chain import Handler, run_chain
from plugins_app.runtime.web.tier import tier_for
from plugins_app.services.engine import admission
from plugins_app.services.engine.admission import FairGate

from ..conftest import PROMPT, appender


def wait_until(condition, what: str, seconds: float = 10.0) -> None:
    deadline = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.01)


class Caller(threading.Thread):
    """Waits for `key`'s turn in `gate`, notes in `admitted` that it got in, and leaves at once."""

    def __init__(self, gate: FairGate, key: str, admitted: list):
        super().__init__(daemon=True)
        self.gate, self.key, self.admitted = gate, key, admitted

    def run(self):
        with self.gate.turn(self.key):
            self.admitted.append(self.key)

    def queue(self) -> "Caller":
        before = self.gate.queued()
        self.start()
        wait_until(lambda: self.gate.queued() == before + 1, f"{self.key} to queue")
        return self


def test_a_freed_place_goes_to_the_next_account_not_the_next_caller():
    gate, admitted = FairGate(1), []
    with gate.turn("holder"):
        # Three callers of one noisy account queue before one caller of a quiet account.
        callers = [Caller(gate, key, admitted).queue() for key in ("noisy", "noisy", "noisy", "quiet")]
    for caller in callers:
        caller.join(10)
    assert admitted == ["noisy", "quiet", "noisy", "noisy"]


def test_places_are_given_at_once_while_there_are_free_ones():
    gate, admitted = FairGate(2), []
    with gate.turn("a"):
        second = Caller(gate, "b", admitted)
        second.start()
        second.join(10)
        assert admitted == ["b"] and gate.queued() == 0


def test_an_uncontended_turn_and_its_engine_wait_make_no_event(monkeypatch):
    # The execute path's common case: a free place and nobody waiting costs a lock, not an Event.
    made = []
    real_event = threading.Event
    monkeypatch.setattr(admission.threading, "Event", lambda: made.append(1) or real_event())
    gate = FairGate(2, per_account=1)
    with gate.turn("a"):
        with gate.waiting():
            pass
    assert made == [] and gate.queued() == 0
    second = Caller(gate, "a", [])   # (a thread makes an event of its own)
    made.clear()
    with gate.turn("a"):   # at its share: a second caller of "a" must queue, with an event
        second.queue()
    second.join(10)
    assert made == [1]


def test_an_account_at_its_share_waits_while_another_account_takes_the_free_place():
    gate, admitted = FairGate(2, per_account=1), []
    with gate.turn("noisy"):
        second_noisy = Caller(gate, "noisy", admitted).queue()   # a place is free, but not for it
        quiet = Caller(gate, "quiet", admitted)
        quiet.start()
        quiet.join(10)
        assert admitted == ["quiet"] and gate.queued() == 1
    second_noisy.join(10)
    assert admitted == ["quiet", "noisy"]


def test_the_wait_for_a_turn_is_reported():
    waits, hold = [], 0.05
    gate = FairGate(1, on_wait=waits.append)
    with gate.turn("first"):
        second = Caller(gate, "second", []).queue()
        threading.Event().wait(hold)   # the place stays taken at least this long after "second" queued
    second.join(10)
    assert len(waits) == 2
    assert waits[0] < hold <= waits[1]


def test_a_nested_turn_of_the_same_thread_shares_its_place():
    gate = FairGate(1)
    with gate.turn("a"):
        with gate.turn("a"):   # a chain run from inside a host call: no second place needed
            assert gate.queued() == 0
        assert gate.books.running == 1
    assert gate.books.running == 0


def test_a_call_waiting_elsewhere_lets_others_in_and_comes_back_before_new_callers():
    gate, order = FairGate(1), []
    gave_place_away, answer_came = threading.Event(), threading.Event()

    def waiting_call():
        with gate.turn("slow"):
            with gate.waiting():
                gave_place_away.set()
                answer_came.wait(10)
            order.append("slow")

    slow = threading.Thread(target=waiting_call, daemon=True)
    slow.start()
    gave_place_away.wait(10)
    with gate.turn("quick"):   # gets the place the waiting call gave up
        order.append("quick")
        answer_came.set()
        wait_until(lambda: gate.queued() == 1, "the slow call to ask for its place back")
        late = Caller(gate, "late", order).queue()
    slow.join(10)
    late.join(10)
    assert order == ["quick", "slow", "late"]


@pytest.fixture
def engines(tmp_path, request):
    supervisor = Supervisor(tmp_path / "engines", engines=2, lane=1).start()
    tier = tier_for(supervisor.describe())
    request.addfinalizer(lambda: (tier.shutdown(), supervisor.stop()))
    return tier


def handler(tier, n: int, source: str) -> Handler:
    compiled = tier.compile(source, "javascript")
    assert not compiled["errors"], compiled["errors"]
    return Handler(str(n), f"plugin-{n}", f"hash-{n}", compiled["code"])


def test_a_chain_running_on_its_engine_does_not_hold_the_web_process_place(engines):
    gate = FairGate(1)
    engines.waiting = gate.waiting
    hog = handler(engines, 1, "globalThis.middleware.systemPrompt = async (c) => {"
                              " const t = Date.now(); while (Date.now() - t < 3000) {} return c.systemPrompt + '!'; };")
    good = handler(engines, 2, appender("+"))

    def hog_call():
        with gate.turn("hogger"):
            run_chain(engines, "hogger", HOOKS["systemPrompt"], [hog], PROMPT)

    first = threading.Thread(target=hog_call, daemon=True)
    first.start()
    hogs_engine = engines.order("hogger")[0]
    wait_until(lambda: engines.ping(hogs_engine)["running"] == "hogger", "the hog to run")
    with gate.turn("other"):   # would wait for the hog's whole chain if its place were still taken
        result = run_chain(engines, "other", HOOKS["systemPrompt"], [good], PROMPT)
        hog_still_running = first.is_alive()
    first.join(15)
    assert result.value == PROMPT["systemPrompt"] + "+"
    assert hog_still_running


def test_the_execute_api_learns_which_account_a_key_belongs_to(api_client, api_key, account, install):
    install(appender("+"))
    prefix = parse_key(api_key)
    assert admission.line_for(prefix) == ("key", prefix)
    response = api_client.post("/api/v1/hooks/systemPrompt/execute", {"context": PROMPT}, format="json")
    assert response.status_code == 200
    # Another key of the account would now wait in the account's line, not a line of its own.
    assert admission.line_for(prefix) == ("account", account.pk)


def test_a_rejected_key_is_never_learnt(client, db):
    forged = f"{KEY_SCHEME}_{'a' * PREFIX_LENGTH}_{'b' * SECRET_LENGTH}"
    prefix = parse_key(forged)
    assert prefix is not None   # well formed, so the middleware does see a prefix
    response = client.post("/api/v1/hooks/systemPrompt/execute", {"context": PROMPT},
                           content_type="application/json", HTTP_AUTHORIZATION=f"Bearer {forged}")
    assert response.status_code == 401
    assert admission.line_for(prefix) == ("key", prefix)
