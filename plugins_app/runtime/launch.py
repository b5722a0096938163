"""How an engine process is started: by the supervisor on its listening sockets, and by a web
process for a private engine on a socket pair (the engine reads these arguments in process.main)."""

from __future__ import annotations

import subprocess
import sys
from dataclasses import dataclass, fields
from pathlib import Path

PROJECT_ROOT = Path(__file__).resolve().parents[2]   # engines start here, where plugins_app is importable


@dataclass(frozen=True)
class EngineArgs:
    """An engine process's command line: `name=value` arguments after the module's name."""

    listen: int | None = None     # a listening socket's descriptor: serve every connection (a supervisor's engine)
    conn: int | None = None       # a connected socket's descriptor: serve it, exit when it closes (a private engine)
    lifeline: int | None = None   # the supervisor's pipe: the engine exits when it closes

    def argv(self) -> list[str]:
        return [f"{f.name}={value}" for f in fields(self) if (value := getattr(self, f.name)) is not None]

    @classmethod
    def parse(cls, argv: list[str]) -> EngineArgs:
        given = dict(arg.split("=", 1) for arg in argv)
        return cls(**{f.name: int(given[f.name]) for f in fields(cls) if f.name in given})

    def start(self, env: dict[str, str]) -> subprocess.Popen[bytes]:
        """The engine process, given the descriptors named here."""
        descriptors = [fd for fd in (self.listen, self.conn, self.lifeline) if fd is not None]
        return subprocess.Popen([sys.executable, "-m", "plugins_app.runtime.engine.process", *self.argv()],
                                pass_fds=descriptors, cwd=PROJECT_ROOT, env=env)
