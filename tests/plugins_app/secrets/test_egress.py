"""host.fetch puts {{secret.NAME}} in at sending time, only for a granted secret and an allowed host,
and the value never reaches the plugin: a loopback server records what it really received."""

import json
from dataclasses import replace

import pytest

from plugins_app.services.secrets import store

from ..conftest import PROMPT
from ..host.stubs import StubServer, execute, reporter

pytestmark = pytest.mark.django_db

VALUE = "tok-3a9f1c7e5d2b8a6f4e0c"
GRANT = ["host:fetch", "secret:TOKEN"]


def _echo(req):
    """Answers with what it received: the token back in a header and in the body (as APIs do)."""
    return 200, {"Content-Type": "application/json", "X-Seen": req.headers.get("Authorization") or ""}, \
        json.dumps({"path": req.path, "auth": req.headers.get("Authorization"), "body": req.body.decode()}).encode()


@pytest.fixture
def site(settings):
    settings.HUB_HOST = replace(settings.HUB_HOST, fetch_allow_private=True)   # the test server is loopback
    server = StubServer(_echo)
    yield server
    server.close()


def fetcher(url: str, init: str = "{headers: {Authorization: 'Bearer {{secret.TOKEN}}'}}") -> str:
    return reporter("systemPrompt", f"host.fetch({url!r}, {init}).then(async (r) => "
                                    "({status: r.status, seen: r.headers['x-seen'], data: await r.json()}))")


def result(api_client) -> dict:
    return json.loads(execute(api_client, "systemPrompt", PROMPT)["value"])


def test_the_server_receives_the_real_value_and_the_plugin_only_the_placeholder(api_client, account, install, site):
    store.set_secret(account, "TOKEN", value=VALUE, allowed_hosts=[site.url])
    installation = install(fetcher(f"{site.url}/v1/{{{{secret.TOKEN}}}}",
                                   "{method: 'POST', headers: {Authorization: 'Bearer {{secret.TOKEN}}'}, "
                                   "body: JSON.stringify({key: '{{secret.TOKEN}}'})}"), grant=GRANT)
    assert installation.plugin.permissions == ["host:fetch", "secret:TOKEN"]   # read from the source
    got = result(api_client)["ok"]
    [request] = site.requests
    assert request.headers["Authorization"] == f"Bearer {VALUE}"
    assert request.path == f"/v1/{VALUE}" and json.loads(request.body) == {"key": VALUE}
    # The echo comes back redacted, in the headers and the body: the value never entered the isolate.
    assert got["seen"] == "Bearer [secret TOKEN]"
    assert got["data"] == {"path": "/v1/[secret TOKEN]", "auth": "Bearer [secret TOKEN]",
                           "body": '{"key":"[secret TOKEN]"}'}


def test_a_host_outside_allowed_hosts_gets_nothing_and_the_error_names_the_rule(api_client, account, install, site):
    store.set_secret(account, "TOKEN", value=VALUE, allowed_hosts=["api.example.com", "*.slack.com"])
    install(fetcher(f"{site.url}/x"), grant=GRANT)
    error = result(api_client)["error"]
    assert site.requests == []   # nothing was sent
    assert error == ("host.fetch refused: secret TOKEN may only be sent to its allowedHosts (api.example.com, "
                     "*.slack.com; a bare host is https on port 443), and http://127.0.0.1:"
                     f"{site.port} is not one of them; nothing was sent")


def test_an_ungranted_secret_is_not_injected(api_client, account, install, site):
    store.set_secret(account, "TOKEN", value=VALUE, allowed_hosts=[site.url])
    install(fetcher(f"{site.url}/x"), name="nosy", grant=["host:fetch"])
    error = result(api_client)["error"]
    assert site.requests == []
    assert error == ("host.fetch: {{secret.TOKEN}} needs the secret:TOKEN permission, which an account admin "
                     "has not granted to nosy; nothing was sent")


def test_a_placeholder_built_at_run_time_is_never_granted(api_client, account, install, site):
    store.set_secret(account, "TOKEN", value=VALUE, allowed_hosts=[site.url])
    # Built from pieces, the name is not in the source: the plugin can't ask for it, so it can't be granted.
    source = fetcher(f"{site.url}/x", "{headers: {Authorization: 'Bearer {{secret.' + 'TOK' + 'EN}}'}}")
    installation = install(source, grant=["host:fetch"])
    assert installation.plugin.permissions == ["host:fetch"]
    assert "needs the secret:TOKEN permission" in result(api_client)["error"]
    assert site.requests == []


def test_a_missing_secret_fails_clearly(api_client, install, site):
    install(fetcher(f"{site.url}/x"), grant=GRANT)
    assert result(api_client)["error"] == "host.fetch: this account has no secret named TOKEN; nothing was sent"
    assert site.requests == []


