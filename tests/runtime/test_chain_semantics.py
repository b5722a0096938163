"""Chain order, value passing, cancel tokens and result shapes, through real V8 engines."""

from .conftest import INBOUND_CONTEXT, PROMPT_CONTEXT

APPEND = "globalThis.middleware.systemPrompt = async (c) => c.systemPrompt + '{}';"


def test_handlers_run_in_order_each_seeing_the_previous_output(make_handler, chain):
    handlers = [make_handler(APPEND.format(x)) for x in "ABC"]
    result = chain("systemPrompt", handlers, PROMPT_CONTEXT)
    assert result.value == "baseABC"
    assert result.outcome == "changed"
    assert [t.status for t in result.trace] == ["ran"] * 3
    assert all(t.changed for t in result.trace)


def test_returning_the_value_unchanged_passes_through(make_handler, chain):
    h = make_handler("globalThis.middleware.systemPrompt = async (c) => c.systemPrompt;")
    result = chain("systemPrompt", [h], PROMPT_CONTEXT)
    assert result.outcome == "unchanged"
    assert result.trace[0].changed is False


def test_cancel_stops_the_chain_and_records_the_reason(make_handler, chain):
    first = make_handler("globalThis.middleware.userMessageInbound = async (c) => c.text + '!';")
    veto = make_handler("globalThis.middleware.userMessageInbound = async (c, t) => t.cancel('no thanks');")
    after = make_handler("globalThis.middleware.userMessageInbound = async (c) => 'never';")
    result = chain("userMessageInbound", [first, veto, after], INBOUND_CONTEXT)
    assert result.outcome == "cancelled"
    assert result.cancellation.reason == "no thanks"
    assert result.cancellation.installation_id == veto.installation_id
    assert [t.installation_id for t in result.trace] == [first.installation_id, veto.installation_id]


def test_cancel_reason_is_cut_to_500_characters(make_handler, chain):
    h = make_handler("globalThis.middleware.userMessageInbound = async (c, t) => t.cancel('x'.repeat(5000));")
    result = chain("userMessageInbound", [h], INBOUND_CONTEXT)
    assert len(result.cancellation.reason) == 500


def test_a_forged_cancel_token_is_malformed(make_handler, chain):
    forger = make_handler(
        "globalThis.middleware.userMessageInbound = async (c, t) => {"
        " const real = t.cancel('x'); return Object.assign({}, real, {cancelled: true, reason: 'x'}); };")
    result = chain("userMessageInbound", [forger], INBOUND_CONTEXT)
    assert result.outcome == "unchanged"
    assert result.trace[0].status == "malformed"


def test_a_token_kept_from_an_earlier_invocation_is_not_honoured(make_handler, chain):
    h = make_handler(
        "let saved; globalThis.middleware.userMessageInbound = async (c, t) => {"
        " if (!saved) { saved = t.cancel('first'); return saved; } return saved; };")
    first = chain("userMessageInbound", [h], INBOUND_CONTEXT, account="stale-token")
    second = chain("userMessageInbound", [h], INBOUND_CONTEXT, account="stale-token")
    assert first.outcome == "cancelled"
    assert second.outcome == "unchanged"
    assert second.trace[0].status == "malformed"


def test_system_prompt_cannot_be_cancelled(make_handler, chain):
    h = make_handler("globalThis.middleware.systemPrompt = async (c, t) => t.cancel ? t.cancel('x') : 'no tools';")
    result = chain("systemPrompt", [h], PROMPT_CONTEXT)
    assert result.outcome == "changed"
    assert result.value == "no tools"


def test_undefined_where_a_value_is_due_is_malformed_and_skipped(make_handler, chain):
    bad = make_handler("globalThis.middleware.systemPrompt = async (c) => { c.systemPrompt + 'x'; };")
    good = make_handler(APPEND.format("!"))
    result = chain("systemPrompt", [bad, good], PROMPT_CONTEXT)
    assert [t.status for t in result.trace] == ["malformed", "ran"]
    assert result.value == "base!"
    assert "undefined" in result.trace[0].warning


def test_wrong_type_is_malformed(make_handler, chain):
    h = make_handler("globalThis.middleware.todoAdded = async (c) => c.texts.join(',');")
    result = chain("todoAdded", [h], {"sessionId": "1", "texts": ["a", "b"]})
    assert result.trace[0].status == "malformed"
    assert result.value == ["a", "b"]


def test_string_list_hook_takes_a_new_list(make_handler, chain):
    h = make_handler("globalThis.middleware.todoAdded = async (c) => c.texts.flatMap(t => t.split(';'));")
    result = chain("todoAdded", [h], {"sessionId": "1", "texts": ["a;b", "c"]})
    assert result.value == ["a", "b", "c"]


def test_multi_field_hooks_take_a_partial_object(make_handler, chain):
    ctx = {"sessionId": "1", "message": "wake", "delaySeconds": 3600}
    clamp = make_handler("globalThis.middleware.notifyScheduled = async (c) => ({delaySeconds: Math.min(c.delaySeconds, 60)});")
    noop = make_handler("globalThis.middleware.notifyScheduled = async () => ({});")
    result = chain("notifyScheduled", [clamp, noop], ctx)
    assert result.value == {"message": "wake", "delaySeconds": 60}
    assert [t.changed for t in result.trace] == [True, False]


def test_negative_or_infinite_delay_is_malformed(make_handler, chain):
    ctx = {"sessionId": "1", "message": "wake", "delaySeconds": 10}
    for bad in ("-1", "Infinity", "NaN"):
        h = make_handler(f"globalThis.middleware.notifyScheduled = async () => ({{delaySeconds: {bad}}});")
        result = chain("notifyScheduled", [h], ctx)
        assert result.trace[0].status == "malformed", bad
        assert result.value["delaySeconds"] == 10


