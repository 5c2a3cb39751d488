"""The service's memory (SQLite, WAL): findings, actions, tickets, disabled ports, probation and an audit log.

Everything that must survive a restart is written here before the switch is touched (an action is `running`
before the driver call and `done` after verification), so a restart can finish or roll back what was half done.
One connection guarded by a lock: the scheduler, the remediation worker threads and the API share it, and every
call is a short transaction. Times are unix nanoseconds. Secrets never reach this file.
"""

from __future__ import annotations

import contextlib
import json
import logging
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TypeVar

from fabricd.detectors.finding import Finding

from . import state_decode as dec
from .config import ServiceConfig, read_secret
from .leader import default_instance
from .state_db import (
    NEW_STATE_HINT,
    ConflictError,
    Db,
    FencedError,
    LockTimeoutError,
    Result,
    Row,
    StateError,
    connect,
    schema,
)
from .state_decode import Quarantine, Quarantined, RowError
from .state_records import (
    FENCE,
    OPEN_ACTION,
    Action,
    ActionStatus,
    ApiToken,
    AuditEntry,
    DisabledPort,
    DrainKind,
    DrainRecord,
    JobRefDoc,
    RefusedReapply,
    StoredFinding,
    Ticket,
    WriteHealth,
    fenced,
)

__all__ = [
    "FENCE",
    "OPEN_ACTION",
    "SCHEMA_VERSION",
    "Action",
    "ActionStatus",
    "ApiToken",
    "AuditEntry",
    "DisabledPort",
    "DrainKind",
    "DrainRecord",
    "JobRefDoc",
    "Quarantined",
    "RefusedReapply",
    "StateStore",
    "StoredFinding",
    "Ticket",
    "WriteHealth",
    "fenced",
    "open_state",
]

log = logging.getLogger("fabricd.state")
R = TypeVar("R")

# 2: actions.key (idempotency); 3: actions.token (the fencing token of the leader that began it); 4: maintenance
# (planned drains, maintenance.py: a new table, which the schema's CREATE TABLE IF NOT EXISTS adds to an older file);
# 5: carrier_seen (each port's last carrier-transitions value, carrier_watch.py: a new table, added the same way);
# 6: reapply_refused (the guard's refusals to re-apply a hold, reconcile_steps.py: shared by every instance)
SCHEMA_VERSION = 6


# Two reports of one fault whose onsets are this close are one incident (upsert_finding): chaos seed 3131 and the
# late-confirm failover test saw a new leader date a flap 0.3 s later than the old one and record it a second time.
SAME_INCIDENT_NS = 10 * 1_000_000_000


