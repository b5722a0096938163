"""`manage.py load_demo`: the demo account, its admin and auditor logins, plugins and an API key."""

import os
from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand
from django.db import transaction

from accounts import services
from accounts.models import Account, ApiKey
from plugins_app.models import CancelLog, Installation
from plugins_app.runtime.environment import Env
from plugins_app.services.execution.execute import execute_hook
from plugins_app.services.observability.metering import meter
from plugins_app.services.plugins import catalog
from plugins_app.services.plugins import installations as plugins

ACCOUNT = "demo"
ADMIN, AUDITOR = "demo-admin", "demo-auditor"
KEY_NAME = "demo"
EXAMPLES = settings.BASE_DIR.parent / "shared" / "spec" / "examples"

# Custom plugins: the spec's examples (read from the spec when it is next to the project).
CUSTOM = [
    ("Polite prompt", None, """\
globalThis.middleware.systemPrompt = async (context) => {
  return context.systemPrompt + "\\n\\nBe polite.";
};
"""),
    ("Cron sentinel", "cron-sentinel.ts", """\
const MARKER = "[cron-sentinel]";
const CANCEL_TOKEN = "#hold";
globalThis.middleware.cronJobFiring = async (context, tools) => {
  host.log("info", `${MARKER} firing ${context.kind} "${context.name}" (cronJob ${context.cronJobId})`);
  if (context.prompt.indexOf(CANCEL_TOKEN) !== -1) {
    return tools.cancel(`${MARKER} refused: prompt carries ${CANCEL_TOKEN}`);
  }
  return `${context.prompt}\\n\\n${MARKER} fired ${context.kind} "${context.name}".`;
};
"""),
]
# Official plugins from the catalog; Caveman runs after "Polite prompt", so there is an order to drag.
OFFICIAL = ["caveman", "card-mask", "rm-guard"]

SSH_SAMPLE = {"sessionId": "1001", "agentId": "2002", "sshHostId": "3003", "hostDisplayName": "web-1",
              "kind": "command", "command": "rm -rf /", "path": None, "content": None}


def _source(example: str | None, inline: str) -> str:
    path = EXAMPLES / example if example else None
    return path.read_text() if path is not None and path.is_file() else inline


class Command(BaseCommand):
    help = ("Create (or refresh) the demo account: an admin and an auditor login (password from "
            "DEMO_PASSWORD, default demo-password), a few plugins, a fresh API key, and some audit rows. "
            "Safe to run again.")

    def handle(self, *args: Any, **options: Any) -> None:
        password = Env(os.environ).text("DEMO_PASSWORD") or "demo-password"
        with transaction.atomic():
            account = services.get_or_create_account(ACCOUNT)
            services.add_member(ACCOUNT, ADMIN, "admin", password=password)
            services.add_member(ACCOUNT, AUDITOR, "auditor", password=password)
        installed = self._install_plugins(account)
        self._record_a_cancel(account)
        with transaction.atomic():
            # One live demo key: the previous one is revoked because its raw value can't be shown again.
            ApiKey.objects.filter(account=account, name=KEY_NAME).revoke()
            _, raw_key = ApiKey.issue(account, name=KEY_NAME)

        port = Env(os.environ).text("PORT", "8000")
        self.stdout.write(self.style.SUCCESS(f"Demo account {ACCOUNT!r} is ready."))
        self.stdout.write(f"  Admin:         http://127.0.0.1:{port}/admin/")
        self.stdout.write(f"  Account admin: {ADMIN} / {password}")
        self.stdout.write(f"  Auditor:       {AUDITOR} / {password}")
        self.stdout.write(f"  Plugins:       {', '.join(installed)}")
        self.stdout.write(f"  API key:       {raw_key}")
        self.stdout.write(f"  Try:           curl -s -H 'Authorization: Bearer {raw_key}' "
                          f"http://127.0.0.1:{port}/api/v1/plugins")

    def _install_plugins(self, account: Account) -> list[str]:
        for name, example, inline in CUSTOM:
            if not Installation.objects.filter(account=account, plugin__name=name, plugin__account=account).exists():
                plugins.install_plugin(account, name=name, source=_source(example, inline),
                                       language="typescript", description="Demo plugin from the hooks spec.")
        catalog.sync_catalog()
        for slug in OFFICIAL:
            if not Installation.objects.filter(account=account, plugin__slug=slug, plugin__account=None).exists():
                catalog.install_official(account, slug)
        return list(Installation.objects.filter(account=account).order_by("created_at", "id")
                    .values_list("plugin__name", flat=True))

    def _record_a_cancel(self, account: Account) -> None:
        """One real execute, so the auditor's cancel log and the usage page are not empty."""
        if CancelLog.objects.filter(account=account).exists():
            return
        execute_hook(account, "sshCommandSending", dict(SSH_SAMPLE), turn_id="demo")
        execute_hook(account, "systemPrompt", {"sessionId": "1001", "agentId": "2002", "sessionKind": "direct",
                                               "systemPrompt": "You are a helpful agent."}, turn_id="demo")
        meter.flush()
