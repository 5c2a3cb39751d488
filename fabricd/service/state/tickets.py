"""Tickets: one open ticket per fault, its versions (each write moves `updated_ts` forward) and what the ticket
backend has taken of them (`synced_ts`)."""

from __future__ import annotations

import json
from typing import Any

from .database import Database
from .db import ConflictError, Row
from .records import Ticket
from .rows import Codec, integer, integer_or_none, json_object, new_id, text, text_or_none


def decode(row: Row) -> Ticket:
    return Ticket(
        id=integer(row, "id"), fault=text(row, "fault"), kind=text(row, "kind"), device=text(row, "device"),
        port=text_or_none(row, "port"), status=text(row, "status"), title=text(row, "title"),
        body=json_object(row, "body"), escalation=bool(integer(row, "escalation")),
        recurrences=integer(row, "recurrences"), external_ref=text_or_none(row, "external_ref"),
        created_ts=integer(row, "created_ts"), updated_ts=integer(row, "updated_ts"),
        resolved_ts=integer_or_none(row, "resolved_ts"), resolved_by=text_or_none(row, "resolved_by"),
        synced_ts=integer_or_none(row, "synced_ts"),
    )  # fmt: skip


CODEC = Codec("tickets", "id", decode, "SELECT * FROM tickets")


class Tickets:
    def __init__(self, database: Database) -> None:
        self._db = database

    def open_ids(self) -> set[int]:
        return {int(r[0]) for r in self._db.all("SELECT id FROM tickets WHERE status = 'open'")}

    def open_for(self, fault: str) -> Ticket | None:
        return self._db.record(CODEC, "SELECT * FROM tickets WHERE fault = ? AND status = 'open'", (fault,))

    def latest_for(self, fault: str) -> Ticket | None:
        return self._db.record(CODEC, "SELECT * FROM tickets WHERE fault = ? ORDER BY id DESC LIMIT 1", (fault,))

    def get(self, ticket_id: int) -> Ticket | None:
        return self._db.record(CODEC, "SELECT * FROM tickets WHERE id = ?", (ticket_id,))

    def all(self, status: str | None = None, limit: int = 500, offset: int = 0) -> list[Ticket]:
        where, args = (" WHERE status = ?", (status,)) if status else ("", ())
        sql = f"SELECT * FROM tickets{where} ORDER BY id DESC LIMIT ? OFFSET ?"
        return self._db.records(CODEC, sql, (*args, limit, offset))

    def create(
        self, fault: str, kind: str, device: str, port: str | None, title: str, body: dict[str, Any], now: int,
        *, escalation: bool = False,
    ) -> Ticket:  # fmt: skip
        with self._db.transaction() as db:
            try:
                tid = new_id(db.execute(
                    "INSERT INTO tickets (fault, kind, device, port, status, title, body, escalation, created_ts,"
                    " updated_ts) VALUES (?, ?, ?, ?, 'open', ?, ?, ?, ?, ?) RETURNING id",
                    (fault, kind, device, port, title, json.dumps(body, sort_keys=True), int(escalation), now, now),
                ))  # fmt: skip
            except ConflictError:
                raise ConflictError(f"tickets: an open ticket for {fault} is in the state already but was not read "
                                    "(quarantined? see `fabricd status`); nothing written") from None  # fmt: skip
        t = self.get(tid)
        assert t is not None
        return t

    def update(
        self, ticket_id: int, now: int, *, body: dict[str, Any] | None = None, title: str | None = None,
        recurrence: bool = False, reopen: bool = False, external_ref: str | None = None,
    ) -> Ticket:  # fmt: skip
        with self._db.transaction() as db:
            if body is not None:
                db.execute("UPDATE tickets SET body = ? WHERE id = ?", (json.dumps(body, sort_keys=True), ticket_id))
            if title is not None:
                db.execute("UPDATE tickets SET title = ? WHERE id = ?", (title, ticket_id))
            if recurrence:
                db.execute("UPDATE tickets SET recurrences = recurrences + 1 WHERE id = ?", (ticket_id,))
            if reopen:
                db.execute(
                    "UPDATE tickets SET status = 'open', resolved_ts = NULL, resolved_by = NULL WHERE id = ?",
                    (ticket_id,),
                )
            if external_ref is not None:
                db.execute("UPDATE tickets SET external_ref = ? WHERE id = ?", (external_ref, ticket_id))
            # The version (updated_ts) always moves forward, even within one clock tick or when the clock steps
            # back: backends key idempotency on it and unsynced() compares it with what they last took.
            db.execute("UPDATE tickets SET updated_ts = GREATEST(?, updated_ts + 1) WHERE id = ?", (now, ticket_id))
        t = self.get(ticket_id)
        assert t is not None
        return t

    def resolve(self, ticket_id: int, now: int, by: str) -> Ticket | None:
        with self._db.transaction() as db:
            db.execute(
                "UPDATE tickets SET status = 'resolved', resolved_ts = ?, resolved_by = ?,"
                " updated_ts = GREATEST(?, updated_ts + 1) WHERE id = ? AND status = 'open'",
                (now, by, now, ticket_id),
            )
        return self.get(ticket_id)

    def mark_synced(self, ticket_id: int, version_ts: int, external_ref: str | None) -> None:
        with self._db.transaction() as db:
            db.execute(
                "UPDATE tickets SET synced_ts = ?, external_ref = COALESCE(?, external_ref) WHERE id = ?",
                (version_ts, external_ref, ticket_id),
            )

    def unsynced(self) -> list[Ticket]:
        """Tickets whose latest version the backend has not taken yet (it was down, or we restarted)."""
        return self._db.records(
            CODEC, "SELECT * FROM tickets WHERE synced_ts IS NULL OR synced_ts < updated_ts ORDER BY id"
        )
