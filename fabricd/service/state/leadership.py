"""The leader (hot standby): which instance leads, under which fencing token. Every write of a leader is conditional
on that token (fence.py); a new leader's claim raises it, so an old leader's late writes are refused."""

from __future__ import annotations

import contextlib
import logging
import threading
import time

from . import audit
from .database import Database, connect
from .db import Db, LockTimeoutError, StateError

log = logging.getLogger("fabricd.state")

CLAIM_LOCK_WAIT_S = 0.1  # a fenced write holds the leader row for milliseconds; longer, its writer is stuck
CLAIM_DEADLINE_S = 10.0  # then the claim fails (the takeover is retried): sessions it cannot end outlive their limit


class Leadership:
    def __init__(self, database: Database, reach: tuple[str | None, str | None, str]) -> None:
        """`reach`: (url, password, name) of the PostgreSQL database, for the claim's session of its own."""
        self._db = database
        self._reach = reach
        self._claimer: Db | None = None  # PostgreSQL: a session of its own for the claim (claim)
        self._claim_lock = threading.Lock()

    def claim(self, holder: str, token: int, now: int) -> bool:
        """Record a new leader and its fencing token; False when the state already names a newer token (this
        instance took a lease that a newer leader has since taken over). Blocking, and thread-safe: the service
        calls it off its event loop.

        On PostgreSQL it never waits on an old leader: every fenced write share-locks the leader row until its
        commit (`fence.check`), so an old leader paused inside one (SIGSTOP, a frozen VM) would hold the claim for
        as long as the pause. The claim waits CLAIM_LOCK_WAIT for the row, then ends the sessions holding it
        (pg_terminate_backend: their transactions roll back, nothing of them is written) and claims again. It runs
        on a session of its own, so the store's other callers do not queue behind it."""
        if self._db.dialect != "postgresql":
            with self._db.transaction() as db:
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

    def current(self) -> tuple[str, int] | None:
        """(holder, fencing token) of the leader the state knows, or None (never led by an HA instance)."""
        row = self._db.one("SELECT holder, token FROM leader WHERE id = 1")
        return None if row is None else (str(row["holder"]), int(row["token"]))

    def close(self) -> None:
        with self._claim_lock:
            if self._claimer is not None:
                self._claimer.close()


def _claim(db: Db, holder: str, token: int, now: int) -> bool:
    """Inside a transaction: the leader row names `holder` and `token` unless it names a newer token."""
    cur = db.execute(
        "INSERT INTO leader (id, holder, token, since_ts) VALUES (1, ?, ?, ?) ON CONFLICT (id) DO UPDATE SET"
        " holder = excluded.holder, token = excluded.token, since_ts = excluded.since_ts"
        " WHERE leader.token < excluded.token",
        (holder, token, now),
    )
    if cur.rowcount:
        audit.write(db, now, f"{holder} leads", f"took the leader lease (fencing token {token})", actor=holder)
    return bool(cur.rowcount)


def _end_lockers(db: Db, holder: str) -> None:
    """PostgreSQL: end the other instances' sessions that hold the leader row (an old leader stuck inside a fenced
    write). Not this instance's own (same application_name). Without the right to (another database role, not a
    member of pg_signal_backend), the server's idle_in_transaction_session_timeout ends them (postgres.py)."""
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
    for row in rows:  # a row unpacked would give its column names (it is a dict): read by name
        log.warning("claiming the lead for %s: ended PostgreSQL session %s (%s), stuck in a write holding the leader"
                    " row", holder, row["pid"], row["application_name"] or "unnamed")  # fmt: skip
