"""The state store on a real SQLite file: what the service remembers across a restart."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from pathlib import Path

import pytest

from fabricd.detectors.finding import Finding
from fabricd.service.state import SCHEMA_VERSION, StateStore
from fabricd.service.state.db import ConflictError, StateError
from fabricd.service.state.tuning import NewTune, TuneStatus

T0 = 1_700_000_000_000_000_000
S = 1_000_000_000
FAULT = "link_flap:gpu-g0-000:nic0--leaf-g0-r0:Ethernet1/1"


def flap(start_ts: int = T0, summary: str = "8 flaps in 10 s") -> Finding:
    return Finding(
        kind="link_flap",
        device="leaf-g0-r0",
        port="Ethernet1/1",
        devices=("gpu-g0-000", "leaf-g0-r0"),
        ports=("gpu-g0-000:nic0", "leaf-g0-r0:Ethernet1/1"),
        start_ts=start_ts,
        detected_ts=start_ts + 2 * S,
        severity="warning",
        confidence=0.9,
        summary=summary,
        evidence={"transitions": 8},
    )


def scalar(store: StateStore, sql: str) -> object:
    row = store.database.one(sql)
    assert row is not None
    return row[0]


def ticket_ref(store: StateStore, ticket_id: int) -> str | None:
    t = store.tickets.get(ticket_id)
    assert t is not None
    return t.external_ref


@pytest.fixture
def store(tmp_path: Path) -> Iterator[StateStore]:
    """A SQLite file; the same tests run on a real PostgreSQL in tests/twin/fabricd/service/test_state_postgres.py."""
    s = StateStore(tmp_path / "var" / "state.db")  # the folder is created
    yield s
    s.close()


def test_wal_journal_and_schema(store: StateStore) -> None:
    if store.dialect != "sqlite":
        assert scalar(store, "SELECT value FROM meta WHERE key = 'schema'") == str(SCHEMA_VERSION)
        return
    assert scalar(store, "PRAGMA journal_mode") == "wal"
    assert scalar(store, "SELECT value FROM meta WHERE key = 'schema'") == str(SCHEMA_VERSION)
    assert store.path is not None and (store.path.parent / "state.db-wal").exists()


def test_newer_schema_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "state.db"
    StateStore(path).close()
    db = sqlite3.connect(path)
    db.execute("UPDATE meta SET value = '99' WHERE key = 'schema'")
    db.commit()
    db.close()
    with pytest.raises(StateError, match=r"newer fabricd \(schema 99\); upgrade fabricd"):
        StateStore(path)


def test_a_schema_1_file_is_migrated_and_keeps_its_actions(tmp_path: Path) -> None:
    # a state file of the fabricd before action keys: the table gains the column, old rows stay, keys are unique
    path = tmp_path / "state.db"
    db = sqlite3.connect(path)
    db.executescript(
        "CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL); INSERT INTO meta VALUES ('schema', '1');"
        "CREATE TABLE actions (id INTEGER PRIMARY KEY, op TEXT NOT NULL, device TEXT NOT NULL, port TEXT NOT NULL,"
        " mode TEXT NOT NULL, status TEXT NOT NULL, reason TEXT NOT NULL, finding_id INTEGER, ticket_id INTEGER,"
        " created_ts INTEGER NOT NULL, updated_ts INTEGER NOT NULL, detail TEXT NOT NULL DEFAULT '');"
        "INSERT INTO actions VALUES (7, 'disable', 'leaf-1', 'Ethernet1/1', 'auto', 'done', 'flap', 1, 1, 1, 2, 'x');"
    )
    db.commit()
    db.close()
    s = StateStore(path)
    try:
        assert scalar(s, "SELECT value FROM meta WHERE key = 'schema'") == str(SCHEMA_VERSION)
        old = s.actions.get(7)
        assert old is not None and old.status == "done" and old.key is None
        a = s.actions.add("disable", "leaf-1", "Ethernet2/1", "auto", "running", "flap", T0, key="k1")
        assert s.actions.add("disable", "leaf-1", "Ethernet2/1", "auto", "running", "again", T0, key="k1") == a
        assert [x.id for x in s.actions.all()] == [a.id, 7]
    finally:
        s.close()


def test_carrier_seen_is_written_in_batches_and_read_back(store: StateStore) -> None:
    # what CarrierWatch remembers: one row per port, updated in place, and the last round's time
    assert store.carrier.seen() == ({}, None)
    rows = [("leaf-1", f"Ethernet{i}/1", i, T0 + i) for i in range(450)]  # more than one batch
    store.carrier.save(rows, T0 + S, ["spine-1"])
    store.carrier.save([("leaf-1", "Ethernet3/1", 2**40, T0 + 2 * S)], T0 + 2 * S, [])
    seen, saved = store.carrier.seen()
    assert len(seen) == 450 and seen[("leaf-1", "Ethernet0/1")] == (0, T0)
    assert seen[("leaf-1", "Ethernet3/1")] == (2**40, T0 + 2 * S)
    assert saved == (T0 + 2 * S, frozenset())


def test_a_schema_4_file_gains_the_carrier_table(tmp_path: Path) -> None:
    path = tmp_path / "state.db"
    StateStore(path).close()
    db = sqlite3.connect(path)
    db.executescript("DROP TABLE carrier_seen; UPDATE meta SET value = '4' WHERE key = 'schema';")
    db.commit()
    db.close()
    s = StateStore(path)
    try:
        assert scalar(s, "SELECT value FROM meta WHERE key = 'schema'") == str(SCHEMA_VERSION)
        s.carrier.save([("leaf-1", "Ethernet1/1", 7, T0)], T0, [])
        assert s.carrier.seen()[0] == {("leaf-1", "Ethernet1/1"): (7, T0)}
    finally:
        s.close()


def test_nested_transactions_are_one(store: StateStore) -> None:
    # every write method opens a transaction; inside an outer one they join it and go (or vanish) together
    with pytest.raises(RuntimeError), store.transaction():
        fid, _ = store.findings.record(flap(), FAULT, T0)
        store.actions.add("disable", "leaf-g0-r0", "Ethernet1/1", "auto", "running", "flap", T0, finding_id=fid)
        store.tickets.create(FAULT, "link_flap", "leaf-g0-r0", "Ethernet1/1", "t", {}, T0)
        raise RuntimeError("crash before the commit")
    assert store.findings.all() == [] and store.actions.all() == [] and store.tickets.all() == []
    with store.transaction():
        store.actions.add("disable", "leaf-g0-r0", "Ethernet1/1", "auto", "running", "flap", T0, key="k")
        store.audit.record(T0, "disable", "flap")
    assert len(store.actions.all()) == 1 and len(store.audit.entries()) == 1


def test_unopenable_path(tmp_path: Path) -> None:
    (tmp_path / "dir.db").mkdir()
    with pytest.raises(StateError, match="cannot open the state database"):
        StateStore(tmp_path / "dir.db")


def test_findings_upsert(store: StateStore) -> None:
    fid, new = store.findings.record(flap(), FAULT, T0 + 2 * S)
    assert new
    again, new = store.findings.record(flap(summary="9 flaps in 10 s"), FAULT, T0 + 3 * S)
    assert (again, new) == (fid, False)
    other, new = store.findings.record(flap(start_ts=T0 + 60 * S), FAULT, T0 + 62 * S)  # a new incident
    assert new and other != fid
    (row,) = [f for f in store.findings.all() if f["id"] == fid]
    assert row["summary"] == "9 flaps in 10 s"
    assert (row["status"], row["last_seen_ts"], row["fault"]) == ("active", T0 + 3 * S, FAULT)
    assert row["evidence"] == {"transitions": 8}
    assert store.findings.counts() == {("link_flap", "active"): 2}

    assert store.findings.clear_not_seen_since(T0 + 10 * S) == 1
    assert [f["id"] for f in store.findings.all("cleared")] == [fid]
    assert [f["id"] for f in store.findings.all("active")] == [other]
    # Seen again after being cleared: the same incident, active again.
    assert store.findings.record(flap(), FAULT, T0 + 70 * S) == (fid, False)
    assert store.findings.counts() == {("link_flap", "active"): 2}


def test_one_incident_dated_a_little_apart_is_one_finding(store: StateStore) -> None:
    """A new leader's detectors hold their own samples and may date an incident a flap period later than the old
    leader did (the late-confirm failover test saw two findings for one flap): an active finding of the same fault
    and kind whose onset is within 10 s is that incident, refreshed, under the new key from then on."""
    fid, new = store.findings.record(flap(), FAULT, T0 + 2 * S)
    assert new
    later = flap(start_ts=T0 + 3 * S // 10)
    assert store.findings.has(later, FAULT) and not store.findings.has(flap(start_ts=T0 + 30 * S), FAULT)
    assert store.findings.record(later, FAULT, T0 + 3 * S) == (fid, False)
    assert store.findings.record(later, FAULT, T0 + 4 * S) == (fid, False)  # by its key now
    assert [f["last_seen_ts"] for f in store.findings.all()] == [T0 + 4 * S]
    other, new = store.findings.record(flap(start_ts=T0 + 30 * S), FAULT, T0 + 32 * S)  # 30 s apart: another
    assert new and other != fid
    store.findings.clear_not_seen_since(T0 + 40 * S)
    # cleared by an instance that restarted without its history, seen again by one that has it (chaos seed 3133):
    # the same incident, active again
    assert store.findings.has(flap(start_ts=T0 + 31 * S), FAULT)
    assert store.findings.record(flap(start_ts=T0 + 31 * S), FAULT, T0 + 50 * S) == (other, False)
    assert [f["status"] for f in store.findings.all() if f["id"] == other] == ["active"]
    again, new = store.findings.record(flap(start_ts=T0 + 45 * S), FAULT, T0 + 50 * S)  # 15 s apart: another
    assert new and again not in (fid, other)


def test_one_open_ticket_per_fault(store: StateStore) -> None:
    t = store.tickets.create(FAULT, "link_flap", "leaf-g0-r0", "Ethernet1/1", "link flap", {"n": 1}, T0)
    assert (t.status, t.body, t.escalation, t.recurrences, t.created_ts) == ("open", {"n": 1}, False, 0, T0)
    assert store.tickets.open_for(FAULT) == t
    with pytest.raises(ConflictError):
        store.tickets.create(FAULT, "link_flap", "leaf-g0-r0", "Ethernet1/1", "again", {}, T0 + S)
    assert [x.id for x in store.tickets.all()] == [t.id]  # the failed insert left nothing behind

    t = store.tickets.update(t.id, T0 + S, body={"n": 2}, recurrence=True, external_ref="JIRA-1")
    assert (t.body, t.recurrences, t.external_ref, t.updated_ts) == ({"n": 2}, 1, "JIRA-1", T0 + S)

    r = store.tickets.resolve(t.id, T0 + 2 * S, "alice")
    assert r is not None and (r.status, r.resolved_ts, r.resolved_by) == ("resolved", T0 + 2 * S, "alice")
    assert store.tickets.open_for(FAULT) is None
    assert store.tickets.latest_for(FAULT) == r
    # A second resolve changes nothing.
    assert store.tickets.resolve(t.id, T0 + 3 * S, "bob") == r

    # Once resolved, a new ticket for the same fault may open; or the old one reopens.
    t2 = store.tickets.create(FAULT, "link_flap", "leaf-g0-r0", "Ethernet1/1", "link flap", {}, T0 + 4 * S)
    assert store.tickets.open_for(FAULT) == t2 and store.tickets.latest_for(FAULT) == t2
    with pytest.raises(ConflictError):
        store.tickets.update(t.id, T0 + 5 * S, reopen=True)  # two open tickets for one fault: refused
    store.tickets.resolve(t2.id, T0 + 5 * S, "alice")
    t = store.tickets.update(t.id, T0 + 6 * S, reopen=True, recurrence=True)
    assert (t.status, t.resolved_ts, t.resolved_by, t.recurrences) == ("open", None, None, 2)
    assert [x.id for x in store.tickets.all("open")] == [t.id]
    assert [x.id for x in store.tickets.all("resolved")] == [t2.id]


def test_escalation_ticket(store: StateStore) -> None:
    t = store.tickets.create("escalation:leaf-g0-r0", "escalation", "leaf-g0-r0", None, "x", {}, T0, escalation=True)
    assert t.escalation is True and t.port is None
    assert t.to_dict()["escalation"] is True


def test_actions_lifecycle(store: StateStore) -> None:
    a = store.actions.add("disable", "leaf-g0-r0", "Ethernet1/1", "approve", "awaiting_approval", "flap", T0)
    assert (a.op, a.status, a.finding_id, a.ticket_id, a.detail) == ("disable", "awaiting_approval", None, None, "")
    assert store.actions.open_on("leaf-g0-r0", "Ethernet1/1") == a
    assert store.actions.open_on("leaf-g0-r0", "Ethernet2/1") is None
    assert store.actions.count_since(T0 - S) == 0  # not running yet: does not count against the rate limit

    t = store.tickets.create(FAULT, "link_flap", "leaf-g0-r0", "Ethernet1/1", "t", {}, T0)
    store.actions.link_ticket(a.id, t.id)
    a = store.actions.set_status(a.id, "running", T0 + S, detail="approved by alice")
    assert (a.status, a.ticket_id, a.detail, a.updated_ts, a.created_ts) == (
        "running", t.id, "approved by alice", T0 + S, T0,
    )  # fmt: skip
    assert store.actions.open_on("leaf-g0-r0", "Ethernet1/1") == a
    assert store.actions.count_since(T0 - S) == 1
    a = store.actions.set_status(a.id, "done", T0 + 2 * S)  # detail kept when not given
    assert (a.status, a.detail) == ("done", "approved by alice")
    assert store.actions.open_on("leaf-g0-r0", "Ethernet1/1") is None
    assert store.actions.count_since(T0 - S) == 1
    assert store.actions.count_since(T0 + S) == 0  # created before the window
    assert store.actions.count_since(T0 - S, op="enable") == 0

    store.actions.add("disable", "leaf-g0-r0", "Ethernet2/1", "auto", "refused", "guard", T0, finding_id=7)
    store.actions.add("enable", "leaf-g0-r0", "Ethernet1/1", "auto", "running", "resolved", T0 + 3 * S)
    assert [x.status for x in store.actions.all()] == ["running", "refused", "done"]  # newest first
    assert [x.port for x in store.actions.all("refused")] == ["Ethernet2/1"]
    assert store.actions.all("refused")[0].finding_id == 7
    assert store.actions.counts() == {("disable", "done"): 1, ("disable", "refused"): 1, ("enable", "running"): 1}
    assert store.actions.get(999) is None


def test_disabled_ports_and_probation(store: StateStore) -> None:
    store.holds.hold("leaf-g0-r0", "Ethernet1/1", 1, 10, T0)
    store.holds.hold("leaf-g0-r1", "Ethernet1/1", 2, None, T0 + S)
    assert store.holds.is_held("leaf-g0-r0", "Ethernet1/1")
    assert not store.holds.is_held("leaf-g0-r0", "Ethernet2/1")
    assert store.holds.all() == [
        {"device": "leaf-g0-r0", "port": "Ethernet1/1", "action_id": 1, "ticket_id": 10, "since_ts": T0},
        {"device": "leaf-g0-r1", "port": "Ethernet1/1", "action_id": 2, "ticket_id": None, "since_ts": T0 + S},
    ]
    store.holds.release("leaf-g0-r0", "Ethernet1/1", T0 + 3600 * S, 10)
    assert not store.holds.is_held("leaf-g0-r0", "Ethernet1/1")
    assert store.holds.probation("leaf-g0-r0", "Ethernet1/1", T0 + 60 * S) == 10
    assert store.holds.probation("leaf-g0-r0", "Ethernet1/1", T0 + 3600 * S) is None  # over
    assert store.holds.probation("leaf-g0-r0", "Ethernet2/1", T0) is None
    # Disabled again during probation: no longer on probation.
    store.holds.hold("leaf-g0-r0", "Ethernet1/1", 3, 10, T0 + 120 * S)
    assert store.holds.probation("leaf-g0-r0", "Ethernet1/1", T0 + 121 * S) is None
    assert [p["action_id"] for p in store.holds.all()] == [2, 3]


def test_unsynced_and_mark_synced(store: StateStore) -> None:
    a = store.tickets.create("f:a", "link_flap", "d", "p", "a", {}, T0)
    b = store.tickets.create("f:b", "link_flap", "d", "p", "b", {}, T0)
    assert [t.id for t in store.tickets.unsynced()] == [a.id, b.id]
    store.tickets.mark_synced(a.id, a.updated_ts, "webhook:1")
    assert [t.id for t in store.tickets.unsynced()] == [b.id]
    assert ticket_ref(store, a.id) == "webhook:1"
    a = store.tickets.update(a.id, T0 + S, body={"more": True})
    assert [t.id for t in store.tickets.unsynced()] == [a.id, b.id]  # a new version to send
    store.tickets.mark_synced(a.id, a.updated_ts, None)  # None keeps the reference
    store.tickets.mark_synced(b.id, b.updated_ts, None)
    assert store.tickets.unsynced() == []
    assert ticket_ref(store, a.id) == "webhook:1"


def test_every_ticket_version_is_distinct(store: StateStore) -> None:
    """Two changes in the same clock tick (or after the clock stepped back) are still two versions: the backend
    must get the second one, and its Idempotency-Key (id + updated_ts) must differ from the first."""
    t = store.tickets.create("f:a", "link_flap", "d", "p", "a", {"v": 1}, T0)
    store.tickets.mark_synced(t.id, t.updated_ts, None)
    t2 = store.tickets.update(t.id, T0, body={"v": 2})  # same tick
    assert t2.updated_ts > t.updated_ts
    assert [x.id for x in store.tickets.unsynced()] == [t.id]
    store.tickets.mark_synced(t.id, t2.updated_ts, None)
    t3 = store.tickets.update(t.id, T0 - 5 * S, body={"v": 3})  # the clock stepped back
    assert t3.updated_ts > t2.updated_ts
    assert [x.id for x in store.tickets.unsynced()] == [t.id]
    store.tickets.mark_synced(t.id, t3.updated_ts, None)
    r = store.tickets.resolve(t.id, T0 - 6 * S, "alice")
    assert r is not None and r.updated_ts > t3.updated_ts
    assert [x.id for x in store.tickets.unsynced()] == [t.id]


def test_audit(store: StateStore) -> None:
    store.audit.record(T0, "disable leaf-g0-r0:Ethernet1/1", "flap", mode="auto", action_id=1, finding_id=2)
    store.audit.record(T0 + S, "approved action 1", "flap", actor="alice", action_id=1)
    log = store.audit.entries()
    assert [(e["what"], e["actor"], e["mode"]) for e in log] == [
        ("approved action 1", "alice", None),
        ("disable leaf-g0-r0:Ethernet1/1", "fabricd", "auto"),
    ]
    assert store.audit.entries(limit=1)[0]["what"] == "approved action 1"


def test_failed_transaction_rolls_back(store: StateStore) -> None:
    with pytest.raises(RuntimeError), store.transaction() as db:
        db.execute("INSERT INTO audit (ts, what, why, actor) VALUES (1, 'x', 'y', 'z')")
        raise RuntimeError("boom")
    assert store.audit.entries() == []
    store.audit.record(T0, "after", "the store still works")
    assert len(store.audit.entries()) == 1


def test_survives_a_restart(tmp_path: Path) -> None:
    path = tmp_path / "state.db"
    s = StateStore(path)
    fid, _ = s.findings.record(flap(), FAULT, T0)
    t = s.tickets.create(FAULT, "link_flap", "leaf-g0-r0", "Ethernet1/1", "link flap", {"evidence": [1, 2]}, T0)
    a = s.actions.add("disable", "leaf-g0-r0", "Ethernet1/1", "auto", "running", "flap", T0, finding_id=fid,
                      ticket_id=t.id)  # fmt: skip
    s.holds.hold("leaf-g0-r1", "Ethernet2/1", a.id, t.id, T0)
    s.holds.release("leaf-g0-r2", "Ethernet3/1", T0 + 3600 * S, t.id)
    s.audit.record(T0, "disable", "flap", action_id=a.id)
    s.close()

    s = StateStore(path)  # the service restarted
    try:
        assert s.findings.record(flap(), FAULT, T0 + S) == (fid, False)  # the same incident, not a new one
        assert s.tickets.open_for(FAULT) == t
        assert s.actions.all("running") == [a]  # what reconcile() must finish
        assert s.holds.is_held("leaf-g0-r1", "Ethernet2/1")
        assert s.holds.probation("leaf-g0-r2", "Ethernet3/1", T0 + S) == t.id
        assert [e["what"] for e in s.audit.entries()] == ["disable"]
        # ids continue after the restart
        t2 = s.tickets.create("other", "link_flap", "d", "p", "x", {}, T0)
        assert t2.id == t.id + 1
    finally:
        s.close()


def test_prune(store: StateStore) -> None:
    # three incidents of one fault, each more than 10 s after the last (closer ones are one incident)
    old, _ = store.findings.record(flap(start_ts=T0), FAULT, T0)
    back, _ = store.findings.record(flap(start_ts=T0 + 20 * S), FAULT, T0 + 20 * S)
    recent, _ = store.findings.record(flap(start_ts=T0 + 40 * S), FAULT, T0 + 100 * S)
    assert store.findings.clear_not_seen_since(T0 + 200 * S) == 3
    store.findings.record(flap(start_ts=T0 + 20 * S), FAULT, T0 + 300 * S)  # seen again: active, kept however old
    store.audit.record(T0, "old", "x")
    store.audit.record(T0 + 100 * S, "new", "x")
    store.holds.release("leaf-g0-r0", "Ethernet1/1", T0 + 10 * S, None)  # probation long over
    store.holds.release("leaf-g0-r0", "Ethernet2/1", T0 + 1000 * S, None)
    t = store.tickets.create(FAULT, "link_flap", "leaf-g0-r0", "Ethernet1/1", "t", {}, T0)

    assert store.prune(T0 + 50 * S) == 3  # the old cleared finding, the old audit row, the old probation
    assert sorted(f["id"] for f in store.findings.all()) == sorted([back, recent])
    assert old not in {f["id"] for f in store.findings.all()}
    assert [e["what"] for e in store.audit.entries()] == ["new"]
    assert store.holds.probation("leaf-g0-r0", "Ethernet2/1", T0) is not None
    assert scalar(store, "SELECT COUNT(*) FROM probation") == 1
    assert store.tickets.get(t.id) == t  # tickets are history: never pruned


def test_a_re_reported_incident_keeps_its_first_detection_time(tmp_path: Path) -> None:
    from dataclasses import replace

    store = StateStore(tmp_path / "s.db")
    f = Finding(
        "link_flap", "leaf-a", "Ethernet1/1", ("leaf-a",), ("leaf-a:Ethernet1/1",), 10, 100, "warning", 1.0, "x"
    )
    fid, new = store.findings.record(f, "fault", 100)
    again, new2 = store.findings.record(replace(f, detected_ts=200, summary="y"), "fault", 200)
    assert (fid, new, new2) == (again, True, False)
    (row,) = store.findings.all()
    assert (row["detected_ts"], row["summary"], row["last_seen_ts"]) == (100, "y", 200)


def _tune(key: str, status: TuneStatus = "applying") -> NewTune:
    return NewTune(key, "leaf-1:Ethernet1/1", "leaf-1", "server", "pfc_before_ecn", "pause_us_per_s",
                   [{"knob": "ecn.min_bytes", "before": 100, "after": 50, "low": 1, "high": 200}], "pauses, no marks",
                   "auto", status, "", {"pause_us_per_s": 5000.0})  # fmt: skip


def test_the_tuning_ledger_is_keyed_and_keeps_its_kpis(store: StateStore) -> None:
    a = store.actions.add("tune", "leaf-1", "tuning leaf-1:Ethernet1/1", "auto", "running", "Kmin down", T0, key="t1")
    t = store.tuning.add(_tune("k1"), T0, action_id=a.id)
    assert store.tuning.add(_tune("k1"), T0 + S) == t  # the same proposal again: the row it has
    assert store.actions.get(a.id) == a  # a tune action decodes like the port's own
    t = store.tuning.update(t.id, "verifying", "applied", applied_ts=T0 + S)
    assert (t.status, t.applied_ts, t.kpis_before) == ("verifying", T0 + S, {"pause_us_per_s": 5000.0})
    t = store.tuning.update(t.id, "confirmed", "pause down", ended_ts=T0 + 2 * S, kpis_after={"pause_us_per_s": 0.0})
    assert store.tuning.of_action(a.id) == t and t.kpis_after == {"pause_us_per_s": 0.0}
    store.tuning.add(_tune("k2", "observed"), T0 - 3600 * S)
    # the ledger admit reads: recent or still open; the history leaves observe's records out on request
    assert [x.key for x in store.tuning.since(T0 - S)] == ["k1"]
    assert [x.key for x in store.tuning.history(applied_only=True)] == ["k1"]
    assert store.tuning.counts() == {"confirmed": 1, "observed": 1}
    assert store.prune(T0) == 1 and store.tuning.counts() == {"confirmed": 1}  # observe's old record, not the change


def test_a_schema_6_file_gains_the_tuning_table(tmp_path: Path) -> None:
    path = tmp_path / "state.db"
    StateStore(path).close()
    db = sqlite3.connect(path)
    db.executescript("DROP TABLE tuning; UPDATE meta SET value = '6' WHERE key = 'schema';")
    db.commit()
    db.close()
    s = StateStore(path)
    try:
        assert scalar(s, "SELECT value FROM meta WHERE key = 'schema'") == str(SCHEMA_VERSION)
        assert s.tuning.add(_tune("k1"), T0).status == "applying"
    finally:
        s.close()
