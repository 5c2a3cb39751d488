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
