"""Hot standby end to end: two `fabricd run` processes on one config, a real nats-server (the lease), a real
PostgreSQL (the shared state), the twin's switches. The leader acts; killed with -9, the standby takes over within
5 s and acts on the next fault; nothing is done or filed twice; cut off from the bus, the new leader stops acting
until the bus is back."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from fabricd.bus import LocalBus, start_local, stop_local
from lab.control_client import inject
from tests.conftest import EXAMPLES, REPO, free_port
from tests.twin.lab.twin_thread import TwinThread
from topology.spec import load_spec

from .service_thread import TOKEN, wait_for, write_config

pytestmark = [pytest.mark.distributed, pytest.mark.slow]
TTL = 2.0
FIRST, SECOND, THIRD = "leaf-g0-r0:Ethernet1/1", "leaf-g1-r1:Ethernet2/1", "leaf-g0-r1:Ethernet3/1"


@pytest.fixture
def twin(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TwinThread]:
    t = TwinThread(load_spec(EXAMPLES / "small-pod.yaml"), tmp_path_factory.mktemp("ha-twin")).start()
    yield t
    t.stop()


class Instance:
    def __init__(self, name: str, config: Path, log: Path) -> None:
        self.name, self.port = name, free_port()
        env = {**os.environ, "FABRICD_API__PORT": str(self.port), "FABRICD_HA__INSTANCE": name}
        self.log = log.open("w")
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "fabricd", "run", "--config", str(config)],
            cwd=REPO, env=env, stdout=self.log, stderr=subprocess.STDOUT,
        )  # fmt: skip

    def get(self, path: str) -> Any:
        r = httpx.get(f"http://127.0.0.1:{self.port}{path}", headers={"Authorization": f"Bearer {TOKEN}"}, timeout=5)
        r.raise_for_status()
        return r.json()

    def role(self) -> str | None:
        try:
            return str(self.get("/api/v1/health")["ha"]["role"])
        except httpx.HTTPError:
            return None

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait(10)
        self.log.close()


def done_on(inst: Instance) -> list[str]:
    return sorted(f"{a['device']}:{a['port']}" for a in inst.get("/api/v1/actions")["actions"] if a["status"] == "done")


def test_leader_killed_the_standby_acts_once_and_a_partitioned_leader_stops(
    twin: TwinThread, nats_bus: LocalBus, postgres_url: str, tmp_path: Path
) -> None:
    config = write_config(tmp_path, twin.inventory, state={"url": postgres_url},
                          ha={"enabled": True, "lease_ttl_s": TTL}, bus={"urls": [nats_bus.url]})  # fmt: skip
    a = Instance("a", config, tmp_path / "a.log")
    b: Instance | None = None
    try:
        wait_for(lambda: a.role() == "leader", 60)
        b = Instance("b", config, tmp_path / "b.log")
        wait_for(lambda: b is not None and b.role() == "standby", 60)
        assert b.get("/api/v1/health")["ha"]["leader"] == "a"
        assert 'fabricd_ha_leader{instance="b"} 0.0' in httpx.get(f"http://127.0.0.1:{b.port}/metrics").text
        status = subprocess.run(
            [sys.executable, "-m", "fabricd", "status", "--api", f"http://127.0.0.1:{b.port}"], cwd=REPO,
            env={**os.environ, "FABRICD_API_TOKEN": TOKEN}, capture_output=True, text=True, timeout=30,
        )  # fmt: skip
        assert "hot standby: b is a standby; the leader is a" in status.stdout, status
        # a standby refuses changes and names why
        r = httpx.post(f"http://127.0.0.1:{b.port}/api/v1/tickets/1/resolve",
                       headers={"Authorization": f"Bearer {TOKEN}"}, timeout=5)  # fmt: skip
        assert r.status_code == 503 and "standby" in r.json()["error"]

        inject(twin.state_dir, "link_flap", {"port": FIRST, "count": 8, "period_s": 0.3})
        wait_for(lambda: done_on(a) == [FIRST], 30)
        assert done_on(b) == [FIRST]  # one shared state

        a.kill()  # kill -9: no goodbye, the lease just stops being renewed
        killed = time.monotonic()
        wait_for(lambda: b is not None and b.role() == "leader", 10, every_s=0.05)
        took = time.monotonic() - killed
        assert took < 5.0, f"standby took {took:.1f} s"
        health = b.get("/api/v1/health")["ha"]
        assert health["leader"] == "b" and health["token"] > 1
        assert 'fabricd_ha_leader{instance="b"} 1.0' in httpx.get(f"http://127.0.0.1:{b.port}/metrics").text

        inject(twin.state_dir, "link_flap", {"port": SECOND, "count": 8, "period_s": 0.3})
        wait_for(lambda: b is not None and done_on(b) == sorted([FIRST, SECOND]), 30)
        time.sleep(2)  # more ticks of b's detectors, which saw the first flap too
        actions = b.get("/api/v1/actions")["actions"]
        assert sorted(f"{x['device']}:{x['port']}" for x in actions) == sorted([FIRST, SECOND])  # never twice
        tickets = b.get("/api/v1/tickets")["tickets"]
        assert len(tickets) == 2 and len({t["id"] for t in tickets}) == 2

        stop_local(nats_bus.folder)  # b is cut off from the bus: it must stop acting
        wait_for(lambda: b is not None and b.role() == "standby", TTL + 2, every_s=0.05)
        inject(twin.state_dir, "link_flap", {"port": THIRD, "count": 30, "period_s": 0.3})
        time.sleep(3)
        assert done_on(b) == sorted([FIRST, SECOND])  # nothing while no lease can be proven
        start_local(nats_bus.folder, port=int(nats_bus.url.rsplit(":", 1)[1]))
        wait_for(lambda: b is not None and b.role() == "leader", 20)
        wait_for(lambda: b is not None and done_on(b) == sorted([FIRST, SECOND, THIRD]), 30)
        audit = [e["what"] for e in b.get("/api/v1/audit")["audit"]]
        assert "a leads" in audit and "b leads" in audit
    finally:
        a.kill()
        if b is not None:
            b.kill()
