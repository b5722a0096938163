"""Whose memory an engine holds: what each installation's chains grew the process by, relief when the
engine nears its bounds (drop the installation that holds the memory, not whoever runs next), and the
notes an installation's next trace carries (a charge, or module state that had to go)."""

from __future__ import annotations

import os
import time
from collections import OrderedDict
from collections.abc import Callable, Iterable

MIB = 1024 * 1024
# Past this share of the process's bound (HUB_ENGINE_MEMORY_MB), or of the isolate's heap limit, after
# a chain, the engine collects and, if still over, finds who holds the memory. The heap's share is
# lower: a handler's temporary must still fit in what is left (a 32 MiB one in a 256 MiB isolate).
PROCESS_SOFT_SHARE = 0.8
HEAP_SOFT_SHARE = 0.6
# A compartment whose drop gave back at least this much was holding it: its installation is charged
# (a memory strike, which also moves it to the lane). Less, and it was not the one: it only lost its state.
CHARGE_BYTES = 16 * MIB
MAX_DROPS = 3          # accounts whose compartments one relief drops, at most
# An account is charged for what all its compartments keep (16 installations keeping 14 MiB each
# hold as much as one keeping 224 MiB): a relief drops, together, the account's compartments that
# each grew the process by at least this much (or its biggest one alone), at most MAX_ACCOUNT_DROPS.
ACCOUNT_SHARE_BYTES = 1 * MIB
MAX_ACCOUNT_DROPS = 64
# After a relief, the process must grow this much more before the next (one that found nothing to drop
# must not make every chain pay for another look).
RELIEF_STEP = 32 * MIB
# A chain that grew the process by this much is followed by a full collection before the next chain,
# and only what survives it is put down to the chain: a large temporary counts for nothing.
RECOUNT_BYTES = 16 * MIB
# Changes smaller than this since the last count wait for the next chain (most chains change the
# process by a few pages, if at all: their books cost one read).
GRAIN_BYTES = 1 * MIB
MAX_KEYS = 20_000      # installations kept in the books (the oldest go first)
# An account one of whose chains kept this much past a full collection (or that was charged) keeps memory
# on purpose: for KEEPER_SECONDS a shared engine sends its calls to the lane, where what it keeps costs
# no other account a collection. Without this, an account whose calls are spread over the shared
# engines (each busy a moment) loads and fills its compartments on every one of them in turn.
KEEPER_BYTES = 8 * MIB
KEEPER_SECONDS = 60.0
MAX_KEEPERS = 1_000

CHARGE = ("kept {mib} MiB in its module state while its engine neared its memory bound; its compartment "
          "was dropped (its state with it) and it counts a memory strike")
ACCOUNT_CHARGE = ("its account's {n} compartments kept {mib} MiB in their module state while its engine neared its "
                  "memory bound; they were dropped (their state with them) and each counts a memory strike")
DROPPED = "its module state was dropped while its engine freed memory that another installation held"
REPLACED = "its module state was lost: its engine's isolate was replaced ({why})"


