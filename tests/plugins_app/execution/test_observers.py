"""The after-chain seam: observers added once in ready(), each hearing every recorded run, one's
failure costing the others nothing."""

import logging

import pytest

from plugins_app.models import PluginLog
from plugins_app.runtime.tables.hooks import HOOKS
from plugins_app.runtime.web.chain import ChainResult
from plugins_app.services.execution.observers import AfterChain, ChainRun, after_chain
from plugins_app.services.log_once import OncePerInterval


def _run(name="systemPrompt"):
    """A run of an empty chain (nothing hooked the point): what the seam hands on, whatever it holds."""
    context = {"systemPrompt": "base"}
    return ChainRun(account=None, spec=HOOKS[name], context=context,
                    result=ChainResult(name, "unchanged", context, "base", None, []), hop=0, turn_id="")


def test_observers_hear_a_run_in_the_order_they_were_added():
    seam, heard = AfterChain(), []
    seam.add("first", lambda run: heard.append(("first", run.spec.name)))
    seam.add("second", lambda run: heard.append(("second", run.spec.name)))
    seam.notify(_run())
    assert heard == [("first", "systemPrompt"), ("second", "systemPrompt")]


def test_adding_a_name_again_replaces_its_observer_instead_of_doubling_it():
    seam, heard = AfterChain(), []
    seam.add("one", lambda run: heard.append("old"))
    seam.add("one", lambda run: heard.append("new"))
    seam.notify(_run())
    assert heard == ["new"] and seam.names() == ["one"]


def test_a_failing_observer_is_logged_and_the_next_still_hears_the_run(caplog):
    seam, heard = AfterChain(), []

    def broken(run):
        raise RuntimeError("metering is down")

    seam.add("broken", broken)
    seam.add("after", lambda run: heard.append(run.spec.name))
    with caplog.at_level(logging.ERROR, logger="plugins_app.services.execution.observers"):
        seam.notify(_run())
    assert heard == ["systemPrompt"]
    assert "'broken' failed" in caplog.text and "metering is down" in caplog.text


def test_the_app_wires_each_collaborator_once_in_its_order():
    assert after_chain.names() == ["quarantine", "metering", "latency", "metrics", "plugin logs", "recorded calls",
                                  "shadow", "tail"]


@pytest.mark.django_db
def test_a_broken_observer_costs_an_execute_call_neither_its_answer_nor_its_logs(api_client, install):
    install("globalThis.middleware.systemPrompt = async (c) => { host.log('info', 'kept'); return c.systemPrompt + '!'; };")
    saved = dict(after_chain._observers)

    def broken(run):
        raise RuntimeError("the meter's table is locked")

    after_chain.add("metering", broken)   # the first observer after strikes fails on every run
    try:
        response = api_client.post("/api/v1/hooks/systemPrompt/execute", {"context": {
            "sessionId": "1", "agentId": "2", "sessionKind": "direct", "systemPrompt": "base"}}, format="json")
    finally:
        after_chain._observers = saved
    assert response.status_code == 200, response.content
    assert response.json()["value"] == "base!"
    assert list(PluginLog.objects.values_list("message", flat=True)) == ["kept"]


def test_an_observer_failing_on_every_call_is_logged_once_per_interval_with_a_count(caplog):
    # Issue 40, item 8: with Redis killed the tail observer logged an ERROR and a traceback per call
    # (105,831 lines in 60 s). 1,000 failing calls over 100 s (a clock of the test's) write a line per
    # interval, each after the first saying how many it stands for.
    seam, now = AfterChain(), [0.0]
    seam._failures = OncePerInterval(seam._failures.logger, seconds=10.0, clock=lambda: now[0])

    def tail(run):
        raise ConnectionError("Error 111 connecting to 127.0.0.1:6379. Connection refused.")

    seam.add("tail", tail)
    with caplog.at_level(logging.ERROR, logger="plugins_app.services.execution.observers"):
        for _ in range(1000):
            seam.notify(_run())
            now[0] += 0.1
    lines = [r for r in caplog.records if r.name == "plugins_app.services.execution.observers"]
    assert len(lines) <= 100 / 10 + 1, len(lines)
    assert lines[0].exc_info is not None and all(r.exc_info is None for r in lines[1:])   # one traceback
    counted = [int(r.getMessage().split("(")[-1].split()[0]) for r in lines[1:]]
    assert all("more since the last such line" in r.getMessage() for r in lines[1:])
    assert len(lines) + sum(counted) > 1000 - 10 / 0.1 - 1   # every call but the last interval's is told
