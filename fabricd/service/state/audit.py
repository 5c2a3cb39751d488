"""The audit log: who did what and why, for people (the page, `fabricd audit`) and for the chaos checker."""

from __future__ import annotations

from .database import Database
from .db import Db, Row
from .records import AuditEntry
from .rows import Codec, integer, integer_or_none, text, text_or_none


def decode(row: Row) -> AuditEntry:
    return AuditEntry(
        id=integer(row, "id"), ts=integer(row, "ts"), what=text(row, "what"), why=text(row, "why"),
        mode=text_or_none(row, "mode"), actor=text(row, "actor"), finding_id=integer_or_none(row, "finding_id"),
        action_id=integer_or_none(row, "action_id"), ticket_id=integer_or_none(row, "ticket_id"),
    )  # fmt: skip


CODEC = Codec("audit", "id", decode, "SELECT * FROM audit")


def write(
    db: Db, ts: int, what: str, why: str, *, mode: str | None = None, actor: str = "fabricd",
    finding_id: int | None = None, action_id: int | None = None, ticket_id: int | None = None,
) -> None:  # fmt: skip
    """Inside a transaction on `db`: one entry (the other repositories audit their own writes with it, in the same
    transaction; the leader's claim on its own session)."""
    db.execute(
        "INSERT INTO audit (ts, what, why, mode, actor, finding_id, action_id, ticket_id)"
        " VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
        (ts, what, why, mode, actor, finding_id, action_id, ticket_id),
    )


class Audit:
    def __init__(self, database: Database) -> None:
        self._db = database

    def record(
        self, ts: int, what: str, why: str, *, mode: str | None = None, actor: str = "fabricd",
        finding_id: int | None = None, action_id: int | None = None, ticket_id: int | None = None,
    ) -> None:  # fmt: skip
        with self._db.transaction() as db:
            write(db, ts, what, why, mode=mode, actor=actor, finding_id=finding_id, action_id=action_id,
                  ticket_id=ticket_id)  # fmt: skip

    def entries(self, limit: int = 200, offset: int = 0) -> list[AuditEntry]:
        """The newest first."""
        return self._db.records(CODEC, "SELECT * FROM audit ORDER BY id DESC LIMIT ? OFFSET ?", (limit, offset))

    def prune(self, before_ts: int) -> int:
        """Forget the entries older than `before_ts` (StateStore.prune)."""
        with self._db.transaction() as db:
            return db.execute("DELETE FROM audit WHERE ts < ?", (before_ts,)).rowcount
