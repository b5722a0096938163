"""rm-guard through the real runtime: what it refuses, what it must let through, -y, settings."""

import pytest

from plugins_app.models import CancelLog

from ..catalog_support import SSH, execute, install_official, patch_settings

pytestmark = pytest.mark.django_db

REFUSED = [
    "rm -rf /", "rm -fr /", "rm -r -f /", "rm -R -f /", "rm -Rf /", "rm --recursive --force /",
    "rm -rf /*", "rm -rf //", "rm -rf /.", "rm -rf /tmp/x /", "rm -rf -- /", 'rm -rf "/"', "rm -rf '/'",
    "rm -r /", "sudo rm -rf /", "sudo -u root rm -rf /", "sudo -- rm -rf /*", "/bin/rm -rf /", "\\rm -rf /",
    "rm --no-preserve-root -rf /", "rm -rf / --no-preserve-root", "rm --no-preserve-root /mnt",
    "env FOO=1 rm -rf /", "DEBUG=1 nohup rm -rf / &", "cd /tmp && rm -rf /", "ls; rm -rf /*",
    "true || rm -rf /", "echo $(rm -rf /)", 'echo "$(rm -rf /)"', "echo `rm -rf /`",
    "bash -c 'rm -rf /'", 'sudo sh -c "rm -rf /*"', "bash -lc 'rm -rf /'", "eval 'rm -rf /'",
    "rm -rf /etc", "rm -rf /usr/", "rm -rf /var/*", "rm -rf ~", "rm -rf ~/", "rm -rf $HOME", "rm -rf ${HOME}",
    "mkfs /dev/sda1", "mkfs.ext4 /dev/sdb1", "sudo mkfs.xfs -f /dev/nvme0n1p1", "mke2fs -t ext4 /dev/sdc",
    "dd if=/dev/zero of=/dev/sda bs=1M", "sudo dd if=image.iso of=/dev/nvme0n1 status=progress",
    "dd if=/dev/urandom of=/dev/vda", "dd of=/dev/xvda if=disk.img", "dd if=x of=/dev/mmcblk0",
    'dd if=x of="/dev/sdb"', "cat disk.img > /dev/sda", "echo 0 >/dev/nvme0n1",
    ":(){ :|:& };:", ":(){ : | : & }; :", "bomb() { bomb | bomb & }; bomb",
]

ALLOWED = [
    "rm -rf ./build", "rm -rf /tmp/x", "rm -rf build/ dist/", "rm -rf /var/tmp/cache", "rm -rf /home/deploy/old",
    "rm /etc/nginx/sites-enabled/default", "rm -f /", "rm -rf .", "rm -rf *.o", "rm -rf /etc/nginx/conf.d/*",
    "dd if=/dev/zero of=./file bs=1M count=10", "dd if=/dev/sda of=/backup/sda.img", "dd if=a of=/dev/null",
    "echo mkfs", "man mkfs", "command -v mkfs.ext4", "which mkfs", "apt-cache search mkfs",
    "grep -r 'rm -rf /' docs/", "echo 'rm -rf /'", 'git commit -m "refuse rm -rf / and mkfs"',
    "echo rm -rf /  # a comment", "ls -la /", "ls > /dev/null 2>&1", "cat /dev/sda1 > /dev/null",
    "find /var/log -name '*.gz' -mtime +30 -print", "systemctl restart nginx", "tail -n 100 /var/log/syslog",
    "docker ps -a | grep web", "echo ':)'", "apt-get update", "apt-get install -y nginx",
    "apt-get -y install nginx", "apt-get install --yes jq", "apt-get -qqy install jq",
    "apt-get install --assume-yes jq", "apt-get -o APT::Get::Assume-Yes=true install jq",
    "echo apt-get install foo", "apt-get remove nginx", "pip install requests",
]

REWRITTEN = [
    ("apt-get install nginx", "apt-get install -y nginx"),
    ("sudo apt-get install nginx", "sudo apt-get install -y nginx"),
    ("apt install jq", "apt install -y jq"),
    ("apt-get update && apt-get install -q nginx curl", "apt-get update && apt-get install -y -q nginx curl"),
    ("DEBIAN_FRONTEND=noninteractive apt-get install tzdata",
     "DEBIAN_FRONTEND=noninteractive apt-get install -y tzdata"),
    ("sudo apt-get -o Dpkg::Options::=--force-confold install nginx",
     "sudo apt-get -o Dpkg::Options::=--force-confold install -y nginx"),
    ("apt-get install a; apt-get install b", "apt-get install -y a; apt-get install -y b"),
]


