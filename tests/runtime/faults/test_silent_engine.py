"""Engines that fall silent are a part's fault, never a plugin's, and a web process never kills one
(issue 40, items 1 and 9; issue 39, item 1), with real SIGSTOP/SIGCONT:

* a frozen engine strikes no handler and lets no veto through: calls that were waiting on it are sent
  to the other engine (they never started) or answered EngineSilent (503); later calls pass it over;
  it is still the same process when it thaws;
* a frozen supervisor whose engine dies meanwhile: that engine's accounts are answered by the other
  engine within seconds, not after the freeze;
* a handler whose own host call (an SSH server that accepts and never speaks) or sleep waits for many
  seconds kills no engine, and another account calling meanwhile is answered every time.

Durations go to the figures table (figures.py), never into assertions."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from plugins_app.runtime.engine.supervisor import Supervisor
from plugins_app.runtime.launch import PROJECT_ROOT
from plugins_app.runtime.pulse import Pulse, pulse_path
from plugins_app.runtime.tables.hooks import HOOKS
from plugins_app.runtime.web.chain import Handler, HostError, run_chain
from plugins_app.runtime.web.tier import EngineSilent, Tier, preferred_order, tier_for, tier_from_directory

from .figures import record

VETO = "globalThis.middleware.userMessageInbound = async (c, tools) => tools.cancel('kept');"
INBOUND = {"sessionId": "1", "channelId": None, "text": "rm -rf /", "mediaIds": []}
FREEZE_SECONDS = 5   # past pulse.SILENT_SECONDS, short of the supervisor's hung limit below
HUNG_SECONDS = 60    # these scenarios are about what web processes do: the supervisor never steps in


def wait_until(predicate, timeout: float, what: str):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.05)
    raise AssertionError(f"timed out after {timeout} s waiting for {what}")


def state(pid: int) -> str:
    """The process's state letter (T: stopped), or "gone"."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, ProcessLookupError):
        return "gone"


def accounts_preferring(tier: Tier, address: str, n: int, prefix: str) -> list[str]:
    found = []
    for i in range(10_000):
        key = f"{prefix}-{i}"
        if preferred_order(tier.engines, key)[0] == address:
            found.append(key)
            if len(found) == n:
                return found
    raise AssertionError("no such accounts")


@dataclass
class Answer:
    account: str
    at: float
    seconds: float
    outcome: str          # vetoed | let through | silent | error
    crashes: list = field(default_factory=list)   # crash kinds in the trace


@dataclass
class Callers:
    """One thread per account, each running its veto chain one call after another."""

    tier: Tier
    accounts: list[str]
    handler: Handler
    answers: list[Answer] = field(default_factory=list)
    errors: list[BaseException] = field(default_factory=list)
    stop: threading.Event = field(default_factory=threading.Event)

    def __enter__(self) -> Callers:
        self.threads = [threading.Thread(target=self._run, args=(a,), daemon=True) for a in self.accounts]
        for thread in self.threads:
            thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.stop.set()
        for thread in self.threads:
            thread.join(60)

    def _run(self, account: str) -> None:
        while not self.stop.is_set():
            sent = time.monotonic()
            try:
                result = run_chain(self.tier, account, HOOKS["userMessageInbound"], [self.handler], INBOUND)
                outcome = "vetoed" if result.cancellation is not None else "let through"
                crashes = [t.crash for t in result.trace if t.crash]
            except EngineSilent:
                outcome, crashes = "silent", []
            except Exception as exc:  # noqa: BLE001 - kept and asserted on
                self.errors.append(exc)
                outcome, crashes = "error", []
            self.answers.append(Answer(account, time.monotonic(), time.monotonic() - sent, outcome, crashes))
            time.sleep(0.01)

    def since(self, moment: float, accounts: list[str] | None = None) -> list[Answer]:
        return [a for a in self.answers if a.at >= moment and (accounts is None or a.account in accounts)]

    def wait_for_vetoes(self, n: int, after: float, accounts: list[str]) -> None:
        wait_until(lambda: sum(a.outcome == "vetoed" for a in self.since(after, accounts)) >= n, 60,
                   f"{n} vetoed answers for {accounts}")


