"""The service process is killed (SIGKILL) after it acted and restarted: nothing lost, nothing duplicated,
and its state still matches the switches. A half-done action found at start is completed."""

from __future__ import annotations

import json
import sqlite3
import time
from pathlib import Path
from typing import Any

import pytest

from fabricd.service.state import StateStore
from lab.control_client import inject
from tests.twin.lab.twin_thread import TwinThread
from tests.twin.processes import admin_enabled, fabricd_run, free_port, twin_fixture, wait_for, write_config

twin = twin_fixture(scope="module")


def test_killed_and_restarted_loses_nothing_and_duplicates_nothing(twin: TwinThread, tmp_path: Path) -> None:
    port = free_port()
    cfg = write_config(tmp_path, twin.inventory, api={"port": port})
    log = tmp_path / "fabricd.log"
    d = fabricd_run(cfg, log, port=port).synced()
    try:
        inject(twin.state_dir, "link_flap", {"port": "leaf-g1-r2:Ethernet3/1", "count": 8, "period_s": 0.3})
        wait_for(lambda: d.get("/api/v1/ports/disabled")["ports"], 15)
        tickets = d.get("/api/v1/tickets")["tickets"]
    finally:
        d.kill()
    d = fabricd_run(cfg, log, port=port).synced()
    try:
        assert d.get("/api/v1/tickets")["tickets"] == tickets  # same tickets, same versions, nothing new
        assert [(p["device"], p["port"]) for p in d.get("/api/v1/ports/disabled")["ports"]] == [
            ("leaf-g1-r2", "Ethernet3/1")
        ]
        assert not admin_enabled(twin, "leaf-g1-r2", "Ethernet3/1")  # the revert timer was confirmed before the kill
        assert d.stop() == 0
    finally:
        if d.proc.poll() is None:
            d.kill()
    text = log.read_text()
    assert "test-api-token" not in text  # neither the API token nor the switches' password reach the log
    assert (twin.state_dir / "lab.secret").read_text().strip() not in text


def test_half_done_action_is_completed_at_start(twin: TwinThread, tmp_path: Path) -> None:
    cfg = write_config(tmp_path, twin.inventory)
    state = StateStore(tmp_path / "state.db")
    t = state.tickets.create("link_flap:x", "link_flap", "leaf-g0-r3", "Ethernet4/1", "flap", {}, 1)
    a = state.actions.add("disable", "leaf-g0-r3", "Ethernet4/1", "auto", "running", "flap", 1, ticket_id=t.id)
    state.close()  # as a crash between "running" and the switch call leaves it
    port = free_port()
    write_config(tmp_path, twin.inventory, api={"port": port})
    d = fabricd_run(cfg, tmp_path / "fabricd.log", port=port).synced()
    try:
        wait_for(lambda: d.get("/api/v1/ports/disabled")["ports"], 15)
        (action,) = [x for x in d.get("/api/v1/actions")["actions"] if x["id"] == a.id]
        assert action["status"] == "done"
        assert not admin_enabled(twin, "leaf-g0-r3", "Ethernet4/1")
        assert any(row["what"] == f"resume action {a.id}" for row in d.get("/api/v1/audit")["audit"])
    finally:
        d.stop()


def _remembered(state: Path, device: str, port: str) -> int | None:
    """The carrier-transitions value the running fabricd wrote for the port (read-only, beside it)."""
    db = sqlite3.connect(f"{state.resolve().as_uri()}?mode=ro", uri=True, timeout=10)
    try:
        row = db.execute("SELECT value FROM carrier_seen WHERE device = ? AND port = ?", (device, port)).fetchone()
        return None if row is None else int(row[0])
    finally:
        db.close()


def _round_after(state: Path, ts: int) -> bool:
    """The running fabricd has written a carrier round after `ts` with every switch heard fresh: it has compared
    every port it remembered."""
    db = sqlite3.connect(f"{state.resolve().as_uri()}?mode=ro", uri=True, timeout=10)
    try:
        row = db.execute("SELECT value FROM meta WHERE key = 'carrier_watch'").fetchone()
        doc = None if row is None else json.loads(row[0])
        return doc is not None and doc["ts"] > ts and doc["unsure"] == []
    finally:
        db.close()


@pytest.mark.parametrize("flapped", [True, False], ids=["flap while down", "no flap while down"])
def test_a_flap_that_ends_while_fabricd_is_down_is_ticketed_not_acted_on(
    twin: TwinThread, tmp_path: Path, flapped: bool
) -> None:
    device, port = "leaf-g1-r0", "Ethernet2/1"  # a server port (its NIC streams nothing): the leaf counts alone
    api = free_port()
    cfg = write_config(tmp_path, twin.inventory, api={"port": api})
    log, state = tmp_path / "fabricd.log", tmp_path / "state.db"
    d = fabricd_run(cfg, log, port=api).synced()
    try:
        before = wait_for(lambda: _remembered(state, device, port) is not None, 20)
    finally:
        d.kill()
    assert before
    if flapped:
        inject(twin.state_dir, "link_flap", {"port": f"{device}:{port}", "count": 8, "period_s": 0.3})
    time.sleep(8 * 0.3 + 1.5)  # the flap is over before fabricd is back
    restarted = time.time_ns()
    d = fabricd_run(cfg, log, port=api).synced()
    try:
        fault = f"link_flap:gpu-g1-001:nic0--{device}:{port}"

        def unwatched() -> list[dict[str, Any]]:
            return [f for f in d.get("/api/v1/findings")["findings"] if "unwatched" in f["evidence"]]

        if not flapped:
            wait_for(lambda: _round_after(state, restarted), 30)
            time.sleep(1)  # a few ticks more
            assert unwatched() == []
            assert [t for t in d.get("/api/v1/tickets")["tickets"] if t["fault"] == fault] == []
            return
        (f,) = wait_for(unwatched, 40)
        tickets = wait_for(lambda: [t for t in d.get("/api/v1/tickets")["tickets"] if t["fault"] == fault], 10)
        assert (f["kind"], f["device"], f["port"]) == ("link_flap", device, port)
        assert f["evidence"]["unwatched"]["transitions"] == 16 and f["evidence"]["flaps"] == 8
        assert f["evidence"]["unwatched"]["to_ts"] > restarted > f["evidence"]["unwatched"]["from_ts"]
        assert "went down 8 times while fabricd was not watching" in f["summary"]
        (t,) = tickets
        assert t["body"]["status_note"] == (
            "flapped while fabricd was not watching; it is stable now: not taken down; watch it"
        )
        assert t["body"]["evidence"]["detector"]["unwatched"] == f["evidence"]["unwatched"]
        time.sleep(2)  # a few more ticks: still nothing done to the port
        assert [a for a in d.get("/api/v1/actions")["actions"] if a["port"] == port and a["device"] == device] == []
        assert (device, port) not in {(p["device"], p["port"]) for p in d.get("/api/v1/ports/disabled")["ports"]}
        assert admin_enabled(twin, device, port)
        assert len([x for x in d.get("/api/v1/tickets")["tickets"] if x["fault"] == fault]) == 1
    finally:
        d.stop()