def test_a_secret_cannot_choose_the_host(api_client, account, install, site):
    store.set_secret(account, "TOKEN", value=VALUE, allowed_hosts=[site.url])
    install(fetcher(f"http://{{{{secret.TOKEN}}}}.example.com:{site.port}/x"), grant=GRANT)
    assert "can't go in the URL's host" in result(api_client)["error"]
    assert site.requests == []


def test_a_value_with_a_line_break_never_reaches_a_header(api_client, account, install, site):
    store.set_secret(account, "TOKEN", value="line-one\r\nX-Evil: 1", allowed_hosts=[site.url])
    install(fetcher(f"{site.url}/x"), grant=GRANT)
    error = result(api_client)["error"]
    assert "would hold a line break" in error and "X-Evil" not in error
    assert site.requests == []


def test_other_accounts_secrets_are_not_found(api_client, other_account, install, site):
    store.set_secret(other_account, "TOKEN", value=VALUE, allowed_hosts=[site.url])
    install(fetcher(f"{site.url}/x"), grant=GRANT)
    assert "no secret named TOKEN" in result(api_client)["error"]
    assert site.requests == []


def test_after_a_key_rotation_the_secret_still_goes_out(api_client, account, install, site, settings):
    settings.HUB_SECRETS = replace(settings.HUB_SECRETS, key="first-key-000000000")
    store.set_secret(account, "TOKEN", value=VALUE, allowed_hosts=[site.url])
    settings.HUB_SECRETS = replace(settings.HUB_SECRETS, key="second-key-11111111", key_fallbacks=("first-key-000000000",))
    assert store.rotate_all() == 1
    settings.HUB_SECRETS = replace(settings.HUB_SECRETS, key_fallbacks=())   # the old key is gone
    install(fetcher(f"{site.url}/x"), grant=GRANT)
    assert result(api_client)["ok"]["seen"] == "Bearer [secret TOKEN]"
    assert site.requests[-1].headers["Authorization"] == f"Bearer {VALUE}"


def test_the_same_plugin_sends_once_its_host_is_allowed_and_nothing_once_it_is_not(api_client, account, install,
                                                                                     site):
    store.set_secret(account, "TOKEN", value=VALUE, allowed_hosts=[site.url])
    install(fetcher(f"{site.url}/x"), grant=GRANT)
    assert result(api_client)["ok"]["status"] == 200 and len(site.requests) == 1
    assert api_client.put("/api/v1/secrets/TOKEN", {"allowedHosts": ["api.example.com"]},
                          format="json").status_code == 200
    assert "may only be sent to its allowedHosts (api.example.com;" in result(api_client)["error"]
    assert len(site.requests) == 1   # the second call sent nothing


def test_an_answer_to_a_granted_handler_is_redacted_even_when_that_call_sent_no_secret(api_client, account,
                                                                                         install, settings):
    settings.HUB_HOST = replace(settings.HUB_HOST, fetch_allow_private=True)
    leaky = StubServer(lambda req: (200, {"Content-Type": "text/plain"}, f"the token is {VALUE}".encode()))
    try:
        store.set_secret(account, "TOKEN", value=VALUE, allowed_hosts=["api.example.com"])
        # Reversed, the text would slip past the after-run pass: only redaction at entry keeps it out.
        source = reporter("systemPrompt", f"host.fetch({leaky.url!r}).then(async (r) => "
                                          "(await r.text()).split('').reverse().join(''))") + \
            "\n// declares {{secret.TOKEN}}"
        install(source, grant=GRANT)
        assert result(api_client) == {"ok": "the token is [secret TOKEN]"[::-1]}
    finally:
        leaky.close()


def test_a_secret_allowed_for_a_bare_host_goes_to_https_443_only(api_client, account, install, site):
    # 127.0.0.1 alone means https on 443: not plain http, not another service's port on the same address.
    store.set_secret(account, "TOKEN", value=VALUE, allowed_hosts=["127.0.0.1"])
    install(fetcher(f"{site.url}/x"), grant=GRANT)
    error = result(api_client)["error"]
    assert site.requests == []
    assert f"and http://127.0.0.1:{site.port} is not one of them; nothing was sent" in error


def test_a_secret_allowed_for_an_http_origin_goes_there_and_nowhere_else(api_client, account, install, site):
    other = StubServer(_echo)   # another service on the same address, another port
    try:
        store.set_secret(account, "TOKEN", value=VALUE, allowed_hosts=[f"http://127.0.0.1:{site.port}"])
        installation = install(fetcher(f"{site.url}/x"), grant=GRANT)
        assert result(api_client)["ok"]["status"] == 200
        assert [r.headers["Authorization"] for r in site.requests] == [f"Bearer {VALUE}"]
        for elsewhere in (f"{other.url}/x", f"https://127.0.0.1:{other.port}/x", f"http://localhost:{site.port}/x"):
            api_client.delete(f"/api/v1/plugins/{installation.pk}")
            installation = install(fetcher(elsewhere), grant=GRANT)
            assert "is not one of them; nothing was sent" in result(api_client)["error"], elsewhere
        assert other.requests == [] and len(site.requests) == 1
    finally:
        other.close()
