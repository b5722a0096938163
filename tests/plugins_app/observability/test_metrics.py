"""GET /metrics: Prometheus text that parses and moves with calls, its protection, bounded labels,
and multiprocess mode across the workers of a real gunicorn."""

import os
import time
from dataclasses import replace
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from plugins_app.services.observability import metrics
from plugins_app.tasks import deliver_due_notifications

from ..conftest import PROMPT, appender
from ..serving import Served


def parse(text: str) -> dict:
    """{(sample name, frozenset(labels)): value} of a scrape."""
    return {(s.name, frozenset(s.labels.items())): s.value
            for family in text_string_to_metric_families(text) for s in family.samples}


def sample(samples: dict, name: str, **labels) -> float:
    return samples.get((name, frozenset(labels.items())), 0.0)


TOKEN = "metrics-t0ken"


@pytest.fixture(autouse=True)
def metrics_token(settings):
    """Scrapes carry a token, as a production hub (DJANGO_DEBUG=0) requires."""
    settings.HUB_METRICS = replace(settings.HUB_METRICS, token=TOKEN)


def scrape(client, **headers) -> dict:
    response = client.get("/metrics", HTTP_AUTHORIZATION=f"Bearer {TOKEN}", **headers)
    assert response.status_code == 200, response.content
    assert response["Content-Type"].startswith("text/plain; version=0.0.4")
    return parse(response.content.decode())


def execute(api_client, hook="systemPrompt", context=PROMPT):
    return api_client.post(f"/api/v1/hooks/{hook}/execute", {"context": context}, format="json")


def test_execute_calls_and_handlers_move_the_counters(client, api_client, install):
    install(appender("!"), name="shouter")
    install("globalThis.middleware.systemPrompt = async () => { throw new Error('no'); };", name="thrower")
    before = scrape(client)
    for _ in range(3):
        assert execute(api_client).status_code == 200
    after = scrape(client)

    def moved(name, **labels):
        return sample(after, name, **labels) - sample(before, name, **labels)

    assert moved("hub_execute_requests_total", hook="systemPrompt", outcome="changed") == 3
    assert moved("hub_execute_duration_seconds_count", hook="systemPrompt", outcome="changed") == 3
    assert moved("hub_handler_runs_total", plugin="shouter", status="ran") == 3
    assert moved("hub_handler_runs_total", plugin="thrower", status="error") == 3
    assert moved("hub_handler_duration_seconds_count", plugin="shouter", hook="systemPrompt") == 3
    assert moved("hub_admission_wait_seconds_count") == 3   # each call's wait for its account's turn
    assert sample(after, "hub_engine_up", engine="0") == 1
    assert sample(after, "hub_engine_resident_bytes", engine="0") > 50 * 1024 * 1024   # V8 and SES at least
    assert ("hub_engine_memory_charges_total", frozenset({("engine", "0")})) in after   # each engine reports it
    assert sample(after, "hub_engine_compartment_misses_total", engine="0") + \
        sample(after, "hub_engine_compartment_misses_total", engine="1") >= 2   # first calls load both


def test_a_rest_of_an_accounts_machine_place_adds_its_seconds(client, db):
    # The gate reports each rest (tests/plugins_app/engine/test_machine_places.py); here it reaches the scrape.
    before = scrape(client)
    metrics.admission_rested(0.25)
    metrics.admission_rested(0.5)
    after = scrape(client)
    assert sample(after, "hub_admission_rest_seconds_total") - sample(before, "hub_admission_rest_seconds_total") == 0.75


def test_a_refused_call_counts_as_rejected_and_an_unknown_hook_is_one_label(client, api_client):
    before = scrape(client)
    assert execute(api_client, context={"sessionId": "1"}).status_code == 400
    assert execute(api_client, hook="noSuchHook-abc").status_code == 404
    after = scrape(client)
    for hook in ("systemPrompt", "unknown"):
        key = ("hub_execute_requests_total", frozenset({"hook": hook, "outcome": "rejected"}.items()))
        assert after[key] - before.get(key, 0) == 1
    assert not any(dict(labels).get("hook") == "noSuchHook-abc" for _, labels in after)


def test_celery_task_outcomes_are_counted(client, db, settings):
    settings.CELERY_TASK_ALWAYS_EAGER = True
    before = scrape(client)
    deliver_due_notifications.apply()
    after = scrape(client)
    labels = dict(task="plugins_app.tasks.deliver_due_notifications", outcome="success")
    assert sample(after, "hub_celery_tasks_total", **labels) - sample(before, "hub_celery_tasks_total", **labels) == 1


