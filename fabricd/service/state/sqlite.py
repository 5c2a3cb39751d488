"""The state file (SQLite, WAL): one service on it under an OS lock, checked when it opens, set aside (never
deleted) by `fabricd run --new-state`."""

from __future__ import annotations

import contextlib
import fcntl
import json
import logging
import os
import socket
import sqlite3
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

from .db import NEW_STATE_HINT, ConflictError, Dialect, Result, StateError, Undecodable, run_script

log = logging.getLogger("fabricd.state")


def sqlite_text(raw: bytes) -> str | Undecodable:
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        return Undecodable(raw)


_SIDE_FILES = ("-wal", "-shm")


def _side(path: Path, suffix: str) -> Path:
    return path.with_name(path.name + suffix)


FORCE_HINT = (
    "run without --new-state to keep it, or add --force to set it aside anyway (kept beside it; fabricd then forgets "
    "its tickets, tokens and audit log and adopts what the switches' marks say it did)"
)


def set_aside(path: Path, now: float | None = None) -> Path | None:
    """`--new-state`: move the state file (and its WAL) aside, never delete it; returns where it went (None: there
    was no file)."""
    if not path.exists():
        return None
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime(time.time() if now is None else now))
    kept = path.with_name(f"{path.name}.set-aside-{stamp}")
    for suffix in ("", *_SIDE_FILES):
        src = _side(path, suffix)
        if src.exists():
            src.rename(_side(kept, suffix))
    return kept


class SqliteDb:
    """The state file. One service on it: the service (`owner`) holds an exclusive OS lock on `<file>.lock` (naming
    its holder) for as long as the store is open; short-lived tools (`fabricd token`) write beside it under SQLite's
    own locking. Created 0600 (it holds token hashes and page-session secrets), its WAL too. Checked when it opens:
    an empty or corrupt file, or one that cannot be written, stops fabricd with a line saying what to do."""

    dialect: Dialect = "sqlite"

    def __init__(self, path: Path, *, owner: bool = False, new_state: bool = False, force: bool = False) -> None:
        """`new_state` (`fabricd run --new-state`, the owner only): under the lock, set the file aside and start
        empty; a file that opens cleanly is set aside only with `force`."""
        self.path = path
        self._lock: Any = None
        self.started_empty: str | None = None  # why this start began with no records (None: it has the file's)
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
        except OSError as e:
            raise StateError(f"{path}: cannot open the state database ({e}); check the path and permissions") from None
        _check_folder(path)
        try:
            if owner:
                self._lock = _take_lock(path)
        except OSError as e:
            raise StateError(f"{path}: cannot open the state database ({e}); check the path and permissions") from None
        try:
            if new_state:
                assert owner, "--new-state is the service's: it holds the lock while it sets the file aside"
                self.started_empty = _start_new(path, force)
            elif owner and not path.exists():  # the service's start (a tool adopts nothing)
                self.started_empty = f"no state file at {path} (a first run, or the file was deleted or moved)"
            self._open(path)
        except BaseException:
            if self._lock is not None:
                self._lock.close()
            raise

    def _open(self, path: Path) -> None:
        if path.exists() and path.stat().st_size == 0:
            raise StateError(f"{path}: the state file is empty (0 bytes): fabricd's records were lost; "
                             + NEW_STATE_HINT)  # fmt: skip
        try:
            fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)  # created 0600 before SQLite sees it
            os.close(fd)
            for suffix in ("", *_SIDE_FILES):  # SQLite gives the WAL and shm files the database's mode
                with contextlib.suppress(FileNotFoundError):
                    _side(path, suffix).chmod(0o600)
        except OSError as e:
            raise StateError(
                f"{path}: cannot open the state database for writing ({e.strerror}); check the path, its "
                "permissions and attributes (lsattr: immutable?) and the disk"
            ) from None
        try:
            self._db = sqlite3.connect(str(path), check_same_thread=False, isolation_level=None, timeout=10)
            self._db.row_factory = sqlite3.Row
            self._db.text_factory = sqlite_text  # one bad value quarantines its row, not the query (rows.py)
            self._db.execute("PRAGMA journal_mode=WAL")
            self._db.execute("PRAGMA synchronous=NORMAL")  # WAL + NORMAL: durable at checkpoints, no torn writes
            problems = [str(r[0]) for r in self._db.execute("PRAGMA quick_check").fetchall()]
        except (sqlite3.DatabaseError, UnicodeDecodeError) as e:  # a damaged schema: its report is not even text
            raise StateError(f"{path}: not a readable state database ({e}); {NEW_STATE_HINT}") from None
        if problems != ["ok"]:
            self._db.close()
            raise StateError(f"{path}: failed its integrity check ({problems[0]}); {NEW_STATE_HINT}")
        for suffix in _SIDE_FILES:
            with contextlib.suppress(FileNotFoundError):
                _side(path, suffix).chmod(0o600)

    def execute(self, sql: str, args: Sequence[Any] = ()) -> Result:
        if sql == "BEGIN":
            sql = "BEGIN IMMEDIATE"  # take the write lock now: no upgrade deadlock between two writers
        with self._errors():
            return _SqliteResult(self._db.execute(sql.replace("GREATEST(", "MAX("), tuple(args)), self._errors)
        raise AssertionError("unreachable")  # _errors raises or the statement returned

    @contextlib.contextmanager
    def _errors(self) -> Iterator[None]:
        """SQLite's errors as ours, a row read late (fetchone, fetchall) included: a page damaged at run time or a
        report with bytes that are not text must not escape as a driver exception (a traceback in a pass)."""
        try:
            yield
        except sqlite3.IntegrityError as e:
            raise ConflictError(f"state database: {e}") from None
        except (sqlite3.Error, UnicodeDecodeError) as e:
            raise StateError(f"{self.path}: {e}; fabricd acts only with its state written") from None

    def script(self, sql: str) -> None:
        run_script(self, sql)

    def close(self) -> None:
        self._db.close()
        if self._lock is not None:
            self._lock.close()  # releases the lock


