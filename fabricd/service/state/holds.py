"""Holds: the ports fabricd holds down (`disabled_ports`), the ports back up on probation, and the guard's refusals
to re-apply a hold (remediation/reconciler.py: shared by every instance)."""

from __future__ import annotations

from .database import Database
from .db import Db, Row
from .records import DisabledPort, RefusedReapply
from .rows import Codec, integer, integer_or_none, text


def decode_held(row: Row) -> DisabledPort:
    return DisabledPort(
        device=text(row, "device"), port=text(row, "port"), action_id=integer(row, "action_id"),
        ticket_id=integer_or_none(row, "ticket_id"), since_ts=integer(row, "since_ts"),
    )  # fmt: skip


def decode_refused(row: Row) -> RefusedReapply:
    return RefusedReapply(
        device=text(row, "device"), port=text(row, "port"), action_id=integer(row, "action_id"),
        rule=text(row, "rule"), reason=text(row, "reason"), since_ts=integer(row, "since_ts"),
    )  # fmt: skip


HELD = Codec("disabled_ports", "action_id", decode_held, "SELECT * FROM disabled_ports")
REFUSED = Codec("reapply_refused", "port", decode_refused, "SELECT * FROM reapply_refused")


class Holds:
    def __init__(self, database: Database) -> None:
        self._db = database

    def hold(self, device: str, port: str, action_id: int, ticket_id: int | None, now: int) -> None:
        """The port is held down by fabricd (and no longer on probation)."""
        with self._db.transaction() as db:
            db.execute(
                "INSERT INTO disabled_ports VALUES (?, ?, ?, ?, ?) ON CONFLICT (device, port) DO UPDATE SET"
                " action_id = excluded.action_id, ticket_id = excluded.ticket_id, since_ts = excluded.since_ts",
                (device, port, action_id, ticket_id, now),
            )
            db.execute("DELETE FROM probation WHERE device = ? AND port = ?", (device, port))

    def release(self, device: str, port: str, probation_until: int, ticket_id: int | None) -> None:
        """The port is back up, on probation until `probation_until`."""
        with self._db.transaction() as db:
            _unhold(db, device, port)
            db.execute(
                "INSERT INTO probation VALUES (?, ?, ?, ?) ON CONFLICT (device, port) DO UPDATE SET"
                " until_ts = excluded.until_ts, ticket_id = excluded.ticket_id",
                (device, port, probation_until, ticket_id),
            )

    def drop(self, device: str, port: str) -> None:
        """The port is no longer held down by fabricd (reconcile found it up); no probation starts."""
        with self._db.transaction() as db:
            _unhold(db, device, port)

    def refused_reapplies(self) -> list[RefusedReapply]:
        """The holds to re-apply (up again, the guard refusing): only of holds that are still the same hold."""
        return self._db.records(
            REFUSED,
            "SELECT r.* FROM reapply_refused r JOIN disabled_ports d ON d.device = r.device AND d.port = r.port"
            " AND d.action_id = r.action_id ORDER BY r.device, r.port",
        )  # fmt: skip

    def refuse_reapply(self, device: str, port: str, action_id: int, rule: str, reason: str, now: int) -> None:
        """Record (or update) the guard's refusal to re-apply the hold `action_id` on the port."""
        with self._db.transaction() as db:
            db.execute(
                "INSERT INTO reapply_refused VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT (device, port) DO UPDATE SET"
                " action_id = excluded.action_id, rule = excluded.rule, reason = excluded.reason,"
                " since_ts = excluded.since_ts",
                (device, port, action_id, rule, reason, now),
            )

    def all(self) -> list[DisabledPort]:
        """Every port fabricd holds down, the longest held first."""
        return self._db.records(HELD, "SELECT * FROM disabled_ports ORDER BY since_ts")

    def is_held(self, device: str, port: str) -> bool:
        return self._db.one("SELECT 1 FROM disabled_ports WHERE device = ? AND port = ?", (device, port)) is not None

    def probation(self, device: str, port: str, now: int) -> int | None:
        """The ticket of a port still on probation at `now`, else None."""
        row = self._db.one(
            "SELECT ticket_id FROM probation WHERE device = ? AND port = ? AND until_ts > ?", (device, port, now)
        )
        return None if row is None else row[0] if isinstance(row[0], int) else 0

    def prune(self, before_ts: int) -> int:
        """Forget the probations that ended before `before_ts` (StateStore.prune)."""
        with self._db.transaction() as db:
            return db.execute("DELETE FROM probation WHERE until_ts < ?", (before_ts,)).rowcount


def _unhold(db: Db, device: str, port: str) -> None:
    """Inside a transaction: the port is no longer held, and a refusal to re-apply its hold goes with the hold."""
    db.execute("DELETE FROM disabled_ports WHERE device = ? AND port = ?", (device, port))
    db.execute("DELETE FROM reapply_refused WHERE device = ? AND port = ?", (device, port))
