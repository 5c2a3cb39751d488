"""Rows into records, defensively, in one place. SQLite's checks (quick_check, integrity_check) see pages, not
values: a text column with bytes that are not UTF-8, a body that is not JSON, a word in an integer column all pass
them. Such a row is *quarantined*: kept in the file as it is, left out of what fabricd reads (it neither acts on
it nor crashes on it), named once in the log (table and id) and listed in health, `fabricd status` and /metrics
until it decodes again. fabricd never writes it back: an operator repairs or deletes it (docs/operations.md)."""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar, cast, get_args

from .state_db import Row, Undecodable
from .state_records import (
    Action,
    ActionStatus,
    ApiToken,
    AuditEntry,
    DisabledPort,
    DrainKind,
    DrainRecord,
    RefusedReapply,
    StoredFinding,
    Ticket,
)

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
        raise RowError(f"column {col}: {_show(v)} is not text")
    return v


def text_or_none(row: Row, col: str) -> str | None:
    return None if _value(row, col) is None else text(row, col)


def integer(row: Row, col: str) -> int:
    v = _value(row, col)
    if isinstance(v, bool) or not isinstance(v, int):
        raise RowError(f"column {col}: {_show(v)} is not an integer")
    return v


def integer_or_none(row: Row, col: str) -> int | None:
    return None if _value(row, col) is None else integer(row, col)


def json_object(row: Row, col: str) -> dict[str, Any]:
    raw = text(row, col)
    try:
        v = json.loads(raw)
    except ValueError as e:
        raise RowError(f"column {col}: not JSON ({e})") from None
    if not isinstance(v, dict):
        raise RowError(f"column {col}: JSON {type(v).__name__}, not an object")
    return v


def json_list(row: Row, col: str) -> list[Any]:
    raw = text(row, col)
    try:
        v = json.loads(raw)
    except ValueError as e:
        raise RowError(f"column {col}: not JSON ({e})") from None
    if not isinstance(v, list):
        raise RowError(f"column {col}: JSON {type(v).__name__}, not a list")
    return v


def _show(v: Any) -> str:
    s = repr(v)
    return s if len(s) <= 40 else s[:37] + "..."


# --- records ---------------------------------------------------------------------------------------------------
_STATUSES = frozenset(get_args(ActionStatus))
_DRAIN_KINDS = frozenset(get_args(DrainKind))


def ticket(row: Row) -> Ticket:
    return Ticket(
        id=integer(row, "id"), fault=text(row, "fault"), kind=text(row, "kind"), device=text(row, "device"),
        port=text_or_none(row, "port"), status=text(row, "status"), title=text(row, "title"),
        body=json_object(row, "body"), escalation=bool(integer(row, "escalation")),
        recurrences=integer(row, "recurrences"), external_ref=text_or_none(row, "external_ref"),
        created_ts=integer(row, "created_ts"), updated_ts=integer(row, "updated_ts"),
        resolved_ts=integer_or_none(row, "resolved_ts"), resolved_by=text_or_none(row, "resolved_by"),
        synced_ts=integer_or_none(row, "synced_ts"),
    )  # fmt: skip


def action(row: Row) -> Action:
    op, status = text(row, "op"), text(row, "status")
    if op not in ("disable", "enable"):
        raise RowError(f"column op: {_show(op)} is neither disable nor enable")
    if status not in _STATUSES:
        raise RowError(f"column status: {_show(status)} is no action status")
    return Action(
        id=integer(row, "id"), op=op, device=text(row, "device"), port=text(row, "port"), mode=text(row, "mode"),
        status=cast(ActionStatus, status), reason=text(row, "reason"), finding_id=integer_or_none(row, "finding_id"),
        ticket_id=integer_or_none(row, "ticket_id"), created_ts=integer(row, "created_ts"),
        updated_ts=integer(row, "updated_ts"), detail=text(row, "detail"), key=text_or_none(row, "key"),
        token=integer_or_none(row, "token"),
    )  # fmt: skip


def api_token(row: Row) -> ApiToken:
    return ApiToken(
        id=integer(row, "id"), user=text(row, "user"), role=text(row, "role"), created_ts=integer(row, "created_ts"),
        created_by=text(row, "created_by"), revoked_ts=integer_or_none(row, "revoked_ts"),
    )  # fmt: skip


def disabled_port(row: Row) -> DisabledPort:
    return DisabledPort(
        device=text(row, "device"), port=text(row, "port"), action_id=integer(row, "action_id"),
        ticket_id=integer_or_none(row, "ticket_id"), since_ts=integer(row, "since_ts"),
    )  # fmt: skip