def _noticed(load: Callers, fault: float, accounts: list[str]) -> float:
    """The slowest answer to a call of `accounts` sent in the first second of the fault: those waited
    on the silent engine until its silence was noticed (and were sent elsewhere, or answered 503)."""
    return round(max((a.seconds for a in load.since(fault, accounts) if fault <= a.at - a.seconds < fault + 1),
                     default=0.0), 2)


def _handler(make_handler, source: str) -> Handler:
    return make_handler(source)


@pytest.fixture
def two_engines(tmp_path):
    supervisor = Supervisor(tmp_path / "engines", engines=2, lane=0, hung_seconds=HUNG_SECONDS).start()
    tier = tier_for(supervisor.describe())
    yield supervisor, tier
    tier.shutdown()
    supervisor.stop()


def test_a_frozen_engine_strikes_nobody_lets_no_veto_through_and_is_not_killed(two_engines, make_handler):
    supervisor, tier = two_engines
    frozen, other = tier.engines
    frozen_pid, other_pid = tier.ping(frozen)["pid"], tier.ping(other)["pid"]
    on_frozen = accounts_preferring(tier, frozen, 3, "frozen")
    on_other = accounts_preferring(tier, other, 2, "other")
    veto = _handler(make_handler, VETO)
    with Callers(tier, on_frozen + on_other, veto) as load:
        load.wait_for_vetoes(10, 0, on_frozen)
        fault = time.monotonic()
        os.kill(frozen_pid, signal.SIGSTOP)
        try:
            # The frozen engine's accounts are answered by the other one within seconds.
            load.wait_for_vetoes(10, fault, on_frozen)
            noticed = _noticed(load, fault, on_frozen)
            time.sleep(max(0.0, FREEZE_SECONDS - (time.monotonic() - fault)))   # the freeze lasts this long
            assert state(frozen_pid) == "T"   # stopped, and no web thread ended it
        finally:
            os.kill(frozen_pid, signal.SIGCONT)
        thawed = time.monotonic()
        load.wait_for_vetoes(10, thawed, on_frozen)
    during = [a for a in load.answers if fault <= a.at < thawed]
    row = record("engine frozen", answers=len(load.answers), **{
        "answers frozen": len(during), "503 (silent)": sum(a.outcome == "silent" for a in load.answers),
        "let through": sum(a.outcome == "let through" for a in load.answers),
        "notice s": noticed,
        "slowest s": round(max(a.seconds for a in during), 2), "restarts": supervisor.restarts()})
    assert load.errors == []
    assert row["let through"] == 0, row   # no veto let through, during the freeze or after it
    # No strike: no handler's trace blames it for the engine (a strike needs a timeout or a crash kind).
    assert [a for a in load.answers if a.crashes] == []
    # Only a chain that was running on it when it stopped may be unknown (503); the rest went elsewhere.
    assert row["503 (silent)"] <= len(on_frozen), row
    # The same engine process, thawed and serving: neither a web process nor the supervisor killed it.
    assert tier.ping(frozen)["pid"] == frozen_pid and tier.ping(other)["pid"] == other_pid
    assert supervisor.restarts() == 0 and supervisor.hung_kills() == 0


def test_an_engine_silent_past_the_hung_limit_is_replaced_by_the_supervisor(tmp_path, make_handler):
    supervisor = Supervisor(tmp_path / "engines", engines=1, lane=0, hung_seconds=2).start()
    tier = tier_for(supervisor.describe())
    try:
        old = tier.ping(tier.engines[0])["pid"]
        os.kill(old, signal.SIGSTOP)
        stopped = time.monotonic()
        wait_until(lambda: supervisor.hung_kills() == 1, 30, "the supervisor to kill the stopped engine")
        wait_until(lambda: _beating(tier.engines[0]), 60, "its replacement to beat")
        record("engine hung past the limit", **{"replaced after s": round(time.monotonic() - stopped, 2)})
        veto = _handler(make_handler, VETO)
        result = run_chain(tier, "acct", HOOKS["userMessageInbound"], [veto], INBOUND)
        assert result.cancellation is not None
        assert tier.ping(tier.engines[0])["pid"] != old and state(old) == "gone"
    finally:
        tier.shutdown()
        supervisor.stop()


