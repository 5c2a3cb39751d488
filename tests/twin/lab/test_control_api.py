"""The twin's control API changes the twin on the event loop that samples it, never from a worker thread."""

from __future__ import annotations

import asyncio
from collections import deque
from typing import Any

import httpx

from lab.control import build_app
from lab.faults import FaultInjector, FaultRecord
from lab.model import Twin
from topology.fabric import Fabric
from topology.model import Cabling


class LoopCheckingInjector(FaultInjector):
    """Notes, for every change, whether it ran on a thread with a running event loop (the twin's own)."""

    def __init__(self, twin: Twin) -> None:
        super().__init__(twin)
        self.on_loop: list[bool] = []

    def _note(self) -> None:
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            self.on_loop.append(False)
        else:
            self.on_loop.append(True)

    def inject(self, kind: str, params: dict[str, Any], now_ns: int | None = None) -> FaultRecord:
        self._note()
        return super().inject(kind, params, now_ns)

    def clear(self, fault_id: str | None = None, now_ns: int | None = None) -> list[FaultRecord]:
        self._note()
        return super().clear(fault_id, now_ns)


def test_inject_and_clear_run_on_the_event_loop(small_blueprint: Cabling) -> None:
    twin = Twin(Fabric(small_blueprint))
    faults = LoopCheckingInjector(twin)
    app = build_app(twin, faults, "token", deque(), {"fabric": "small-pod"})

    async def calls() -> None:
        transport = httpx.ASGITransport(app=app)
        headers = {"Authorization": "Bearer token"}
        async with httpx.AsyncClient(transport=transport, base_url="http://twin", headers=headers) as client:
            body = {"kind": "link_down", "params": {"port": "leaf-g0-r0:Ethernet5/1"}}
            rec = await client.post("/faults", json=body)
            assert rec.status_code == 200, rec.text
            assert (await client.delete(f"/faults/{rec.json()['id']}")).status_code == 200
            assert (await client.delete("/faults")).status_code == 200
            assert (await client.get("/status")).json()["ports_down"] == 0

    asyncio.run(calls())
    # a worker thread recomputing counters while the loop samples them corrupts them (pause time past wall time)
    assert faults.on_loop == [True, True, True]


def test_workloads_and_congestion_settings_over_the_control_api(small_blueprint: Cabling) -> None:
    """`fabricd lab workload ...` and issue 51's tuning loop: start an incast, read the congested queue, change a NIC
    knob, refuse what is not one, clear."""
    twin = Twin(Fabric(small_blueprint))
    app = build_app(twin, FaultInjector(twin), "token", deque(), {"fabric": "small-pod"})

    async def calls() -> None:
        transport = httpx.ASGITransport(app=app)
        headers = {"Authorization": "Bearer token"}
        async with httpx.AsyncClient(transport=transport, base_url="http://twin", headers=headers) as client:
            body = {"kind": "incast", "params": {"port": "leaf-g0-r0:Ethernet1/1", "fan_in": 4}}
            rec = await client.post("/workloads", json=body)
            assert rec.status_code == 200, rec.text
            state = (await client.get("/congestion")).json()
            assert "leaf-g0-r0" in {q["device"] for q in state["queues"]}
            assert state["nic"]["time_reset_s"] == 300e-6  # ConnectX default
            put = await client.put("/congestion", json={"nic": {"min_dec_fac": 0.95}, "flowlet_gap_us": 512})
            assert put.status_code == 200 and put.json()["nic"]["min_dec_fac"] == 0.95
            bad = await client.put("/congestion", json={"nic": {"gain": 2}})
            assert bad.status_code == 400 and "nic: unknown parameter gain" in bad.json()["detail"]
            refused = await client.post("/workloads", json={"kind": "storm", "params": {}})
            assert refused.status_code == 400 and "unknown workload 'storm'" in refused.json()["detail"]
            status = (await client.get("/status")).json()
            assert [w["id"] for w in status["active_workloads"]] == [rec.json()["id"]]
            assert (await client.delete("/workloads")).status_code == 200
            assert (await client.get("/status")).json()["congested_queues"] == 0

    asyncio.run(calls())
