"""Row damage SQLite's checks miss (bytes that are not UTF-8, a body that is not JSON, a word in an integer column)
is quarantined by the one decode layer (state/rows.py): the row stays in the file, every read leaves it out and
none raises, it is logged once naming its table and id, and it leaves the quarantine once it decodes again."""

from __future__ import annotations

import logging
import sqlite3
from collections.abc import Callable
from pathlib import Path

import pytest

from fabricd.detectors.finding import Finding
from fabricd.service.state import StateStore

T0 = 1_700_000_000_000_000_000


def filled(path: Path) -> None:
    s = StateStore(path)
    s.tickets.create("link_flap:a", "link_flap", "leaf-g0-r0", "Ethernet1/1", "title a", {"n": 1}, T0)
    s.tickets.create("link_flap:b", "link_flap", "leaf-g0-r1", "Ethernet2/1", "title b", {"n": 2}, T0)
    for port in ("Ethernet1/1", "Ethernet2/1"):
        a = s.actions.add("disable", "leaf-g0-r0", port, "auto", "running", "flaps", T0, ticket_id=1)
        s.actions.finish(a.id, "done", T0, "down", 0)
    f = Finding(kind="link_flap", device="leaf-g0-r0", port="Ethernet1/1", devices=("leaf-g0-r0",),
                ports=("leaf-g0-r0:Ethernet1/1",), start_ts=T0, detected_ts=T0, severity="warning", confidence=1.0,
                summary="flaps", evidence={})  # fmt: skip
    s.findings.record(f, "link_flap:a", T0)
    s.findings.record(Finding(**{**f.__dict__, "port": "Ethernet2/1"}), "link_flap:b", T0)
    s.access.add_token("alice", "viewer", "hash-a", T0, "test")
    s.access.add_token("bob", "viewer", "hash-b", T0, "test")
    s.mode.set("approve", "alice", "test", T0)
    for port in ("Ethernet3/1", "Ethernet4/1"):
        s.drains.add("port", f"leaf-g0-r0:{port}", [f"leaf-g0-r0:{port}"], "optics", "alice", True, None, [], 0, T0)
    s.close()


def damage(path: Path, sql: str) -> None:
    db = sqlite3.connect(path)
    db.execute(sql)
    db.commit()
    db.close()


BAD_UTF8 = "CAST(X'7B2261223A22FF227D' AS TEXT)"  # {"a":"\xff"}: passes quick_check and integrity_check

# (damage, table, id, what the quarantine says, how the store is read)
CASES = [
    (
        f"UPDATE tickets SET body = {BAD_UTF8} WHERE id = 1",
        "tickets",
        "1",
        "column body: <9 bytes, not UTF-8>",
        lambda s: [t.id for t in s.tickets.all()],
        [2],
    ),
    (
        "UPDATE tickets SET body = 'not json' WHERE id = 1",
        "tickets",
        "1",
        "column body: not JSON",
        lambda s: [t.id for t in s.tickets.unsynced()],
        [2],
    ),
    (
        "UPDATE tickets SET escalation = 'yes' WHERE id = 2",
        "tickets",
        "2",
        "column escalation: 'yes' is not an integer",
        lambda s: (
            s.tickets.get(2),
            s.tickets.open_for("link_flap:b"),
            s.tickets.latest_for("link_flap:a") is not None,
        ),
        (None, None, True),
    ),
    (
        "UPDATE disabled_ports SET port = CAST(X'45746800FF' AS TEXT) WHERE action_id = 1",
        "disabled_ports",
        "1",
        "column port: <5 bytes, not UTF-8>",
        lambda s: [p["action_id"] for p in s.holds.all()],
        [2],
    ),
    (
        "UPDATE actions SET status = 'gone' WHERE id = 2",
        "actions",
        "2",
        "column status: 'gone' is no action status",
        lambda s: ([a.id for a in s.actions.all()], [a.id for a in s.actions.with_status("done")], s.actions.get(2)),
        ([1], [1], None),
    ),
    (
        "UPDATE findings SET data = '[1, 2]' WHERE id = 1",
        "findings",
        "1",
        "column data: JSON list, not an object",
        lambda s: [f["id"] for f in s.findings.all()],
        [2],
    ),
    (
        f'UPDATE tokens SET "user" = {BAD_UTF8} WHERE id = 1',
        "tokens",
        "1",
        "column user: <9 bytes, not UTF-8>",
        lambda s: (
            [t.id for t in s.access.tokens()],
            s.access.token_by_hash("hash-a"),
            s.access.token_by_hash("hash-b") is not None,
        ),
        ([2], None, True),
    ),
    (
        "UPDATE audit SET what = X'FF' WHERE id = 1",
        "audit",
        "1",
        "column what: b'\\xff' is not text",
        lambda s: len(s.audit.entries()) == len(s.database.all("SELECT id FROM audit")) - 1,
        True,
    ),
    (
        "UPDATE maintenance SET kind = 'rack' WHERE id = 1",
        "maintenance",
        "1",
        "column kind: 'rack' is none of switch, link, port",
        lambda s: ([d.id for d in s.drains.all()], s.drains.get(1)),
        ([2], None),
    ),
    (
        "UPDATE meta SET value = 'approve' WHERE key = 'mode'",
        "meta",
        "mode",
        "not [mode, actor, time]",
        lambda s: s.mode.override(),
        None,
    ),
]


