"""The host member table (runtime/tables/members.py) against the harness, the permissions and the bridge."""

import re

import pytest

from plugins_app.runtime.engine import jsassets
from plugins_app.runtime.tables.context import sample_context
from plugins_app.runtime.tables.hooks import HOOKS
from plugins_app.runtime.tables.members import BRIDGED_MEMBERS, HOST_MEMBERS, MEMBERS_BY_NAME, UNCHARGED_MEMBERS
from plugins_app.runtime.tables.permissions import ALL_PERMISSIONS, permission_for
from plugins_app.runtime.web.chain import host_plan


def make_host_source() -> str:
    harness = jsassets.harness_source()
    start = harness.index("function makeHost(")
    return harness[start:harness.index("\n  }\n", start)]


def harness_calls(source: str) -> set[str]:
    return set(re.findall(r'call\("([\w.]+)"', source))


def test_the_harness_bridges_exactly_the_tables_bridged_members():
    assert harness_calls(make_host_source()) == BRIDGED_MEMBERS


def test_the_harness_answers_the_local_members_itself():
    host_object = make_host_source().split("const host = {", 1)[1].split("};", 1)[0]
    local = {m.name for m in HOST_MEMBERS if not m.bridged}
    assert local and all(re.search(rf"^\s*{name}:", host_object, re.M) for name in local)


@pytest.mark.parametrize("offer", ["session", "workspace", "ssh"], ids=lambda offer: f"offer-{offer}")
def test_the_harness_builds_each_optional_group_from_the_host_plan(offer):
    source = make_host_source()
    block = source.split(f"if (hostPlan.{offer}) {{", 1)[1].split("\n    }\n", 1)[0]
    assert harness_calls(block) == {m.name for m in HOST_MEMBERS if m.offered == offer}


def test_the_host_plan_offers_a_member_on_exactly_the_hooks_the_table_names():
    for m in HOST_MEMBERS:
        if m.offered == "always":
            assert m.hooks() == tuple(HOOKS)
            continue
        offered = tuple(name for name, spec in HOOKS.items()
                        if host_plan(spec, sample_context(spec))[m.offered])
        assert offered == m.hooks(), m.name


def test_permissions_and_budget_come_from_the_table():
    for m in HOST_MEMBERS:
        assert permission_for(m.name) == m.permission
    assert set(ALL_PERMISSIONS) == {m.permission for m in HOST_MEMBERS if m.permission}
    assert UNCHARGED_MEMBERS == {"ssh.command"}


def test_the_sdk_declarations_cover_the_tables_members_for_the_same_hooks():
    from plugins_app.runtime.tables.sdk_types import HOST_MEMBERS as DECLARED

    declared = {m.path: m.given for m in DECLARED}
    # The SDK names the workspace's offer after what carries it (an agent); the rest match by name.
    same_offer = {"always": "all", "session": "session", "workspace": "agent", "ssh": "ssh"}
    assert {m.name: same_offer[m.offered] for m in HOST_MEMBERS} == {
        path: given for path, given in declared.items() if path in MEMBERS_BY_NAME}
    # What the SDK declares beyond the table is plain data on host.session, not a member to call.
    assert {path for path in declared if path not in MEMBERS_BY_NAME} == {"session.id", "session.agentId",
                                                                          "session.kind"}