@pytest.fixture
def supervisor_process(tmp_path):
    """A supervisor in a process of its own (it can be stopped), with two shared engines."""
    directory = tmp_path / "engines"
    proc = subprocess.Popen([sys.executable, "-m", "plugins_app.runtime.engine.supervisor", str(directory),
                             "--engines", "2", "--lane", "0"], cwd=PROJECT_ROOT, start_new_session=True)
    try:
        wait_until(lambda: (directory / "tier.json").exists(), 60, "the supervisor's tier.json")
        tier = tier_from_directory(directory)
        wait_until(lambda: all(_beating(a) for a in tier.engines), 60, "both engines to beat")
        yield proc, tier
        tier.shutdown()
    finally:
        os.killpg(proc.pid, signal.SIGCONT)
        proc.terminate()
        proc.wait(30)


def _beating(address: str) -> bool:
    pulse = Pulse.open(pulse_path(address))
    return pulse is not None and pulse.read()[1] == 2 and not pulse.silent()


def test_a_frozen_supervisor_whose_engine_dies_meanwhile_costs_its_accounts_seconds(supervisor_process, make_handler):
    proc, tier = supervisor_process
    dead, other = tier.engines
    dead_pid = tier.ping(dead)["pid"]
    on_dead = accounts_preferring(tier, dead, 2, "dead")
    on_other = accounts_preferring(tier, other, 1, "alive")
    veto = _handler(make_handler, VETO)
    with Callers(tier, on_dead + on_other, veto) as load:
        load.wait_for_vetoes(10, 0, on_dead)
        os.kill(proc.pid, signal.SIGSTOP)   # the supervisor cannot start another engine now
        fault = time.monotonic()
        try:
            os.kill(dead_pid, signal.SIGKILL)
            load.wait_for_vetoes(10, fault, on_dead)   # answered by the other engine, the supervisor still frozen
            answered = _noticed(load, fault, on_dead)
            assert state(proc.pid) == "T"
        finally:
            os.kill(proc.pid, signal.SIGCONT)
        thawed = time.monotonic()
        # The thawed supervisor starts another engine in the dead one's place, and it serves again.
        wait_until(lambda: _beating(dead), 60, "the replacement engine to beat")
        load.wait_for_vetoes(10, time.monotonic(), on_dead)
    during = [a for a in load.since(fault) if a.at < thawed]
    let_through = [a for a in load.since(fault) if a.outcome == "let through"]
    row = record("supervisor frozen, engine killed", answers=len(load.answers), **{
        "answers frozen": len(during), "503 (silent)": sum(a.outcome == "silent" for a in during),
        "let through": len(let_through), "notice s": answered,
        "slowest s": round(max(a.seconds for a in during), 2)})
    assert load.errors == []
    # Only a chain running on the engine when it was killed may fail open (as any engine death), and its
    # trace says the engine crashed: never a strike.
    assert len(let_through) <= len(on_dead) and all(a.crashes == ["crashed"] for a in let_through), row
    assert [a for a in load.answers if set(a.crashes) - {"crashed"}] == []
    assert tier.ping(dead)["pid"] != dead_pid


