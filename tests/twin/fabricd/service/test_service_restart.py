"""The service process is killed (SIGKILL) after it acted and restarted: nothing lost, nothing duplicated,
and its state still matches the switches. A half-done action found at start is completed."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from fabricd.service.state import StateStore
from lab.control_client import inject
from tests.conftest import EXAMPLES
from tests.twin.lab.twin_thread import TwinThread
from topology.spec import load_spec

from .service_thread import TOKEN, wait_for, write_config
from .test_service_twin import admin_enabled


@pytest.fixture(scope="module")
def twin(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TwinThread]:
    t = TwinThread(load_spec(EXAMPLES / "small-pod.yaml"), tmp_path_factory.mktemp("twin")).start()
    yield t
    t.stop()


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Daemon:
    """`fabricd run` as its own process, the way systemd runs it."""

    def __init__(self, config: Path, port: int, log: Path) -> None:
        self.url = f"http://127.0.0.1:{port}"
        self.log = log
        env = {k: v for k, v in os.environ.items() if not k.startswith("FABRICD_")}
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "fabricd", "run", "--config", str(config)],
            stdout=subprocess.DEVNULL,
            stderr=log.open("ab"),
            env=env,
        )
        wait_for(self._healthy, 30, 0.2)

    def _healthy(self) -> bool:
        if self.proc.poll() is not None:
            raise AssertionError(f"fabricd run exited {self.proc.returncode}: {self.log.read_text()[-2000:]}")
        try:
            synced: int = httpx.get(self.url + "/api/v1/health", timeout=2).json()["telemetry"]["synced"]
            return synced > 0
        except httpx.HTTPError:
            return False

    def get(self, path: str) -> Any:
        return httpx.get(self.url + path, headers={"Authorization": f"Bearer {TOKEN}"}, timeout=10).json()

    def kill(self) -> None:
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(10)

    def stop(self) -> int:
        self.proc.send_signal(signal.SIGTERM)
        return self.proc.wait(20)


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
