"""How an engine process is started: by the supervisor on its listening sockets, and by a web
process for a private engine on a socket pair (the engine reads these arguments in process.main)."""

from __future__ import annotations

import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from plugins_app.runtime.config import DEFAULT_ENGINE_MEMORY_MB

PROJECT_ROOT = Path(__file__).resolve().parents[2]   # engines start here, where plugins_app is importable


@dataclass(frozen=True)
class EngineArgs:
    """An engine process's command line: `name=value` arguments after the module's name."""

    memory_mb: int                # its isolates' heap limit (EngineConfig.isolate_memory_mb)
    listen: int | None = None     # a listening socket's descriptor: serve every connection (a supervisor's engine)
    conn: int | None = None       # a connected socket's descriptor: serve it, exit when it closes (a private engine)
    lifeline: int | None = None   # the supervisor's pipe: the engine exits when it closes
    nice: int = 0                 # added to its isolates' threads' nice value (the lane's engines)
    spare: bool = True            # keep a spare isolate started, to take a replaced one's place at once
    engine_memory_mb: int = DEFAULT_ENGINE_MEMORY_MB   # the process's resident memory bound (EngineConfig)
    board: int | None = None      # the shared engines' board's descriptor (engine/board.py); lane and private: none
    seat: int | None = None       # this engine's seat on it
    pulse: int | None = None      # its pulse file's descriptor (pulse.py), which its loop stamps; private: none

    def argv(self) -> list[str]:
        given = {"memory_mb": self.memory_mb, "listen": self.listen, "conn": self.conn,
                 "lifeline": self.lifeline, "nice": self.nice, "spare": int(self.spare),
                 "engine_memory_mb": self.engine_memory_mb, "board": self.board, "seat": self.seat, "pulse": self.pulse}
        return [f"{name}={value}" for name, value in given.items() if value is not None]

    @classmethod
    def parse(cls, argv: list[str]) -> EngineArgs:
        given = {name: int(value) for name, value in (arg.split("=", 1) for arg in argv)}
        return cls(memory_mb=given["memory_mb"], listen=given.get("listen"), conn=given.get("conn"),
                   lifeline=given.get("lifeline"), nice=given.get("nice", 0), spare=given.get("spare", 1) != 0,
                   engine_memory_mb=given.get("engine_memory_mb", DEFAULT_ENGINE_MEMORY_MB),
                   board=given.get("board"), seat=given.get("seat"), pulse=given.get("pulse"))

    def start(self, env: dict[str, str]) -> subprocess.Popen[bytes]:
        """The engine process, given the descriptors named here."""
        descriptors = [fd for fd in (self.listen, self.conn, self.lifeline, self.board, self.pulse) if fd is not None]
        return subprocess.Popen([sys.executable, "-m", "plugins_app.runtime.engine.process", *self.argv()],
                                pass_fds=descriptors, cwd=PROJECT_ROOT, env=env)
