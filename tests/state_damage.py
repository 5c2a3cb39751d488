"""Damage to a state file that a disk, an editor or a bad copy can do, as hypothesis strategies and how to apply it:
a value of the wrong kind in a row (bytes that are not UTF-8, a body that is not JSON, a word where a number
belongs), bytes overwritten, the file truncated, the WAL lost. Shared by the state layer's property tests (unit and
real processes)."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

from hypothesis import strategies as st

COLUMNS = {
    "tickets": ["fault", "kind", "device", "port", "status", "title", "body", "escalation", "recurrences",
                "created_ts", "updated_ts", "resolved_ts", "synced_ts"],
    "actions": ["op", "device", "port", "mode", "status", "reason", "finding_id", "ticket_id", "created_ts", "detail",
                "key", "token"],
    "findings": ["key", "fault", "kind", "device", "status", "data", "detected_ts", "last_seen_ts"],
    "disabled_ports": ["device", "port", "action_id", "ticket_id", "since_ts"],
    "probation": ["device", "port", "until_ts", "ticket_id"],
    "tokens": ["user", "role", "hash", "created_ts", "revoked_ts"],
    "audit": ["ts", "what", "why", "mode", "actor"],
    "meta": ["value"],
}  # fmt: skip
VALUES = ["CAST(X'7B2261223A22FF227D' AS TEXT)", "'not json'", "'x'", "1.5", "NULL", "-1", "9223372036854775807",
          "X'FF00'", "''", "'[]'", "'{}'", "'running'", "'enable'"]  # fmt: skip
row_damage = st.tuples(
    st.just("row"), st.sampled_from(sorted(COLUMNS)), st.integers(0, 2), st.sampled_from(VALUES), st.integers(0, 12)
)
file_damage = st.one_of(
    st.tuples(st.just("bytes"), st.floats(0.0, 1.0), st.integers(1, 4096), st.binary(min_size=1, max_size=64)),
    st.tuples(st.just("truncate"), st.floats(0.0, 1.0)),
    st.tuples(st.just("drop-wal")),  # the WAL lost (what was not checkpointed yet)
)
# several damages to rows for each to the file: a damaged file mostly refuses the start, rows are the subtle part
damages = st.lists(st.one_of(row_damage, row_damage, row_damage, row_damage, file_damage), min_size=1, max_size=3)


def damage_row(path: Path, table: str, column: str, row: int, value: str) -> None:
    db = sqlite3.connect(path)
    try:
        rowid = db.execute(f"SELECT rowid FROM {table} LIMIT 1 OFFSET ?", (row,)).fetchone()
        if rowid is not None:
            db.execute(f"UPDATE {table} SET {column} = {value} WHERE rowid = ?", (rowid[0],))
            db.commit()
    except (sqlite3.Error, UnicodeDecodeError):
        pass  # NOT NULL, UNIQUE, or a file already damaged: this damage does not apply
    finally:
        db.close()


def damage_file(path: Path, d: tuple[Any, ...]) -> None:
    if d[0] == "drop-wal":
        path.with_name(path.name + "-wal").unlink(missing_ok=True)
        return
    data = bytearray(path.read_bytes())
    at = int(d[1] * len(data))
    if d[0] == "truncate":
        path.write_bytes(bytes(data[:at]))
        return
    size = min(d[2], len(d[3]) * 64)
    data[at : at + size] = (d[3] * (size // len(d[3]) + 1))[:size]
    path.write_bytes(bytes(data))


def apply_damage(path: Path, damage: list[tuple[Any, ...]]) -> None:
    for d in damage:
        if d[0] == "row":
            _, table, row, value, col = d
            damage_row(path, table, COLUMNS[table][col % len(COLUMNS[table])], row, value)
        elif path.exists():
            damage_file(path, d)
