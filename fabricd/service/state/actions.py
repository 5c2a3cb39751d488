"""Actions: what fabricd did or proposes to do to a port (disable, enable), recorded before the switch is touched
(`running` before the driver call, `done` after verification), so a restart can finish or roll back what was half
done; each unique by its key and carrying the fencing token of the leader that began it."""

from __future__ import annotations

from typing import cast, get_args

from .database import Database
from .db import Row
from .fence import FENCE
from .holds import Holds
from .records import OPEN_ACTION, OPS, Action, ActionStatus
from .rows import (
    Codec,
    RowError,
    decoded,
    integer,
    integer_or_none,
    label_counts,
    new_id,
    show,
    text,
    text_or_none,
)

_STATUSES = frozenset(get_args(ActionStatus))


def decode(row: Row) -> Action:
    op, status = text(row, "op"), text(row, "status")
    if op not in OPS:
        raise RowError(f"column op: {show(op)} is not {', '.join(sorted(OPS))}")
    if status not in _STATUSES:
        raise RowError(f"column status: {show(status)} is no action status")
    return Action(
        id=integer(row, "id"), op=op, device=text(row, "device"), port=text(row, "port"), mode=text(row, "mode"),
        status=cast(ActionStatus, status), reason=text(row, "reason"), finding_id=integer_or_none(row, "finding_id"),
        ticket_id=integer_or_none(row, "ticket_id"), created_ts=integer(row, "created_ts"),
        updated_ts=integer(row, "updated_ts"), detail=text(row, "detail"), key=text_or_none(row, "key"),
        token=integer_or_none(row, "token"),
    )  # fmt: skip


CODEC = Codec("actions", "id", decode, "SELECT * FROM actions")


