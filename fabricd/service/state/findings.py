"""Findings: each incident the detectors reported, refreshed while it lasts and cleared once it is no longer seen."""

from __future__ import annotations

import json
from typing import cast

from fabricd.detectors.finding import Finding

from .database import Database
from .db import Row
from .records import StoredFinding
from .rows import Codec, RowError, integer, json_object, label_counts, new_id, show, text

# Two reports of one fault whose onsets are this close are one incident (Findings.record): chaos seed 3131 and the
# late-confirm failover test saw a new leader date a flap 0.3 s later than the old one and record it a second time.
SAME_INCIDENT_NS = 10 * 1_000_000_000
# The key of an incident closed by bringing its port back (`close`), with when: `<key>#closed:<ts>`. Its reports
# from then on refresh nothing; one that shows the fault again after that time is a new incident.
CLOSED = "#closed:"
# Transitions after the close that make a flap again: the enable that brought the port back is one (up), a flap is two
AGAIN_TRANSITIONS = 3


def _closed_ts(key: str) -> int | None:
    head, sep, ts = key.rpartition(CLOSED)
    return int(ts) if sep and head and ts.isdigit() else None


def _again_since(f: Finding, ts: int) -> bool:
    """The report shows the fault again after `ts`: a link flap's timeline has a flap after it, a down and an up
    (AGAIN_TRANSITIONS): the port coming back up from the close's own enable is one transition, not a flap. A finding
    without a timeline cannot say so: its incident stays closed (a new episode is a new start_ts, a new incident)."""
    timeline = f.evidence.get("timeline")
    after = [t for t in timeline if isinstance(t, int) and t > ts] if isinstance(timeline, list) else []
    return len(after) >= AGAIN_TRANSITIONS


def decode(row: Row) -> StoredFinding:
    """A finding's stored document (its `data`) with the row's id, incident key, status and last sighting."""
    d = json_object(row, "data")
    for col in ("kind", "device"):  # what the API, the metrics and the ticket titles read of every finding
        if not isinstance(d.get(col), str):
            raise RowError(f"column data: {col} {show(d.get(col))} is not text")
    d.update(id=integer(row, "id"), fault=text(row, "fault"), status=text(row, "status"),
             last_seen_ts=integer(row, "last_seen_ts"))  # fmt: skip
    return cast(StoredFinding, d)


CODEC = Codec("findings", "id", decode, "SELECT id, fault, status, last_seen_ts, data FROM findings")


