"""Checking a version against 1,000 recorded calls (issue 43's target: <= 10 s on the 2-core machine).

Run with `.venv/bin/python bench/check.py [CALLS]`. Builds a fresh SQLite database in a temporary folder,
an account with a three-handler userMessageInbound chain (trim, a guard, a signature) and a draft of the
guard, records CALLS calls by running them through the live execute path (and flushing the recorded
calls' writer), then times `services/versions/check.check` on all of them, twice (the first run also
ships the draft's code to the engine). Prints seconds, calls per second and the comparison's summary,
and, as the baseline measured in the same run, the time the same calls took as live execute calls.
"""

from __future__ import annotations

import os
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

TRIM = "globalThis.middleware.userMessageInbound = async (c) => c.text.trim();"
GUARD = ("globalThis.middleware.userMessageInbound = async (c, t) => "
         "c.text.startsWith('rm') ? t.cancel('no rm') : c.text;")
GUARD_V2 = """globalThis.middleware.userMessageInbound = async (c, t) => {
  if (c.text.includes('secret')) return t.cancel('no secrets');
  if (c.text.startsWith('x')) return c.text.toUpperCase();
  return c.text;
};"""
SIGN = "globalThis.middleware.userMessageInbound = async (c) => c.text + ' -- sent by Acme bot';"
TEXTS = [" hello there ", "xyz", "my secret", "rm -rf /", "what is the weather like today?"]


def setup(workdir: str) -> None:
    os.environ.update(DATABASE_URL=f"sqlite:///{workdir}/bench.sqlite3", DJANGO_DEBUG="0",
                      DJANGO_SETTINGS_MODULE="middleware_hub.settings", HUB_METERING_FLUSH_SECONDS="60",
                      HUB_RECORDED_CALLS_PER_HOOK="2000")
    import django
    from django.core.management import call_command

    django.setup()
    call_command("migrate", "--noinput", verbosity=0)


def main() -> None:
    calls = int(sys.argv[1]) if len(sys.argv) > 1 else 1000
    with tempfile.TemporaryDirectory(prefix="hub-bench-check-") as workdir:
        setup(workdir)
        from accounts.models import Account
        from plugins_app.models import RecordedCall
        from plugins_app.services.execution.invoke import invoke
        from plugins_app.services.plugins import installations as plugins
        from plugins_app.services.versions import check, recording
        from plugins_app.services.versions import releases as versions

        account = Account.objects.create(name="bench")
        plugins.install_plugin(account, name="trim", source=TRIM, language="javascript")
        guard = plugins.install_plugin(account, name="guard", source=GUARD, language="javascript")
        plugins.install_plugin(account, name="sign", source=SIGN, language="javascript")
        versions.create_draft(account, guard.pk, source=GUARD_V2, language="javascript")
        context = {"sessionId": "10", "channelId": None, "mediaIds": []}
        started = time.perf_counter()
        for n in range(calls):
            invoke(account, "userMessageInbound", dict(context, text=TEXTS[n % len(TEXTS)]))
        live = time.perf_counter() - started
        recording.recorder.flush()
        assert RecordedCall.objects.count() == calls, RecordedCall.objects.count()
        runs = []
        for _ in range(2):
            started = time.perf_counter()
            result = check.check(account, guard.pk, 2, calls)
            runs.append(time.perf_counter() - started)
        assert result.tally.calls + result.skipped == calls
        best = min(runs)
        print(f"check of version 2 against {calls} recorded calls: {runs[0]:.2f} s first, {runs[1]:.2f} s second "
              f"({calls / best:.0f} calls/s; target <= 10 s); {check.compare.summary(result.tally)}, "
              f"{result.skipped} skipped")
        print(f"baseline, same run: the {calls} calls as live invocations took {live:.2f} s; "
              f"check / live = {best / live:.2f}x (a check runs two invocations per call)")


if __name__ == "__main__":
    main()
