"""secret-redactor through the real runtime: the secret shapes it catches, ordinary output it
leaves alone, and its settings."""

import pytest

from ..catalog_support import SSH, execute, install_official, logs, patch_settings

pytestmark = pytest.mark.django_db

AWS = "AKIAIOSFODNN7EXAMPLE"
RSA_KEY = ("-----BEGIN RSA PRIVATE KEY-----\nMIIEpAIBAAKCAQEA7bq8w1Hc\nq2kqZ7uN0hYc9zA=\n"
           "-----END RSA PRIVATE KEY-----")
OPENSSH_KEY = ("-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAABG5vbmUAAAAEbm9uZQ\n"
               "-----END OPENSSH PRIVATE KEY-----")
JWT = ("eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJzdWIiOiIxMjM0NTY3ODkwIiwibmFtZSI6IkpvaG4ifQ"
       ".SflKxwRJSMeKKF2QT4fwpMeJf36POk6yJV_adQssw5c")

# (output, what the model sees instead)
CAUGHT = [
    (f"aws_access_key_id = {AWS}", "aws_access_key_id = [REDACTED]"),
    ("key ASIAY34FZKBOKMUTVV7A in use", "key [REDACTED] in use"),
    (f"before\n{RSA_KEY}\nafter", "before\n[REDACTED]\nafter"),
    (f"{OPENSSH_KEY}\n", "[REDACTED]\n"),
    ("-----BEGIN PRIVATE KEY-----\nMIIEvQIBADANBgkqhkiG9w0BAQEFAASC",   # truncated output
     "[REDACTED]"),
    ("-----BEGIN PGP PRIVATE KEY BLOCK-----\nlQOYBF\n-----END PGP PRIVATE KEY BLOCK-----", "[REDACTED]"),
    ("remote: ghp_" + "a1B2c3D4e5" * 3 + "a1B2c3", "remote: [REDACTED]"),
    ("github_pat_11ABCDEFG0123456789_abcdefghijklmnopqrstuvwxyzABCDEF", "[REDACTED]"),
    ("SLACK=xoxb-123456789012-abcdefghijKLMN", "SLACK=[REDACTED]"),
    ("stripe sk_live_" + "4eC39HqLyjWDarjtT1zdp7dc", "stripe [REDACTED]"),
    ("maps AIzaSyD-9tSrke72PouQMnMX-a7eZSW0jkFMBWY ok", "maps [REDACTED] ok"),
    ("OPENAI_API_KEY=sk-proj-" + "Ab1_" * 14, "OPENAI_API_KEY=[REDACTED]"),
    (f"cookie: session={JWT}", "cookie: session=[REDACTED]"),
    ("password=hunter2", "password=[REDACTED]"),
    ("DB_PASSWORD: 's3cr3t pass'", "DB_PASSWORD: '[REDACTED]'"),
    ('{"api_key": "12345abcdef", "user": "bob"}', '{"api_key": "[REDACTED]", "user": "bob"}'),
    ("passwd: letmein\nuser: bob", "passwd: [REDACTED]\nuser: bob"),
    ("client_secret=abc123;debug=1", "client_secret=[REDACTED];debug=1"),
    ("export GITHUB_TOKEN=abc123def", "export GITHUB_TOKEN=[REDACTED]"),
    ("DATABASE_URL=postgres://app:s3cretpw@db:5432/app", "DATABASE_URL=postgres://app:[REDACTED]@db:5432/app"),
    ("> Authorization: Bearer abc.def-ghi_jkl", "> Authorization: Bearer [REDACTED]"),
]

ORDINARY = [
    "total 12\ndrwxr-xr-x  3 root root 4096 Jan  1 12:00 .\n-rw-r--r--  1 root root  220 Jan  1 12:00 .bashrc",
    "Filesystem      Size  Used Avail Use% Mounted on\n/dev/sda1        50G   21G   27G  44% /",
    "PATH=/usr/local/bin:/usr/bin\nHOME=/root\nPWD=/root\nOLDPWD=/tmp\nSHELL=/bin/bash\nLANG=C.UTF-8",
    "a1b2c3d Fix token refresh\n9f8e7d6 Rotate the password policy",
    "root         1  0.0  0.1 167744 11840 ?        Ss   Jan01   0:03 /sbin/init",
    "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855  empty.txt",
    "id 550e8400-e29b-41d4-a716-446655440000",
    "max_tokens: 4096\ntoken_type: bearer\ntokens=5",
    "password_hash = models.CharField(max_length=128)",
    "Enter password:\n",
    "Secrets: 3 found, 0 leaked",
    "-----BEGIN CERTIFICATE-----\nMIIDdzCCAl+gAwIBAgIEAgAAuTANBgkqhkiG9w0BAQUFADBa\n-----END CERTIFICATE-----",
    "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIOMqqnkVzrm0SdG6UOoqKLsabgH5C9okWi0dh2l9GKJl deploy@web-1",
    "image sha256:4bcff63911fcb4448bd4fdacec207030997caf25e9bea4045fa6c8c44de311d1",
    "https://example.com/path?q=1 and git@github.com:org/repo.git",
    "AKIA123 is too short; task-manager-sk-learn",
]


