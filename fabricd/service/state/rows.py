"""Rows into records, defensively: the column readers every repository decodes its rows with, and the one place
rows become records (`decode_rows`). SQLite's checks (quick_check, integrity_check) see pages, not values: a text
column with bytes that are not UTF-8, a body that is not JSON, a word in an integer column all pass them. Such a row
is *quarantined*: kept in the file as it is, left out of what fabricd reads (it neither acts on it nor crashes on
it), named once in the log (table and id) and listed in health, `fabricd status` and /metrics until it decodes
again. fabricd never writes it back: an operator repairs or deletes it (docs/operations.md)."""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from .db import Result, Row, StateError, Undecodable

log = logging.getLogger("fabricd.state")
T = TypeVar("T")


class RowError(ValueError):
    """A row that cannot be read as its record: which column, and why."""


@dataclass(frozen=True)
class Quarantined:
    table: str
    id: str
    reason: str


class Quarantine:
    """The rows that cannot be decoded, by (table, id): noted (and logged) once, dropped when they decode again."""

    def __init__(self) -> None:
        self._rows: dict[tuple[str, str], Quarantined] = {}
        self._lock = threading.Lock()

    def note(self, table: str, row_id: str, reason: str) -> None:
        with self._lock:
            if (table, row_id) in self._rows:
                return
            self._rows[(table, row_id)] = Quarantined(table, row_id, reason)
        log.error("state: %s row %s cannot be decoded (%s): quarantined, kept in the file and left out; repair or "
                  "delete it (docs/operations.md)", table, row_id, reason)  # fmt: skip

    def decoded(self, table: str, row_id: str) -> None:
        if (table, row_id) in self._rows:
            with self._lock:
                if self._rows.pop((table, row_id), None) is not None:
                    log.warning("state: %s row %s decodes again: out of quarantine", table, row_id)

    def entries(self) -> list[Quarantined]:
        with self._lock:
            return sorted(self._rows.values(), key=lambda q: (q.table, q.id))


# --- columns ---------------------------------------------------------------------------------------------------
def _value(row: Row, col: str) -> Any:
    try:
        return row[col]
    except (IndexError, KeyError) as e:
        raise RowError(f"no column {col}") from e


def text(row: Row, col: str) -> str:
    v = _value(row, col)
    if isinstance(v, Undecodable):
        raise RowError(f"column {col}: {v!r}")
    if not isinstance(v, str):
        raise RowError(f"column {col}: {show(v)} is not text")
    return v


def text_or_none(row: Row, col: str) -> str | None:
    return None if _value(row, col) is None else text(row, col)


def integer(row: Row, col: str) -> int:
    v = _value(row, col)
    if isinstance(v, bool) or not isinstance(v, int):
        raise RowError(f"column {col}: {show(v)} is not an integer")
    return v


def integer_or_none(row: Row, col: str) -> int | None:
    return None if _value(row, col) is None else integer(row, col)


def json_object(row: Row, col: str) -> dict[str, Any]:
    found: dict[str, Any] = _json(row, col, dict, "an object")
    return found


def json_list(row: Row, col: str) -> list[Any]:
    found: list[Any] = _json(row, col, list, "a list")
    return found


def _json(row: Row, col: str, kind: type, name: str) -> Any:
    raw = text(row, col)  # a RowError of its own (a ValueError too): not "not JSON"
    try:
        v = json.loads(raw)
    except ValueError as e:
        raise RowError(f"column {col}: not JSON ({e})") from None
    if not isinstance(v, kind):
        raise RowError(f"column {col}: JSON {type(v).__name__}, not {name}")
    return v


def show(v: Any) -> str:
    s = repr(v)
    return s if len(s) <= 40 else s[:37] + "..."


@dataclass(frozen=True)
class Codec(Generic[T]):
    """How the rows of one table become records (each repository has its table's): the decoder, the column that
    names a row in the quarantine list, and the query that reads every row (the start-time scan)."""

    table: str
    key: str
    decode: Callable[[Row], T]
    select: str


def row_id(row: Row, key: str) -> str:
    """What names a row in the quarantine: its key column, as far as that can be read."""
    try:
        v = row[key]
    except (IndexError, KeyError):
        return "?"
    return str(v) if isinstance(v, int) or (isinstance(v, str) and v.strip()) else repr(v)


def decode_rows(quarantine: Quarantine, codec: Codec[T], rows: list[Row]) -> list[T]:
    """The rows that decode, as records; the others quarantined (the one place rows become records)."""
    out = []
    for r in rows:
        try:
            out.append(codec.decode(r))
        except RowError as e:
            quarantine.note(codec.table, row_id(r, codec.key), str(e))
        else:
            quarantine.decoded(codec.table, row_id(r, codec.key))
    return out


def decoded(quarantine: Quarantine, codec: Codec[T], row: Row) -> T:
    """Inside a transaction, a record fabricd is about to act on: one that cannot be decoded stops the transaction
    (quarantined; nothing written), it is not guessed at."""
    found = decode_rows(quarantine, codec, [row])
    if not found:
        raise StateError(f"{codec.table} row {row_id(row, codec.key)} cannot be decoded: quarantined, nothing written")
    return found[0]


def new_id(cur: Result) -> int:
    """The id an `INSERT ... RETURNING id` gave its row."""
    row = cur.fetchone()
    return int(row[0])


def label_counts(rows: list[Row]) -> dict[tuple[str, str], int]:
    """(label, label) -> count, for /metrics: a group whose labels are not text (a damaged row) is left out; the
    row itself is listed by the quarantine."""
    return {(r[0], r[1]): int(r[2]) for r in rows if isinstance(r[0], str) and isinstance(r[1], str)}