class MemoryBooks:
    """Kept by one engine process. What the process grew or shrank by across a chain is put down to
    that chain's handlers (chains interleave, so the share also holds what others grew it by meanwhile:
    the ranking only orders the search), floored at zero; after a chain that grew it
    a lot, only what survives a full collection. What a handler keeps adds up, what it only uses
    does not: the account whose installations hold the memory ranks first (summed, so splitting it
    over many installations hides nothing). The ranking only orders the search; dropping the
    compartments and measuring what came back is what charges."""

    def __init__(self, process_bound_mb: int, heap_limit_mb: int):
        self.process_bound = process_bound_mb * MIB
        self.heap_soft = int(heap_limit_mb * MIB * HEAP_SOFT_SHARE)
        self.process_soft = int(self.process_bound * PROCESS_SOFT_SHARE)
        self._statm = os.open("/proc/self/statm", os.O_RDONLY)   # one pread a chain: ~2 us
        self._page = os.sysconf("SC_PAGE_SIZE")
        self.last = self.rss()
        # The process's size past which the isolate's heap may have passed its soft share: what is not
        # heap at the last look, plus that share (a look costs a heap count, under a millisecond).
        self.heap_mark = self.last + self.heap_soft
        self.process_mark = self.process_soft
        self.growth: OrderedDict[str, float] = OrderedDict()   # "account/id" -> bytes put down to it
        self.notes: OrderedDict[str, tuple[str, bool]] = OrderedDict()   # "account/id" -> (warning, charged)
        self.relief_due = False
        self.recount: tuple[str, list[str], int] | None = None   # (account, ids, size before) awaiting a collection
        self.charged = 0               # installations charged since the process started (status)
        self.keepers: dict[str, float] = {}   # account -> until when its calls go to the lane (monotonic)
        self.on_keeper: Callable[[str, float], None] | None = None   # told of each (the shared engines' board)

    def rss(self) -> int:
        return int(os.pread(self._statm, 64, 0).split()[1]) * self._page

    def over_bound(self) -> bool:
        """Past the process's hard bound: whatever runs now is stopped (its isolate is replaced)."""
        return self.rss() > self.process_bound

    def due(self) -> bool:
        """Whether the engine must collect (a recount, a relief) before it takes the next chain."""
        return self.relief_due or self.recount is not None

    def unchanged(self) -> bool:
        """Whether the process is within a grain of its size at the last count: most chains' only cost here."""
        return abs(self.rss() - self.last) < GRAIN_BYTES

    def chain_ended(self, account: str, handler_ids: list[str]) -> None:
        now = self.rss()
        if now - self.last >= RECOUNT_BYTES and handler_ids:
            self.recount = (account, handler_ids, self.last)
            return
        self._put_down(account, handler_ids, now - self.last)
        self._look(now)

    def rebase(self) -> None:
        """The process grew for its own reasons (an isolate started): count the next chain from here."""
        now = self.rss()
        self.heap_mark += max(0, now - self.last)
        self.last = now

    def recounted(self) -> None:
        """After the full collection a recount waited for: what survived it is put down."""
        if self.recount is None:
            return
        account, handler_ids, before = self.recount
        self.recount = None
        now = self.rss()
        self._put_down(account, handler_ids, now - before)
        if now - before >= KEEPER_BYTES:
            self._keeper(account)
        self._look(now)

    def _keeper(self, account: str) -> None:
        now = time.monotonic()
        if len(self.keepers) >= MAX_KEEPERS:
            self.keepers = {a: until for a, until in self.keepers.items() if until > now}
        if len(self.keepers) < MAX_KEEPERS:
            self.keepers[account] = now + KEEPER_SECONDS
        if self.on_keeper is not None:
            self.on_keeper(account, KEEPER_SECONDS)

    def keeps_memory(self, account: str) -> bool:
        """Whether `account` kept memory here lately (its calls then go to the lane)."""
        if not self.keepers:   # nearly always: checked on every request a shared engine admits
            return False
        until = self.keepers.get(account)
        return until is not None and until > time.monotonic()

    def _put_down(self, account: str, handler_ids: list[str], grown: int) -> None:
        if grown and handler_ids:
            share = grown / len(handler_ids)
            for inst_id in handler_ids:
                key = f"{account}/{inst_id}"
                self.growth[key] = max(0.0, self.growth.pop(key, 0.0) + share)
            while len(self.growth) > MAX_KEYS:
                self.growth.popitem(last=False)

    def _look(self, now: int) -> None:
        self.last = now
        if now > self.process_mark or now > self.heap_mark:
            self.relief_due = True

    def pressed(self, heap_used: int) -> bool:
        """Is the isolate's heap or the process past its soft share?"""
        return heap_used > self.heap_soft or self.rss() > self.process_soft

    def biggest(self, loaded: dict[str, str]) -> list[str]:
        """The loaded compartments of the account the process grew the most by (all its installations
        summed), to be dropped together: those that each grew it by a share worth counting, biggest
        first, or its biggest alone. Empty when no loaded installation grew it."""
        totals: dict[str, float] = {}
        for key, grown in self.growth.items():
            if key in loaded and grown > 0:
                account = key.split("/", 1)[0]
                totals[account] = totals.get(account, 0.0) + grown
        if not totals:
            return []
        account = max(totals, key=lambda name: totals[name])
        own = sorted(((grown, key) for key, grown in self.growth.items()
                      if key in loaded and grown > 0 and key.split("/", 1)[0] == account), reverse=True)
        shares = [key for grown, key in own if grown >= ACCOUNT_SHARE_BYTES]
        return (shares or [own[0][1]])[:MAX_ACCOUNT_DROPS]

    def dropped(self, keys: list[str], freed: int) -> bool:
        """These compartments (one account's) were dropped together to relieve memory and gave back
        `freed` bytes; True if they are charged (each then counts a memory strike)."""
        charged = freed >= CHARGE_BYTES
        if charged and keys:
            self._keeper(keys[0].split("/", 1)[0])
        for key in keys:
            self.growth.pop(key, None)
            if not charged:
                text = DROPPED
            elif len(keys) == 1:
                text = CHARGE.format(mib=freed // MIB)
            else:
                text = ACCOUNT_CHARGE.format(n=len(keys), mib=freed // MIB)
            self._note(key, text, charged)
            self.charged += charged
        return charged

    def lost(self, keys: list[str], why: str) -> None:
        """These compartments went with a replaced isolate: their state is gone, and so is their growth."""
        for key in keys:
            self.growth.pop(key, None)
            if key not in self.notes:   # a charge waiting to be told is kept
                self._note(key, REPLACED.format(why=why), False)

    def forget(self, key: str) -> None:
        """Uninstalled or redeployed: nothing to tell its next run."""
        self.growth.pop(key, None)
        self.notes.pop(key, None)

    def pending(self, account: str, handler_ids: Iterable[str]) -> bool:
        if not self.notes:   # nearly always: checked on every chain's start
            return False
        return any(f"{account}/{inst_id}" in self.notes for inst_id in handler_ids)

    def take_note(self, account: str, inst_id: str) -> tuple[str, bool] | None:
        return self.notes.pop(f"{account}/{inst_id}", None)

    def settled(self, heap_used: int) -> None:
        """After a look (and any relief): the process's size now is what the next chain's growth
        counts from, and the heap's share is looked at again once the process grows past it."""
        self.relief_due = False
        self.last = self.rss()
        # Look again once the process has grown by what the heap had left below its share (or, if
        # it is still past it with nothing left to drop, by a step).
        self.heap_mark = self.last + max(self.heap_soft - heap_used, RELIEF_STEP)
        self.process_mark = max(self.process_soft, self.last + RELIEF_STEP)

    def _note(self, key: str, text: str, charged: bool) -> None:
        self.notes.pop(key, None)
        self.notes[key] = (text, charged)
        while len(self.notes) > MAX_KEYS:
            self.notes.popitem(last=False)