class StateStore:
    def __init__(
        self, path: Path | None = None, *, url: str | None = None, password: str | None = None, owner: bool = False,
        new_state: bool = False, force: bool = False, name: str = "fabricd",
    ) -> None:  # fmt: skip
        """SQLite at `path` (the default), or the PostgreSQL database at `url` that a leader and its standbys
        share (the password comes from state.password, never from the URL). `owner`: the service's own store (one
        per SQLite file, state_db.SqliteDb); `new_state`, `force`: `fabricd run --new-state [--force]`; `name`: the
        instance, as PostgreSQL's sessions show it."""
        self.path = path
        self._db: Db = connect(path, url, password, owner=owner, new_state=new_state, force=force, name=name)
        self.started_empty = self._db.started_empty  # adoption notes say so (reconcile_steps)
        self._reach = (url, password, name)
        self._claimer: Db | None = None  # PostgreSQL: a session of its own for claim_leader (claim_leader)
        self._claim_lock = threading.Lock()
        self.writes = WriteHealth()
        self.quarantine = Quarantine()  # rows that cannot be decoded (state_decode.py)
        self.dialect = self._db.dialect
        self._lock = threading.RLock()
        self._depth = 0  # nesting of tx() in the thread that holds the lock
        where = str(path) if path is not None else "the state database"
        with self.tx() as db:
            if self.dialect == "postgresql":  # two instances starting at once must not both create the tables
                db.execute("SELECT pg_advisory_xact_lock(7152308)")
            version = db.execute("SELECT value FROM meta WHERE key = 'schema'").fetchone() if self._has_meta() else None
            if version is not None and not (isinstance(version[0], str) and version[0].isdigit()):
                raise StateError(f"{where}: its schema version ({version[0]!r}) cannot be read; {NEW_STATE_HINT}")
            if version is not None and int(version[0]) > SCHEMA_VERSION:
                raise StateError(f"{where}: written by a newer fabricd (schema {version[0]}); upgrade fabricd")
            if version is not None and int(version[0]) < SCHEMA_VERSION:
                self._migrate(int(version[0]))
            self._db.script(schema(self.dialect))
            if version is None:
                db.execute("INSERT INTO meta (key, value) VALUES ('schema', ?)", (str(SCHEMA_VERSION),))
            db.execute("CREATE UNIQUE INDEX IF NOT EXISTS actions_key ON actions(key) WHERE key IS NOT NULL")
            # A real write at every open: a state that cannot be written stops fabricd now, not at its first action.
            db.execute("INSERT INTO meta (key, value) VALUES ('opened', ?) ON CONFLICT (key) DO UPDATE SET"
                       " value = excluded.value", (str(time.time_ns()),))  # fmt: skip

    def _has_meta(self) -> bool:
        if self.dialect == "postgresql":
            return self._db.execute("SELECT to_regclass('meta') IS NOT NULL").fetchone()[0] is True
        return self._db.execute("SELECT 1 FROM sqlite_master WHERE name = 'meta'").fetchone() is not None

    def _migrate(self, version: int) -> None:
        """Inside the opening transaction: bring a state file of an older fabricd up to SCHEMA_VERSION."""
        if version < 2 and self.dialect == "sqlite":  # PostgreSQL support began at schema 2
            columns = {r[1] for r in self._db.execute("PRAGMA table_info(actions)").fetchall()}
            if "key" not in columns:
                self._db.execute("ALTER TABLE actions ADD COLUMN key TEXT")
        if version < 3:
            big = "INTEGER" if self.dialect == "sqlite" else "BIGINT"
            self._db.execute(f"ALTER TABLE actions ADD COLUMN token {big}")
        self._db.execute("UPDATE meta SET value = ? WHERE key = 'schema'", (str(SCHEMA_VERSION),))

    def close(self) -> None:
        with self._lock:
            self._db.close()
        with self._claim_lock:
            if self._claimer is not None:
                self._claimer.close()

    @contextmanager
    def tx(self) -> Iterator[Db]:
        """One atomic unit: everything inside commits together or not at all. Nested calls (every write method
        opens one) join the outermost, so a caller can make several writes one transaction."""
        with self._lock:
            if self._depth:
                self._depth += 1
                try:
                    yield self._db
                finally:
                    self._depth -= 1
                return
            try:
                self._db.execute("BEGIN")
            except StateError as e:
                self.writes.failed(e)
                raise
            self._depth = 1
            try:
                token = FENCE.get()
                if token is not None:
                    self._check_fence(token)
                yield self._db
            except BaseException as e:
                with contextlib.suppress(StateError):  # a lost connection has rolled back already
                    self._db.execute("ROLLBACK")
                if isinstance(e, StateError) and not isinstance(e, ConflictError | FencedError):
                    self.writes.failed(e)
                raise
            finally:
                self._depth = 0
            try:
                self._db.execute("COMMIT")
            except StateError as e:
                self.writes.failed(e)
                raise
            self.writes.ok()

    def _check_fence(self, token: int) -> None:
        """Inside a transaction: the state still names `token` as the leader's, or FencedError. On PostgreSQL the
        leader row is share-locked until the commit, so a new leader's claim waits for this write to end and reads
        it (or ends it: an old leader stuck in a write does not hold the claim, claim_leader), or this write sees the
        claim and writes nothing (SQLite serializes writers anyway)."""
        lock = " FOR SHARE" if self.dialect == "postgresql" else ""
        row = self._db.execute(f"SELECT holder, token FROM leader WHERE id = 1{lock}").fetchone()
        if row is None or int(row[1]) != token:
            who = "nobody" if row is None else f"{row[0]} (token {row[1]})"
            raise FencedError(f"fenced: the state names {who} as leader, not this instance's token {token}; "
                              "nothing written, this instance steps down")  # fmt: skip

    def _one(self, sql: str, args: tuple[Any, ...] = ()) -> Row | None:
        with self._lock:
            row: Row | None = self._db.execute(sql, args).fetchone()
            return row

    def _all(self, sql: str, args: tuple[Any, ...] = ()) -> list[Row]:
        with self._lock:
            return list(self._db.execute(sql, args).fetchall())

    def _records(self, table: str, decode: Callable[[Row], R], sql: str, args: tuple[Any, ...] = ()) -> list[R]:
        """The rows of `sql` as records; a row that cannot be decoded is quarantined, never raised."""
        return dec.decode_rows(self.quarantine, table, self._all(sql, args), decode)

    def _record(self, table: str, decode: Callable[[Row], R], sql: str, args: tuple[Any, ...] = ()) -> R | None:
        found = self._records(table, decode, sql, args)
        return found[0] if found else None

    def scan(self) -> list[Quarantined]:
        """Decode every record once (the service's start): what cannot be decoded is quarantined and listed from
        the first health check on, not only once something reads it."""
        for c in dec.CODECS:
            self._records(c.table, c.decode, c.select)
        self.mode_override()
        return self.quarantine.entries()

    # --- settings changed at run time ---------------------------------------------------------------------
    def mode_override(self) -> tuple[str, str, int] | None:
        """The remediation mode an admin set at run time: (mode, actor, when), or None (fabricd.yaml's holds)."""
        row = self._one("SELECT value FROM meta WHERE key = 'mode'")
        if row is None:
            return None
        try:
            mode, actor, ts = json.loads(dec.text(row, "value"))
            if not (isinstance(mode, str) and isinstance(actor, str) and isinstance(ts, int)):
                raise ValueError(f"{mode!r}, {actor!r}, {ts!r}")
        except (RowError, ValueError, TypeError) as e:
            self.quarantine.note("meta", "mode", f"not [mode, actor, time]: {e}")  # fabricd.yaml's mode holds
            return None
        self.quarantine.decoded("meta", "mode")
        return mode, actor, ts

    def set_mode(self, mode: str, actor: str, why: str, now: int) -> None:
        with self.tx() as db:
            db.execute(
                "INSERT INTO meta (key, value) VALUES ('mode', ?)"
                " ON CONFLICT(key) DO UPDATE SET value = excluded.value",
                (json.dumps([mode, actor, now]),),
            )
            db.execute(
                "INSERT INTO audit (ts, what, why, mode, actor) VALUES (?, ?, ?, ?, ?)",
                (now, f"remediation mode set to {mode}", why, mode, actor),
            )

    # --- the leader (hot standby) ----------------------------------------------------------------------------
    def claim_leader(self, holder: str, token: int, now: int) -> bool:
        """Record a new leader and its fencing token; False when the state already names a newer token (this
        instance took a lease that a newer leader has since taken over). Blocking, and thread-safe: the service
        calls it off its event loop.

        On PostgreSQL it never waits on an old leader: every fenced write share-locks the leader row until its
        commit (`_check_fence`), so an old leader paused inside one (SIGSTOP, a frozen VM) would hold the claim for
        as long as the pause. The claim waits CLAIM_LOCK_WAIT for the row, then ends the sessions holding it
        (pg_terminate_backend: their transactions roll back, nothing of them is written) and claims again. It runs
        on a session of its own, so the store's other callers do not queue behind it."""
        if self.dialect != "postgresql":
            with self.tx() as db:
                return _claim(db, holder, token, now)
        with self._claim_lock:
            if self._claimer is None:
                url, password, name = self._reach
                self._claimer = connect(None, url, password, name=name)
            db, deadline = self._claimer, time.monotonic() + CLAIM_DEADLINE_S
            while True:
                db.execute("BEGIN")
                try:
                    db.execute(f"SET LOCAL lock_timeout = '{int(CLAIM_LOCK_WAIT_S * 1000)}ms'")
                    won = _claim(db, holder, token, now)
                    db.execute("COMMIT")
                    return won
                except LockTimeoutError:
                    with contextlib.suppress(StateError):
                        db.execute("ROLLBACK")
                    if time.monotonic() >= deadline:
                        raise
                    _end_lockers(db, holder)
                except BaseException:
                    with contextlib.suppress(StateError):
                        db.execute("ROLLBACK")
                    raise

    def leader(self) -> tuple[str, int] | None:
        """(holder, fencing token) of the leader the state knows, or None (never led by an HA instance)."""
        row = self._one("SELECT holder, token FROM leader WHERE id = 1")
        return None if row is None else (str(row["holder"]), int(row["token"]))

    # --- page sessions -------------------------------------------------------------------------------------
    # In the state, not in one process: a restart or a standby taking over keeps people logged in, and revoking
    # the token a session was opened with ends the session. The session id is kept hashed, like tokens.
    def add_page_session(
        self, sid_hash: str, actor: str, role: str, csrf: str, expires_ts: int, token_hash: str | None, now: int
    ) -> None:
        with self.tx() as db:
            db.execute("DELETE FROM page_sessions WHERE expires_ts < ?", (now,))
            db.execute(
                "INSERT INTO page_sessions (sid_hash, actor, role, csrf, expires_ts, token_hash)"
                " VALUES (?, ?, ?, ?, ?, ?)",
                (sid_hash, actor, role, csrf, expires_ts, token_hash),
            )

    def page_session(self, sid_hash: str, now: int) -> tuple[str, str, str] | None:
        """(actor, role, csrf) of a live session: not expired, and its token (if it was opened with a user token)
        not revoked."""
        row = self._one(
            "SELECT s.actor, s.role, s.csrf FROM page_sessions s LEFT JOIN tokens t ON t.hash = s.token_hash"
            " WHERE s.sid_hash = ? AND s.expires_ts >= ?"
            " AND (s.token_hash IS NULL OR (t.id IS NOT NULL AND t.revoked_ts IS NULL))",
            (sid_hash, now),
        )
        return None if row is None else (str(row["actor"]), str(row["role"]), str(row["csrf"]))

    def drop_page_session(self, sid_hash: str) -> None:
        with self.tx() as db:
            db.execute("DELETE FROM page_sessions WHERE sid_hash = ?", (sid_hash,))

    # --- API tokens ------------------------------------------------------------------------------------------
    def add_token(self, user: str, role: str, token_hash: str, now: int, created_by: str) -> ApiToken:
        with self.tx() as db:
            tid = _new_id(db.execute(
                'INSERT INTO tokens ("user", role, hash, created_ts, created_by) VALUES (?, ?, ?, ?, ?) RETURNING id',
                (user, role, token_hash, now, created_by),
            ))  # fmt: skip
            db.execute(
                "INSERT INTO audit (ts, what, why, actor) VALUES (?, ?, ?, ?)",
                (now, f"token {tid} created", f"user {user}, role {role}", created_by),
            )
        return ApiToken(tid, user, role, now, created_by, None)

    def token_by_hash(self, token_hash: str) -> ApiToken | None:
        """The live (not revoked) token with this hash."""
        row = self._one(
            'SELECT id, "user", role, created_ts, created_by, revoked_ts FROM tokens'
            " WHERE hash = ? AND revoked_ts IS NULL",
            (token_hash,),
        )
        found = dec.decode_rows(self.quarantine, "tokens", [row] if row else [], dec.api_token)
        return found[0] if found else None

    def api_tokens(self) -> list[ApiToken]:
        sql = 'SELECT id, "user", role, created_ts, created_by, revoked_ts FROM tokens ORDER BY id'
        return self._records("tokens", dec.api_token, sql)

    def revoke_token(self, token_id: int, now: int, actor: str) -> bool:
        """True when this call revoked it; False when there is no such live token (revoking twice is a no-op)."""
        with self.tx() as db:
            cur = db.execute("UPDATE tokens SET revoked_ts = ? WHERE id = ? AND revoked_ts IS NULL", (now, token_id))
            if cur.rowcount:
                db.execute(
                    "INSERT INTO audit (ts, what, why, actor) VALUES (?, ?, ?, ?)",
                    (now, f"token {token_id} revoked", "revoked", actor),
                )
            return bool(cur.rowcount)

    # --- audit -----------------------------------------------------------------------------------------------
    def audit(
        self,
        ts: int,
        what: str,
        why: str,
        *,
        mode: str | None = None,
        actor: str = "fabricd",
        finding_id: int | None = None,
        action_id: int | None = None,
        ticket_id: int | None = None,
    ) -> None:
        with self.tx() as db:
            db.execute(
                "INSERT INTO audit (ts, what, why, mode, actor, finding_id, action_id, ticket_id)"
                " VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                (ts, what, why, mode, actor, finding_id, action_id, ticket_id),
            )

    def audit_log(self, limit: int = 200, offset: int = 0) -> list[AuditEntry]:
        return self._records("audit", dec.audit_entry, "SELECT * FROM audit ORDER BY id DESC LIMIT ? OFFSET ?",
                             (limit, offset))  # fmt: skip

    # --- findings --------------------------------------------------------------------------------------------
    def upsert_finding(self, f: Finding, fault: str, now: int) -> tuple[int, bool]:
        """Store a finding (or refresh the same incident); returns (id, new)."""
        key = json.dumps(list(f.key))
        data = json.dumps(f.to_dict(), sort_keys=True)
        with self.tx() as db:
            row = db.execute("SELECT id, detected_ts FROM findings WHERE key = ?", (key,)).fetchone()
            if row is None:
                # The same incident dated a little differently: a standby's detectors, now the leader's, hold their
                # own samples and may date it later (a flap period, a sync) than the instance that recorded it. Cleared
                # too: an instance restarted without the incident's history cleared it, and the standby that takes
                # over after it still sees it (chaos seed 3133: a BGP flap recorded twice, 67 s apart).
                row = db.execute(
                    "SELECT id, detected_ts FROM findings WHERE fault = ? AND kind = ?"
                    " AND start_ts BETWEEN ? AND ? ORDER BY status = 'active' DESC, id DESC LIMIT 1",
                    (fault, f.kind, f.start_ts - SAME_INCIDENT_NS, f.start_ts + SAME_INCIDENT_NS),
                ).fetchone()
                if row is not None:
                    db.execute("UPDATE findings SET key = ? WHERE id = ?", (key, row["id"]))
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
            return _new_id(cur), True

    def has_finding(self, f: Finding, fault: str) -> bool:
        """Whether this incident is recorded already (active or cleared, dated the same or a little apart, as
        upsert_finding matches it)."""
        with self.tx() as db:
            if db.execute("SELECT 1 FROM findings WHERE key = ?", (json.dumps(list(f.key)),)).fetchone() is not None:
                return True
            return (
                db.execute(
                    "SELECT 1 FROM findings WHERE fault = ? AND kind = ? AND start_ts BETWEEN ? AND ?",
                    (fault, f.kind, f.start_ts - SAME_INCIDENT_NS, f.start_ts + SAME_INCIDENT_NS),
                ).fetchone()
                is not None
            )

    def clear_findings_not_seen_since(self, ts: int) -> int:
        with self.tx() as db:
            cur = db.execute(
                "UPDATE findings SET status = 'cleared' WHERE status = 'active' AND last_seen_ts < ?", (ts,)
            )
            return cur.rowcount

    def findings(self, status: str | None = None, limit: int = 500, offset: int = 0) -> list[StoredFinding]:
        where, args = (" WHERE status = ?", (status,)) if status else ("", ())
        sql = f"SELECT id, fault, status, last_seen_ts, data FROM findings{where} ORDER BY id DESC LIMIT ? OFFSET ?"
        return self._records("findings", dec.finding, sql, (*args, limit, offset))

    def finding_counts(self) -> dict[tuple[str, str], int]:
        rows = self._all("SELECT kind, status, COUNT(*) AS n FROM findings GROUP BY kind, status")
        return _counts(rows)

    # --- tickets ---------------------------------------------------------------------------------------------
    def open_ticket_ids(self) -> set[int]:
        return {int(r[0]) for r in self._all("SELECT id FROM tickets WHERE status = 'open'")}

    def open_ticket(self, fault: str) -> Ticket | None:
        row = self._one("SELECT * FROM tickets WHERE fault = ? AND status = 'open'", (fault,))
        return self._one_ticket(row)

    def latest_ticket(self, fault: str) -> Ticket | None:
        row = self._one("SELECT * FROM tickets WHERE fault = ? ORDER BY id DESC LIMIT 1", (fault,))
        return self._one_ticket(row)

    def ticket(self, ticket_id: int) -> Ticket | None:
        row = self._one("SELECT * FROM tickets WHERE id = ?", (ticket_id,))
        return self._one_ticket(row)

    def tickets(self, status: str | None = None, limit: int = 500, offset: int = 0) -> list[Ticket]:
        if status:
            rows = self._all(
                "SELECT * FROM tickets WHERE status = ? ORDER BY id DESC LIMIT ? OFFSET ?", (status, limit, offset)
            )
        else:
            rows = self._all("SELECT * FROM tickets ORDER BY id DESC LIMIT ? OFFSET ?", (limit, offset))
        return dec.decode_rows(self.quarantine, "tickets", rows, dec.ticket)

    def _one_ticket(self, row: Row | None) -> Ticket | None:
        found = dec.decode_rows(self.quarantine, "tickets", [row] if row else [], dec.ticket)
        return found[0] if found else None

    def create_ticket(
        self, fault: str, kind: str, device: str, port: str | None, title: str, body: dict[str, Any], now: int,
        *, escalation: bool = False,
    ) -> Ticket:  # fmt: skip
        with self.tx() as db:
            try:
                tid = _new_id(db.execute(
                    "INSERT INTO tickets (fault, kind, device, port, status, title, body, escalation, created_ts,"
                    " updated_ts) VALUES (?, ?, ?, ?, 'open', ?, ?, ?, ?, ?) RETURNING id",
                    (fault, kind, device, port, title, json.dumps(body, sort_keys=True), int(escalation), now, now),
                ))  # fmt: skip
            except ConflictError:
                raise ConflictError(f"tickets: an open ticket for {fault} is in the state already but was not read "
                                    "(quarantined? see `fabricd status`); nothing written") from None  # fmt: skip
        t = self.ticket(tid)
        assert t is not None
        return t

    def update_ticket(
        self, ticket_id: int, now: int, *, body: dict[str, Any] | None = None, title: str | None = None,
        recurrence: bool = False, reopen: bool = False, external_ref: str | None = None,
    ) -> Ticket:  # fmt: skip
        with self.tx() as db:
            if body is not None:
                db.execute("UPDATE tickets SET body = ? WHERE id = ?", (json.dumps(body, sort_keys=True), ticket_id))
            if title is not None:
                db.execute("UPDATE tickets SET title = ? WHERE id = ?", (title, ticket_id))
            if recurrence:
                db.execute("UPDATE tickets SET recurrences = recurrences + 1 WHERE id = ?", (ticket_id,))
            if reopen:
                db.execute(
                    "UPDATE tickets SET status = 'open', resolved_ts = NULL, resolved_by = NULL WHERE id = ?",
                    (ticket_id,),
                )
            if external_ref is not None:
                db.execute("UPDATE tickets SET external_ref = ? WHERE id = ?", (external_ref, ticket_id))
            # The version (updated_ts) always moves forward, even within one clock tick or when the clock steps
            # back: backends key idempotency on it and unsynced() compares it with what they last took.
            db.execute("UPDATE tickets SET updated_ts = GREATEST(?, updated_ts + 1) WHERE id = ?", (now, ticket_id))
        t = self.ticket(ticket_id)
        assert t is not None
        return t

    def resolve_ticket(self, ticket_id: int, now: int, by: str) -> Ticket | None:
        with self.tx() as db:
            db.execute(
                "UPDATE tickets SET status = 'resolved', resolved_ts = ?, resolved_by = ?,"
                " updated_ts = GREATEST(?, updated_ts + 1) WHERE id = ? AND status = 'open'",
                (now, by, now, ticket_id),
            )
        return self.ticket(ticket_id)

    def mark_synced(self, ticket_id: int, version_ts: int, external_ref: str | None) -> None:
        with self.tx() as db:
            db.execute(
                "UPDATE tickets SET synced_ts = ?, external_ref = COALESCE(?, external_ref) WHERE id = ?",
                (version_ts, external_ref, ticket_id),
            )

    def unsynced(self) -> list[Ticket]:
        """Tickets whose latest version the backend has not taken yet (it was down, or we restarted)."""
        rows = self._all("SELECT * FROM tickets WHERE synced_ts IS NULL OR synced_ts < updated_ts ORDER BY id")
        return dec.decode_rows(self.quarantine, "tickets", rows, dec.ticket)

    # --- actions ---------------------------------------------------------------------------------------------
    def add_action(
        self, op: str, device: str, port: str, mode: str, status: ActionStatus, reason: str, now: int,
        *, finding_id: int | None = None, ticket_id: int | None = None, key: str | None = None,
    ) -> Action:  # fmt: skip
        """Record a new action; with a `key` already recorded, the action that has it (nothing is added). Under a
        fencing token (`fenced`), the action carries it."""
        with self.tx() as db:
            if key is not None and (row := db.execute("SELECT * FROM actions WHERE key = ?", (key,)).fetchone()):
                return self._decoded_action(row)
            aid = _new_id(db.execute(
                "INSERT INTO actions (op, device, port, mode, status, reason, finding_id, ticket_id, created_ts,"
                " updated_ts, key, token) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) RETURNING id",
                (op, device, port, mode, status, reason, finding_id, ticket_id, now, now, key, FENCE.get()),
            ))  # fmt: skip
            a = self.action(aid)
        assert a is not None
        return a

    def set_action(self, action_id: int, status: ActionStatus, now: int, detail: str | None = None) -> Action:
        with self.tx() as db:
            db.execute("UPDATE actions SET status = ?, updated_ts = ? WHERE id = ?", (status, now, action_id))
            if detail is not None:
                db.execute("UPDATE actions SET detail = ? WHERE id = ?", (detail, action_id))
        a = self.action(action_id)
        assert a is not None
        return a

    def finish_action(
        self, action_id: int, status: ActionStatus, now: int, detail: str, probation_until: int
    ) -> Action:
        """An action's end and what it did to the port, in one transaction: between an admin change marked done and
        the port recorded as held down, the guard would not count the port and could let one more go down."""
        with self.tx() as db:
            sql = "UPDATE actions SET status = ?, updated_ts = ?, detail = ? WHERE id = ?"
            db.execute(sql, (status, now, detail, action_id))
            a = self._decoded_action(db.execute("SELECT * FROM actions WHERE id = ?", (action_id,)).fetchone())
            if status == "done" and a.op == "disable":
                _hold(db, a.device, a.port, a.id, a.ticket_id, now)
            elif status == "done" and a.op == "enable":
                _release(db, a.device, a.port, probation_until, a.ticket_id)
        return a

    def retoken(self, action_id: int, token: int) -> Action:
        """A new leader takes over an action an old one began and found nothing of it on the switch: it commits under
        its own token (the old transaction's name is ended, so the old leader's late commands find nothing)."""
        with self.tx() as db:
            db.execute("UPDATE actions SET token = ? WHERE id = ?", (token, action_id))
        a = self.action(action_id)
        assert a is not None
        return a

    def link_action_ticket(self, action_id: int, ticket_id: int) -> None:
        with self.tx() as db:
            db.execute("UPDATE actions SET ticket_id = ? WHERE id = ?", (ticket_id, action_id))

    def _decoded_action(self, row: Row) -> Action:
        """Inside a transaction, an action fabricd is about to act on: one that cannot be decoded stops the
        transaction (quarantined; nothing written), it is not guessed at."""
        found = dec.decode_rows(self.quarantine, "actions", [row], dec.action)
        if not found:
            raise StateError(f"actions row {dec.row_id(row, 'id')} cannot be decoded: quarantined, nothing written")
        return found[0]

    def action(self, action_id: int) -> Action | None:
        return self._record("actions", dec.action, "SELECT * FROM actions WHERE id = ?", (action_id,))

    def actions(self, status: str | None = None, limit: int = 500, offset: int = 0) -> list[Action]:
        if status:
            rows = self._all(
                "SELECT * FROM actions WHERE status = ? ORDER BY id DESC LIMIT ? OFFSET ?", (status, limit, offset)
            )
        else:
            rows = self._all("SELECT * FROM actions ORDER BY id DESC LIMIT ? OFFSET ?", (limit, offset))
        return dec.decode_rows(self.quarantine, "actions", rows, dec.action)

    def actions_in(self, *statuses: ActionStatus, op: str | None = None) -> list[Action]:
        """Every action in these statuses (no limit: remediation decides from all of them, oldest first)."""
        q = ",".join("?" * len(statuses))
        sql = f"SELECT * FROM actions WHERE status IN ({q})" + (" AND op = ?" if op else "") + " ORDER BY id"
        return self._records("actions", dec.action, sql, (*statuses, *([op] if op else [])))

    def actions_on(self, device: str, since_ts: int, op: str) -> list[Action]:
        """Every `op` action on `device` created at or after `since_ts` (no limit), oldest first."""
        sql = "SELECT * FROM actions WHERE device = ? AND op = ? AND created_ts >= ? ORDER BY id"
        return self._records("actions", dec.action, sql, (device, op, since_ts))

    def count_actions(self, device: str, port: str, op: str, *, after_id: int) -> int:
        """How many `op` actions on the port were recorded after action `after_id`."""
        sql = "SELECT COUNT(*) FROM actions WHERE device = ? AND port = ? AND op = ? AND id > ?"
        row = self._one(sql, (device, port, op, after_id))
        return int(row[0]) if row else 0

    def open_action(self, device: str, port: str) -> Action | None:
        q = ",".join("?" * len(OPEN_ACTION))
        sql = f"SELECT * FROM actions WHERE device = ? AND port = ? AND status IN ({q}) ORDER BY id DESC LIMIT 1"
        return self._record("actions", dec.action, sql, (device, port, *OPEN_ACTION))

    def actions_since(self, ts: int, op: str = "disable") -> int:
        row = self._one(
            "SELECT COUNT(*) FROM actions WHERE op = ? AND created_ts >= ? AND status IN ('running', 'done')",
            (op, ts),
        )
        return int(row[0]) if row else 0

    def action_counts(self) -> dict[tuple[str, str], int]:
        return _counts(self._all("SELECT op, status, COUNT(*) AS n FROM actions GROUP BY op, status"))

    # --- disabled ports and probation ------------------------------------------------------------------------
    def mark_disabled(self, device: str, port: str, action_id: int, ticket_id: int | None, now: int) -> None:
        with self.tx() as db:
            _hold(db, device, port, action_id, ticket_id, now)

    def mark_enabled(self, device: str, port: str, probation_until: int, ticket_id: int | None) -> None:
        with self.tx() as db:
            _release(db, device, port, probation_until, ticket_id)

    def drop_hold(self, device: str, port: str) -> None:
        """The port is no longer held down by fabricd (reconcile found it up); no probation starts."""
        with self.tx() as db:
            db.execute("DELETE FROM disabled_ports WHERE device = ? AND port = ?", (device, port))
            db.execute("DELETE FROM reapply_refused WHERE device = ? AND port = ?", (device, port))

    def refused_reapplies(self) -> list[RefusedReapply]:
        """The holds to re-apply (up again, the guard refusing): only of holds that are still the same hold."""
        return self._records(
            "reapply_refused", dec.refused_reapply,
            "SELECT r.* FROM reapply_refused r JOIN disabled_ports d ON d.device = r.device AND d.port = r.port"
            " AND d.action_id = r.action_id ORDER BY r.device, r.port",
        )  # fmt: skip

    def refuse_reapply(self, device: str, port: str, action_id: int, rule: str, reason: str, now: int) -> None:
        """Record (or update) the guard's refusal to re-apply the hold `action_id` on the port."""
        with self.tx() as db:
            db.execute(
                "INSERT INTO reapply_refused VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT (device, port) DO UPDATE SET"
                " action_id = excluded.action_id, rule = excluded.rule, reason = excluded.reason,"
                " since_ts = excluded.since_ts",
                (device, port, action_id, rule, reason, now),
            )

    def disabled_ports(self) -> list[DisabledPort]:
        return self._records("disabled_ports", dec.disabled_port, "SELECT * FROM disabled_ports ORDER BY since_ts")

    def is_disabled(self, device: str, port: str) -> bool:
        return self._one("SELECT 1 FROM disabled_ports WHERE device = ? AND port = ?", (device, port)) is not None

    def probation(self, device: str, port: str, now: int) -> int | None:
        """The ticket of a port still on probation at `now`, else None."""
        row = self._one(
            "SELECT ticket_id FROM probation WHERE device = ? AND port = ? AND until_ts > ?", (device, port, now)
        )
        return None if row is None else row[0] if isinstance(row[0], int) else 0

    # --- planned maintenance (maintenance.py) -------------------------------------------------------------------
    def add_drain(
        self, kind: DrainKind, target: str, ports: list[str], reason: str, actor: str, shut: bool,
        until_ts: int | None, steps: list[str], done: int, now: int,
    ) -> DrainRecord:  # fmt: skip
        with self.tx() as db:
            cur = db.execute(
                "INSERT INTO maintenance (kind, target, ports, reason, actor, shut, until_ts, state, steps, done,"
                " created_ts, updated_ts) VALUES (?, ?, ?, ?, ?, ?, ?, 'draining', ?, ?, ?, ?) RETURNING id",
                (kind, target, json.dumps(ports), reason, actor, int(shut), until_ts, json.dumps(steps), done, now,
                 now),
            )  # fmt: skip
            new = self.drain(_new_id(cur))
        assert new is not None
        return new

    def set_drain(self, drain_id: int, now: int, *, state: str | None = None, done: int | None = None,
                  detail: str | None = None) -> DrainRecord:  # fmt: skip
        """Record a step taken (`done`) or a new state, before the next step is taken."""
        with self.tx() as db:
            db.execute(
                "UPDATE maintenance SET state = COALESCE(?, state), done = COALESCE(?, done),"
                " detail = COALESCE(?, detail), updated_ts = ? WHERE id = ?",
                (state, done, detail, now, drain_id),
            )
            row = self.drain(drain_id)
        assert row is not None
        return row

    def drain(self, drain_id: int) -> DrainRecord | None:
        return self._record("maintenance", dec.drain, "SELECT * FROM maintenance WHERE id = ?", (drain_id,))

    def drains(self, states: tuple[str, ...] | None = None, limit: int = 500) -> list[DrainRecord]:
        args: tuple[Any, ...] = (limit,)
        if states is None:
            sql = "SELECT * FROM maintenance ORDER BY id DESC LIMIT ?"
        else:
            q = ",".join("?" * len(states))
            sql, args = f"SELECT * FROM maintenance WHERE state IN ({q}) ORDER BY id DESC LIMIT ?", (*states, limit)
        return self._records("maintenance", dec.drain, sql, args)

    def drain_counts(self) -> dict[str, int]:
        return {str(r[0]): int(r[1]) for r in self._all("SELECT state, COUNT(*) FROM maintenance GROUP BY state")}

    # --- carrier-transitions as last seen (carrier_watch.py) ------------------------------------------------------
    def carrier_seen(self) -> tuple[dict[tuple[str, str], tuple[int, int]], tuple[int, frozenset[str]] | None]:
        """Each port's last carrier-transitions value written, (device, port) -> (value, ts of its sample), and the
        last save round (its time and the switches not heard fresh then), or None before the first."""
        rows = self._records("carrier_seen", dec.carrier_seen, "SELECT * FROM carrier_seen")
        row = self._one("SELECT value FROM meta WHERE key = 'carrier_watch'")
        saved = None
        if row is not None:
            try:
                doc = json.loads(dec.text(row, "value"))
                saved = (int(doc["ts"]), frozenset(str(d) for d in doc["unsure"]))
            except (RowError, ValueError, TypeError, KeyError) as e:
                self.quarantine.note("meta", "carrier_watch", f"not {{ts, unsure}}: {e}")  # rows' own times hold
            else:
                self.quarantine.decoded("meta", "carrier_watch")
        return {(d, p): (v, t) for d, p, v, t in rows}, saved

    def save_carrier_seen(self, rows: list[tuple[str, str, int, int]], now: int, unsure: list[str]) -> None:
        """Write the ports' values that changed (device, port, value, sample ts) and the round: as of `now`, every
        port's row holds, except on the switches in `unsure` (not heard fresh). One transaction, rows in batches."""
        with self.tx() as db:
            for i in range(0, len(rows), 200):
                batch = rows[i : i + 200]
                db.execute(
                    "INSERT INTO carrier_seen (device, port, value, ts) VALUES "
                    + ", ".join("(?, ?, ?, ?)" for _ in batch)
                    + " ON CONFLICT (device, port) DO UPDATE SET value = excluded.value, ts = excluded.ts",
                    [x for r in batch for x in r],
                )
            db.execute("INSERT INTO meta (key, value) VALUES ('carrier_watch', ?) ON CONFLICT (key) DO UPDATE SET"
                       " value = excluded.value", (json.dumps({"ts": now, "unsure": sorted(unsure)}),))  # fmt: skip

    def prune(self, before_ts: int) -> int:
        with self.tx() as db:
            n = db.execute("DELETE FROM findings WHERE status = 'cleared' AND last_seen_ts < ?", (before_ts,)).rowcount
            n += db.execute("DELETE FROM audit WHERE ts < ?", (before_ts,)).rowcount
            n += db.execute("DELETE FROM probation WHERE until_ts < ?", (before_ts,)).rowcount
        return n


