"""A memory squatter through the execute API (issue 28): its engine drops its compartment and charges
it (a strike, a warning, the lane), while the account whose calls only use temporaries is never
struck and keeps its module state."""

import re
import uuid

import pytest

from plugins_app.models import HandlerWarning, Installation

SQUATTER = """const keep = [];
globalThis.middleware.userMessageInbound = async (c) => {
  if (keep.length < 30) keep.push(new Array(1024 * 1024).fill(0.5));
  return c.text;
};"""


def victim_source() -> str:
    return f"""// {uuid.uuid4()}
let calls = 0;
globalThis.middleware.userMessageInbound = async (c) => {{
  const t = new Array(4 * 1024 * 1024).fill(1.5);
  return `${{c.text}} ${{++calls}} ${{t.length > 0}}`;
}};"""


def execute(client):
    response = client.post("/api/v1/hooks/userMessageInbound/execute",
                           {"context": {"sessionId": "1", "channelId": None, "text": "hi", "mediaIds": []}},
                           format="json")
    assert response.status_code == 200, response.content
    return response.json()


@pytest.mark.slow
def test_the_squatter_is_struck_and_moved_and_the_victim_keeps_counting(api_client, other_api_client, install,
                                                                         account, other_account):
    squatter = install(SQUATTER + f"// {uuid.uuid4()}", name="squatter")
    victim = install(victim_source(), name="victim", target=other_account)
    victim_values = []
    for _ in range(25):
        execute(api_client)
        answer = execute(other_api_client)
        assert answer["trace"][0]["status"] == "ran" and answer["trace"][0]["warning"] is None
        victim_values.append(answer["value"])
    assert victim_values == [f"hi {n} true" for n in range(1, 26)]   # its state was never reset

    squatter.refresh_from_db()
    assert len(squatter.strikes) >= 1 and squatter.slow_lane_until is not None
    charge = HandlerWarning.objects.get(installation=squatter)
    # Charged alone ("kept N MiB in its module state"), or with its account's other compartments on that
    # engine ("its account's 2 compartments kept N MiB in their module state"): the engines outlive a
    # test, and an earlier test's account of the same id may have left a compartment beside it.
    assert charge.kind == HandlerWarning.Kind.ENGINE_RESTART
    assert re.search(r"kept \d+ MiB in (its|their) module state", charge.message), charge.message
    victim.refresh_from_db()
    assert (victim.strikes, victim.slow_lane_until) == ([], None)
    assert not HandlerWarning.objects.filter(account=other_account).exists()
    assert Installation.objects.filter(account=account, quarantined_until__isnull=False).count() == 0
