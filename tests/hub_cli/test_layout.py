"""The CLI needs no Django and no database: it imports the runtime's tables and engine, the hook samples
and nothing else of the hub; its slugs are the server's."""

import pytest
from django.utils.text import slugify

from hub_cli.files import slug_of
from tests.middleware_hub.test_dependencies import imported_modules

# The hub's request rules (Django-free), so `hub dev --allow-fetch` fetches as host.fetch does.
# host.kv's checks (plain Python), so `hub dev`'s local store refuses what the hub refuses.
ALLOWED = ("plugins_app.runtime", "plugins_app.services.execution.hook_samples", "plugins_app.services.host.outbound",
           "plugins_app.services.host.ssrf", "plugins_app.services.kv.checks")


def test_the_cli_imports_no_django_and_only_the_runtime_of_the_hub():
    against = {}
    for path, names in imported_modules("hub_cli").items():
        bad = sorted(n for n in names if n.split(".")[0] in ("django", "rest_framework", "accounts", "middleware_hub")
                     or (n.startswith("plugins_app") and not n.startswith(ALLOWED)))
        if bad:
            against[path] = bad
    assert against == {}


@pytest.mark.parametrize("name", ["Prompt Tail", "  Ünïcödé name!  ", "a--b__c", "rm guard (v2)", "x" * 120,
                                  "__private__", "tabs\tand\nnewlines"])
def test_slugs_are_the_servers(name):
    assert slug_of(name) == slugify(name)[:100]