CLAIM_LOCK_WAIT_S = 0.1  # a fenced write holds the leader row for milliseconds; longer, its writer is stuck
CLAIM_DEADLINE_S = 10.0  # then the claim fails (the takeover is retried): sessions it cannot end outlive their limit


def _claim(db: Db, holder: str, token: int, now: int) -> bool:
    """Inside a transaction: the leader row names `holder` and `token` unless it names a newer token."""
    cur = db.execute(
        "INSERT INTO leader (id, holder, token, since_ts) VALUES (1, ?, ?, ?) ON CONFLICT (id) DO UPDATE SET"
        " holder = excluded.holder, token = excluded.token, since_ts = excluded.since_ts"
        " WHERE leader.token < excluded.token",
        (holder, token, now),
    )
    if cur.rowcount:
        db.execute(
            "INSERT INTO audit (ts, what, why, actor) VALUES (?, ?, ?, ?)",
            (now, f"{holder} leads", f"took the leader lease (fencing token {token})", holder),
        )
    return bool(cur.rowcount)


def _end_lockers(db: Db, holder: str) -> None:
    """PostgreSQL: end the other instances' sessions that hold the leader row (an old leader stuck inside a fenced
    write). Not this instance's own (same application_name). Without the right to (another database role, not a
    member of pg_signal_backend), the server's idle_in_transaction_session_timeout ends them (state_db)."""
    try:
        rows = db.execute(
            "SELECT a.pid, a.application_name, pg_terminate_backend(a.pid) FROM pg_stat_activity a WHERE a.pid IN"
            " (SELECT l.pid FROM pg_locks l WHERE l.locktype = 'relation' AND l.relation = 'leader'::regclass AND"
            " l.granted) AND a.pid <> pg_backend_pid() AND a.application_name <> current_setting('application_name')"
        ).fetchall()
    except StateError as e:
        log.warning("claiming the lead: could not end the sessions holding the leader row (%s); waiting for the"
                    " server to end them", e)  # fmt: skip
        return
    for pid, name, _ in rows:
        log.warning("claiming the lead for %s: ended PostgreSQL session %s (%s), stuck in a write holding the leader"
                    " row", holder, pid, name or "unnamed")  # fmt: skip