class Actions:
    """The actions; an action's end and what it did to the port (`finish`) are one transaction with `holds`."""

    def __init__(self, database: Database, holds: Holds) -> None:
        self._db = database
        self._holds = holds

    def add(
        self, op: str, device: str, port: str, mode: str, status: ActionStatus, reason: str, now: int,
        *, finding_id: int | None = None, ticket_id: int | None = None, key: str | None = None,
    ) -> Action:  # fmt: skip
        """Record a new action; with a `key` already recorded, the action that has it (nothing is added). Under a
        fencing token (`fenced`), the action carries it."""
        with self._db.transaction() as db:
            if key is not None and (row := db.execute("SELECT * FROM actions WHERE key = ?", (key,)).fetchone()):
                return decoded(self._db.quarantine, CODEC, row)
            aid = new_id(db.execute(
                "INSERT INTO actions (op, device, port, mode, status, reason, finding_id, ticket_id, created_ts,"
                " updated_ts, key, token) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) RETURNING id",
                (op, device, port, mode, status, reason, finding_id, ticket_id, now, now, key, FENCE.get()),
            ))  # fmt: skip
            a = self.get(aid)
        assert a is not None
        return a

    def set_status(self, action_id: int, status: ActionStatus, now: int, detail: str | None = None) -> Action:
        with self._db.transaction() as db:
            db.execute("UPDATE actions SET status = ?, updated_ts = ? WHERE id = ?", (status, now, action_id))
            if detail is not None:
                db.execute("UPDATE actions SET detail = ? WHERE id = ?", (detail, action_id))
        a = self.get(action_id)
        assert a is not None
        return a

    def finish(self, action_id: int, status: ActionStatus, now: int, detail: str, probation_until: int) -> Action:
        """An action's end and what it did to the port, in one transaction: between an admin change marked done and
        the port recorded as held down, the guard would not count the port and could let one more go down."""
        with self._db.transaction() as db:
            sql = "UPDATE actions SET status = ?, updated_ts = ?, detail = ? WHERE id = ?"
            db.execute(sql, (status, now, detail, action_id))
            row = db.execute("SELECT * FROM actions WHERE id = ?", (action_id,)).fetchone()
            a = decoded(self._db.quarantine, CODEC, row)
            if status == "done" and a.op == "disable":
                self._holds.hold(a.device, a.port, a.id, a.ticket_id, now)
            elif status == "done" and a.op == "enable":
                self._holds.release(a.device, a.port, probation_until, a.ticket_id)
        return a

    def retoken(self, action_id: int, token: int) -> Action:
        """A new leader takes over an action an old one began and found nothing of it on the switch: it commits under
        its own token (the old transaction's name is ended, so the old leader's late commands find nothing)."""
        with self._db.transaction() as db:
            db.execute("UPDATE actions SET token = ? WHERE id = ?", (token, action_id))
        a = self.get(action_id)
        assert a is not None
        return a

    def link_ticket(self, action_id: int, ticket_id: int) -> None:
        with self._db.transaction() as db:
            db.execute("UPDATE actions SET ticket_id = ? WHERE id = ?", (ticket_id, action_id))

    def get(self, action_id: int) -> Action | None:
        return self._db.record(CODEC, "SELECT * FROM actions WHERE id = ?", (action_id,))

    def all(self, status: str | None = None, limit: int = 500, offset: int = 0) -> list[Action]:
        where, args = (" WHERE status = ?", (status,)) if status else ("", ())
        sql = f"SELECT * FROM actions{where} ORDER BY id DESC LIMIT ? OFFSET ?"
        return self._db.records(CODEC, sql, (*args, limit, offset))

    def with_status(self, *statuses: ActionStatus, op: str | None = None) -> list[Action]:
        """Every action in these statuses (no limit: remediation decides from all of them, oldest first)."""
        q = ",".join("?" * len(statuses))
        sql = f"SELECT * FROM actions WHERE status IN ({q})" + (" AND op = ?" if op else "") + " ORDER BY id"
        return self._db.records(CODEC, sql, (*statuses, *([op] if op else [])))

    def on(self, device: str, since_ts: int, op: str) -> list[Action]:
        """Every `op` action on `device` created at or after `since_ts` (no limit), oldest first."""
        sql = "SELECT * FROM actions WHERE device = ? AND op = ? AND created_ts >= ? ORDER BY id"
        return self._db.records(CODEC, sql, (device, op, since_ts))

    def keyed(self, prefix: str, status: ActionStatus | None = None, since_ts: int = 0) -> list[Action]:
        """The actions whose key starts with `prefix` (the floor's returns: `return:`) updated at or after
        `since_ts`, oldest first."""
        sql = "SELECT * FROM actions WHERE key LIKE ? AND updated_ts >= ?" + (" AND status = ?" if status else "")
        args = (prefix.replace("%", "") + "%", since_ts, *([status] if status else []))
        return self._db.records(CODEC, sql + " ORDER BY id", args)

    def with_key(self, key: str) -> Action | None:
        return self._db.record(CODEC, "SELECT * FROM actions WHERE key = ?", (key,))

    def of_findings(self, finding_ids: list[int], status: ActionStatus, op: str) -> list[Action]:
        """The `op` actions of these findings in `status`, oldest first."""
        if not finding_ids:
            return []
        q = ",".join("?" * len(finding_ids))
        sql = f"SELECT * FROM actions WHERE finding_id IN ({q}) AND status = ? AND op = ? ORDER BY id"
        return self._db.records(CODEC, sql, (*finding_ids, status, op))

    def latest_on(self, device: str, port: str, *statuses: ActionStatus) -> Action | None:
        """The port's newest action (of these statuses, when given)."""
        q = (" AND status IN (" + ",".join("?" * len(statuses)) + ")") if statuses else ""
        sql = f"SELECT * FROM actions WHERE device = ? AND port = ?{q} ORDER BY id DESC LIMIT 1"
        return self._db.record(CODEC, sql, (device, port, *statuses))

    def count(self, device: str, port: str, op: str, *, after_id: int) -> int:
        """How many `op` actions on the port were recorded after action `after_id`."""
        sql = "SELECT COUNT(*) FROM actions WHERE device = ? AND port = ? AND op = ? AND id > ?"
        row = self._db.one(sql, (device, port, op, after_id))
        return int(row[0]) if row else 0

    def open_on(self, device: str, port: str) -> Action | None:
        """The port's action still under way (awaiting approval or running), if any."""
        q = ",".join("?" * len(OPEN_ACTION))
        sql = f"SELECT * FROM actions WHERE device = ? AND port = ? AND status IN ({q}) ORDER BY id DESC LIMIT 1"
        return self._db.record(CODEC, sql, (device, port, *OPEN_ACTION))

    def count_since(self, ts: int, op: str = "disable") -> int:
        """How many `op` actions created at or after `ts` ran or are running."""
        row = self._db.one(
            "SELECT COUNT(*) FROM actions WHERE op = ? AND created_ts >= ? AND status IN ('running', 'done')",
            (op, ts),
        )
        return int(row[0]) if row else 0

    def counts(self) -> dict[tuple[str, str], int]:
        return label_counts(self._db.all("SELECT op, status, COUNT(*) AS n FROM actions GROUP BY op, status"))
