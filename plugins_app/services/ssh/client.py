"""The hub's SSH client (asyncssh): pinned host keys only, jump-host tunnels, capped output, SFTP."""

from __future__ import annotations

import asyncio
import codecs
import contextlib
import time
from dataclasses import dataclass, field

import asyncssh
from django.conf import settings

from plugins_app.models import SshHost

READ_CHUNK = 64 * 1024
# Past its cap a stream is still drained (so a command that prints a little too much keeps its
# real exit status), but not forever: beyond this multiple of the cap the session is closed.
DRAIN_FACTOR = 16
TIMED_OUT_EXIT_CODE = 124    # what coreutils' `timeout` reports
GONE_EXIT_CODE = -1          # the hub closed the session before the command reported a status
FILE_KINDS = ("list_files", "read_file", "write_file", "edit_file", "delete_file")


class SshFailed(Exception):
    """The server could not be reached, trusted or logged into (or the connection dropped)."""


class SshTimedOut(Exception):
    """The operation outlived its timeout; `result` holds what it had produced by then."""

    def __init__(self, seconds: float, result: SshResult):
        super().__init__(f"timed out after {seconds:g} s")
        self.seconds = seconds
        self.result = result


@dataclass(frozen=True)
class Endpoint:
    label: str
    hostname: str
    port: int
    username: str
    host_key: str
    private_key: str = field(repr=False)


@dataclass(frozen=True)
class Target:
    server: Endpoint
    jump: Endpoint | None = None


@dataclass
class SshResult:
    exit_code: int
    output: str | None
    error_output: str | None
    is_truncated: bool
    duration_ms: float
    timed_out: bool = False

    def as_dict(self) -> dict:
        return {"exitCode": self.exit_code, "output": self.output, "errorOutput": self.error_output,
                "isTruncated": self.is_truncated, "durationMs": self.duration_ms}


def _endpoint(host: SshHost, hostname: str, port: int) -> Endpoint:
    return Endpoint(host.display_name, hostname, port, host.username, host.host_key, host.private_key())


def target_for(host: SshHost) -> Target:
    """How to reach `host`: directly, or through its jump host."""
    if host.is_tunnel:
        jump = host.jump_host
        # hosts.prepare saves a tunnel host only with a jump host, and that one direct (with a port).
        assert jump is not None and jump.port is not None
        return Target(_endpoint(host, host.hostname, host.tunnel_port or 22),
                      _endpoint(jump, jump.hostname, jump.port))
    assert host.port is not None   # hosts.prepare saves a direct host only with its port
    return Target(_endpoint(host, host.hostname, host.port))


def max_output_bytes() -> int:
    return settings.HUB_SSH.max_output_bytes


# -- public, synchronous entry points (each runs its own event loop and connection) ---------------

def run_command(target: Target, command: str, *, timeout: float, max_output: int | None = None) -> SshResult:
    """Run `command` through the user's login shell. A non-zero exit is a result; failing to
    connect raises SshFailed, and outliving `timeout` raises SshTimedOut."""
    return _run_sync(target, _command(target, command, timeout, max_output or max_output_bytes()))


def run_file_operation(target: Target, kind: str, path: str, content: str | None = None, *,
                       timeout: float, max_output: int | None = None) -> SshResult:
    """One SFTP operation; a failure on the server (no such file, permission denied) is a result
    with exit code 1 and the reason in error_output."""
    if kind not in FILE_KINDS:
        raise ValueError(f"not a file operation: {kind}")
    return _run_sync(target, _file_operation(target, kind, path, content, timeout, max_output or max_output_bytes()))


def _run_sync(target: Target, coro) -> SshResult:
    try:
        return asyncio.run(coro)
    except (SshFailed, SshTimedOut):
        raise
    except (asyncssh.Error, OSError) as exc:
        raise SshFailed(f"{target.server.label}: the connection failed: {_reason(exc)}") from None


# -- connections ----------------------------------------------------------------------------------

@contextlib.asynccontextmanager
async def _connection(target: Target):
    async with contextlib.AsyncExitStack() as stack:
        tunnel = None
        if target.jump is not None:
            tunnel = await _open(target.jump, None, stack, role="jump host ")
        yield await _open(target.server, tunnel, stack, role="")


async def _open(endpoint: Endpoint, tunnel, stack: contextlib.AsyncExitStack, *, role: str):
    where = f"{role}{endpoint.label} ({endpoint.hostname}:{endpoint.port})"
    try:
        client_key = asyncssh.import_private_key(endpoint.private_key)
        pinned = asyncssh.import_public_key(endpoint.host_key)
    except (asyncssh.KeyImportError, ValueError):
        raise SshFailed(f"{where}: the stored keys cannot be read") from None
    try:
        conn = await asyncssh.connect(
            endpoint.hostname, endpoint.port, tunnel=tunnel, username=endpoint.username,
            client_keys=[client_key], known_hosts=([pinned], [], []), x509_trusted_certs=None,
            config=None, agent_path=None, password=None, kbdint_auth=False, gss_auth=False,
            host_based_auth=False, connect_timeout=settings.HUB_SSH.connect_timeout_seconds)
    except asyncssh.HostKeyNotVerifiable:
        raise SshFailed(f"{where}: the server's host key does not match the pinned host key; "
                        f"connection refused") from None
    except asyncssh.PermissionDenied:
        raise SshFailed(f"{where}: the server refused the key for {endpoint.username}") from None
    except TimeoutError:
        raise SshFailed(f"{where}: no answer within "
                        f"{settings.HUB_SSH.connect_timeout_seconds:g} s") from None
    except (asyncssh.Error, OSError) as exc:
        raise SshFailed(f"{where}: could not connect: {_reason(exc)}") from None
    stack.push_async_callback(_close, conn)
    return conn


