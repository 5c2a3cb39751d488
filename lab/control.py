"""The twin's control API (HTTP on loopback): status, fault injection and clearing, workloads, the congestion
model's settings and answer, recent probes.

`fabricd lab inject/clear/status` and tests use it. Every call needs the lab's bearer token (the lab
password), since anything on the machine can reach loopback. Handlers are `async`: they run on the event loop that
samples the twin for gNMI, never in a worker thread, since two threads recomputing the twin's counters at once
corrupt them (a stuck queue briefly transmits, pause time runs past wall time).
"""

from __future__ import annotations

import dataclasses
import hmac
import time
from collections import deque
from typing import Any

from fastapi import Depends, FastAPI, HTTPException, Request
from pydantic import BaseModel, Field

from .congestion import NicParams
from .faults import FaultError, FaultInjector
from .model import Twin
from .workloads import WorkloadError, WorkloadRunner


class FaultRequest(BaseModel):
    kind: str
    params: dict[str, Any] = Field(default_factory=dict)


class CongestionRequest(BaseModel):
    """Changes to the twin's congestion settings (lab/model.py CongestionSettings): NicParams fields by name, the DRs
    that generate CNPs, the flowlet gap."""

    nic: dict[str, float | bool] = Field(default_factory=dict)
    dr_cnp: list[str] | None = None
    flowlet_gap_us: float | None = Field(None, gt=0)


def congestion_state(twin: Twin) -> dict[str, Any]:
    """The settings and the model's last answer per congested queue (bits/s, bytes, shares)."""
    settings = twin.congestion
    return {
        "nic": dataclasses.asdict(settings.nic),
        "dr_cnp": sorted(settings.dr_cnp) if settings.dr_cnp is not None else None,
        "flowlet_gap_us": settings.flowlet_gap_us,
        "queues": [
            {"device": device, "port": port, "dr_cnp": view.dr_cnp} | dataclasses.asdict(view.outcome)
            for (device, port), view in sorted(twin.congested.items())
        ],
        "flowlets": [{"device": device} | dataclasses.asdict(view) for device, view in sorted(twin.flowlets.items())],
        # the server NICs' ConnectX DCQCN counters (cumulative): no switch serves them (lab/nics.py)
        "nics": twin.nic_counters(twin.now),
    }


def build_app(
    twin: Twin,
    faults: FaultInjector,
    token: str,
    probes: deque[dict[str, Any]],
    info: dict[str, Any],
    workloads: WorkloadRunner | None = None,
) -> FastAPI:
    app = FastAPI(title="fabricd twin control", version="1")
    started = time.time()
    runner = workloads or WorkloadRunner(twin)

    def auth(request: Request) -> None:
        given = request.headers.get("authorization", "")
        if not hmac.compare_digest(given.encode(), f"Bearer {token}".encode()):
            raise HTTPException(401, "missing or wrong bearer token (the lab password in the state dir)")

    @app.get("/status", dependencies=[Depends(auth)])
    async def status() -> dict[str, Any]:
        now = twin.advance()
        down = sum(int((~sw.oper_up).sum()) for sw in twin.switches.values())
        return info | {
            "switches": len(twin.switches),
            "ports": sum(len(sw.ports) for sw in twin.switches.values()),
            "ports_down": down,
            "uptime_s": round(time.time() - started, 1),
            "now_ns": now,
            "active_faults": [r.to_dict() for r in faults.active()],
            "active_workloads": [r.to_dict() for r in runner.active()],
            "congested_queues": len(twin.congested),
        }

    @app.get("/faults", dependencies=[Depends(auth)])
    async def fault_log() -> list[dict[str, Any]]:
        return [r.to_dict() for r in faults.log]

    @app.post("/faults", dependencies=[Depends(auth)])
    async def inject(req: FaultRequest) -> dict[str, Any]:
        try:
            return faults.inject(req.kind, req.params).to_dict()
        except FaultError as e:
            raise HTTPException(400, str(e)) from None

    @app.delete("/faults", dependencies=[Depends(auth)])
    async def clear_all() -> list[dict[str, Any]]:
        return [r.to_dict() for r in faults.clear()]

    @app.delete("/faults/{fault_id}", dependencies=[Depends(auth)])
    async def clear_one(fault_id: str) -> list[dict[str, Any]]:
        try:
            return [r.to_dict() for r in faults.clear(fault_id)]
        except FaultError as e:
            raise HTTPException(404, str(e)) from None

    @app.get("/workloads", dependencies=[Depends(auth)])
    async def workload_log() -> list[dict[str, Any]]:
        return [r.to_dict() for r in runner.log]

    @app.post("/workloads", dependencies=[Depends(auth)])
    async def start_workload(req: FaultRequest) -> dict[str, Any]:
        try:
            return runner.start(req.kind, req.params).to_dict()
        except WorkloadError as e:
            raise HTTPException(400, str(e)) from None

    @app.delete("/workloads", dependencies=[Depends(auth)])
    async def clear_workloads() -> list[dict[str, Any]]:
        return [r.to_dict() for r in runner.clear()]

    @app.delete("/workloads/{workload_id}", dependencies=[Depends(auth)])
    async def clear_workload(workload_id: str) -> list[dict[str, Any]]:
        try:
            return [r.to_dict() for r in runner.clear(workload_id)]
        except WorkloadError as e:
            raise HTTPException(404, str(e)) from None

    @app.get("/congestion", dependencies=[Depends(auth)])
    async def congestion() -> dict[str, Any]:
        twin.advance()
        return congestion_state(twin)

    @app.put("/congestion", dependencies=[Depends(auth)])
    async def set_congestion(req: CongestionRequest) -> dict[str, Any]:
        settings = twin.congestion
        known = {f.name for f in dataclasses.fields(NicParams)}
        unknown = sorted(set(req.nic) - known)
        if unknown:
            raise HTTPException(
                400, f"nic: unknown parameter {', '.join(unknown)}; use one of {', '.join(sorted(known))}"
            )
        try:
            nic = dataclasses.replace(settings.nic, **req.nic)  # type: ignore[arg-type]
        except TypeError as e:
            raise HTTPException(400, f"nic: {e}") from None
        twin.advance()
        settings.nic = nic
        if req.dr_cnp is not None:
            settings.dr_cnp = frozenset(req.dr_cnp)
        if req.flowlet_gap_us is not None:
            settings.flowlet_gap_us = req.flowlet_gap_us
        twin.touch()
        twin.advance()
        return congestion_state(twin)

    @app.get("/probes", dependencies=[Depends(auth)])
    async def recent_probes(since: int = 0) -> list[dict[str, Any]]:
        return [p for p in probes if p["ts"] > since]

    return app
