"""The service's memory: one database (SQLite in WAL, or PostgreSQL shared by a leader and its standbys) and a
repository per aggregate over it: findings, actions, tickets, holds, drains, audit, leadership (and the fence every
leader's write passes), access (tokens, page sessions), the run-time mode and the carrier values.

Everything that must survive a restart is written here before the switch is touched (an action is `running`
before the driver call and `done` after verification), so a restart can finish or roll back what was half done.
Writes that belong together are one unit of work: `with state.transaction():` around calls to several repositories
commits them together or not at all (database.py).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from ..config import ServiceConfig, read_secret
from ..leader import default_instance
from . import access, actions, audit, carrier, drains, findings, holds, tickets, tuning
from .access import Access
from .actions import Actions
from .audit import Audit
from .carrier import CarrierSeen
from .database import Database, connect
from .db import NEW_STATE_HINT, Db, StateError, schema
from .drains import Drains
from .findings import Findings
from .holds import Holds
from .leadership import Leadership
from .mode import Mode
from .rows import Codec, Quarantined
from .tickets import Tickets
from .tuning import Tuning

log = logging.getLogger("fabricd.state")

# 2: actions.key (idempotency); 3: actions.token (the fencing token of the leader that began it); 4: maintenance
# (planned drains, maintenance.py: a new table, which the schema's CREATE TABLE IF NOT EXISTS adds to an older file);
# 5: carrier_seen (each port's last carrier-transitions value, carrier_watch.py: a new table, added the same way);
# 6: reapply_refused (the guard's refusals to re-apply a hold, remediation/reconciler.py: shared by every instance);
# 7: tuning (the tuning loop's ledger, state/tuning.py: a new table, added the same way; actions of op `tune`)
SCHEMA_VERSION = 7

# Every table's rows, decoded once at the start (scan): each repository's own codec.
CODECS: tuple[Codec[Any], ...] = (
    tickets.CODEC, actions.CODEC, findings.CODEC, holds.HELD, access.CODEC, audit.CODEC, carrier.CODEC, drains.CODEC,
    holds.REFUSED, tuning.CODEC,
)  # fmt: skip


class StateStore:
    def __init__(
        self, path: Path | None = None, *, url: str | None = None, password: str | None = None, owner: bool = False,
        new_state: bool = False, force: bool = False, name: str = "fabricd",
    ) -> None:  # fmt: skip
        """SQLite at `path` (the default), or the PostgreSQL database at `url` that a leader and its standbys
        share (the password comes from state.password, never from the URL). `owner`: the service's own store (one
        per SQLite file, sqlite.SqliteDb); `new_state`, `force`: `fabricd run --new-state [--force]`; `name`: the
        instance, as PostgreSQL's sessions show it."""
        self.path = path
        self._db: Db = connect(path, url, password, owner=owner, new_state=new_state, force=force, name=name)
        self.started_empty = self._db.started_empty  # adoption notes say so (remediation/reconciler.py)
        self.database = Database(self._db)
        self.writes = self.database.writes
        self.quarantine = self.database.quarantine  # rows that cannot be decoded (rows.py)
        self.dialect = self._db.dialect
        self.findings = Findings(self.database)
        self.holds = Holds(self.database)
        self.actions = Actions(self.database, self.holds)
        self.tickets = Tickets(self.database)
        self.drains = Drains(self.database)
        self.audit = Audit(self.database)
        self.leadership = Leadership(self.database, (url, password, name))
        self.access = Access(self.database)
        self.mode = Mode(self.database)
        self.carrier = CarrierSeen(self.database)
        self.tuning = Tuning(self.database)
        self._open_schema(str(path) if path is not None else "the state database")

    def _open_schema(self, where: str) -> None:
        """Check the schema's version, bring an older one up to SCHEMA_VERSION, and write once."""
        with self.transaction() as db:
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
        self.database.close()
        self.leadership.close()

    @contextmanager
    def transaction(self) -> Iterator[Db]:
        """The unit of work: every repository write inside (`state.findings.record`, `state.actions.add`, ...)
        commits together or not at all, fenced as one write (database.py). Yields the connection, for raw SQL."""
        with self.database.transaction() as db:
            yield db

    def scan(self) -> list[Quarantined]:
        """Decode every record once (the service's start): what cannot be decoded is quarantined and listed from
        the first health check on, not only once something reads it."""
        for c in CODECS:
            self.database.records(c, c.select)
        self.mode.override()
        return self.quarantine.entries()

    def prune(self, before_ts: int) -> int:
        """Forget cleared findings, audit entries, probations and observe mode's tuning records older than
        `before_ts`, in one transaction."""
        with self.transaction():
            return (self.findings.prune(before_ts) + self.audit.prune(before_ts) + self.holds.prune(before_ts)
                    + self.tuning.prune(before_ts))  # fmt: skip


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
        store.scan()  # rows that cannot be decoded: quarantined and listed from the start (rows.py)
    if owner and store.started_empty:
        log.warning("state started empty: %s; ports the switches' marks say fabricd shut are adopted",
                    store.started_empty)  # fmt: skip
    return store