def refused_reapply(row: Row) -> RefusedReapply:
    return RefusedReapply(
        device=text(row, "device"), port=text(row, "port"), action_id=integer(row, "action_id"),
        rule=text(row, "rule"), reason=text(row, "reason"), since_ts=integer(row, "since_ts"),
    )  # fmt: skip


def drain(row: Row) -> DrainRecord:
    ports, steps = json_list(row, "ports"), json_list(row, "steps")
    kind = text(row, "kind")
    if kind not in _DRAIN_KINDS:
        raise RowError(f"column kind: {_show(kind)} is none of switch, link, port")
    return DrainRecord(
        id=integer(row, "id"), kind=cast(DrainKind, kind), target=text(row, "target"), ports=[str(p) for p in ports],
        reason=text(row, "reason"), actor=text(row, "actor"), shut=bool(integer(row, "shut")),
        until_ts=integer_or_none(row, "until_ts"), state=text(row, "state"), steps=[str(x) for x in steps],
        done=integer(row, "done"), detail=text(row, "detail"), created_ts=integer(row, "created_ts"),
        updated_ts=integer(row, "updated_ts"),
    )  # fmt: skip


def carrier_seen(row: Row) -> tuple[str, str, int, int]:
    return text(row, "device"), text(row, "port"), integer(row, "value"), integer(row, "ts")


def audit_entry(row: Row) -> AuditEntry:
    return AuditEntry(
        id=integer(row, "id"), ts=integer(row, "ts"), what=text(row, "what"), why=text(row, "why"),
        mode=text_or_none(row, "mode"), actor=text(row, "actor"), finding_id=integer_or_none(row, "finding_id"),
        action_id=integer_or_none(row, "action_id"), ticket_id=integer_or_none(row, "ticket_id"),
    )  # fmt: skip


def finding(row: Row) -> StoredFinding:
    """A finding's stored document (its `data`) with the row's id, incident key, status and last sighting."""
    d = json_object(row, "data")
    for col in ("kind", "device"):  # what the API, the metrics and the ticket titles read of every finding
        if not isinstance(d.get(col), str):
            raise RowError(f"column data: {col} {_show(d.get(col))} is not text")
    d.update(id=integer(row, "id"), fault=text(row, "fault"), status=text(row, "status"),
             last_seen_ts=integer(row, "last_seen_ts"))  # fmt: skip
    return cast(StoredFinding, d)


@dataclass(frozen=True)
class Codec:
    """How the rows of one table become records: the decoder, the column that names a row in the quarantine list,
    and the query that reads every row (the start-time scan)."""

    table: str
    key: str
    decode: Callable[[Row], Any]
    select: str


CODECS = (
    Codec("tickets", "id", ticket, "SELECT * FROM tickets"),
    Codec("actions", "id", action, "SELECT * FROM actions"),
    Codec("findings", "id", finding, "SELECT id, fault, status, last_seen_ts, data FROM findings"),
    Codec("disabled_ports", "action_id", disabled_port, "SELECT * FROM disabled_ports"),
    Codec("tokens", "id", api_token, 'SELECT id, "user", role, created_ts, created_by, revoked_ts FROM tokens'),
    Codec("audit", "id", audit_entry, "SELECT * FROM audit"),
    Codec("carrier_seen", "port", carrier_seen, "SELECT * FROM carrier_seen"),
    Codec("maintenance", "id", drain, "SELECT * FROM maintenance"),
    Codec("reapply_refused", "port", refused_reapply, "SELECT * FROM reapply_refused"),
)
BY_TABLE = {c.table: c for c in CODECS}


def row_id(row: Row, key: str) -> str:
    """What names a row in the quarantine: its key column, as far as that can be read."""
    try:
        v = row[key]
    except (IndexError, KeyError):
        return "?"
    return str(v) if isinstance(v, int) or (isinstance(v, str) and v.strip()) else repr(v)


def decode_rows(quarantine: Quarantine, table: str, rows: list[Row], decode: Callable[[Row], T]) -> list[T]:
    """The rows that decode, as records; the others quarantined (the one place rows become records)."""
    key = BY_TABLE[table].key if table in BY_TABLE else "id"
    out = []
    for r in rows:
        try:
            out.append(decode(r))
        except RowError as e:
            quarantine.note(table, row_id(r, key), str(e))
        else:
            quarantine.decoded(table, row_id(r, key))
    return out
