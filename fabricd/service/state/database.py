"""The unit of work over the state's one database: every repository (findings.py, actions.py, tickets.py, ...)
reads and writes through one `Database`, and a write joins the transaction open in its thread, so what a caller
wraps in `with state.transaction():` commits together or not at all, fenced by the leader's token (fence.py).

One connection guarded by a lock: the scheduler, the remediation worker threads and the API share it, and every
call is a short transaction. Times are unix nanoseconds. Secrets never reach the database.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TypeVar

from . import fence
from .db import ConflictError, Db, FencedError, Row, StateError
from .postgres import PostgresDb
from .rows import Codec, Quarantine, decode_rows
from .sqlite import SqliteDb

log = logging.getLogger("fabricd.state")
R = TypeVar("R")


def connect(
    path: Path | None, url: str | None, password: str | None, *, owner: bool = False, new_state: bool = False,
    force: bool = False, name: str = "fabricd",
) -> Db:  # fmt: skip
    if url:
        return PostgresDb(url, password, name=name)
    assert path is not None
    return SqliteDb(path, owner=owner, new_state=new_state, force=force)


class Database:
    """One connection, its lock, the transaction open in the holding thread, whether writes succeed (`writes`) and
    the rows that cannot be decoded (`quarantine`): what every repository shares."""

    def __init__(self, db: Db) -> None:
        self.db = db
        self.dialect = db.dialect
        self.writes = WriteHealth()
        self.quarantine = Quarantine()  # rows that cannot be decoded (rows.py)
        self.lock = threading.RLock()
        self._depth = 0  # nesting of transaction() in the thread that holds the lock

    @contextmanager
    def transaction(self) -> Iterator[Db]:
        """One atomic unit: everything inside commits together or not at all. Nested calls (every write method
        opens one) join the outermost, so a caller can make several writes, of several repositories, one
        transaction. Under a fencing token (`fence.fenced`) it first checks the token is still the leader's."""
        with self.lock:
            if self._depth:
                self._depth += 1
                try:
                    yield self.db
                finally:
                    self._depth -= 1
                return
            try:
                self.db.execute("BEGIN")
            except StateError as e:
                self.writes.failed(e)
                raise
            self._depth = 1
            try:
                token = fence.FENCE.get()
                if token is not None:
                    fence.check(self.db, token)
                yield self.db
            except BaseException as e:
                with contextlib.suppress(StateError):  # a lost connection has rolled back already
                    self.db.execute("ROLLBACK")
                if isinstance(e, StateError) and not isinstance(e, ConflictError | FencedError):
                    self.writes.failed(e)
                raise
            finally:
                self._depth = 0
            try:
                self.db.execute("COMMIT")
            except StateError as e:
                self.writes.failed(e)
                raise
            self.writes.ok()

    def one(self, sql: str, args: tuple[Any, ...] = ()) -> Row | None:
        with self.lock:
            row: Row | None = self.db.execute(sql, args).fetchone()
            return row

    def all(self, sql: str, args: tuple[Any, ...] = ()) -> list[Row]:
        with self.lock:
            return list(self.db.execute(sql, args).fetchall())

    def records(self, codec: Codec[R], sql: str, args: tuple[Any, ...] = ()) -> list[R]:
        """The rows of `sql` as records; a row that cannot be decoded is quarantined, never raised."""
        return decode_rows(self.quarantine, codec, self.all(sql, args))

    def record(self, codec: Codec[R], sql: str, args: tuple[Any, ...] = ()) -> R | None:
        found = self.records(codec, sql, args)
        return found[0] if found else None

    def close(self) -> None:
        with self.lock:
            self.db.close()


class WriteHealth:
    """Whether the state can be written: a write that fails makes the service `failing` (health, the
    fabricd_state_writable metric and its alert) and observe-only, since fabricd acts only with its state written;
    the failure is logged once a minute, not once per write."""

    LOG_EVERY_S = 60.0

    def __init__(self) -> None:
        self.failures = 0
        self.failing_since: float | None = None
        # Must this instance write now? A hot standby need not (it records nothing): a write of its that failed
        # when it led (its session ended by the new leader's claim) says nothing of the state it does not write.
        self.needed: Callable[[], bool] = lambda: True
        self.last_error = ""
        self._logged = -1e18

    @property
    def failing(self) -> bool:
        """A write failed and none has succeeded since, and this instance must write (`needed`)."""
        return self.failing_since is not None and self.needed()

    def failed(self, e: BaseException) -> None:
        self.failures += 1
        self.last_error = str(e)
        mono = time.monotonic()
        if self.failing_since is None:
            self.failing_since = mono
        if mono - self._logged >= self.LOG_EVERY_S:
            self._logged = mono
            log.error("state cannot be written (%d failed writes so far): %s; fabricd takes no action until it can",
                      self.failures, e)  # fmt: skip

    def ok(self) -> None:
        if self.failing_since is not None:
            log.warning("state can be written again after %d failed writes", self.failures)
        self.failing_since = None
