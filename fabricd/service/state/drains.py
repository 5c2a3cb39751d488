"""Drains: planned maintenance (maintenance.py), each step recorded before the next is taken, so a restart or a new
leader resumes at `done`."""

from __future__ import annotations

import json
from typing import Any, cast, get_args

from .database import Database
from .db import Row
from .records import DrainKind, DrainRecord
from .rows import Codec, RowError, integer, integer_or_none, json_list, new_id, show, text

_DRAIN_KINDS = frozenset(get_args(DrainKind))


def decode(row: Row) -> DrainRecord:
    ports, steps = json_list(row, "ports"), json_list(row, "steps")
    kind = text(row, "kind")
    if kind not in _DRAIN_KINDS:
        raise RowError(f"column kind: {show(kind)} is none of switch, link, port")
    return DrainRecord(
        id=integer(row, "id"), kind=cast(DrainKind, kind), target=text(row, "target"), ports=[str(p) for p in ports],
        reason=text(row, "reason"), actor=text(row, "actor"), shut=bool(integer(row, "shut")),
        until_ts=integer_or_none(row, "until_ts"), state=text(row, "state"), steps=[str(x) for x in steps],
        done=integer(row, "done"), detail=text(row, "detail"), created_ts=integer(row, "created_ts"),
        updated_ts=integer(row, "updated_ts"),
    )  # fmt: skip


CODEC = Codec("maintenance", "id", decode, "SELECT * FROM maintenance")


class Drains:
    def __init__(self, database: Database) -> None:
        self._db = database

    def add(
        self, kind: DrainKind, target: str, ports: list[str], reason: str, actor: str, shut: bool,
        until_ts: int | None, steps: list[str], done: int, now: int,
    ) -> DrainRecord:  # fmt: skip
        with self._db.transaction() as db:
            cur = db.execute(
                "INSERT INTO maintenance (kind, target, ports, reason, actor, shut, until_ts, state, steps, done,"
                " created_ts, updated_ts) VALUES (?, ?, ?, ?, ?, ?, ?, 'draining', ?, ?, ?, ?) RETURNING id",
                (kind, target, json.dumps(ports), reason, actor, int(shut), until_ts, json.dumps(steps), done, now,
                 now),
            )  # fmt: skip
            new = self.get(new_id(cur))
        assert new is not None
        return new

    def update(self, drain_id: int, now: int, *, state: str | None = None, done: int | None = None,
               detail: str | None = None) -> DrainRecord:  # fmt: skip
        """Record a step taken (`done`) or a new state, before the next step is taken."""
        with self._db.transaction() as db:
            db.execute(
                "UPDATE maintenance SET state = COALESCE(?, state), done = COALESCE(?, done),"
                " detail = COALESCE(?, detail), updated_ts = ? WHERE id = ?",
                (state, done, detail, now, drain_id),
            )
            row = self.get(drain_id)
        assert row is not None
        return row

    def get(self, drain_id: int) -> DrainRecord | None:
        return self._db.record(CODEC, "SELECT * FROM maintenance WHERE id = ?", (drain_id,))

    def all(self, states: tuple[str, ...] | None = None, limit: int = 500) -> list[DrainRecord]:
        """The drains in these states (None: every drain), the newest first."""
        args: tuple[Any, ...] = (limit,)
        if states is None:
            sql = "SELECT * FROM maintenance ORDER BY id DESC LIMIT ?"
        else:
            q = ",".join("?" * len(states))
            sql, args = f"SELECT * FROM maintenance WHERE state IN ({q}) ORDER BY id DESC LIMIT ?", (*states, limit)
        return self._db.records(CODEC, sql, args)

    def counts(self) -> dict[str, int]:
        return {str(r[0]): int(r[1]) for r in self._db.all("SELECT state, COUNT(*) FROM maintenance GROUP BY state")}
