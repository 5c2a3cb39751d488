"""Each port's carrier-transitions value as fabricd last saw it (carrier_watch.py), kept across restarts: a flap
train that ended while fabricd was not watching is still found."""

from __future__ import annotations

import json

from .database import Database
from .db import Row
from .rows import Codec, RowError, integer, text


def decode(row: Row) -> tuple[str, str, int, int]:
    return text(row, "device"), text(row, "port"), integer(row, "value"), integer(row, "ts")


CODEC = Codec("carrier_seen", "port", decode, "SELECT * FROM carrier_seen")


class CarrierSeen:
    def __init__(self, database: Database) -> None:
        self._db = database

    def seen(self) -> tuple[dict[tuple[str, str], tuple[int, int]], tuple[int, frozenset[str]] | None]:
        """Each port's last carrier-transitions value written, (device, port) -> (value, ts of its sample), and the
        last save round (its time and the switches not heard fresh then), or None before the first."""
        rows = self._db.records(CODEC, "SELECT * FROM carrier_seen")
        row = self._db.one("SELECT value FROM meta WHERE key = 'carrier_watch'")
        saved = None
        if row is not None:
            try:
                doc = json.loads(text(row, "value"))
                saved = (int(doc["ts"]), frozenset(str(d) for d in doc["unsure"]))
            except (RowError, ValueError, TypeError, KeyError) as e:
                self._db.quarantine.note("meta", "carrier_watch", f"not {{ts, unsure}}: {e}")  # rows' own times hold
            else:
                self._db.quarantine.decoded("meta", "carrier_watch")
        return {(d, p): (v, t) for d, p, v, t in rows}, saved

    def save(self, rows: list[tuple[str, str, int, int]], now: int, unsure: list[str]) -> None:
        """Write the ports' values that changed (device, port, value, sample ts) and the round: as of `now`, every
        port's row holds, except on the switches in `unsure` (not heard fresh). One transaction, rows in batches."""
        with self._db.transaction() as db:
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