def test_a_supervisor_that_stood_still_with_its_engine_does_not_take_the_engine_for_hung(tmp_path):
    # A machine frozen or starved for longer than the hung limit stops the supervisor and its engines
    # alike. Thawed, the supervisor looks first (the engine a moment later here): the engine's silence
    # was the supervisor's own, and it must not replace the engine (and lose its accounts' state).
    directory = tmp_path / "engines"
    proc = subprocess.Popen([sys.executable, "-m", "plugins_app.runtime.engine.supervisor", str(directory),
                             "--engines", "1", "--lane", "0", "--hung-seconds", "1.5"],
                            cwd=PROJECT_ROOT, start_new_session=True)
    try:
        wait_until(lambda: (directory / "tier.json").exists(), 60, "the supervisor's tier.json")
        tier = tier_from_directory(directory)
        [address] = tier.engines
        wait_until(lambda: _beating(address), 60, "the engine to beat")
        engine_pid = tier.ping(address)["pid"]
        os.kill(proc.pid, signal.SIGSTOP)
        os.kill(engine_pid, signal.SIGSTOP)
        time.sleep(3.5)   # past the 1.5 s limit, twice over
        os.kill(proc.pid, signal.SIGCONT)
        time.sleep(0.5)   # the supervisor looks while the engine is still stopped
        os.kill(engine_pid, signal.SIGCONT)
        time.sleep(2.5)   # past the limit again, counted from the thaw: the engine beats meanwhile
        assert state(engine_pid) not in ("gone", "Z")
        assert tier.ping(address)["pid"] == engine_pid
        # A silence the supervisor watched the whole time still counts: the engine stopped alone goes.
        os.kill(engine_pid, signal.SIGSTOP)
        wait_until(lambda: state(engine_pid) in ("gone", "Z"), 30, "the supervisor to replace the stopped engine")
        tier.shutdown()
    finally:
        os.killpg(proc.pid, signal.SIGCONT)
        proc.terminate()
        proc.wait(30)


def test_a_supervisor_stalled_in_the_middle_of_a_look_does_not_take_its_beating_engine_for_hung(tmp_path):
    # The supervisor's thread can be held up between reading an engine's pulse and reading the clock (its
    # process starved of CPU or of memory, a long GIL hold in the process it lives in). A beat it read
    # before the stall is then old by the stall's length: that silence was the supervisor's, not the engine's.
    supervisor = Supervisor(tmp_path / "engines", engines=1, lane=0, hung_seconds=1.5).start()
    tier = tier_for(supervisor.describe())
    [slot] = supervisor.slots
    try:
        pid = tier.ping(tier.engines[0])["pid"]
        wait_until(lambda: _beating(tier.engines[0]), 60, "the engine to beat")
        time.sleep(1.6)   # the supervisor judges silences by now (it has watched for the whole limit)
        real_read, stalls = slot.pulse.read, []

        def read_then_stall():
            record = real_read()
            if len(stalls) < 2:   # one look reads the pulse twice (its state, then its stamp)
                time.sleep(2.5)   # past the 1.5 s limit, while the engine beats on
                stalls.append(record)
            return record

        slot.pulse.read = read_then_stall
        wait_until(lambda: len(stalls) == 2, 10, "the supervisor's stalled look")
        time.sleep(0.5)   # its verdict, and the looks after
        assert supervisor.hung_kills() == 0 and tier.ping(tier.engines[0])["pid"] == pid
    finally:
        tier.shutdown()
        supervisor.stop()


# -- issue 39, item 1: a handler's own long wait ------------------------------------------------------

SSH_WAITER = """
globalThis.middleware.sshCommandSending = async (c) => {
  for (let i = 0; i < 3; i++) {
    try { await host.ssh.command("true", { timeoutSeconds: 90 }); } catch (e) {}
  }
  return { command: c.command };
};"""
SLEEPER = """
globalThis.middleware.sshCommandSending = async (c) => {
  await new Promise((resolve) => setTimeout(resolve, 4900));
  return { command: c.command };
};"""
SSH_CONTEXT = {"sessionId": "1", "agentId": "2", "sshHostId": "3", "hostDisplayName": "h", "kind": "command",
               "command": "ls", "path": None, "content": None}
SSH_SILENCE_SECONDS = 7   # each host.ssh.command waits this long on a server that never speaks (90 s in the issue)