def _check_folder(path: Path) -> None:
    """SQLite writes its journal (-wal, -shm) beside the state file and `--new-state` renames it there: a folder
    that cannot be written (read-only, immutable, full) is named as such, not reported as a bad database."""
    try:
        fd, probe = tempfile.mkstemp(prefix=f".{path.name}.probe-", dir=path.parent)
        os.close(fd)
        Path(probe).unlink()
    except OSError as e:
        raise StateError(
            f"{path}: its folder {path.parent} cannot be written ({e.strerror}); fabricd keeps its journal beside "
            "the state file: check the folder's permissions and attributes (lsattr -d: immutable?) and the disk"
        ) from None


def _start_new(path: Path, force: bool) -> str:
    """`--new-state`, the lock held: a file that opens cleanly is refused without `force`; otherwise it is set aside
    (never deleted). Returns why the state starts empty."""
    if not path.exists():
        return f"--new-state: no state file at {path}"
    if not force and (healthy := _readable_summary(path)) is not None:
        raise StateError(f"{path}: --new-state refused: this state file is readable ({healthy}); {FORCE_HINT}")
    try:
        kept = set_aside(path)
    except OSError as e:
        raise StateError(
            f"{path}: --new-state cannot set the state file aside ({e.strerror}); check the permissions and "
            f"attributes of the file and of {path.parent} (lsattr -d: immutable?)"
        ) from None
    log.warning("--new-state: %s set aside as %s; starting with an empty state", path, kept)
    return f"--new-state: {path} set aside as {kept}"


def _readable_summary(path: Path) -> str | None:
    """What a state file holds when it opens and passes its check, read-only (None: empty, corrupt or unreadable:
    what `--new-state` is for)."""
    if path.stat().st_size == 0:
        return None
    try:
        db = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True, timeout=10)
    except (sqlite3.Error, UnicodeDecodeError):
        return None
    try:
        if [str(r[0]) for r in db.execute("PRAGMA quick_check").fetchall()] != ["ok"]:
            return None
        counts = []
        for table in ("tickets", "actions", "tokens"):
            with contextlib.suppress(sqlite3.Error, UnicodeDecodeError):
                counts.append(f"{db.execute(f'SELECT COUNT(*) FROM {table}').fetchone()[0]} {table}")
        return ", ".join(counts) or "no fabricd records"
    except (sqlite3.Error, UnicodeDecodeError):
        return None
    finally:
        db.close()


class _SqliteResult:
    """A cursor whose late errors (reading the rows) are StateErrors too."""

    def __init__(self, cursor: sqlite3.Cursor, errors: Callable[[], contextlib.AbstractContextManager[None]]) -> None:
        self._cursor, self._errors = cursor, errors

    @property
    def rowcount(self) -> int:
        return self._cursor.rowcount

    def fetchone(self) -> Any:
        with self._errors():
            return self._cursor.fetchone()

    def fetchall(self) -> list[Any]:
        with self._errors():
            return self._cursor.fetchall()


def _take_lock(path: Path) -> Any:
    """The exclusive lock on `<state>.lock` (flock: released by the kernel when the process dies, kill -9 too), with
    who holds it written inside; a second fabricd on the same file is refused, naming the holder."""
    lock_path = _side(path, ".lock")
    f = lock_path.open("a+")
    try:
        lock_path.chmod(0o600)
        fcntl.flock(f.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        f.seek(0)
        try:
            holder = json.loads(f.read() or "{}")
        except ValueError:
            holder = {}
        f.close()
        who = f"pid {holder.get('pid', '?')} on {holder.get('host', '?')}"
        since = holder.get("since")
        if since:
            who += f" (since {since})"
        raise StateError(
            f"{path}: in use by another fabricd, {who}; one fabricd per state file: stop that one, or run several "
            "as leader and standbys on PostgreSQL with a leader lease (docs/ha.md)"
        ) from None
    f.seek(0)
    f.truncate()
    stamp = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime())
    f.write(json.dumps({"pid": os.getpid(), "host": socket.gethostname(), "since": stamp}) + "\n")
    f.flush()
    return f
