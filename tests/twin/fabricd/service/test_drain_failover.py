"""Planned maintenance across a failover (issue 41): two `fabricd run` processes on one config, a real nats-server (the
lease), a real PostgreSQL (the shared state, where a drain records each step before the next), the twin's switches
(small-pod with 4 spines per rail: a spine drained leaves each leaf 75 %). The leader begins a spine drain with
--shut and is killed with -9 between its steps; the standby takes over and finishes it once: each port shut by one
action, the shift in the spine's config, one drain begun."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml

from fabricd.bus import LocalBus
from tests.conftest import EXAMPLES
from tests.twin.lab.twin_thread import TwinThread
from tests.twin.processes import TTL, Fabricd, eos_driver, hot_pair, running_twin, wait_for, write_config

pytestmark = [pytest.mark.distributed, pytest.mark.slow]
SPINE = "spine-r0-0"


@pytest.fixture
def spec(tmp_path: Path) -> Path:
    data = yaml.safe_load((EXAMPLES / "small-pod.yaml").read_text())
    path = tmp_path / "four-spines.yaml"
    path.write_text(yaml.safe_dump({**data, "spines_per_rail": 4}))
    return path


@pytest.fixture
def twin(spec: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[TwinThread]:
    with running_twin(spec, tmp_path_factory.mktemp("drain-ha-twin")) as t:
        yield t


def drain_of(inst: Fabricd) -> dict[str, Any] | None:
    try:
        drains = inst.get("/api/v1/maintenance")["maintenance"]
    except httpx.HTTPError:
        return None
    return drains[0] if drains else None


def maintenance_actions(inst: Fabricd, drain_id: int) -> list[dict[str, Any]]:
    actions = inst.get("/api/v1/actions")["actions"]
    return [a for a in actions if (a["key"] or "").startswith(f"maintenance:{drain_id}:")]


@pytest.mark.parametrize("kill_at", ["verify", "shut"])
def test_a_leader_killed_mid_drain_the_standby_finishes_it_once(
    kill_at: str, twin: TwinThread, spec: Path, nats_bus: LocalBus, postgres_url: str, tmp_path: Path
) -> None:
    """`verify`: killed once the shift is recorded, while it waits for the rates to fall (the standby verifies,
    then shuts). `shut`: killed once the first port's shut began (the standby completes the old leader's running
    actions, and its resumed shut step finds them by their keys instead of adding new ones)."""
    config = write_config(tmp_path, twin.inventory, spec=str(spec), state={"url": postgres_url},
                          ha={"enabled": True, "lease_ttl_s": TTL}, bus={"urls": [nats_bus.url]})  # fmt: skip
    with hot_pair(config, tmp_path) as (a, b):
        r = a.post("/api/v1/maintenance", json={"kind": "switch", "target": SPINE, "reason": "NOS upgrade",
                                                "shut": True})  # fmt: skip
        assert r.status_code == 200, r.text
        drain = r.json()["drain"]
        did, ports, steps = drain["id"], drain["ports"], drain["steps"]
        assert [s.split(":")[0] for s in steps] == ["guard", "shift", "verify", "shut", "hold", "drained"]

        def between_steps() -> bool:
            d = drain_of(a)
            assert d is not None and d["state"] == "draining", d  # killed before it could end
            if kill_at == "verify":
                return bool(d["done"] == 2)  # guard and shift recorded, verify waiting
            return any(x["status"] == "running" for x in maintenance_actions(a, did))

        wait_for(between_steps, 30, every_s=0.02)
        a.kill()  # kill -9 between two steps: nothing of it says goodbye
        wait_for(lambda: b.role() == "leader", 10, every_s=0.05)
        d = wait_for(lambda: (x := drain_of(b)) is not None and x["state"] == "drained" and x, 60)
        assert d["done"] == len(steps) and d["id"] == did, d

        # each drained port shut by exactly one action of this drain, done (the old leader's, or the new one's)
        actions = b.get("/api/v1/actions")["actions"]
        assert sorted(x["key"] for x in actions) == sorted(f"maintenance:{did}:down:{p}" for p in ports), actions
        assert {(x["op"], x["status"]) for x in actions} == {("disable", "done")}, actions
        held = b.get("/api/v1/ports/disabled")["ports"]
        assert sorted(f"{p['device']}:{p['port']}" for p in held) == sorted(ports)
        assert {p["ticket_id"] for p in held} == {None}  # held as maintenance, no fault ticket
        assert b.get("/api/v1/tickets")["tickets"] == []
        # what the switches say: each port admin down with fabricd's maintenance mark, the spine in maintenance mode
        by_device: dict[str, list[str]] = {}
        for p in ports:
            device, _, port = p.partition(":")
            by_device.setdefault(device, []).append(port)
        for device, names in by_device.items():
            with eos_driver(twin, device) as drv:
                rows = drv.get_interfaces()
                if device == SPINE:
                    assert "      quiesce" in drv.get_config(retrieve="running")["running"]
            for port in names:
                assert not rows[port]["is_enabled"], (device, port)
                assert rows[port]["description"].endswith("maintenance]"), (device, port, rows[port]["description"])
        # the audit: one drain begun (by a), resumed once (by b), nothing begun twice
        audit = b.get("/api/v1/audit")["audit"]
        whats = [e["what"] for e in audit]
        assert whats.count(f"drain {did} of switch {SPINE} begun") == 1
        assert [e["why"] for e in audit if e["why"].startswith(f"drain {did} resumed")] == [
            f"drain {did} resumed at its next step"
        ]
        assert "a leads" in whats and "b leads" in whats
