"""Production settings: `manage.py check --deploy` reports only what docs/production.md's settings section explains."""

import os
import re
import secrets
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PRODUCTION = {"DJANGO_DEBUG": "0", "DJANGO_SECRET_KEY": secrets.token_urlsafe(50),
              "DJANGO_ALLOWED_HOSTS": "hub.example.com"}
DOMAIN_WIDE = {"DJANGO_SECURE_SSL_REDIRECT": "1", "DJANGO_SECURE_HSTS_INCLUDE_SUBDOMAINS": "1",
               "DJANGO_SECURE_HSTS_PRELOAD": "1"}


def manage(*args: str, **env: str) -> str:
    """Run manage.py with only `env` among the hub's own variables (none inherited from this shell)."""
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("DJANGO_", "HUB_"))}
    result = subprocess.run([sys.executable, "manage.py", *args], cwd=ROOT, capture_output=True, text=True,
                            env={**clean, **env}, timeout=120)
    return result.stdout + result.stderr


def explained_checks() -> set[str]:
    page = (ROOT / "docs" / "production.md").read_text()
    section = page.split("## Production settings", 1)[1]
    section = re.split(r"^#{1,2} ", section, maxsplit=1, flags=re.M)[0]
    return set(re.findall(r"security\.[EW]\d+", section))


def reported_checks(output: str) -> set[str]:
    return set(re.findall(r"\((\w+\.[EW]\d+)\)", output))


def test_check_deploy_reports_only_what_readme_explains():
    output = manage("check", "--deploy", **PRODUCTION)
    assert "ERRORS" not in output, output
    reported = reported_checks(output)
    assert reported, output   # the section's explanations are about something real
    assert reported <= explained_checks(), output


def test_with_the_domain_wide_choices_made_check_deploy_reports_nothing():
    output = manage("check", "--deploy", **PRODUCTION, **DOMAIN_WIDE)
    assert "System check identified no issues" in output, output


def test_development_keeps_plain_http_and_a_proxy_can_vouch_for_https():
    show = ("from django.conf import settings as s; print(s.SESSION_COOKIE_SECURE, s.CSRF_COOKIE_SECURE, "
            "s.SECURE_HSTS_SECONDS, s.SECURE_SSL_REDIRECT, s.SECURE_PROXY_SSL_HEADER)")
    assert manage("shell", "--no-imports", "-c", show).split() == ["False", "False", "0", "False", "None"]
    assert manage("shell", "--no-imports", "-c", show, **PRODUCTION).split() == ["True", "True", "31536000", "False", "None"]
    assert manage("shell", "--no-imports", "-c", show, **PRODUCTION, DJANGO_SECURE_PROXY_SSL_HEADER="1").split()[-2:] == [
        "('HTTP_X_FORWARDED_PROTO',", "'https')"]
