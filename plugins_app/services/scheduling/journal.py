"""The task spool on disk: one SQLite file per spool directory, shared by every process of the machine;
a row is claimed by the process sending it and deleted once sent (the outbox's journal)."""

from __future__ import annotations

import contextlib
import functools
import json
import logging
import os
import sqlite3
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path

logger = logging.getLogger(__name__)

FILE = "journal.sqlite3"
TIMEOUT_SECONDS = 5.0     # SQLite's busy timeout: a writer waits this long for another's transaction (each lasts ms)
CHECKPOINT_PAGES = 16     # WAL pages before a checkpoint: the WAL stays small and its room is reused, so on a
                          # nearly full disk the space goes to rows, and sending (updates, deletes) needs no new room
RESERVE_BYTES = 256 * 1024   # free disk kept for sending what the journal holds: a claim, a delete and the
                             # checkpoint (which grows the file) need room too, and with none at all they would
                             # fail until someone freed space. With less free than this, new rows are refused.
REUSED_PID_SLACK = 2.0    # seconds: /proc's start times are coarse; a claim older than its pid's process by more
                          # than this was made by a process that is gone
LEGACY_TMP_SECONDS = 60.0  # an older version's half-written `.*.json.tmp` this old is debris, not a write under way

SCHEMA = """CREATE TABLE IF NOT EXISTS tasks (
    id INTEGER PRIMARY KEY AUTOINCREMENT,   -- never reused: a late settle cannot touch a newer row
    task TEXT NOT NULL,
    args TEXT NOT NULL,        -- JSON
    claimed_by INTEGER,        -- the pid sending it, NULL while it waits
    claimed_at REAL            -- when (time.time()): tells a claim of a reused pid's earlier process
);
CREATE INDEX IF NOT EXISTS tasks_claimed_by ON tasks (claimed_by);"""

Item = tuple[str, list]   # (task name, its arguments): JSON-ready
Row = tuple[int, str, list]   # (row id, task name, arguments)

# Connections a forked child inherited. Never closed there: closing a connection another process
# opened would drop that process's POSIX locks on the file (SQLite's "how to corrupt", 2.6).
_inherited: list[sqlite3.Connection] = []


class SpoolError(Exception):
    """The journal did not take a read or a write (a full disk, a file it cannot open); nothing of it
    was kept (SQLite rolled it back). The sqlite3 or OS error is chained."""


