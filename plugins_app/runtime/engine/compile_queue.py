"""Fair turns at the one compile engine's TypeScript isolate (issue 39, item 5): accounts take turns
round-robin (one account's eight installs never stand in front of another's one), each account may
keep only a few compiles waiting, and a compile that waited past the deadline is answered "busy"
instead of holding its caller. With each check bounded (compiler.py's TYPECHECK_SECONDS), another
account waits at most one check per account ahead of it."""

from __future__ import annotations

import asyncio
import contextlib
from collections import OrderedDict, deque
from collections.abc import AsyncIterator

# Compiles of one account waiting behind the running one, at most: more are refused at once.
MAX_WAITING_PER_ACCOUNT = 2
# A compile still waiting after this long is answered busy (the web side says 503 and when to retry).
QUEUE_DEADLINE_SECONDS = 20.0
RETRY_AFTER_SECONDS = 5


class CompileBusy(Exception):
    """No turn for this compile: `kind` "account" (its account has enough waiting: a 429) or
    "deadline" (it waited past the queue's deadline: a 503)."""

    def __init__(self, kind: str, message: str):
        super().__init__(message)
        self.kind = kind

    def reply(self) -> dict[str, object]:
        return {"busy": self.kind, "message": str(self), "retryAfter": RETRY_AFTER_SECONDS}


class FairQueue:
    """One turn at a time; waiting turns are handed out round-robin across accounts, in arrival order
    within one account."""

    def __init__(self, max_waiting: int = MAX_WAITING_PER_ACCOUNT, deadline: float = QUEUE_DEADLINE_SECONDS):
        self.max_waiting, self.deadline = max_waiting, deadline
        self.busy = False
        self.lines: OrderedDict[str, deque[asyncio.Future[None]]] = OrderedDict()
        self.refused = {"account": 0, "deadline": 0}   # a status and a test's look

    def waiting(self, account: str | None = None) -> int:
        lines = self.lines.values() if account is None else [self.lines.get(account, deque())]
        return sum(1 for line in lines for f in line if not f.done())

    @contextlib.asynccontextmanager
    async def turn(self, account: str) -> AsyncIterator[None]:
        if self.busy:
            await self._wait(account)
        else:
            self.busy = True
        try:
            yield
        finally:
            self._hand_on()

    async def _wait(self, account: str) -> None:
        if self.waiting(account) >= self.max_waiting:
            self.refused["account"] += 1
            raise CompileBusy("account", f"this account already has {self.max_waiting} plugin compiles waiting; "
                                         "send the next when one has finished")
        granted: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self.lines.setdefault(account, deque()).append(granted)
        try:
            await asyncio.wait_for(asyncio.shield(granted), self.deadline)
        except BaseException as exc:   # the deadline, or the caller gone: the turn must never be lost
            if granted.done() and not granted.cancelled():   # handed the turn just then: pass it on
                self._hand_on()
            granted.cancel()
            if not isinstance(exc, TimeoutError):
                raise
            self.refused["deadline"] += 1
            raise CompileBusy("deadline", f"plugin compiles are busy: this one waited {self.deadline:g} s "
                                          "without a turn") from None

    def _hand_on(self) -> None:
        """The turn goes to the next account in line (and that account to the back of the round)."""
        while self.lines:
            account, line = next(iter(self.lines.items()))
            granted = line.popleft()
            if line:
                self.lines.move_to_end(account)
            else:
                del self.lines[account]
            if not granted.done():
                granted.set_result(None)
                return
        self.busy = False
