"""The versions page's line diff costs bounded work (issue 39, item 7: difflib.HtmlDiff took 26-34 s for two
500-line versions and answered 500 at 1,000): counted steps, a too-large answer with downloads, never a 500."""

import random

import pytest
from django.urls import reverse

from plugins_app.admin.versions import diff as diff_page
from plugins_app.models import PluginVersion
from plugins_app.services.versions import line_diff

from ..conftest import appender


def _applied(a, b, result):
    """b rebuilt from a and the opcodes, checking they are contiguous and their equal runs equal."""
    out, i, j = [], 0, 0
    for tag, i1, i2, j1, j2 in result.opcodes:
        assert (i1, j1) == (i, j)
        if tag == "equal":
            assert a[i1:i2] == b[j1:j2]
        out += b[j1:j2]
        i, j = i2, j2
    assert (i, j) == (len(a), len(b))
    return out


def _lcs(a, b):
    rows = [[0] * (len(b) + 1) for _ in range(len(a) + 1)]
    for i in range(len(a) - 1, -1, -1):
        for j in range(len(b) - 1, -1, -1):
            rows[i][j] = rows[i + 1][j + 1] + 1 if a[i] == b[j] else max(rows[i + 1][j], rows[i][j + 1])
    return rows[0][0]


def test_small_diffs_are_correct_and_smallest():
    generator = random.Random(39)
    for _ in range(500):
        a = [generator.choice("abcde") for _ in range(generator.randint(0, 14))]
        b = [generator.choice("abcdef") for _ in range(generator.randint(0, 14))]
        result = line_diff.diff(a, b)
        assert _applied(a, b, result) == b and result.smallest
        assert sum(i2 - i1 for tag, i1, i2, _, _ in result.opcodes if tag == "equal") == _lcs(a, b)


def test_a_1000_line_pair_is_diffed_in_counted_work():
    a = [f"  const line{i} = {i};" for i in range(1000)]
    b = [f"  const line{i} = {i * 2};" if i % 7 == 0 else line for i, line in enumerate(a)]
    b[500:500] = ["// added"] * 20
    result = line_diff.diff(a, b)
    assert _applied(a, b, result) == b and result.smallest
    assert result.steps <= line_diff.MAX_STEPS


def test_a_pair_that_is_costly_to_diff_stops_at_its_budget_and_is_shown_whole():
    generator = random.Random(7)
    # Few distinct lines in random order: the search for the smallest diff would be quadratic.
    a = [generator.choice(["}", "", "x();", "y();", "return;"]) for _ in range(line_diff.MAX_LINES)]
    b = [generator.choice(["}", "", "x();", "y();", "return;"]) for _ in range(line_diff.MAX_LINES)]
    result = line_diff.diff(a, b)
    assert _applied(a, b, result) == b and not result.smallest
    # The budget, one round's overrun (at most one step per item and diagonal) and a linear pass.
    assert result.steps <= line_diff.MAX_STEPS + 4 * (len(a) + len(b))


def _version(installation, number, lines):
    return PluginVersion.objects.create(
        installation=installation, number=number, language="javascript", source="\n".join(lines),
        compiled_js="", code_hash=f"h{number}", hooks=["systemPrompt"], created_by_name="tests")


@pytest.fixture
def counted(monkeypatch):
    """The steps of every diff the page computes."""
    calls = []
    real = line_diff.diff

    def counting(a, b, max_steps=line_diff.MAX_STEPS):
        result = real(a, b, max_steps)
        calls.append(result.steps)
        return result
    monkeypatch.setattr(line_diff, "diff", counting)
    return calls


@pytest.mark.django_db
def test_the_versions_page_shows_a_1000_line_diff_and_says_5000_lines_are_too_large(login, install, counted):
    plugin = install(appender("-v1"), name="big")
    client = login("acme", "alice", "admin")
    page_url = reverse("admin:plugins_app_pluginversion_installation", args=[plugin.pk])
    thousand = [f"const line{i} = {i}; // <b>{i}</b>" for i in range(1000)]
    _version(plugin, 2, thousand)
    _version(plugin, 3, [line.replace("= 5", "= 50") for line in thousand])

    page = client.get(page_url, {"a": "2", "b": "3"})
    html = page.content.decode()
    assert page.status_code == 200 and 'id="hub-line-diff"' in html
    assert "= 50" in html and "&lt;b&gt;" in html and "<b>5" not in html   # the source is escaped
    assert len(counted) == 1 and counted[0] <= line_diff.MAX_STEPS

    counted.clear()
    five_thousand = [f"const line{i} = {i};" for i in range(5000)]
    _version(plugin, 4, five_thousand)
    _version(plugin, 5, five_thousand[::-1])
    page = client.get(page_url, {"a": "4", "b": "5"})
    html = page.content.decode()
    assert page.status_code == 200 and counted == []   # the fallback: nothing diffed
    assert "too large to compare here (5000 lines)" in html and 'id="hub-line-diff"' not in html
    download = client.get(reverse("admin:plugins_app_pluginversion_source", args=[plugin.pk, 5]))
    assert download.status_code == 200 and download["Content-Type"].startswith("text/plain")
    assert download.content.decode() == "\n".join(five_thousand[::-1])
    assert f'href="{reverse("admin:plugins_app_pluginversion_source", args=[plugin.pk, 4])}"' in html


def test_the_word_diff_of_a_huge_value_is_bounded_too(counted):
    before = "\n".join(f"line {i}" for i in range(line_diff.MAX_LINES + 1))
    html = diff_page.diff_html(before, before + "\nmore")
    assert "<ins>" in html and counted == []
    html = diff_page.diff_html("a <b> c", "a <i> c")
    assert "&lt;<del>b</del><ins>i</ins>&gt;" in html and "<b>" not in html and len(counted) == 1
