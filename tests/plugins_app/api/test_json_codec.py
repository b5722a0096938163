"""The API's JSON in and out: orjson where it reads and writes as DRF's own would, DRF's otherwise."""

import datetime
import io
import json
from collections import OrderedDict
from zoneinfo import ZoneInfo

import pytest
from rest_framework.exceptions import ParseError
from rest_framework.parsers import JSONParser
from rest_framework.renderers import JSONRenderer

from plugins_app.api import parsers
from plugins_app.api.parsers import LimitedJSONParser
from plugins_app.api.renderers import PlainJSONRenderer
from plugins_app.errors import InvalidInput
from plugins_app.services.observability.metering import site_today

from ..conftest import PROMPT, appender

EXECUTE = "/api/v1/hooks/systemPrompt/execute"

BODIES = [
    b'{"context": {"sessionId": "18446744073709551615", "text": "caf\xc3\xa9 \\u00e9 \\ud83d\\ude00"}}',
    b'{"big": 18446744073709551616, "neg": -123456789012345678901, "inList": [1, 99999999999999999999]}',
    b'{"exact": 9007199254740993, "float": 0.1, "exp": 1e-7, "huge": 1e400, "zero": -0}',
    b'{"a": 1, "a": 2, "nested": {"x": [true, false, null, "\\u2028"]}}',
    b'[1, 2.5, "three"]',
]


def parse(raw: bytes, encoding: str = "utf-8"):
    return LimitedJSONParser().parse(io.BytesIO(raw), "application/json", {"encoding": encoding})


@pytest.mark.parametrize("raw", BODIES)
def test_a_body_reads_as_the_standard_library_reads_it(raw):
    expected = JSONParser().parse(io.BytesIO(raw), "application/json", {})
    got = parse(raw)
    assert got == expected
    assert json.dumps(got) == json.dumps(expected)   # same types too: an exact int is not a rounded float


def test_a_lone_surrogate_orjson_refuses_is_still_named_by_the_text_check():
    with pytest.raises(InvalidInput) as caught:
        parse(b'{"ok": "x", "lone": "\\ud800"}')
    assert caught.value.extra["field"] == "lone"


def test_a_long_number_takes_the_exact_path_and_a_short_one_the_fast_path(monkeypatch):
    calls = []
    monkeypatch.setattr(parsers.orjson, "loads", lambda raw: calls.append(raw) or {"fast": True})
    assert parse(b'{"n": 12345}') == {"fast": True}
    assert parse(b'{"n": 12345678901234567890}') == {"n": 12345678901234567890}
    assert parse(b'{"id": "12345678901234567890"}') == {"fast": True}   # digits in a string
    assert parse(b'{"n": 1}', encoding="latin-1") == {"n": 1}            # another charset
    assert len(calls) == 2


@pytest.mark.parametrize("raw", [b'{"a": 1,}', b"{'a': 1}", b'{"a": NaN}', b"\xef\xbb\xbf{}", b'{"a": "\xff"}'])
def test_a_body_the_standard_library_refuses_is_refused_with_its_message(raw):
    with pytest.raises(ParseError) as ours:
        parse(raw)
    with pytest.raises(ParseError) as theirs:
        JSONParser().parse(io.BytesIO(raw), "application/json", {})
    assert str(ours.value.detail) == f"the body is not valid JSON: {theirs.value.detail}"


PLAIN = [
    {"hook": "systemPrompt", "value": "café \u2028 \u2029 😀", "trace": [{"durationMs": 0.031, "warning": None}]},
    [1, -2, 0.5, True, False, None, "", {}, []],
    {"nested": {"deeper": [{"k": "v"}]}},
]


@pytest.mark.parametrize("data", PLAIN)
def test_plain_data_renders_to_drfs_bytes(data):
    assert PlainJSONRenderer().render(data) == JSONRenderer().render(data)


@pytest.mark.parametrize("data", [
    {"at": datetime.datetime(2026, 12, 3, 10, 0, 0, 123456, tzinfo=datetime.UTC)},
    OrderedDict(a=1),
    {"big": 2 ** 70},
    {"lone": "\ud800"},
    {1: "int key"},
])
def test_anything_else_is_rendered_by_drf(data):
    try:
        expected = JSONRenderer().render(data)
    except ValueError as refused:   # DRF's verdict stands, whatever it is
        with pytest.raises(type(refused)):
            PlainJSONRenderer().render(data)
        return
    assert PlainJSONRenderer().render(data) == expected