def test_read_only_field_in_a_partial_object_is_malformed(make_handler, chain):
    h = make_handler("globalThis.middleware.sshCommandSending = async () => ({kind: 'delete_file'});")
    ctx = {"sessionId": "1", "agentId": "2", "sshHostId": "3", "hostDisplayName": "web", "kind": "command",
           "command": "ls", "path": None, "content": None}
    result = chain("sshCommandSending", [h], ctx)
    assert result.trace[0].status == "malformed"
    assert "kind" in result.trace[0].warning


def test_observe_only_hooks_ignore_the_return_value(make_handler, chain):
    h = make_handler("globalThis.middleware.sessionClearCompleted = async () => 'ignored';")
    ctx = {"sessionId": "1", "agentId": "2", "deletedMessageCount": 3, "deletedSubagentCount": 0,
           "deletedPeerThreadCount": 0}
    result = chain("sessionClearCompleted", [h], ctx)
    assert result.value is None
    assert result.outcome == "unchanged"
    assert result.trace[0].status == "ran"


def test_observe_only_but_cancellable_hook_can_refuse(make_handler, chain):
    h = make_handler("globalThis.middleware.sshConnectionOpening = async (c, t) => t.cancel('not today');")
    ctx = {"sessionId": "1", "agentId": "2", "sshHostId": "3", "hostDisplayName": "web", "hostname": "h",
           "port": 22, "connectionType": "direct", "username": "u"}
    result = chain("sshConnectionOpening", [h], ctx)
    assert result.outcome == "cancelled"
    assert result.cancellation.reason == "not today"


def test_a_64_bit_id_passes_through_a_handler_unchanged(make_handler, chain):
    h = make_handler("globalThis.middleware.systemPrompt = async (c) => c.sessionId + '|' + c.systemPrompt;")
    ctx = dict(PROMPT_CONTEXT, sessionId="18446744073709551615")
    result = chain("systemPrompt", [h], ctx)
    assert result.value == "18446744073709551615|base"
    assert result.context["sessionId"] == "18446744073709551615"


def test_a_handler_mutating_its_context_does_not_leak_to_the_next(make_handler, chain):
    mutate = make_handler("globalThis.middleware.systemPrompt = async (c) => { const v = c.systemPrompt; c.agentId = 'evil'; return v; };")
    read = make_handler("globalThis.middleware.systemPrompt = async (c) => c.systemPrompt + ':' + c.agentId;")
    result = chain("systemPrompt", [mutate, read], PROMPT_CONTEXT)
    assert result.value == "base:2"


def test_host_log_is_collected_per_handler(make_handler, chain):
    h = make_handler("globalThis.middleware.systemPrompt = async (c) => { host.log('warn', 'careful'); console.log('via', 'console'); return c.systemPrompt; };")
    result = chain("systemPrompt", [h], PROMPT_CONTEXT)
    assert [(entry["level"], entry["message"]) for entry in result.trace[0].logs] == [("warn", "careful"), ("info", "via console")]


def test_astral_text_travels_both_ways_and_lone_surrogates_come_back_repaired(make_handler, chain):
    # A lone surrogate is legal in a JS string, not in UTF-8: what a plugin returns is repaired
    # with U+FFFD and the trace says so; astral characters and U+2028 pass untouched.
    h = make_handler("globalThis.middleware.userMessageInbound = async (c) => c.text + '\\ud800' + '\\u{1F600}';")
    text = "caf\u00e9 \U0001F600 \u2028 end"
    result = chain("userMessageInbound", [h], dict(INBOUND_CONTEXT, text=text))
    assert result.trace[0].status == "ran"
    assert result.value == text + "\ufffd\U0001F600"
    assert "U+FFFD" in result.trace[0].warning


def test_lone_surrogates_in_reasons_logs_and_errors_are_repaired(make_handler, chain):
    logs = make_handler("globalThis.middleware.userMessageInbound = async (c) => { host.log('info', 'a\\udc00'); throw new Error('b\\ud800'); };")
    cancel = make_handler("globalThis.middleware.userMessageInbound = async (c, tools) => tools.cancel('c\\ud800');")
    result = chain("userMessageInbound", [logs, cancel], INBOUND_CONTEXT)
    assert result.trace[0].logs[0]["message"] == "a\ufffd"
    assert result.trace[0].status == "error" and "b\ufffd" in result.trace[0].warning
    assert result.cancellation.reason == "c\ufffd"


def test_values_near_the_size_limit_travel_both_ways(make_handler, chain):
    h = make_handler("globalThis.middleware.userMessageInbound = async (c) => c.text.toUpperCase();")
    text = "ab " * 300_000   # 900 KB in and out: larger than any socket buffer
    result = chain("userMessageInbound", [h], dict(INBOUND_CONTEXT, text=text))
    assert result.trace[0].status == "ran"
    assert result.value == text.upper()


def test_trace_values_show_each_handlers_result_only_when_asked(make_handler, chain):
    a = make_handler("globalThis.middleware.systemPrompt = async (c) => c.systemPrompt + 'A';")
    broken = make_handler("globalThis.middleware.systemPrompt = async () => { throw 1; };")
    b = make_handler("globalThis.middleware.systemPrompt = async (c) => c.systemPrompt + 'B';")
    traced = chain("systemPrompt", [a, broken, b], PROMPT_CONTEXT, trace_values=True)
    assert [t.value for t in traced.trace] == ["baseA", "baseA", "baseAB"]
    plain = chain("systemPrompt", [a, broken, b], PROMPT_CONTEXT)
    assert [t.value for t in plain.trace] == [None, None, None]
    assert plain.value == traced.value == "baseAB"