def test_a_quarantine_is_counted(client, api_client, install, settings):
    settings.HUB_QUARANTINE = replace(settings.HUB_QUARANTINE, strikes=1)
    settings.HUB_ENGINE = replace(settings.HUB_ENGINE, budget_ms=200)
    install("globalThis.middleware.systemPrompt = () => new Promise(() => {});", name="hangs")
    before = sample(scrape(client), "hub_quarantines_total")
    trace = execute(api_client).json()["trace"]
    assert trace[0]["status"] == "timeout"
    assert sample(scrape(client), "hub_quarantines_total") - before == 1


@pytest.mark.django_db
def test_without_a_token_only_loopback_may_scrape_a_development_server(client, settings):
    settings.HUB_METRICS = replace(settings.HUB_METRICS, token="")
    settings.DEBUG = True
    response = client.get("/metrics", REMOTE_ADDR="10.1.2.3")
    assert response.status_code == 403
    assert "loopback" in response.json()["error"]["message"]
    assert client.get("/metrics", REMOTE_ADDR="::1").status_code == 200


@pytest.mark.django_db
def test_without_a_token_a_production_hub_answers_no_one(client, settings):
    # Issue 33: behind a reverse proxy on the same host every caller is loopback.
    settings.HUB_METRICS = replace(settings.HUB_METRICS, token="")
    settings.DEBUG = False
    response = client.get("/metrics", REMOTE_ADDR="127.0.0.1")
    assert response.status_code == 403
    assert "set HUB_METRICS_TOKEN" in response.json()["error"]["message"]


@pytest.mark.django_db
def test_with_a_token_set_it_is_required_from_everywhere(client, settings):
    settings.HUB_METRICS = replace(settings.HUB_METRICS, token="s3cret-token")
    missing = client.get("/metrics")
    assert missing.status_code == 401 and missing["WWW-Authenticate"].startswith("Bearer")
    assert missing.json()["error"]["code"] == "unauthenticated"
    assert client.get("/metrics", HTTP_AUTHORIZATION="Bearer wrong").status_code == 401
    ok = client.get("/metrics", REMOTE_ADDR="10.1.2.3", HTTP_AUTHORIZATION="Bearer s3cret-token")
    assert ok.status_code == 200 and b"hub_execute_requests" in ok.content


def test_plugin_labels_stop_growing_past_the_limit(settings):
    settings.HUB_METRICS = replace(settings.HUB_METRICS, max_plugins=2)
    label = metrics._BoundedLabel(lambda: settings.HUB_METRICS.max_plugins)
    assert [label(name) for name in ("a", "b", "c", "a", "d")] == ["a", "b", metrics.OTHER, "a", metrics.OTHER]


@pytest.fixture
def two_workers(tmp_path):
    # Workers are recycled every few requests, so the calls are served by several worker
    # processes (two at a time), each writing its own files in the multiprocess directory.
    # Threaded workers: uvicorn's worker, recycled, closes a connection it accepted but had not read yet
    # (docs/production.md), which this test's calls would meet; summing across workers is the same.
    server = Served(workers=2, extra_args=("--max-requests", "3"), HUB_WORKER_CLASS="gthread",
                    PROMETHEUS_MULTIPROC_DIR=str(tmp_path / "prom"), HUB_METRICS_TOKEN=TOKEN).start()
    yield server
    server.stop()


def test_the_scrape_sums_every_gunicorn_worker(two_workers):
    key = two_workers.manage("create_api_key", "acme").strip().splitlines()[-1]
    auth = {"Authorization": f"Bearer {key}"}
    status, _, body = two_workers.request("POST", "/api/v1/plugins", {
        "name": "shouter", "source": appender("!"), "language": "javascript"}, auth)
    assert status == 201, body
    calls = 12
    for _ in range(calls):
        status, _, body = two_workers.request("POST", "/api/v1/hooks/systemPrompt/execute", {"context": PROMPT}, auth)
        assert status == 200, body
    # Each worker applies its observations within a second (or as it exits): wait for the sum.
    deadline = time.monotonic() + 30
    while True:
        status, headers, body = two_workers.request("GET", "/metrics", headers={"Authorization": f"Bearer {TOKEN}"})
        assert status == 200 and headers["Content-Type"].startswith("text/plain")
        samples = parse(body.decode())
        counted = sample(samples, "hub_execute_requests_total", hook="systemPrompt", outcome="changed")
        if counted >= calls or time.monotonic() > deadline:
            break
        time.sleep(0.2)   # poll again: another worker's flush is due
    assert counted == calls
    assert sample(samples, "hub_handler_runs_total", plugin="shouter", status="ran") == calls
    writers = {Path(f).stem.rsplit("_", 1)[-1] for f in os.listdir(two_workers.env["PROMETHEUS_MULTIPROC_DIR"])
               if f.startswith("counter_")}
    assert len(writers) >= 2, writers   # the total above was summed over several processes' files