@pytest.mark.parametrize(("sql", "table", "row", "reason", "read", "expected"), CASES,
                         ids=[f"{c[1]}-{c[3][:24]}" for c in CASES])  # fmt: skip
def test_a_row_that_cannot_be_decoded_is_quarantined_not_raised(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, sql: str, table: str, row: str, reason: str,
    read: Callable[[StateStore], object], expected: object,
) -> None:  # fmt: skip
    path = tmp_path / "state.db"
    filled(path)
    damage(path, sql)
    caplog.set_level(logging.ERROR, "fabricd.state")
    s = StateStore(path)
    (q,) = s.scan()
    assert (q.table, q.id) == (table, row) and reason in q.reason, q
    assert read(s) == expected
    assert read(s) == expected  # read again: still left out, logged once
    (line,) = [r.getMessage() for r in caplog.records]
    assert line.startswith(f"state: {table} row {row} cannot be decoded (") and "quarantined" in line
    assert s.findings.counts() and s.actions.counts()  # the /metrics counts read past it
    s.close()


def test_a_repaired_row_leaves_the_quarantine(tmp_path: Path) -> None:
    path = tmp_path / "state.db"
    filled(path)
    damage(path, "UPDATE tickets SET body = 'not json' WHERE id = 1")
    s = StateStore(path)
    assert [q.id for q in s.scan()] == ["1"]
    damage(path, """UPDATE tickets SET body = '{"n": 1}' WHERE id = 1""")  # the operator's repair
    assert [t.id for t in s.tickets.all()] == [2, 1]
    assert s.quarantine.entries() == []
    s.close()


def test_damaged_labels_leave_the_metric_counts_but_not_the_rest(tmp_path: Path) -> None:
    path = tmp_path / "state.db"
    filled(path)
    damage(path, "UPDATE findings SET kind = X'FF' WHERE id = 1")
    damage(path, f"UPDATE actions SET op = {BAD_UTF8} WHERE id = 1")
    s = StateStore(path)
    assert s.findings.counts() == {("link_flap", "active"): 1}
    assert s.actions.counts() == {("disable", "done"): 1}
    assert [q.id for q in s.scan()] == ["1"]  # the action (op is read); a finding's record is its data
    s.close()


def test_a_schema_version_that_cannot_be_read_stops_the_start_in_one_line(tmp_path: Path) -> None:
    path = tmp_path / "state.db"
    filled(path)
    damage(path, "UPDATE meta SET value = 'three' WHERE key = 'schema'")
    with pytest.raises(Exception) as e:
        StateStore(path)
    assert str(e.value) == (
        f"{path}: its schema version ('three') cannot be read; restore it from a backup, or start with `fabricd run "
        "--new-state` (the file is kept beside it; fabricd then adopts what the switches say it did)"
    )
