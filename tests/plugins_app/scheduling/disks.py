"""Small real file systems to fill (the task spool's full-disk tests): a tmpfs mounted for the test, which
needs root, as CI (.ci/run) and the development machines run the suite."""

from __future__ import annotations

import errno
import shutil
import subprocess
from pathlib import Path

CHUNK = 65536


def mount_tmpfs(point: Path, size: str) -> str | None:
    """Mounts a tmpfs of `size` (mount's spelling: "1m") at `point`; why not, when it cannot."""
    point.mkdir(parents=True, exist_ok=True)
    if shutil.which("mount") is None:
        return "there is no mount command"
    result = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(point)],
                            capture_output=True, text=True)
    return None if result.returncode == 0 else f"mount -t tmpfs failed: {result.stderr.strip()} (it needs root)"


def unmount(point: Path) -> None:
    # Lazily: a process may still hold a file there open (an outbox's journal, a test's daemon thread);
    # the file system goes once it lets go.
    subprocess.run(["umount", "--lazy", str(point)], check=True)


def fill(directory: Path) -> Path:
    """Another writer takes every byte left on `directory`'s file system: the file it wrote."""
    filler = directory / "filler"
    with open(filler, "wb", buffering=0) as out:
        for size in (CHUNK, 1):   # whole chunks, then the last partial one byte at a time
            try:
                while True:
                    out.write(b"\0" * size)
            except OSError as exc:
                if exc.errno != errno.ENOSPC:
                    raise
    return filler
