"""The REST API (FastAPI, OpenAPI at /docs and /openapi.json) and /metrics for Prometheus.

Reads are open to whoever can reach the address (bind it to localhost or a management network); calls that
change anything need `Authorization: Bearer <api token>`. Without a configured token they are refused.
"""

from __future__ import annotations

import hmac
from typing import TYPE_CHECKING, Any

from fastapi import Depends, FastAPI, HTTPException, Query, Request
from fastapi.responses import JSONResponse, Response
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

from fabricd import __version__

from .remediation import ActionError, UnknownIdError

if TYPE_CHECKING:
    from .daemon import Service


def create_app(service: Service) -> FastAPI:
    app = FastAPI(title="fabricd", version=__version__, description="Fabric controller for RoCE GPU fabrics.")

    def require_token(request: Request) -> str:
        token = service.api_token
        if token is None:
            raise HTTPException(403, "mutating calls are disabled: set api.token in fabricd.yaml")
        got = request.headers.get("authorization", "")
        scheme, _, value = got.partition(" ")
        if scheme.lower() != "bearer" or not hmac.compare_digest(value.encode(), token.get_secret_value().encode()):
            raise HTTPException(401, "missing or wrong bearer token", headers={"WWW-Authenticate": "Bearer"})
        return request.headers.get("x-fabricd-actor", "api")

    @app.get("/api/v1/health")
    async def health() -> dict[str, Any]:
        return service.health()

    @app.get("/api/v1/findings")
    async def findings(status: str | None = Query(None, pattern="^(active|cleared)$"), limit: int = 500) -> Any:
        return {"findings": service.state.findings(status, limit)}

    @app.get("/api/v1/actions")
    async def actions(status: str | None = None, limit: int = 500) -> Any:
        return {"actions": [a.to_dict() for a in service.state.actions(status, limit)]}

    @app.get("/api/v1/tickets")
    async def tickets(status: str | None = Query(None, pattern="^(open|resolved)$"), limit: int = 500) -> Any:
        return {"tickets": [t.to_dict() for t in service.state.tickets(status, limit)]}

    @app.get("/api/v1/tickets/{ticket_id}")
    async def ticket(ticket_id: int) -> Any:
        t = service.state.ticket(ticket_id)
        if t is None:
            raise HTTPException(404, f"no ticket {ticket_id}")
        return t.to_dict()

    @app.get("/api/v1/ports/disabled")
    async def disabled() -> Any:
        return {"ports": service.state.disabled_ports()}

    @app.get("/api/v1/topology/summary")
    async def topology() -> Any:
        return service.topology_summary()

    @app.get("/api/v1/dci")
    async def dci() -> Any:
        """The DR port monitor's last judgement per group: load share, drops and cost (docs/dci.md)."""
        return {"groups": [x.to_dict() for x in sorted(service.dci_state.live.values(), key=lambda x: x.group)]}

    @app.get("/api/v1/jobs")
    async def jobs() -> Any:
        """Every job with its footprint, traffic per rail, outliers and the ports that need attention."""
        return {"jobs": [r.to_dict(ports=False) for r in service.job_reports()], "source": service.health()["jobs"]}

    @app.get("/api/v1/jobs/{job_id}")
    async def job(job_id: str) -> Any:
        for r in service.job_reports():
            if r.footprint.job.id == job_id:
                return r.to_dict()
        raise HTTPException(404, f"no job {job_id}; list them with `fabricd jobs`")

    @app.get("/api/v1/audit")
    async def audit(limit: int = 200) -> Any:
        return {"audit": service.state.audit_log(limit)}

    @app.post("/api/v1/tickets/{ticket_id}/resolve")
    async def resolve(ticket_id: int, actor: str = Depends(require_token)) -> Any:
        try:
            t = await service.remediator.resolve(ticket_id, actor)
        except ActionError as e:
            raise HTTPException(404 if isinstance(e, UnknownIdError) else 409, str(e)) from None
        await service.publish(t)
        return t.to_dict()

    @app.post("/api/v1/actions/{action_id}/approve")
    async def approve(action_id: int, actor: str = Depends(require_token)) -> Any:
        try:
            a = await service.remediator.approve(action_id, actor)
        except ActionError as e:
            raise HTTPException(404 if isinstance(e, UnknownIdError) else 409, str(e)) from None
        return a.to_dict()

    @app.get("/metrics")
    async def metrics() -> Response:
        return Response(generate_latest(service.registry), media_type=CONTENT_TYPE_LATEST)

    @app.exception_handler(HTTPException)
    async def _http_error(_: Request, exc: HTTPException) -> JSONResponse:
        return JSONResponse({"error": exc.detail}, status_code=exc.status_code, headers=exc.headers)

    return app
