"""The SDK declarations: generated from the hook table, agreeing with the real host object, and type-checked by tsc."""

import json
import shutil
import subprocess
from pathlib import Path

import pytest

from plugins_app.runtime.engine.jsassets import NODE_MODULES
from plugins_app.runtime.tables.hooks import HOOKS
from plugins_app.runtime.tables.members import HOST_MEMBERS
from plugins_app.runtime.tables.sdk_types import middleware_d_ts

ROOT = Path(__file__).resolve().parents[2]
TSC = NODE_MODULES / "typescript" / "bin" / "tsc"
EXAMPLE = ROOT / "docs" / "plugin-example"
CATALOG_DIR = ROOT / "plugins_app" / "catalog"


def tsc(project: Path) -> subprocess.CompletedProcess:
    return subprocess.run(["node", str(TSC), "-p", str(project)], capture_output=True, text=True, timeout=120,
                          check=False)


def project(tmp_path: Path, sources: dict[str, str]) -> Path:
    shutil.copy(EXAMPLE / "tsconfig.json", tmp_path / "tsconfig.json")
    (tmp_path / "middleware.d.ts").write_text(middleware_d_ts())
    for name, text in sources.items():
        (tmp_path / "src").mkdir(exist_ok=True)
        (tmp_path / "src" / name).write_text(text)
    return tmp_path


def test_every_hook_and_host_member_is_declared():
    text = middleware_d_ts()
    for spec in HOOKS.values():
        assert f"  {spec.name}?: (context: " in text
        for f in spec.fields:
            assert f"readonly {f.name}" in text
    for member in HOST_MEMBERS:
        assert member.signature in text


def test_the_example_project_type_checks(tmp_path):
    shutil.copytree(EXAMPLE, tmp_path / "example")
    (tmp_path / "example" / "middleware.d.ts").write_text(middleware_d_ts())
    result = tsc(tmp_path / "example")
    assert result.returncode == 0, result.stdout


@pytest.mark.parametrize("source, expected", [
    ("middleware.systemPrompt = async (c) => 42;", "Type 'number' is not assignable"),
    ("middleware.systemPrompt = (c, tools) => tools.cancel('no');", "CancelToken"),
    ("middleware.sessionClearing = (c) => c.trailingText.length;", "possibly 'null'"),
    ("middleware.notifyScheduled = (c) => ({ delaySeconds: '5' });", "not assignable"),
    ("middleware.systemPromt = (c) => c.systemPrompt;", "systemPromt"),
    ("host.workspace!.read(1);", "not assignable to parameter of type 'string'"),
    ("middleware.match = { systemPrompt: { text: { equals: 'x' } } };", "'text' does not exist in type 'SystemPromptMatch'"),
    ("middleware.match = { sshCommandSending: { kind: { equals: 'rm' } } };", "not assignable"),
    ("middleware.match = { notifyScheduled: { delaySeconds: { regex: '6' } } };", "'regex' does not exist"),
    ("middleware.match = { systemPromt: {} };", "systemPromt"),
])
def test_type_errors_are_found(tmp_path, source, expected):
    result = tsc(project(tmp_path, {"plugin.ts": source}))
    assert result.returncode != 0
    assert expected in result.stdout


def test_the_catalog_plugins_type_check(tmp_path):
    sources = {}
    for folder in sorted(p for p in CATALOG_DIR.iterdir() if (p / "manifest.json").exists()):
        manifest = json.loads((folder / "manifest.json").read_text())
        parts = [(CATALOG_DIR / include).read_text() for include in manifest.get("include", [])]
        # Each plugin is its own script: wrap it so two plugins' top-level names don't meet.
        sources[f"{folder.name}.ts"] = "\n".join(parts + [(folder / "index.ts").read_text()]) + "\nexport {};\n"
    assert len(sources) >= 5
    result = tsc(project(tmp_path, sources))
    assert result.returncode == 0, result.stdout


def test_the_host_object_has_exactly_the_declared_members(make_handler, chain):
    # sshCommandSending gets every optional part (session, workspace, ssh): list what the real host holds.
    lister = make_handler("""
globalThis.middleware.sshCommandSending = async (c) => {
  const paths = [];
  const walk = (o, prefix) => { for (const k of Object.keys(o)) {
    const v = o[k]; const p = prefix ? prefix + '.' + k : k;
    if (v !== null && typeof v === 'object' && k !== 'config') walk(v, p); else paths.push(p); } };
  walk(host, '');
  return { command: paths.sort().join(',') };
};""")
    context = {"sessionId": "1", "agentId": "2", "sshHostId": "3", "hostDisplayName": "h", "kind": "command",
               "command": "ls", "path": None, "content": None}
    result = chain("sshCommandSending", [lister], context)
    assert result.value["command"].split(",") == sorted(m.name for m in HOST_MEMBERS)