class Journal:
    """One per Outbox. Every method is one short transaction on this process's own connection (a
    forked child opens its own); the busy timeout bounds any wait on another process's."""

    def __init__(self, directory: Callable[[], Path]):
        self._directory = directory
        self.reserve_bytes = RESERVE_BYTES
        self._lock = threading.Lock()
        self._db: sqlite3.Connection | None = None
        self._opened: tuple[int, Path, int, int] | None = None   # pid, path, device and inode it was opened for

    def forked(self) -> None:
        """In a forked child: the parent's connection and lock are not this process's to use."""
        if self._db is not None:
            _inherited.append(self._db)
        self._db, self._opened, self._lock = None, None, threading.Lock()

    # -- the rows -----------------------------------------------------------------------------------
    def append(self, items: Sequence[Item]) -> None:
        """Keeps `items`: all of them, or (SpoolError) none."""
        rows = [(task, json.dumps(args)) for task, args in items]
        with self._write() as db:   # the room is looked at holding the write lock: appenders take turns
            self._check_room()
            db.executemany("INSERT INTO tasks (task, args) VALUES (?, ?)", rows)

    def claim(self, limit: int) -> list[Row]:
        """Up to `limit` waiting rows, oldest first, now this process's: no other process takes them."""
        with self._write() as db:   # BEGIN IMMEDIATE: the select and the update see no other writer between them
            rows = db.execute("SELECT id, task, args FROM tasks WHERE claimed_by IS NULL ORDER BY id LIMIT ?",
                              (limit,)).fetchall()
            db.executemany("UPDATE tasks SET claimed_by = ?, claimed_at = ? WHERE id = ?",
                           [(os.getpid(), time.time(), row[0]) for row in rows])
        return [(id_, task, json.loads(args)) for id_, task, args in rows]

    def settle(self, sent: Sequence[int], unsent: Sequence[int]) -> None:
        """Rows this process claimed: the sent ones are deleted, the others wait again. A row another
        process took meanwhile (it judged this one gone) is its to settle: it may be sent twice."""
        pid = os.getpid()
        with self._write() as db:
            db.executemany("DELETE FROM tasks WHERE id = ? AND claimed_by = ?", [(id_, pid) for id_ in sent])
            db.executemany("UPDATE tasks SET claimed_by = NULL, claimed_at = NULL WHERE id = ? AND claimed_by = ?",
                           [(id_, pid) for id_ in unsent])

    def reclaim(self) -> int:
        """Rows claimed by a process that is gone (or by this one, which holds none between its sender's
        rounds: a settle the disk refused) wait again. How many."""
        with self._read() as db:   # most rounds find no claim: no write lock for them
            if db.execute("SELECT 1 FROM tasks WHERE claimed_by IS NOT NULL LIMIT 1").fetchone() is None:
                return 0
        with self._write() as db:
            claims = db.execute("SELECT claimed_by, MIN(claimed_at) FROM tasks WHERE claimed_by IS NOT NULL "
                                "GROUP BY claimed_by").fetchall()
            released = 0
            for pid, oldest in claims:
                if pid == os.getpid():
                    stale_before = float("inf")
                else:
                    stale_before = _started(pid) - REUSED_PID_SLACK   # +inf: no such process
                if oldest < stale_before:
                    released += db.execute("UPDATE tasks SET claimed_by = NULL, claimed_at = NULL "
                                           "WHERE claimed_by = ? AND claimed_at < ?", (pid, stale_before)).rowcount
        return released

    def count(self) -> int:
        with self._read() as db:
            return int(db.execute("SELECT COUNT(*) FROM tasks").fetchone()[0])

    def compact(self) -> None:
        """Gives the pages of sent rows back to the file system (after an outage the file held them)."""
        with self._read() as db:
            if db.execute("PRAGMA freelist_count").fetchone()[0]:
                db.executescript("PRAGMA incremental_vacuum")   # execute() would free one page: it steps once
                db.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchall()   # the file shrinks at a checkpoint

    def _check_room(self) -> None:
        try:
            disk = os.statvfs(self._directory())
        except OSError as exc:
            raise SpoolError(f"{type(exc).__name__}: {exc}") from exc
        if disk.f_bavail * disk.f_frsize < self.reserve_bytes:
            raise SpoolError(f"the disk is full: less than {self.reserve_bytes // 1024} KiB free, kept for "
                             f"sending what the spool holds")

    # -- the connection -----------------------------------------------------------------------------
    @contextlib.contextmanager
    def _write(self) -> Iterator[sqlite3.Connection]:
        with self._read() as db:
            db.execute("BEGIN IMMEDIATE")
            try:
                yield db
                db.execute("COMMIT")
            except BaseException:
                if db.in_transaction:   # SQLite may have rolled back already (a full disk)
                    with contextlib.suppress(sqlite3.Error):
                        db.execute("ROLLBACK")
                raise

    @contextlib.contextmanager
    def _read(self) -> Iterator[sqlite3.Connection]:
        with self._lock:   # one connection per process, used by its sender and by callers (put, stop, pending)
            try:
                yield self._connect()
            except (sqlite3.Error, OSError) as exc:
                raise SpoolError(f"{type(exc).__name__}: {exc}") from exc

    def _connect(self) -> sqlite3.Connection:
        directory = self._directory()
        directory.mkdir(parents=True, exist_ok=True)
        path = directory / FILE
        stat = path.stat() if path.exists() else None
        key = (os.getpid(), path, stat.st_dev, stat.st_ino) if stat else None
        if self._db is not None and key == self._opened:
            return self._db
        if self._db is not None:   # the directory changed, or the file was removed: this one is ours to close
            self._db.close()
            self._db = self._opened = None
        db = sqlite3.connect(path, timeout=TIMEOUT_SECONDS, isolation_level=None, check_same_thread=False)
        try:
            # Before the first table, or it has no effect: lets compact() shrink the file.
            db.execute("PRAGMA auto_vacuum = INCREMENTAL")
            db.execute("PRAGMA journal_mode = WAL")
            # Each commit survives the process; only a power cut may take the last ones (as the file spool).
            db.execute("PRAGMA synchronous = NORMAL")
            db.execute(f"PRAGMA wal_autocheckpoint = {CHECKPOINT_PAGES}")
            db.executescript(SCHEMA)
            stat = path.stat()
        except BaseException:
            db.close()
            raise
        self._db, self._opened = db, (os.getpid(), path, stat.st_dev, stat.st_ino)
        return db


