"""The twin's control API (HTTP on loopback): status, fault injection and clearing, recent probes.

`fabricd lab inject/clear/status` and tests use it. Every call needs the lab's bearer token (the lab
password), since anything on the machine can reach loopback. Handlers are `async`: they run on the event loop that
samples the twin for gNMI, never in a worker thread, since two threads recomputing the twin's counters at once
corrupt them (a stuck queue briefly transmits, pause time runs past wall time).
"""

from __future__ import annotations

import hmac
import time
from collections import deque
from typing import Any

from fastapi import Depends, FastAPI, HTTPException, Request
from pydantic import BaseModel, Field

from .faults import FaultError, FaultInjector
from .model import Twin


class FaultRequest(BaseModel):
    kind: str
    params: dict[str, Any] = Field(default_factory=dict)


def build_app(
    twin: Twin, faults: FaultInjector, token: str, probes: deque[dict[str, Any]], info: dict[str, Any]
) -> FastAPI:
    app = FastAPI(title="fabricd twin control", version="1")
    started = time.time()

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

    @app.get("/probes", dependencies=[Depends(auth)])
    async def recent_probes(since: int = 0) -> list[dict[str, Any]]:
        return [p for p in probes if p["ts"] > since]

    return app
