"""Popular npm libraries, bundled with esbuild as plugin authors do (compat/build.sh), run in the real runtime."""

import json
import uuid
from pathlib import Path

import pytest

from .conftest import INBOUND_CONTEXT

BUNDLES = Path(__file__).parent / "compat" / "bundles"

# library -> (the message text the handler gets, the text it must hand on)
CASES = {
    "marked": ("# Hi\n\n<!-- keep -->\n\n**bold** and `import('x')`",
               "<h1>Hi</h1>\n<!-- keep -->\n\n<p><strong>bold</strong> and <code>import(&#39;x&#39;)</code></p>\n"),
    "lodash": ("Hello big World foo", json.dumps({
        "kebab": "hello-big-world-foo", "chunks": [["Hello", "big"], ["World", "foo"]], "counts": {"3": 2, "5": 2},
        "merged": {"a": {"b": 1, "c": 2}}, "clone": {"d": [1, {"e": 2}]}, "template": "Hi Hello!"},
        separators=(",", ":"))),
    "zod": ('{"id": "nope", "qty": 0, "email": "a@b.co"}', "invalid id,qty"),
    "date-fns": ("2024-02-28 2024-03-02", "Wednesday, February 28th 2024 | 3 | 2024-03-04"),
    "js-yaml": ("items: [a, b]\nname: x\n", "items:\n  - a\n  - b\n  - added\nname: x\n"),
    "ajv": ('{"name": "x", "age": -1, "extra": 1}', "/ additionalProperties; /age minimum; /name minLength"),
    "mustache": ('{"name": "Ann", "items": [1,2], "raw": "<b>", "esc": "<i>"}', "Hello Ann! <1><2> <b> &lt;i&gt;"),
    "diff": ("the quick fox\n---\nthe slow fox",
             ("-quick +slow\n===================================================================\n--- a.txt\t\n"
              "+++ b.txt\t\n@@ -1,1 +1,1 @@\n-the quick fox\n+the slow fox\n")),
    "papaparse": ("name,qty\na,2\nb,3\n", '2 rows, 5 total, fields name/qty; a,"b,c"\r\n1,"say ""hi"""'),
    "semver": ("1.2.3 1.10.0 2.0.0 1.2.10", "1.10.0 | 1.2.3,1.2.10,1.10.0,2.0.0 | false | 1.10.0"),
    "validator": ("mail a@b.com or https://x.io <script>", "mail [email] or [url] &lt;script&gt;"),
    "bad-words": ("you frobnicate hell", "you ********** ****"),
    "he": ("&#x3C;p&#62; caf&#233; &copy;", "&lt;p&gt; caf&eacute; &copy;"),
    "immer": ('{"todos": [{"title": "a", "done": false}], "meta": {"v": 1}}', json.dumps({
        "next": {"todos": [{"title": "a", "done": True}, {"title": "new", "done": False}], "meta": {"v": 1}},
        "baseUnchanged": True, "sharedUntouched": True, "frozen": True}, separators=(",", ":"))),
    "handlebars": ('{"people": [{"name": "ann", "age": 3}, {"name": "bo", "age": 4}], "title": "t"}',
                   "ANN is 3, BO is 4 <t>"),
    # Time zones through Intl (issue 33: SES's default locale taming made dayjs answer UTC for Berlin).
    "dayjs": ("2026-07-01T12:00:00Z Europe/Berlin", "2026-07-01 14:00 +02:00"),   # with its timezone plugin
    # Six months on, the same wall-clock time in winter's offset.
    "luxon": ("2026-07-01T12:00:00Z America/New_York", "2026-07-01 08:00 -04:00 EDT 08:00 -05:00"),
}


@pytest.mark.parametrize("library", sorted(CASES))
def test_a_bundled_library_installs_and_runs(library, make_handler, chain):
    text, expected = CASES[library]
    handler = make_handler((BUNDLES / f"{library}.js").read_text(), slug=library)
    result = chain("userMessageInbound", [handler], dict(INBOUND_CONTEXT, text=text))
    assert result.trace[0].status == "ran", result.trace[0].warning
    assert result.value == expected


def test_uuid_runs_on_web_crypto(make_handler, chain):
    handler = make_handler((BUNDLES / "uuid.js").read_text(), slug="uuid")
    result = chain("userMessageInbound", [handler], dict(INBOUND_CONTEXT, text="example.com"))
    assert result.trace[0].status == "ran", result.trace[0].warning
    assert result.value == f"true 4 {uuid.uuid5(uuid.NAMESPACE_DNS, 'example.com')} true"


def test_every_fixture_is_listed_with_its_version():
    versions = json.loads((BUNDLES / "versions.json").read_text())
    bundled = {p.stem for p in BUNDLES.glob("*.js")}
    assert bundled == set(CASES) | {"uuid"}
    assert bundled <= set(versions)