class Findings:
    def __init__(self, database: Database) -> None:
        self._db = database

    def record(self, f: Finding, fault: str, now: int) -> tuple[int, bool]:
        """Store a finding (or refresh the same incident); returns (id, new). An incident closed by bringing its
        port back (`close`) is not refreshed: its report is the old one (not new) unless it shows the fault again
        since the close (a port on probation that flaps again: a new incident, which decide judges)."""
        key = json.dumps(list(f.key))
        data = json.dumps(f.to_dict(), sort_keys=True)
        with self._db.transaction() as db:
            row = db.execute("SELECT id, detected_ts FROM findings WHERE key = ?", (key,)).fetchone()
            if row is None:
                # The same incident dated a little differently: a standby's detectors, now the leader's, hold their
                # own samples and may date it later (a flap period, a sync) than the instance that recorded it. Cleared
                # too: an instance restarted without the incident's history cleared it, and the standby that takes
                # over after it still sees it (chaos seed 3133: a BGP flap recorded twice, 67 s apart).
                rows = db.execute(
                    "SELECT id, detected_ts, key FROM findings WHERE fault = ? AND kind = ?"
                    " AND start_ts BETWEEN ? AND ? ORDER BY status = 'active' DESC, id DESC",
                    (fault, f.kind, f.start_ts - SAME_INCIDENT_NS, f.start_ts + SAME_INCIDENT_NS),
                ).fetchall()
                closed = {int(r["id"]): ts for r in rows if (ts := _closed_ts(str(r["key"]))) is not None}
                row = next((r for r in rows if int(r["id"]) not in closed), None)
                if row is not None:
                    db.execute("UPDATE findings SET key = ? WHERE id = ?", (key, row["id"]))
                elif closed and not _again_since(f, max(closed.values())):
                    return max(closed), False  # the closed incident reported on, nothing new since it was closed
            if row is not None:
                # Detectors re-report an active incident every tick: keep when it was first detected.
                first = row["detected_ts"] if isinstance(row["detected_ts"], int) else f.detected_ts
                data = json.dumps({**f.to_dict(), "detected_ts": first}, sort_keys=True)
                db.execute(
                    "UPDATE findings SET last_seen_ts = ?, data = ?, severity = ?, summary = ?, status = 'active'"
                    " WHERE id = ?",
                    (now, data, f.severity, f.summary, row["id"]),
                )
                return int(row["id"]), False
            cur = db.execute(
                "INSERT INTO findings (key, fault, kind, device, port, priority, severity, summary, start_ts,"
                " detected_ts, last_seen_ts, data) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) RETURNING id",
                (key, fault, f.kind, f.device, f.port, f.priority, f.severity, f.summary, f.start_ts,
                 f.detected_ts, now, data),
            )  # fmt: skip
            return new_id(cur), True

    def close(self, finding_id: int, now: int) -> None:
        """The incident's port was brought back (its ticket resolved): cleared, and its key marked closed at `now`,
        so that a report of the same flap train is no longer taken for it once it shows a flap after `now`
        (`record`). Before, a port re-enabled while its finding was still reported (a dampened flap stays reported
        for a minute or two after its last flap) flapped again unseen: the re-flap refreshed the old finding."""
        with self._db.transaction() as db:
            row = db.execute("SELECT key FROM findings WHERE id = ?", (finding_id,)).fetchone()
            if row is None:
                return
            # closed again (a second resolve after a repair on the wrong cable): the close moves to now, so the
            # transitions of the enable rolled back since are not taken for a flap
            head = str(row["key"]).partition(CLOSED)[0]
            db.execute("UPDATE findings SET key = ?, status = 'cleared' WHERE id = ?",
                       (f"{head}{CLOSED}{now}", finding_id))  # fmt: skip

    def has(self, f: Finding, fault: str) -> bool:
        """Whether this incident is recorded already (active or cleared, dated the same or a little apart, as
        `record` matches it)."""
        with self._db.transaction() as db:
            if db.execute("SELECT 1 FROM findings WHERE key = ?", (json.dumps(list(f.key)),)).fetchone() is not None:
                return True
            return (
                db.execute(
                    "SELECT 1 FROM findings WHERE fault = ? AND kind = ? AND start_ts BETWEEN ? AND ?",
                    (fault, f.kind, f.start_ts - SAME_INCIDENT_NS, f.start_ts + SAME_INCIDENT_NS),
                ).fetchone()
                is not None
            )

    def clear_not_seen_since(self, ts: int) -> int:
        with self._db.transaction() as db:
            cur = db.execute(
                "UPDATE findings SET status = 'cleared' WHERE status = 'active' AND last_seen_ts < ?", (ts,)
            )
            return cur.rowcount

    def all(self, status: str | None = None, limit: int = 500, offset: int = 0) -> list[StoredFinding]:
        where, args = (" WHERE status = ?", (status,)) if status else ("", ())
        sql = f"SELECT id, fault, status, last_seen_ts, data FROM findings{where} ORDER BY id DESC LIMIT ? OFFSET ?"
        return self._db.records(CODEC, sql, (*args, limit, offset))

    def get(self, finding_id: int) -> StoredFinding | None:
        return self._db.record(CODEC, "SELECT id, fault, status, last_seen_ts, data FROM findings WHERE id = ?",
                               (finding_id,))  # fmt: skip

    def counts(self) -> dict[tuple[str, str], int]:
        return label_counts(self._db.all("SELECT kind, status, COUNT(*) AS n FROM findings GROUP BY kind, status"))

    def prune(self, before_ts: int) -> int:
        """Forget the incidents cleared before `before_ts` (StateStore.prune)."""
        with self._db.transaction() as db:
            return db.execute(
                "DELETE FROM findings WHERE status = 'cleared' AND last_seen_ts < ?", (before_ts,)
            ).rowcount
