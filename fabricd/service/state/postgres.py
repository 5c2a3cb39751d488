"""The shared state on PostgreSQL (`state.url`): one bounded, named session per store, opened again when the
server ends it outside a transaction."""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from .db import ConflictError, Dialect, LockTimeoutError, Result, StateError, run_script

# Every PostgreSQL session of fabricd's is bounded, so no instance (a paused one included: SIGSTOP, a frozen VM)
# holds another up for long, and none waits on one for long: a lock waited for at most 1 s (an event loop that
# waits longer would miss its lease renewals), a statement at most 10 s, and a transaction left idle (its process
# paused mid-transaction) ended by the server after 5 s, its locks released. A new leader does not wait even that
# long for an old leader's transaction: it ends it (Leadership.claim, leadership.py).
SESSION_LIMITS = {"lock_timeout": "1s", "statement_timeout": "10s", "idle_in_transaction_session_timeout": "5s"}


class _PgRow(dict[str, Any]):
    """A PostgreSQL row addressable like sqlite3.Row: row["name"] and row[0]."""

    def __init__(self, names: list[str], values: Sequence[Any]) -> None:
        super().__init__(zip(names, values, strict=True))
        self._values = tuple(values)

    def __getitem__(self, key: str | int) -> Any:
        return self._values[key] if isinstance(key, int) else super().__getitem__(key)


_PLACEHOLDER = re.compile(r"\?")


class PostgresDb:
    """One session on the shared PostgreSQL, bounded by SESSION_LIMITS and named `name` (application_name: who
    holds what in pg_stat_activity and pg_locks). A session the server ended (its limits, a new leader fencing
    this one off, a restart) is opened again for the next statement outside a transaction; inside one, the
    transaction fails (what it wrote went with the session)."""

    dialect: Dialect = "postgresql"
    started_empty: str | None = None  # a shared database is never started afresh by one instance

    def __init__(self, url: str, password: str | None, timeout_s: float = 10.0, *, name: str = "fabricd") -> None:
        import psycopg  # only a PostgreSQL deployment needs it loaded

        self._psycopg = psycopg
        self._url, self._password, self._timeout_s, self.name = url, password, timeout_s, name
        self.where = _safe_url(url)
        self._in_tx = False
        self._db = self._open()

    def _open(self) -> Any:
        psycopg = self._psycopg
        try:
            db = psycopg.connect(
                self._url, password=self._password, autocommit=True, connect_timeout=max(1, int(self._timeout_s)),
                row_factory=_pg_rows, application_name=self.name[:63],
            )  # fmt: skip
            for setting, value in SESSION_LIMITS.items():
                db.execute(f"SET {setting} = '{value}'")
        except psycopg.Error as e:
            raise StateError(f"{self.where}: cannot connect to the state database ({_first_line(e)}); check "
                             "state.url, the password and that PostgreSQL is up") from None  # fmt: skip
        return db

    def execute(self, sql: str, args: Sequence[Any] = ()) -> Result:
        inside = self._in_tx  # a statement outside a transaction (a read, BEGIN) may be sent again on a new session
        if sql == "BEGIN":
            self._in_tx = True
        elif sql in ("COMMIT", "ROLLBACK"):
            self._in_tx = False
        if self._db.closed or self._db.broken:
            if inside:  # the transaction died with its session: nothing of it may go on in a new one
                raise StateError(f"{self.where}: the session ended inside a transaction (nothing of it was written);"
                                 " fabricd acts only with its state written")  # fmt: skip
            self._db = self._open()
        try:
            return self._send(sql, args)
        except StateError:
            if inside or not self._db.broken:
                raise
        self._db = self._open()  # the server had ended the session (a limit, a new leader, a restart): once more
        return self._send(sql, args)

    def _send(self, sql: str, args: Sequence[Any]) -> Result:
        try:
            cur: Result = self._db.execute(_PLACEHOLDER.sub("%s", sql.replace("%", "%%")), tuple(args))
        except self._psycopg.errors.UniqueViolation as e:
            raise ConflictError(f"state database: {_first_line(e)}") from None
        except self._psycopg.errors.LockNotAvailable as e:
            raise LockTimeoutError(f"{self.where}: {_first_line(e)}; another session holds the rows") from None
        except self._psycopg.Error as e:
            raise StateError(f"{self.where}: {_first_line(e)}; fabricd acts only with its state written") from None
        return cur

    def script(self, sql: str) -> None:
        run_script(self, sql)

    def close(self) -> None:
        self._db.close()


def _pg_rows(cursor: Any) -> Any:
    names = [c.name for c in cursor.description or []]

    def make(values: Sequence[Any]) -> _PgRow:
        return _PgRow(names, values)

    return make


def _first_line(e: BaseException) -> str:
    return (str(e).strip().splitlines() or [type(e).__name__])[0]


def _safe_url(url: str) -> str:
    """The URL without a password (one in the URL is refused at load time; this is for errors)."""
    return re.sub(r"//([^:/@]+):[^@]*@", r"//\1:***@", url)
