"""The tuning ledger (docs/tuning.md, issue 51): every change the tuning loop proposed, applied, verified, confirmed
or rolled back, with the KPIs before and after. It is what `admit` decides from (the hysteresis and the budget hold
across restarts and failovers), what `fabricd tune history` lists, and where a new leader finds a change the old one
left half done (`applying`, `verifying`, `rolling_back`) to finish it. The change on the switch is a keyed action
too (op `tune`, state/actions.py): the action is what `fabricd approve` approves; this row says what it changes."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Literal, cast, get_args

from .database import Database
from .db import Row
from .rows import Codec, RowError, decoded, integer, integer_or_none, json_list, json_object, new_id, show, text

# observed (observe mode: recorded, never applied) | awaiting_approval -> applying -> verifying -> confirmed |
# rolling_back -> rolled_back; refused (rejected, or the push failed and nothing stayed on the switch)
TuneStatus = Literal[
    "observed", "awaiting_approval", "applying", "verifying", "rolling_back", "confirmed", "rolled_back", "refused"
]
OPEN_TUNE: tuple[TuneStatus, ...] = ("awaiting_approval", "applying", "verifying", "rolling_back")
_STATUSES = frozenset(get_args(TuneStatus))


@dataclass(frozen=True)
class TuneRecord:
    id: int
    key: str  # the proposal's idempotency key: one row per proposal, whichever instance makes it
    action_id: int | None  # the keyed action on the switch (none in observe mode)
    subject: str  # device:port, or device:group
    device: str
    port_class: str
    rule: str | None  # None: a correction into bounds
    target: str | None  # the KPI verify judges it by
    changes: list[dict[str, int | str]]  # knob, before, after, low, high
    reason: str
    mode: str
    status: TuneStatus
    why: str  # how it ended (verify's word, the refusal), or what it waits for
    kpis_before: dict[str, float]
    kpis_after: dict[str, float]
    no_effect: bool
    created_ts: int
    applied_ts: int | None
    ended_ts: int | None

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id, "key": self.key, "action_id": self.action_id, "subject": self.subject,
            "device": self.device, "class": self.port_class, "rule": self.rule, "target": self.target,
            "changes": self.changes, "reason": self.reason, "mode": self.mode, "status": self.status, "why": self.why,
            "kpis_before": self.kpis_before, "kpis_after": self.kpis_after, "no_effect": self.no_effect,
            "created_ts": self.created_ts, "applied_ts": self.applied_ts, "ended_ts": self.ended_ts,
        }  # fmt: skip


def decode(row: Row) -> TuneRecord:
    status = text(row, "status")
    if status not in _STATUSES:
        raise RowError(f"column status: {show(status)} is no tuning status")
    rule, target = row["rule"], row["target"]
    return TuneRecord(
        id=integer(row, "id"), key=text(row, "key"), action_id=integer_or_none(row, "action_id"),
        subject=text(row, "subject"), device=text(row, "device"), port_class=text(row, "port_class"),
        rule=None if rule is None else text(row, "rule"), target=None if target is None else text(row, "target"),
        changes=json_list(row, "changes"), reason=text(row, "reason"), mode=text(row, "mode"),
        status=cast(TuneStatus, status), why=text(row, "why"), kpis_before=json_object(row, "kpis_before"),
        kpis_after=json_object(row, "kpis_after"), no_effect=bool(integer(row, "no_effect")),
        created_ts=integer(row, "created_ts"), applied_ts=integer_or_none(row, "applied_ts"),
        ended_ts=integer_or_none(row, "ended_ts"),
    )  # fmt: skip


CODEC = Codec("tuning", "id", decode, "SELECT * FROM tuning")


@dataclass(frozen=True)
class NewTune:
    """A proposal as the loop records it."""

    key: str
    subject: str
    device: str
    port_class: str
    rule: str | None
    target: str | None
    changes: list[dict[str, int | str]]
    reason: str
    mode: str
    status: TuneStatus
    why: str
    kpis_before: dict[str, float]


class Tuning:
    def __init__(self, database: Database) -> None:
        self._db = database

    def add(self, new: NewTune, now: int, action_id: int | None = None) -> TuneRecord:
        """Record a proposal; with its key already recorded, the row that has it (nothing is added)."""
        with self._db.transaction() as db:
            if row := db.execute("SELECT * FROM tuning WHERE key = ?", (new.key,)).fetchone():
                return decoded(self._db.quarantine, CODEC, row)
            tid = new_id(db.execute(
                "INSERT INTO tuning (key, action_id, subject, device, port_class, rule, target, changes, reason,"
                " mode, status, why, kpis_before, kpis_after, no_effect, created_ts) VALUES (?, ?, ?, ?, ?, ?, ?, ?,"
                " ?, ?, ?, ?, ?, '{}', 0, ?) RETURNING id",
                (new.key, action_id, new.subject, new.device, new.port_class, new.rule, new.target,
                 json.dumps(new.changes), new.reason, new.mode, new.status, new.why, json.dumps(new.kpis_before),
                 now),
            ))  # fmt: skip
            row = db.execute("SELECT * FROM tuning WHERE id = ?", (tid,)).fetchone()
            return decoded(self._db.quarantine, CODEC, row)

    def update(
        self, tune_id: int, status: TuneStatus, why: str, *, applied_ts: int | None = None,
        ended_ts: int | None = None, kpis_before: dict[str, float] | None = None,
        kpis_after: dict[str, float] | None = None, no_effect: bool | None = None,
    ) -> TuneRecord:  # fmt: skip
        sets: list[str] = ["status = ?", "why = ?"]
        args: list[str | int] = [status, why]
        for col, v in (("applied_ts", applied_ts), ("ended_ts", ended_ts)):
            if v is not None:
                sets.append(f"{col} = ?")
                args.append(v)
        for col, d in (("kpis_before", kpis_before), ("kpis_after", kpis_after)):
            if d is not None:
                sets.append(f"{col} = ?")
                args.append(json.dumps(d))
        if no_effect is not None:
            sets.append("no_effect = ?")
            args.append(int(no_effect))
        with self._db.transaction() as db:
            db.execute(f"UPDATE tuning SET {', '.join(sets)} WHERE id = ?", (*args, tune_id))
            row = db.execute("SELECT * FROM tuning WHERE id = ?", (tune_id,)).fetchone()
            return decoded(self._db.quarantine, CODEC, row)

    def get(self, tune_id: int) -> TuneRecord | None:
        return self._db.record(CODEC, "SELECT * FROM tuning WHERE id = ?", (tune_id,))

    def with_key(self, key: str) -> TuneRecord | None:
        return self._db.record(CODEC, "SELECT * FROM tuning WHERE key = ?", (key,))

    def of_action(self, action_id: int) -> TuneRecord | None:
        return self._db.record(CODEC, "SELECT * FROM tuning WHERE action_id = ?", (action_id,))

    def since(self, ts: int) -> list[TuneRecord]:
        """Every change created at or after `ts`, and every one still open, oldest first (the ledger `admit` reads:
        its hold-off and its budget look back at most an hour or the hold-off)."""
        q = ",".join("?" * len(OPEN_TUNE))
        sql = f"SELECT * FROM tuning WHERE created_ts >= ? OR status IN ({q}) ORDER BY id"
        return self._db.records(CODEC, sql, (ts, *OPEN_TUNE))

    def with_status(self, *statuses: TuneStatus) -> list[TuneRecord]:
        q = ",".join("?" * len(statuses))
        return self._db.records(CODEC, f"SELECT * FROM tuning WHERE status IN ({q}) ORDER BY id", statuses)

    def history(self, limit: int = 200, applied_only: bool = False) -> list[TuneRecord]:
        """The newest first; `applied_only` leaves observe's records out."""
        where = " WHERE status <> 'observed'" if applied_only else ""
        return self._db.records(CODEC, f"SELECT * FROM tuning{where} ORDER BY id DESC LIMIT ?", (limit,))

    def prune(self, before_ts: int) -> int:
        """Forget observe's records older than `before_ts` (StateStore.prune): the changes themselves stay, the
        history of what was done."""
        with self._db.transaction() as db:
            return db.execute("DELETE FROM tuning WHERE status = 'observed' AND created_ts < ?", (before_ts,)).rowcount

    def counts(self) -> dict[str, int]:
        rows = self._db.all("SELECT status, COUNT(*) AS n FROM tuning GROUP BY status")
        return {r[0]: int(r[1]) for r in rows if isinstance(r[0], str)}
