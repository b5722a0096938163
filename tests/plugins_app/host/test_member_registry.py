"""The host bridge's member functions: found by walking services/host/ (no list of modules), one for
each bridged member of the one table (runtime/tables/members.py), and nothing else."""

import sys

import pytest

from plugins_app.runtime.tables.members import BRIDGED_MEMBERS, HOST_MEMBERS
from plugins_app.services import host as host_package
from plugins_app.services.execution import host_bridge
from plugins_app.services.host.registry import member_functions

PROBE = "registry_probe_member"


def test_the_walk_finds_one_function_for_each_bridged_member_of_the_table():
    functions: dict[str, set] = {}
    for fn in member_functions():
        functions.setdefault(fn.host_member[0], set()).add(fn)
    assert set(functions) == BRIDGED_MEMBERS
    assert all(len(fns) == 1 for fns in functions.values()), functions
    # The bridge, registered at start, serves exactly those (log and config are the harness's own).
    assert host_bridge.MEMBERS == {name: fn for name, (fn,) in functions.items()}
    assert not {m.name for m in HOST_MEMBERS if not m.bridged} & set(host_bridge.MEMBERS)


def test_a_new_module_in_the_package_is_found_without_being_listed(tmp_path, monkeypatch):
    (tmp_path / f"{PROBE}.py").write_text(
        "from plugins_app.services.execution.host_bridge import member\n\n"
        "@member('workspace.read')\n"
        "def read_again(call, args):\n"
        "    return None\n")
    monkeypatch.setattr(host_package, "__path__", [*host_package.__path__, str(tmp_path)])
    module = f"{host_package.__name__}.{PROBE}"
    try:
        found = [fn for fn in member_functions() if fn.__module__ == module]
        assert [fn.__name__ for fn in found] == ["read_again"]
        # A second function for a member stops the registration, leaving the bridge as it was.
        saved = dict(host_bridge.MEMBERS)
        with pytest.raises(ValueError, match="host.workspace.read is answered by two functions"):
            host_bridge.register_members(member_functions())
        assert host_bridge.MEMBERS == saved
    finally:
        sys.modules.pop(module, None)


def test_a_function_for_a_member_the_table_no_longer_declares_stops_the_registration(monkeypatch):
    saved = dict(host_bridge.MEMBERS)
    monkeypatch.setattr(host_bridge, "BRIDGED_MEMBERS", BRIDGED_MEMBERS - {"fetch"})
    with pytest.raises(ValueError, match="host.fetch is answered by .*but runtime/tables/members.py declares no"):
        host_bridge.register_members(member_functions())
    assert host_bridge.MEMBERS == saved