async def _close(conn) -> None:
    conn.close()
    await conn.wait_closed()


def _reason(exc: BaseException) -> str:
    return getattr(exc, "reason", None) or getattr(exc, "strerror", None) or str(exc) or type(exc).__name__


# -- commands -------------------------------------------------------------------------------------

class _Capture:
    """Keeps the first `limit` bytes of a stream and counts the rest."""

    def __init__(self, limit: int):
        self.limit = limit
        self.kept = bytearray()
        self.seen = 0

    def feed(self, chunk: bytes) -> None:
        self.seen += len(chunk)
        room = self.limit - len(self.kept)
        if room > 0:
            self.kept += chunk[:room]

    @property
    def truncated(self) -> bool:
        return self.seen > len(self.kept)

    @property
    def flooding(self) -> bool:
        return self.seen > self.limit * DRAIN_FACTOR

    def text(self) -> str:
        # A cut-off stream may end inside a UTF-8 sequence: hold that tail back instead of
        # turning it into a replacement character.
        return codecs.getincrementaldecoder("utf-8")(errors="replace").decode(bytes(self.kept),
                                                                              final=not self.truncated)


async def _command(target: Target, command: str, timeout: float, limit: int) -> SshResult:
    out, err = _Capture(limit), _Capture(limit)
    started = time.monotonic()
    process = None

    async def execute() -> int:
        nonlocal process
        process = await conn.create_process(command, encoding=None)
        process.stdin.write_eof()
        return await _collect(process, out, err)

    async with _connection(target) as conn:
        try:
            exit_code = await asyncio.wait_for(execute(), timeout)
        except TimeoutError:
            if process is not None:
                _stop(process)
            raise SshTimedOut(timeout, _command_result(TIMED_OUT_EXIT_CODE, out, err, started, True)) from None
        finally:
            if process is not None:
                process.close()
    return _command_result(exit_code, out, err, started)


async def _collect(process, out: _Capture, err: _Capture) -> int:
    async def pump(stream, capture: _Capture) -> None:
        while chunk := await stream.read(READ_CHUNK):
            capture.feed(chunk)
            if capture.flooding:
                raise _Flooding

    flooded = False
    try:
        async with asyncio.TaskGroup() as streams:
            streams.create_task(pump(process.stdout, out))
            streams.create_task(pump(process.stderr, err))
    except* _Flooding:
        flooded = True
    if flooded:
        _stop(process)
        return GONE_EXIT_CODE
    await process.wait_closed()
    code = process.returncode
    if code is None:
        return GONE_EXIT_CODE
    return 128 - code if code < 0 else code   # killed by signal N: the shell's 128+N


class _Flooding(Exception):
    pass


def _stop(process) -> None:
    """Ask sshd to kill the command, as closing a session without a terminal does not stop it.
    OpenSSH refuses signals in root logins: there the command ends when it next writes (its
    pipes are closed with the session) or finishes by itself."""
    with contextlib.suppress(OSError):
        process.kill()


def _command_result(code: int, out: _Capture, err: _Capture, started: float, timed_out: bool = False) -> SshResult:
    return SshResult(code, out.text(), err.text(), out.truncated or err.truncated, _elapsed_ms(started), timed_out)


def _elapsed_ms(started: float) -> float:
    return round((time.monotonic() - started) * 1000, 1)


# -- files (SFTP) ---------------------------------------------------------------------------------

async def _file_operation(target: Target, kind: str, path: str, content: str | None, timeout: float,
                          limit: int) -> SshResult:
    started = time.monotonic()
    async with _connection(target) as conn:
        try:
            return await asyncio.wait_for(_sftp(conn, kind, path, content, limit, started), timeout)
        except TimeoutError:
            raise SshTimedOut(timeout, SshResult(TIMED_OUT_EXIT_CODE, None, None, False,
                                                 _elapsed_ms(started), True)) from None


async def _sftp(conn, kind: str, path: str, content: str | None, limit: int, started: float) -> SshResult:
    output, truncated = None, False
    try:
        async with conn.start_sftp_client() as sftp:
            if kind == "list_files":
                names = sorted(n for n in await sftp.listdir(path) if n not in (".", ".."))
                capture = _Capture(limit)
                capture.feed("\n".join(names).encode())
                output, truncated = capture.text(), capture.truncated
            elif kind == "read_file":
                async with sftp.open(path, "rb") as f:
                    capture = _Capture(limit)
                    capture.feed(await f.read(limit + 1))
                output, truncated = capture.text(), capture.truncated
            elif kind == "delete_file":
                await sftp.remove(path)
            else:
                if kind == "edit_file" and not await sftp.isfile(path):
                    raise asyncssh.SFTPNoSuchFile(f"{path} is not an existing file (write_file creates files)")
                async with sftp.open(path, "wb") as f:
                    await f.write((content or "").encode())
    except asyncssh.SFTPError as exc:
        return SshResult(1, None, f"{kind} {path}: {exc.reason}", False, _elapsed_ms(started))
    return SshResult(0, output, None, truncated, _elapsed_ms(started))
