"""The remediation mode an admin set at run time (it outlives a restart and is the same on every instance)."""

from __future__ import annotations

import json

from . import audit
from .database import Database
from .rows import RowError, text


class Mode:
    def __init__(self, database: Database) -> None:
        self._db = database

    def override(self) -> tuple[str, str, int] | None:
        """The remediation mode an admin set at run time: (mode, actor, when), or None (fabricd.yaml's holds)."""
        row = self._db.one("SELECT value FROM meta WHERE key = 'mode'")
        if row is None:
            return None
        try:
            mode, actor, ts = json.loads(text(row, "value"))
            if not (isinstance(mode, str) and isinstance(actor, str) and isinstance(ts, int)):
                raise ValueError(f"{mode!r}, {actor!r}, {ts!r}")
        except (RowError, ValueError, TypeError) as e:
            self._db.quarantine.note("meta", "mode", f"not [mode, actor, time]: {e}")  # fabricd.yaml's mode holds
            return None
        self._db.quarantine.decoded("meta", "mode")
        return mode, actor, ts

    def set(self, mode: str, actor: str, why: str, now: int) -> None:
        with self._db.transaction() as db:
            db.execute(
                "INSERT INTO meta (key, value) VALUES ('mode', ?)"
                " ON CONFLICT(key) DO UPDATE SET value = excluded.value",
                (json.dumps([mode, actor, now]),),
            )
            audit.write(db, now, f"remediation mode set to {mode}", why, mode=mode, actor=actor)