@pytest.fixture
def mute_ssh_server():
    """A loopback TCP listener that accepts and never says a word (an SSH server that never speaks)."""
    listener = socket.create_server(("127.0.0.1", 0))
    accepted: list[socket.socket] = []
    stop = threading.Event()

    def accept():
        listener.settimeout(0.2)
        while not stop.is_set():
            try:
                accepted.append(listener.accept()[0])
            except TimeoutError:
                continue
            except OSError:
                return
    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    yield listener.getsockname()[1]
    stop.set()
    thread.join(5)
    listener.close()
    for conn in accepted:
        conn.close()


@pytest.mark.parametrize("attack", ["ssh to a mute server", "12 connections sleeping 4.9 s"])
def test_a_handlers_own_long_wait_kills_no_engine_and_no_other_account_fails_open(attack, two_engines, make_handler,
                                                                                  mute_ssh_server):
    supervisor, tier = two_engines
    pids = {a: tier.ping(a)["pid"] for a in tier.engines}

    def host(handler, member, args):
        # The hub's host.ssh.command against a server that accepts and never speaks: the wait is the
        # web process's, on behalf of this handler alone.
        assert member == "ssh.command"
        with socket.create_connection(("127.0.0.1", mute_ssh_server), timeout=SSH_SILENCE_SECONDS) as conn:
            try:
                conn.recv(1)
            except TimeoutError:
                raise HostError("ssh: the server sent nothing") from None
        raise HostError("ssh: the server closed the connection")

    ssh = attack.startswith("ssh")
    waiter = make_handler(SSH_WAITER if ssh else SLEEPER)
    attackers = [f"tenant-{i}" for i in range(3)] if ssh else ["tenant"] * 12
    outcomes: list[str] = []

    def attack_once(account: str) -> None:
        try:
            result = run_chain(tier, account, HOOKS["sshCommandSending"], [waiter], SSH_CONTEXT, host=host)
            outcomes.append(result.trace[0].status if result.trace else "none")
        except Exception as exc:  # noqa: BLE001 - kept and asserted on
            outcomes.append(type(exc).__name__)

    victims = accounts_preferring(tier, tier.engines[0], 1, "victim") + accounts_preferring(tier, tier.engines[1], 1, "victim")
    veto = make_handler(VETO)
    with Callers(tier, victims, veto) as load:
        load.wait_for_vetoes(5, 0, victims)
        start = time.monotonic()
        threads = [threading.Thread(target=attack_once, args=(a,)) for a in attackers]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(120)
        waited = time.monotonic() - start
        load.wait_for_vetoes(5, time.monotonic(), victims)
    during = load.since(start)
    row = record(f"39.1: {attack}", **{"attacker calls": len(outcomes), "attack s": round(waited, 1),
                                       "victim answers": len(during),
                                       "victims not vetoed": sum(a.outcome != "vetoed" for a in during),
                                       "victims slowest s": round(max(a.seconds for a in during), 2),
                                       "engines killed": supervisor.restarts()})
    assert len(outcomes) == len(attackers) and not [o for o in outcomes if o not in ("ran", "timeout", "quarantined")], outcomes
    # Every victim call ran its veto: none failed open, none was answered 503.
    assert load.errors == [] and row["victims not vetoed"] == 0, row
    # No engine was killed, by a web thread or anyone: the same processes serve.
    assert {a: tier.ping(a)["pid"] for a in tier.engines} == pids
    assert supervisor.restarts() == 0


def test_the_pulse_file_is_made_anew_without_being_cut_short(tmp_path):
    # A web process maps the pulse file; a supervisor started again on the same directory must not
    # shrink it (reading a mapping past a file's end is SIGBUS), and its stamps reach that mapping.
    from plugins_app.runtime import pulse
    path = str(tmp_path / "engine-0.sock.pulse")
    first = pulse.create(path)
    reader = Pulse.open(path)
    assert reader is not None and not reader.silent()   # never stamped: taken on trust
    again = pulse.create(path)
    writer = Pulse(again)
    writer.starting(1234)
    assert reader.read()[:2] == (1234, pulse.STARTING) and os.path.getsize(path) == pulse.RECORD.size
    for fd in (first, again):
        os.close(fd)
    assert json.dumps(reader.read())   # still mapped and readable