def test_indented_output_is_drfs():
    context = {"indent": 2}
    assert PlainJSONRenderer().render({"a": [1]}, renderer_context=context) == \
        JSONRenderer().render({"a": [1]}, renderer_context=context)


@pytest.mark.django_db
def test_the_execute_answer_is_the_same_json_through_either_renderer(api_client, install):
    install(appender(" [\u2028]"))
    response = api_client.post(EXECUTE, {"context": PROMPT}, format="json")
    assert response.status_code == 200
    assert response.content == JSONRenderer().render(response.data)
    assert response.json()["value"].endswith(" [\u2028]")


def test_the_site_day_follows_the_time_zone_and_turns_at_its_midnight(settings):
    settings.TIME_ZONE = "Asia/Kathmandu"   # UTC+5:45: a day that starts on a quarter hour
    midnight = datetime.datetime(2026, 12, 4, tzinfo=ZoneInfo("Asia/Kathmandu")).timestamp()
    assert site_today(midnight - 1) == datetime.date(2026, 12, 3)
    assert site_today(midnight) == datetime.date(2026, 12, 4)
    assert site_today(midnight - 60) == datetime.date(2026, 12, 3)   # the cache is per minute, not sticky
    settings.TIME_ZONE = "UTC"
    assert site_today(midnight) == datetime.date(2026, 12, 3)        # 18:15 UTC on the 3rd


ACCEPTS = [None, "*/*", "application/json", "", "text/html", "application/json; indent=2", "application/*",
           "text/html, application/json;q=0.9", "application/xml"]
QUERIES = ["", "?format=json", "?format=api", "?x=1"]


def negotiate(negotiation, accept, query, content_type, renderers):
    from django.http import Http404
    from rest_framework.exceptions import NotAcceptable
    from rest_framework.request import Request
    from rest_framework.test import APIRequestFactory

    headers = {} if accept is None else {"HTTP_ACCEPT": accept}
    request = Request(APIRequestFactory().post("/x" + query, b"{}", content_type=content_type, **headers),
                      parsers=[LimitedJSONParser()])
    try:
        renderer, media_type = negotiation.select_renderer(request, renderers)
        chosen = (type(renderer).__name__, media_type)
    except NotAcceptable:
        chosen = ("406",)
    except Http404:   # ?format= naming no renderer of the view
        chosen = ("404",)
    parser = negotiation.select_parser(request, request.parsers)
    return chosen, type(parser).__name__ if parser else None


@pytest.mark.parametrize("accept", ACCEPTS)
@pytest.mark.parametrize("query", QUERIES)
@pytest.mark.parametrize("content_type", ["application/json", "application/json; charset=utf-8", "text/plain"])
def test_the_execute_negotiation_chooses_what_drfs_would(accept, query, content_type):
    from rest_framework.negotiation import DefaultContentNegotiation
    from rest_framework.renderers import BrowsableAPIRenderer

    from plugins_app.api.renderers import JSONFirstNegotiation

    for renderers in ([PlainJSONRenderer()], [PlainJSONRenderer(), BrowsableAPIRenderer()]):
        assert negotiate(JSONFirstNegotiation(), accept, query, content_type, renderers) == \
            negotiate(DefaultContentNegotiation(), accept, query, content_type, renderers)


def test_the_usual_execute_call_skips_media_type_parsing(monkeypatch):
    from rest_framework.negotiation import DefaultContentNegotiation

    from plugins_app.api.renderers import JSONFirstNegotiation

    def refuse(*args, **kwargs):
        raise AssertionError("DRF's negotiation ran")

    monkeypatch.setattr(DefaultContentNegotiation, "select_renderer", refuse)
    monkeypatch.setattr(DefaultContentNegotiation, "select_parser", refuse)
    for accept in (None, "*/*", "application/json"):
        assert negotiate(JSONFirstNegotiation(), accept, "", "application/json", [PlainJSONRenderer()]) == \
            (("PlainJSONRenderer", "application/json"), "LimitedJSONParser")
