"""Tracing: the caller's traceparent is honoured and spans reach a real OTLP/HTTP receiver; Server-Timing
names each handler; nothing is traced when no endpoint is configured."""


from plugins_app.services.observability import tracing

from ..conftest import PROMPT, appender

TRACE_ID = "4bf92f3577b34da6a3ce929d0e0e4736"
PARENT_ID = "00f067aa0ba902b7"


def execute(api_client, **headers):
    return api_client.post("/api/v1/hooks/systemPrompt/execute", {"context": PROMPT}, format="json", **headers)


def attributes(span) -> dict:
    return {a.key: a.value.string_value or a.value.int_value or a.value.double_value for a in span.attributes}


def test_a_traceparent_is_honoured_with_a_span_per_handler(api_client, install, collector):
    install(appender("!"), name="shouter")
    install("globalThis.middleware.systemPrompt = async () => { throw new Error('no'); };", name="thrower")
    response = execute(api_client, HTTP_TRACEPARENT=f"00-{TRACE_ID}-{PARENT_ID}-01")
    assert response.status_code == 200
    assert tracing.force_flush()
    by_name = {span.name: span for span in collector.spans}
    chain = by_name["execute systemPrompt"]
    assert chain.trace_id.hex() == TRACE_ID and chain.parent_span_id.hex() == PARENT_ID
    handlers = [by_name["handler shouter"], by_name["handler thrower"]]
    for span in handlers:
        assert span.trace_id.hex() == TRACE_ID and span.parent_span_id == chain.span_id
        assert chain.start_time_unix_nano <= span.start_time_unix_nano <= span.end_time_unix_nano
    assert attributes(handlers[0])["hub.status"] == "ran" and attributes(handlers[1])["hub.status"] == "error"
    assert handlers[1].status.code == handlers[1].status.STATUS_CODE_ERROR
    assert handlers[0].end_time_unix_nano == handlers[1].start_time_unix_nano   # laid end to end
    assert attributes(chain)["hub.outcome"] == "changed"
    assert response["traceresponse"] == f"00-{TRACE_ID}-{chain.span_id.hex()}-01"


def test_without_a_valid_traceparent_a_new_trace_starts(api_client, install, collector):
    install(appender("!"), name="shouter")
    response = execute(api_client, HTTP_TRACEPARENT="00-not-a-trace-01")
    assert response.status_code == 200
    assert tracing.force_flush()
    chain = next(span for span in collector.spans if span.name == "execute systemPrompt")
    assert chain.trace_id.hex() != TRACE_ID and chain.parent_span_id == b""
    assert response["traceresponse"].split("-")[1] == chain.trace_id.hex()


def test_without_an_endpoint_nothing_is_traced(api_client, install, monkeypatch):
    monkeypatch.delenv("OTEL_EXPORTER_OTLP_ENDPOINT", raising=False)
    monkeypatch.delenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", raising=False)
    install(appender("!"), name="shouter")
    response = execute(api_client, HTTP_TRACEPARENT=f"00-{TRACE_ID}-{PARENT_ID}-01")
    assert response.status_code == 200 and not response.has_header("traceresponse")
    assert tracing._provider is None


def test_server_timing_has_the_chain_then_one_entry_per_handler(api_client, install):
    install(appender("!"), name="shouter")
    install('globalThis.middleware.systemPrompt = async () => 42;', name="say \"hi\"")
    header = execute(api_client)["Server-Timing"]
    entries = [part.strip() for part in header.split(",")]
    assert entries[0].startswith("chain;dur=") and len(entries) == 3
    assert entries[1].startswith("h0;dur=") and entries[1].endswith(';desc="shouter ran"')
    assert entries[2].startswith("h1;dur=") and "malformed" in entries[2]
    assert all(float(e.split("dur=")[1].split(";")[0]) >= 0 for e in entries)