def _new_id(cur: Result) -> int:
    row = cur.fetchone()
    return int(row[0])


def _counts(rows: list[Row]) -> dict[tuple[str, str], int]:
    """(label, label) -> count, for /metrics: a group whose labels are not text (a damaged row) is left out; the
    row itself is listed by the quarantine."""
    return {(r[0], r[1]): int(r[2]) for r in rows if isinstance(r[0], str) and isinstance(r[1], str)}


def _hold(db: Db, device: str, port: str, action_id: int, ticket_id: int | None, now: int) -> None:
    """Inside a transaction: the port is held down by fabricd (and no longer on probation)."""
    db.execute(
        "INSERT INTO disabled_ports VALUES (?, ?, ?, ?, ?) ON CONFLICT (device, port) DO UPDATE SET"
        " action_id = excluded.action_id, ticket_id = excluded.ticket_id, since_ts = excluded.since_ts",
        (device, port, action_id, ticket_id, now),
    )
    db.execute("DELETE FROM probation WHERE device = ? AND port = ?", (device, port))


def _release(db: Db, device: str, port: str, probation_until: int, ticket_id: int | None) -> None:
    """Inside a transaction: the port is back up, on probation until `probation_until`."""
    db.execute("DELETE FROM disabled_ports WHERE device = ? AND port = ?", (device, port))
    db.execute("DELETE FROM reapply_refused WHERE device = ? AND port = ?", (device, port))
    db.execute(
        "INSERT INTO probation VALUES (?, ?, ?, ?) ON CONFLICT (device, port) DO UPDATE SET"
        " until_ts = excluded.until_ts, ticket_id = excluded.ticket_id",
        (device, port, probation_until, ticket_id),
    )


