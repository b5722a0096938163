"""hub.yaml without a server: what a second export removes and keeps, and line numbers of bad values."""

from __future__ import annotations

import pytest

from hub_cli import files

STATE = {"plugins": [
    {"plugin": "alpha", "official": False, "name": "alpha", "description": "", "language": "javascript",
     "enabled": True, "mode": "live", "granted": [], "settings": {}, "source": "// a\n"},
    {"plugin": "beta", "official": False, "name": "beta", "description": "", "language": "typescript",
     "enabled": True, "mode": "live", "granted": [], "settings": {}, "source": "// b\n"},
], "chains": {"systemPrompt": ["beta", "alpha"]}}


def test_export_removes_only_code_files_it_wrote_before(tmp_path):
    files.write(tmp_path, STATE)
    mine = tmp_path / "plugins" / "draft.ts"
    mine.write_text("// not exported yet\n")
    files.write(tmp_path, {"plugins": STATE["plugins"][1:], "chains": {"systemPrompt": ["beta"]}})
    assert sorted(p.name for p in (tmp_path / "plugins").iterdir()) == ["beta.ts", "draft.ts"]


def test_a_written_directory_reads_back(tmp_path):
    files.write(tmp_path, STATE)
    desired = files.read(tmp_path)
    assert list(desired.plugins) == ["alpha", "beta"] and desired.chains == {"systemPrompt": ["beta", "alpha"]}
    assert desired.plugins["beta"].language == "typescript" and desired.plugins["alpha"].source == "// a\n"


@pytest.mark.parametrize(("edit", "where", "message"), [
    (("mode: live", "mode: dark", 1), "plugins.alpha.mode", "expected live or shadow"),
    (("  - alpha\n", "  - gamma\n", 1), "chains.systemPrompt.1", "gamma is not under plugins:"),
    (("source: plugins/beta.ts", "source: plugins/beta.py", 1), "plugins.beta.source", "expected a .ts or .js file"),
    (("name: alpha", "name: Alpha Two", 1), "plugins.alpha.name", "makes the slug 'alpha-two'"),
    (("chains:", "chainz:", 1), "chainz", "unknown key"),
])
def test_a_bad_value_is_refused_at_its_line(tmp_path, edit, where, message):
    files.write(tmp_path, STATE)
    path = tmp_path / "hub.yaml"
    old, new, count = edit
    path.write_text(path.read_text().replace(old, new, count))
    line = next(i for i, row in enumerate(path.read_text().splitlines(), 1) if new.strip() in row)
    with pytest.raises(files.FileError) as caught:
        files.read(tmp_path)
    assert (caught.value.field, caught.value.line) == (where, line) and message in caught.value.message


def test_a_syntax_error_names_its_line(tmp_path):
    (tmp_path / "hub.yaml").write_text("plugins:\n  alpha: {enabled: true\nchains: {}\n")
    with pytest.raises(files.FileError) as caught:
        files.read(tmp_path)
    assert caught.value.field == "(syntax)" and caught.value.line == 3


def test_tail_lines_read_as_sentences():
    from hub_cli.tail import line

    base = {"at": 0, "hook": "systemPrompt", "plugin": "polite", "status": "ran", "version": 3}
    assert line({**base, "type": "run", "durationMs": 1.25, "changed": True}).endswith(
        "run     systemPrompt polite v3 ran 1.2 ms changed")
    assert line({**base, "type": "log", "level": "warn", "message": "hi"}).endswith("[warn] hi")
    assert line({**base, "type": "warning", "status": "error", "message": "TypeError: x"}).endswith(
        "polite v3 error: TypeError: x")
    assert line({**base, "type": "cancel", "status": "cancelled", "reason": "no"}).endswith("polite v3: no")
    assert "dropped 12 event(s)" in line({"type": "dropped", "at": 0, "count": 12})
