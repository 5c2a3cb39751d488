"""The service process is killed (SIGKILL) after it acted and restarted: nothing lost, nothing duplicated,
and its state still matches the switches. A half-done action found at start is completed."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from fabricd.service.state import StateStore
from lab.control_client import inject
from tests.conftest import EXAMPLES
from tests.twin.lab.twin_thread import TwinThread
from topology.spec import load_spec

from .service_thread import Daemon, free_port, wait_for, write_config
from .test_service_twin import admin_enabled


@pytest.fixture(scope="module")
def twin(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TwinThread]:
    t = TwinThread(load_spec(EXAMPLES / "small-pod.yaml"), tmp_path_factory.mktemp("twin")).start()
    yield t
    t.stop()


def test_killed_and_restarted_loses_nothing_and_duplicates_nothing(twin: TwinThread, tmp_path: Path) -> None:
    port = free_port()
    cfg = write_config(tmp_path, twin.inventory, api={"port": port})
    log = tmp_path / "fabricd.log"
    d = Daemon(cfg, port, log)
    try:
        inject(twin.state_dir, "link_flap", {"port": "leaf-g1-r2:Ethernet3/1", "count": 8, "period_s": 0.3})
        wait_for(lambda: d.get("/api/v1/ports/disabled")["ports"], 15)
        tickets = d.get("/api/v1/tickets")["tickets"]
    finally:
        d.kill()
    d = Daemon(cfg, port, log)
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
    t = state.create_ticket("link_flap:x", "link_flap", "leaf-g0-r3", "Ethernet4/1", "flap", {}, 1)
    a = state.add_action("disable", "leaf-g0-r3", "Ethernet4/1", "auto", "running", "flap", 1, ticket_id=t.id)
    state.close()  # as a crash between "running" and the switch call leaves it
    port = free_port()
    write_config(tmp_path, twin.inventory, api={"port": port})
    d = Daemon(cfg, port, tmp_path / "fabricd.log")
    try:
        wait_for(lambda: d.get("/api/v1/ports/disabled")["ports"], 15)
        (action,) = [x for x in d.get("/api/v1/actions")["actions"] if x["id"] == a.id]
        assert action["status"] == "done"
        assert not admin_enabled(twin, "leaf-g0-r3", "Ethernet4/1")
        assert any(row["what"] == f"resume action {a.id}" for row in d.get("/api/v1/audit")["audit"])
    finally:
        d.stop()
