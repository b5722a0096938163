"""Dry runs: a write service run for real inside a transaction that is always rolled back, so a dry run
refuses exactly what the real call refuses and leaves nothing behind."""

from __future__ import annotations

import contextvars
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

from django.db import transaction
from django.db.models import Max

from plugins_app.models import AccountChange

# Why the real service, rolled back, and not a validate() beside each save(): the services check under
# the account's lock and against rows they read there (a name already taken, the installations a chain
# holds, the permissions every version asks for), and some checks come after writes of the same call
# (an install appends to chains, then records). A separate validation path would be a second copy of
# those rules that drifts from the first.
#
# What a rolled-back transaction does not undo, and how each is kept in:
# - work queued for after the commit (engines dropping compartments, Celery tasks): transaction.on_commit
#   callbacks of a rolled-back block are discarded by Django, savepoint or not;
# - the per-process chain cache: it would otherwise remember chains read inside the transaction under
#   the account's committed change marker; it neither stores nor serves while `rehearsing()`;
# - compiling: a pure function of the source, nothing to undo (the compile engine's turn is taken as
#   the real call takes it).
_active: contextvars.ContextVar[bool] = contextvars.ContextVar("hub_rehearsal", default=False)


def rehearsing() -> bool:
    """True inside `rehearse()`: what is written now will be rolled back."""
    return _active.get()


@dataclass
class Rehearsal:
    """What the rehearsed call would have written to the account's change log (action and summary)."""

    changes: list[dict[str, str]] = field(default_factory=list)


@contextmanager
def rehearse(account_id: int) -> Iterator[Rehearsal]:
    """Run the block's writes, note the change-log rows they made, then roll all of it back. An error the
    block raises leaves it as it would the real call (rolled back, raised unchanged)."""
    outcome = Rehearsal()
    token = _active.set(True)
    try:
        with transaction.atomic():
            last = AccountChange.objects.filter(account_id=account_id).aggregate(last=Max("pk"))["last"] or 0
            yield outcome
            outcome.changes = [{"action": action, "summary": summary} for action, summary in
                               AccountChange.objects.filter(account_id=account_id, pk__gt=last)
                               .order_by("pk").values_list("action", "summary")]
            transaction.set_rollback(True)
    finally:
        _active.reset(token)