def _started(pid: int) -> float:
    """When the process now holding `pid` started (time.time()), -inf while it cannot be told (no
    /proc), and +inf when there is none (or a zombie): every claim of that pid is older."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return float("inf") if Path("/proc/self").exists() else _started_without_proc(pid)
    except OSError:
        return float("-inf")
    fields = stat.rsplit(")", 1)[1].split()   # after the command's name, which may hold spaces
    if fields[0] == "Z":
        return float("inf")
    return _boot_time() + int(fields[19]) / os.sysconf("SC_CLK_TCK")


def _started_without_proc(pid: int) -> float:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return float("inf")
    except PermissionError:
        pass
    return float("-inf")


@functools.cache
def _boot_time() -> float:
    for line in Path("/proc/stat").read_text().splitlines():
        if line.startswith("btime "):
            return float(line.split()[1])
    return 0.0


# -- the spool of older versions: one JSON file per batch --------------------------------------------
def adopt_legacy(directory: Path, journal: Journal) -> int:
    """Moves the tasks an older version left as JSON files (`*.json`, and `*.json.<pid>.sending` of a
    process that is gone) into the journal, so an upgrade loses none; removes its stale temporary
    files. A file is claimed by renaming it, as that version did, so a process of either version
    running beside this one never takes it too. How many tasks."""
    adopted = 0
    for path in sorted(directory.glob("*.json*")):
        name = path.name
        if name.endswith(".json"):
            adopted += _adopt(path, journal)
        elif name.endswith(".sending") and _abandoned(path):
            adopted += _adopt(path, journal)
    for temporary in directory.glob(".*.json.tmp"):
        with contextlib.suppress(OSError):
            if time.time() - temporary.stat().st_mtime > LEGACY_TMP_SECONDS:
                temporary.unlink()
    return adopted


def _abandoned(claimed: Path) -> bool:
    """A file claimed (renamed) by a process that is gone; this one's own are left by its sender's
    rounds only when gone too (a pid reused), as the claim's time (the rename's ctime) tells."""
    pid = claimed.name.rsplit(".", 2)[1]
    if not pid.isdigit():
        return False
    try:
        renamed = claimed.stat().st_ctime
    except OSError:
        return False
    return int(pid) == os.getpid() or renamed < _started(int(pid)) - REUSED_PID_SLACK


def _adopt(path: Path, journal: Journal) -> int:
    original = path.name.split(".json", 1)[0] + ".json"
    claimed = path.with_name(f"{original}.{os.getpid()}.sending")
    try:
        os.rename(path, claimed)   # another process that tries finds it gone
        items = [(str(task), list(args)) for task, args in json.loads(claimed.read_text())]
    except FileNotFoundError:
        return 0
    except (OSError, ValueError, TypeError):
        logger.error("unreadable task spool file %s of an older version, left as %s.unreadable", path, original)
        with contextlib.suppress(OSError):
            os.rename(claimed, path.with_name(f"{original}.unreadable"))
        return 0
    try:
        journal.append(items)
    except SpoolError:   # no room yet: the file waits, as it was, for a later round
        with contextlib.suppress(OSError):
            os.rename(claimed, path.with_name(original))
        raise
    claimed.unlink(missing_ok=True)
    return len(items)


def legacy_pending(directory: Path) -> int:
    """Tasks still in an older version's files (not adopted yet)."""
    total = 0
    for path in directory.glob("*.json*"):
        if path.name.endswith((".json", ".sending")):
            with contextlib.suppress(OSError, ValueError, TypeError):
                total += len(json.loads(path.read_text()))
    return total
