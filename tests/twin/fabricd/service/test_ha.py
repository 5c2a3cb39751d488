"""Hot standby end to end: two `fabricd run` processes on one config, a real nats-server (the lease), a real
PostgreSQL (the shared state), the twin's switches. The leader acts; killed with -9, the standby takes over within
5 s and acts on the next fault; nothing is done or filed twice; cut off from the bus, the new leader stops acting
until the bus is back."""

from __future__ import annotations

import time
from pathlib import Path

import httpx
import pytest

from fabricd.bus import LocalBus
from lab.control_client import inject
from tests.twin.lab.twin_thread import TwinThread
from tests.twin.processes import TTL, bus_down, bus_up, done_on, fabricd, hot_pair, twin_fixture, wait_for, write_config

pytestmark = [pytest.mark.distributed, pytest.mark.slow]
FIRST, SECOND, THIRD = "leaf-g0-r0:Ethernet1/1", "leaf-g1-r1:Ethernet2/1", "leaf-g0-r1:Ethernet3/1"
twin = twin_fixture()


def test_leader_killed_the_standby_acts_once_and_a_partitioned_leader_stops(
    twin: TwinThread, nats_bus: LocalBus, postgres_url: str, tmp_path: Path
) -> None:
    config = write_config(tmp_path, twin.inventory, state={"url": postgres_url},
                          ha={"enabled": True, "lease_ttl_s": TTL}, bus={"urls": [nats_bus.url]})  # fmt: skip
    with hot_pair(config, tmp_path) as (a, b):
        assert b.get("/api/v1/health")["ha"]["leader"] == "a"
        assert 'fabricd_ha_leader{instance="b"} 0.0' in httpx.get(b.url + "/metrics").text
        status = fabricd("status", "--api", b.url, token=True, timeout_s=30)
        assert "hot standby: b is a standby; the leader is a" in status.stdout, status
        # a standby refuses changes and names why
        r = b.post("/api/v1/tickets/1/resolve")
        assert r.status_code == 503 and "standby" in r.json()["error"]

        inject(twin.state_dir, "link_flap", {"port": FIRST, "count": 8, "period_s": 0.3})
        wait_for(lambda: done_on(a) == [FIRST], 30)
        assert done_on(b) == [FIRST]  # one shared state

        a.kill()  # kill -9: no goodbye, the lease just stops being renewed
        killed = time.monotonic()
        wait_for(lambda: b.role() == "leader", 10, every_s=0.05)
        took = time.monotonic() - killed
        assert took < 5.0, f"standby took {took:.1f} s"
        health = b.get("/api/v1/health")["ha"]
        assert health["leader"] == "b" and health["token"] > 1
        assert 'fabricd_ha_leader{instance="b"} 1.0' in httpx.get(b.url + "/metrics").text

        inject(twin.state_dir, "link_flap", {"port": SECOND, "count": 8, "period_s": 0.3})
        wait_for(lambda: done_on(b) == sorted([FIRST, SECOND]), 30)
        time.sleep(2)  # more ticks of b's detectors, which saw the first flap too
        actions = b.get("/api/v1/actions")["actions"]
        assert sorted(f"{x['device']}:{x['port']}" for x in actions) == sorted([FIRST, SECOND])  # never twice
        tickets = b.get("/api/v1/tickets")["tickets"]
        assert len(tickets) == 2 and len({t["id"] for t in tickets}) == 2

        bus_down(nats_bus)  # b is cut off from the bus: it must stop acting
        wait_for(lambda: b.role() == "standby", TTL + 2, every_s=0.05)
        inject(twin.state_dir, "link_flap", {"port": THIRD, "count": 30, "period_s": 0.3})
        time.sleep(3)
        assert done_on(b) == sorted([FIRST, SECOND])  # nothing while no lease can be proven
        bus_up(nats_bus)
        wait_for(lambda: b.role() == "leader", 20)
        wait_for(lambda: done_on(b) == sorted([FIRST, SECOND, THIRD]), 30)
        audit = [e["what"] for e in b.get("/api/v1/audit")["audit"]]
        assert "a leads" in audit and "b leads" in audit
