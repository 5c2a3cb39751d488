"""The fence (HA): every state write of a leader is conditional on its fencing token still being the one the state
names, so an old leader that wakes from a pause writes nothing. The leader row itself is leadership.py's."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar

from .db import Db, FencedError

# The fencing token the current task writes under (HA): every transaction first checks that the state still names
# this token as the leader's, so an old leader that wakes from a pause writes nothing (FencedError). Set by
# remediation for the work it does as leader (`fenced`); None (the default) writes unchecked: a single instance,
# a standby's page login, `fabricd token`.
FENCE: ContextVar[int | None] = ContextVar("fabricd_fence", default=None)


@contextmanager
def fenced(token: int | None) -> Iterator[None]:
    """Every state write inside is conditional on `token` still being the leader's (None: unconditional)."""
    reset = FENCE.set(token)
    try:
        yield
    finally:
        FENCE.reset(reset)


def check(db: Db, token: int) -> None:
    """Inside a transaction: the state still names `token` as the leader's, or FencedError. On PostgreSQL the
    leader row is share-locked until the commit, so a new leader's claim waits for this write to end and reads
    it (or ends it: an old leader stuck in a write does not hold the claim, Leadership.claim), or this write sees the
    claim and writes nothing (SQLite serializes writers anyway)."""
    lock = " FOR SHARE" if db.dialect == "postgresql" else ""
    row = db.execute(f"SELECT holder, token FROM leader WHERE id = 1{lock}").fetchone()
    if row is None or int(row[1]) != token:
        who = "nobody" if row is None else f"{row[0]} (token {row[1]})"
        raise FencedError(f"fenced: the state names {who} as leader, not this instance's token {token}; "
                          "nothing written, this instance steps down")  # fmt: skip
