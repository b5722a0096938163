"""host.llm and host.decide against a real local OpenAI-compatible server."""

import json
from dataclasses import replace

import pytest

from plugins_app.services.host.llm import match_option

from ..conftest import PROMPT
from .stubs import LLMStub, StubServer, execute, json_answer, reporter

pytestmark = pytest.mark.django_db

LLM = ["host:llm"]
DECIDE = ["host:decide"]


@pytest.fixture
def llm_server(settings):
    answers = {"text": "The sky is blue."}
    server = LLMStub(lambda body: answers["text"])
    server.answers = answers
    settings.HUB_HOST = replace(settings.HUB_HOST, llm_base_url=server.url + "/v1/")
    settings.HUB_HOST = replace(settings.HUB_HOST, llm_api_key="sk-test")
    settings.HUB_HOST = replace(settings.HUB_HOST, llm_model="tiny-model")
    yield server
    server.close()


def run(api_client, install, expression, grant):
    install(reporter("systemPrompt", expression), grant=grant)
    return json.loads(execute(api_client, "systemPrompt", PROMPT)["value"])


def test_llm_with_a_prompt_string_resolves_the_assistant_text(api_client, install, llm_server):
    assert run(api_client, install, "host.llm('What colour is the sky?')", LLM) == {"ok": "The sky is blue."}
    (req,) = llm_server.requests
    assert (req.method, req.path) == ("POST", "/v1/chat/completions")
    assert req.headers["Authorization"] == "Bearer sk-test"
    assert req.json() == {"model": "tiny-model", "messages": [{"role": "user", "content": "What colour is the sky?"}]}


def test_llm_with_messages_and_options(api_client, install, llm_server):
    expression = ("host.llm({messages: [{role: 'user', content: 'hi'}, {role: 'assistant', content: 'hello'},"
                  " {role: 'user', content: 'again'}], system: 'Be brief.', temperature: 0.2, max_tokens: 20})")
    assert run(api_client, install, expression, LLM) == {"ok": "The sky is blue."}
    sent = llm_server.requests[0].json()
    assert sent["messages"][0] == {"role": "system", "content": "Be brief."}
    assert [m["content"] for m in sent["messages"][1:]] == ["hi", "hello", "again"]
    assert (sent["temperature"], sent["max_tokens"], sent["model"]) == (0.2, 20, "tiny-model")


def test_llm_rejects_what_it_cannot_send(api_client, install, llm_server):
    result = run(api_client, install, "host.llm({messages: [{role: 'robot', content: 'x'}]})", LLM)
    assert "messages[0] must be" in result["error"]
    assert llm_server.requests == []


def test_llm_refuses_an_unknown_option(api_client, install, llm_server):
    result = run(api_client, install, "host.llm('x', {model: 'gpt-huge'})", LLM)
    assert "unknown option 'model'" in result["error"]


def test_without_an_endpoint_llm_and_decide_reject_clearly(api_client, install, settings):
    settings.HUB_HOST = replace(settings.HUB_HOST, llm_base_url="")
    install(reporter("userMessageInbound", "host.decide('ok?', ['yes', 'no'])"), grant=DECIDE)
    assert "no LLM endpoint is configured" in run(api_client, install, "host.llm('x')", LLM)["error"]
    body = execute(api_client, "userMessageInbound", {"sessionId": "1", "channelId": None, "text": "t", "mediaIds": []})
    assert "host.decide is not available: no LLM endpoint" in json.loads(body["value"])["error"]


def test_an_endpoint_error_is_a_rejection(api_client, install, settings):
    server = StubServer(lambda req: json_answer(503, {"error": {"message": "model overloaded"}}))
    try:
        settings.HUB_HOST = replace(settings.HUB_HOST, llm_base_url=server.url, llm_model="m")
        result = run(api_client, install, "host.llm('x')", LLM)
        assert result == {"error": "host.llm: the LLM endpoint answered HTTP 503: model overloaded"}
    finally:
        server.close()


def test_decide_returns_the_option_the_model_names(api_client, install, llm_server):
    llm_server.answers["text"] = "  refund.  "
    result = run(api_client, install, "host.decide('What does the customer want?', ['Refund', 'Exchange', 'Other'])",
                 DECIDE)
    assert result == {"ok": "Refund"}
    sent = llm_server.requests[0].json()
    assert sent["temperature"] == 0
    assert "- Refund\n- Exchange\n- Other" in sent["messages"][-1]["content"]
    assert sent["messages"][-1]["content"].startswith("What does the customer want?")


def test_decide_never_returns_something_else(api_client, install, llm_server):
    llm_server.answers["text"] = "Maybe a partial refund?"
    result = run(api_client, install, "host.decide('Approve?', ['yes', 'no'])", DECIDE)
    assert "matches none of the options" in result["error"]


def test_decide_validates_its_options(api_client, install, llm_server):
    assert "options must be" in run(api_client, install, "host.decide('q', [])", DECIDE)["error"]
    assert llm_server.requests == []


@pytest.mark.parametrize("answer, expected", [
    ("Yes", "yes"),
    ("YES.", "yes"),
    ('"no"', "no"),
    ("I would say: no.", "no"),
    ("not sure", "not sure"),
    ("nobody knows", None),            # "no" only inside another word
    ("yes and no", None),              # two options: ambiguous
    ("Option: not sure", "not sure"),  # "no" is not named inside "not sure"
])
def test_match_option(answer, expected):
    assert match_option(answer, ["yes", "no", "not sure"]) == expected


def test_an_endpoint_echoing_the_provider_key_never_hands_it_to_the_plugin(api_client, install, llm_server):
    llm_server.answers["text"] = "your key is sk-test, thanks"
    assert run(api_client, install, "host.llm('hi')", LLM) == {"ok": "your key is [secret LLM_API_KEY], thanks"}
    assert llm_server.requests[0].headers["Authorization"] == "Bearer sk-test"   # it was sent