def command(text, kind="command"):
    return dict(SSH, kind=kind, command=text, path=None, content=None)


@pytest.fixture
def guard(api_client, synced):
    return install_official(api_client, "rm-guard")


def outcomes(api_client, commands):
    return {c: execute(api_client, "sshCommandSending", command(c)) for c in commands}


def test_refuses_destructive_commands_in_all_their_forms(api_client, guard, account):
    results = outcomes(api_client, REFUSED)
    assert [c for c, r in results.items() if r["outcome"] != "cancelled"] == []
    for c, r in results.items():
        assert r["cancellation"]["reason"].startswith("rm-guard refused "), c
        assert r["cancellation"]["plugin"] == "rm-guard"
    assert CancelLog.objects.filter(account=account, plugin_slug="rm-guard").count() == len(REFUSED)


def test_reasons_name_what_was_refused(api_client, guard):
    reason = lambda c: execute(api_client, "sshCommandSending", command(c))["cancellation"]["reason"]
    assert reason("sudo rm -rf /*") == "rm-guard refused recursive delete of /: sudo rm -rf /*"
    assert "rm --no-preserve-root" in reason("rm -rf --no-preserve-root /")
    assert "mkfs.ext4 (formats a filesystem)" in reason("mkfs.ext4 /dev/sdb1")
    assert "dd onto disk device /dev/sda" in reason("dd if=/dev/zero of=/dev/sda")
    assert "redirection onto disk device /dev/sda" in reason("cat x > /dev/sda")
    assert "fork bomb" in reason(":(){ :|:& };:")
    assert "recursive delete of /etc" in reason("rm -rf /etc/")
    long = "rm -rf / " + "x" * 600
    assert len(reason(long)) <= 500


def test_leaves_ordinary_commands_alone(api_client, guard):
    results = outcomes(api_client, ALLOWED)
    assert {c: r["outcome"] for c, r in results.items() if r["outcome"] != "unchanged"} == {}
    assert all(r["value"]["command"] == c for c, r in results.items())


def test_forces_dash_y_on_apt_install_without_doubling_it(api_client, guard):
    for before, after in REWRITTEN:
        result = execute(api_client, "sshCommandSending", command(before))
        assert (result["outcome"], result["value"]["command"]) == ("changed", after), before
        again = execute(api_client, "sshCommandSending", command(after))
        assert again["outcome"] == "unchanged", after


def test_file_operations_pass_untouched(api_client, guard):
    write = dict(SSH, kind="write_file", command=None, path="/tmp/notes.sh", content="rm -rf /\napt-get install x\n")
    result = execute(api_client, "sshCommandSending", write)
    assert result["outcome"] == "unchanged"
    assert result["value"] == {"command": None, "path": "/tmp/notes.sh", "content": write["content"]}


def test_assume_yes_can_be_switched_off(api_client, guard):
    assert patch_settings(api_client, guard["id"], {"assumeYes": False}).status_code == 200
    result = execute(api_client, "sshCommandSending", command("apt-get install nginx"))
    assert result["outcome"] == "unchanged"
    assert execute(api_client, "sshCommandSending", command("rm -rf /"))["outcome"] == "cancelled"


def test_protected_paths_replace_the_defaults_but_root_stays_protected(api_client, guard):
    response = patch_settings(api_client, guard["id"], {"protectedPaths": ["/srv/data"]})
    assert response.status_code == 200, response.content
    assert execute(api_client, "sshCommandSending", command("rm -rf /srv/data/"))["outcome"] == "cancelled"
    assert execute(api_client, "sshCommandSending", command("rm -rf /srv/data/old"))["outcome"] == "unchanged"
    assert execute(api_client, "sshCommandSending", command("rm -rf /etc"))["outcome"] == "unchanged"
    assert execute(api_client, "sshCommandSending", command("rm -rf /*"))["outcome"] == "cancelled"


def test_bad_protected_paths_are_refused_and_change_nothing(api_client, guard):
    response = patch_settings(api_client, guard["id"], {"protectedPaths": "/srv"})
    assert response.status_code == 400
    assert response.json()["error"]["field"] == "settings.protectedPaths"
    assert execute(api_client, "sshCommandSending", command("rm -rf /etc"))["outcome"] == "cancelled"


def test_a_long_command_cannot_outlast_the_guard(api_client, guard):
    # Fail-open would let the command through if parsing it took longer than the 5 s budget.
    for filler in ("a" * 300_000, "a.b-" * 80_000, "x(" * 100_000):
        result = execute(api_client, "sshCommandSending", command(f"echo {filler}; rm -rf /"))
        assert result["outcome"] == "cancelled", result["trace"]
