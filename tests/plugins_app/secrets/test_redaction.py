"""The Redactor: each value, as sent, JSON-escaped or percent-encoded, becomes [secret NAME], in text,
in JSON-like data (keys too) and in a chain result."""

from plugins_app.runtime.web.chain import Cancellation, ChainResult, HandlerTrace
from plugins_app.services.secrets.redaction import Redactor

VALUE = 'p@ss/w"rd+x y'


def redactor() -> Redactor:
    r = Redactor()
    r.add("PW", VALUE)
    return r


def test_the_usual_encodings_are_replaced():
    r = redactor()
    assert r.text(f"raw {VALUE}") == "raw [secret PW]"
    assert r.text('json "p@ss/w\\"rd+x y"') == 'json "[secret PW]"'
    assert r.text("url p%40ss%2Fw%22rd%2Bx%20y") == "url [secret PW]"
    assert r.text("form p%40ss%2Fw%22rd%2Bx+y") == "form [secret PW]"
    assert r.text("nothing here") == "nothing here"


def test_a_longer_value_containing_a_shorter_one_is_replaced_whole():
    r = Redactor()
    r.add("SHORT", "abcdefgh")
    r.add("LONG", "abcdefgh-ijklmnop")
    assert r.text("abcdefgh-ijklmnop and abcdefgh") == "[secret LONG] and [secret SHORT]"


def test_data_is_copied_with_keys_and_values_replaced():
    r = redactor()
    data = {VALUE: [VALUE, {"n": 1, "s": f"x{VALUE}x"}], "ok": True}
    assert r.data(data) == {"[secret PW]": ["[secret PW]", {"n": 1, "s": "x[secret PW]x"}], "ok": True}
    assert data[VALUE][0] == VALUE   # a copy: the original is untouched


def test_a_chain_result_is_scrubbed_in_place():
    trace = HandlerTrace("1", "p", "error", True, 1.0, warning=f"boom {VALUE}",
                         logs=[{"level": "info", "message": VALUE, "at": None}], value=VALUE, state_reset=VALUE)
    result = ChainResult("userMessageInbound", "cancelled", {"text": VALUE}, VALUE,
                         Cancellation("1", "p", f"because {VALUE}"), [trace])
    redactor().chain_result(result)
    assert VALUE not in repr(result)
    assert result.cancellation.reason == "because [secret PW]" and result.context == {"text": "[secret PW]"}
    assert trace.logs[0]["message"] == "[secret PW]" and trace.warning == "boom [secret PW]"


def test_an_empty_redactor_changes_nothing():
    r = Redactor()
    assert not r and r.text(VALUE) == VALUE and r.data({"a": VALUE}) == {"a": VALUE}