def open_state(cfg: ServiceConfig, *, owner: bool = False, new_state: bool = False, force: bool = False) -> StateStore:
    """The state store fabricd.yaml names: PostgreSQL at state.url (password from state.password), else the file.
    `owner`: the service's own store (the SQLite file's lock); `new_state`: under that lock, set an empty or corrupt
    SQLite file aside (a readable one only with `force`) and start empty (fabricd then adopts what the switches'
    marks say it did)."""
    password = None
    if cfg.state.password is not None:
        password = read_secret(cfg.state.password, "state.password", cfg.source).get_secret_value()
    if cfg.state.url:
        if new_state:
            raise StateError("--new-state sets a SQLite state file aside; a shared PostgreSQL state is not discarded")
        name = f"fabricd {cfg.ha.instance or default_instance()}"  # who holds what, in pg_stat_activity
        store = StateStore(url=cfg.state.url, password=password, owner=owner, name=name)
        if owner:
            store.scan()
        return store
    store = StateStore(cfg.state.path, owner=owner, new_state=new_state, force=force)
    if owner:
        store.scan()  # rows that cannot be decoded: quarantined and listed from the start (state_decode.py)
    if owner and store.started_empty:
        log.warning("state started empty: %s; ports the switches' marks say fabricd shut are adopted",
                    store.started_empty)  # fmt: skip
    return store
