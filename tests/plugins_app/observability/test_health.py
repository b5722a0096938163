"""GET /healthz and /readyz: in process, and against a real gunicorn whose database disappears."""

import json
import shutil

import pytest

from ..serving import Served, free_port


@pytest.mark.django_db
def test_healthz_answers_without_a_key(client):
    response = client.get("/healthz")
    assert response.status_code == 200 and response.json() == {"status": "ok"}


@pytest.mark.django_db
def test_readyz_checks_the_database_engines_and_broker(client):
    response = client.get("/readyz")
    body = response.json()
    assert response.status_code == 200, body
    assert body["status"] == "ready"
    assert {name for name, check in body["checks"].items() if check["ok"]} == {"database", "engines", "broker"}
    assert body["checks"]["engines"]["engines"] and all("queued" in e for e in body["checks"]["engines"]["engines"])


@pytest.mark.django_db
def test_readyz_is_503_naming_an_unreachable_broker(client):
    from middleware_hub.celery import app

    previous = app.conf.broker_url
    app.conf.broker_url = f"redis://127.0.0.1:{free_port()}/0"   # a free port: nothing listens there
    try:
        response = client.get("/readyz")
    finally:
        app.conf.broker_url = previous
    body = response.json()
    assert response.status_code == 503 and body["status"] == "not ready"
    assert body["checks"]["broker"]["ok"] is False and "refused" in body["checks"]["broker"]["error"].lower()
    assert body["checks"]["database"]["ok"] and body["checks"]["engines"]["ok"]


@pytest.fixture
def served():
    server = Served(workers=1, DATABASE_CONN_MAX_AGE="0").start()
    yield server
    server.stop()


def test_readyz_fails_when_the_database_is_gone(served):
    status, _, body = served.request("GET", "/readyz")
    assert status == 200, body
    shutil.rmtree(served.db_dir)   # the database file and its directory are gone
    status, _, body = served.request("GET", "/readyz")
    checks = json.loads(body)["checks"]
    assert status == 503
    assert checks["database"]["ok"] is False and "OperationalError" in checks["database"]["error"]
    assert checks["engines"]["ok"] and checks["broker"]["ok"]
    assert served.request("GET", "/healthz")[0] == 200   # the process itself is still up