def completed(output, error_output=None, kind="command"):
    return dict(SSH, kind=kind, command="cat config", path=None, exitCode=0, output=output,
                errorOutput=error_output, isTruncated=False, durationMs=12)


@pytest.fixture
def redactor(api_client, synced):
    return install_official(api_client, "secret-redactor")


def redact(api_client, output, error_output=None):
    return execute(api_client, "sshCommandCompleted", completed(output, error_output))


def test_catches_secret_shapes(api_client, redactor):
    wrong = {}
    for output, expected in CAUGHT:
        value = redact(api_client, output)["value"]["output"]
        if value != expected:
            wrong[output] = value
    assert wrong == {}


def test_leaves_ordinary_output_alone(api_client, redactor):
    changed = {o: r["value"]["output"] for o in ORDINARY if (r := redact(api_client, o))["outcome"] != "unchanged"}
    assert changed == {}


def test_redacts_error_output_and_keeps_nulls(api_client, redactor):
    result = redact(api_client, None, f"warning: key {AWS} is deprecated")
    assert result["value"] == {"output": None, "errorOutput": "warning: key [REDACTED] is deprecated"}
    listing = execute(api_client, "sshCommandCompleted", dict(completed(f"id_rsa\n{AWS}.txt"), kind="list_files"))
    assert listing["value"]["output"] == "id_rsa\n[REDACTED].txt"


def test_logs_what_it_redacted_but_never_the_secret(api_client, redactor):
    redact(api_client, f"{AWS}\npassword=hunter2\nghp_{'x' * 36}")
    lines = logs(api_client, "secret-redactor")
    assert lines == ["redacted 1 AWS access key, 1 GitHub token, 1 assignment from command on web-1"]
    assert not any(AWS in line or "hunter2" in line for line in lines)


def test_replacement_and_assignments_settings(api_client, redactor):
    response = patch_settings(api_client, redactor["id"], {"replacement": "***", "assignments": False})
    assert response.status_code == 200, response.content
    result = redact(api_client, f"password=hunter2 key={AWS}")
    assert result["value"]["output"] == "password=hunter2 key=***"


def test_extra_patterns_are_javascript_regexes(api_client, redactor):
    response = patch_settings(api_client, redactor["id"], {"extraPatterns": [r"(?<org>ACME)-\d{6}", "corp-[a-z]{8}"]})
    assert response.status_code == 200, response.content
    result = redact(api_client, "ticket ACME-123456 and corp-abcdefgh, not ACME-12")
    assert result["value"]["output"] == "ticket [REDACTED] and [REDACTED], not ACME-12"


@pytest.mark.parametrize("patterns, message", [
    (["ok", "(unclosed"], "item 1: Invalid regular expression"),
    (["a{2,1}"], "item 0: Invalid regular expression"),
    ([""], "item 0: an empty pattern would match everywhere"),
    ("ACME", "expected an array of strings"),
    ([1], "expected an array of strings"),
])
def test_bad_extra_patterns_are_refused_at_install(api_client, synced, patterns, message):
    response = api_client.post("/api/v1/plugins", {"catalog": "secret-redactor",
                                                   "settings": {"extraPatterns": patterns}}, format="json")
    assert response.status_code == 400
    error = response.json()["error"]
    assert error["field"] == "settings.extraPatterns"
    assert message in error["message"]
    assert api_client.get("/api/v1/plugins").json()["plugins"] == []


def test_long_pathological_output_is_still_redacted_in_time(api_client, redactor):
    # Fail-open would let the secret through if the regexes backtracked past the 5 s budget.
    for filler in ("a.b-" * 120_000, "x" * 500_000, "http://u:" * 50_000):
        result = redact(api_client, filler + f" password=hunter2 {AWS}")
        assert result["trace"][0]["status"] == "ran"
        assert result["value"]["output"].endswith(" password=[REDACTED] [REDACTED]")
