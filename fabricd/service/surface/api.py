"""The REST API (FastAPI, OpenAPI at /docs and /openapi.json) and /metrics for Prometheus.

Every call but /metrics and /api/v1/health needs `Authorization: Bearer <token>` with a role that allows it
(fabricd/service/surface/access.py: viewer reads, operator approves and resolves, admin manages tokens); the actor in
the audit log is the token's user. `api.anonymous_read: true` opens the reads (a lab). docs/access.md.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from typing import Any, Literal

from fastapi import Depends, FastAPI, HTTPException, Query, Request
from fastapi import Path as PathParam
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response
from fastapi.routing import APIRoute
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest
from pydantic import BaseModel, Field
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.routing import Match, Route
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from fabricd import __version__
from topology.model import Endpoint

from ..maintenance.plan import MaintenanceInputError, UnknownTargetError, overran
from ..remediation.errors import ActionError, StandbyError, UnknownIdError
from ..state import Action, DrainRecord, Ticket
from . import web
from .access import ANONYMOUS, USER_PATTERN, Principal, Role, new_token, token_hash, valid_user
from .api_models import (
    Actions,
    Audit,
    CreatedToken,
    DisabledPorts,
    DrainPlanned,
    Findings,
    HoldReleased,
    Maintenance,
    ModeSet,
    Revoked,
    Tickets,
    Tokens,
)
from .person_text import OptionalText, Text
from .surface import ServiceSurface

MAX_BODY = 64 * 1024  # the API takes small JSON bodies only
MAX_OFFSET = 10**9


def _id() -> Any:
    """A path id: positive and bounded (SQLite integers are 64-bit: never overflow them). One per parameter: FastAPI
    binds a parameter object to its first name."""
    return PathParam(ge=1, le=2**53, description="a positive id")


class NewToken(BaseModel):
    user: str = Field(pattern=USER_PATTERN, description="a login or an e-mail: letters, digits and . _ @ -")
    role: Literal["viewer", "operator", "admin"]


class ErrorBody(BaseModel):
    error: str  # one line: what is wrong and what to do


ERRORS: dict[int | str, dict[str, Any]] = {
    400: {"model": ErrorBody, "description": "a bad query value or body, named"},
    401: {"model": ErrorBody, "description": "no token, or an unknown or revoked one"},
    403: {"model": ErrorBody, "description": "the token's role does not allow this call"},
    404: {"model": ErrorBody, "description": "no such object"},
    409: {"model": ErrorBody, "description": "the object is not in a state that allows this"},
    413: {"model": ErrorBody, "description": "request body too large"},
}


# Every person's text below is person_text.Text: stripped, no control character, not empty (400 naming the field)
class ModeChange(BaseModel):
    mode: Literal["observe", "approve", "auto"]
    reason: Text = Field(min_length=1, max_length=500)


class Rejection(BaseModel):
    reason: Text = Field(min_length=1, max_length=500)


class HoldRelease(BaseModel):
    port: Text = Field(min_length=1, max_length=200, description="device:port")
    reason: Text = Field(min_length=1, max_length=500)


class DrainRequest(BaseModel):
    kind: Literal["switch", "link", "port"]
    target: Text = Field(min_length=1, max_length=200, description="a switch, or device:port")
    reason: Text = Field(min_length=1, max_length=500)
    until: OptionalText = Field(None, max_length=64, description="ISO 8601, UTC unless zoned; past it: overran")
    shut: bool = False
    dry_run: bool = False
    force: bool = Field(False, description="admin only: drain even though the guard refuses (audited)")


class UndrainRequest(BaseModel):
    target: Text = Field(min_length=1, max_length=200)


class BodyLimit:
    """Bounded request bodies before anything else, authentication included: a declared Content-Length over the
    limit is refused at once, and the bytes actually streamed are counted (a chunked upload declares none), so the
    request is refused with 413 as soon as it passes the limit, with at most the limit read into memory. Pure ASGI:
    once it has answered, the app sees the client gone and whatever it answers is dropped."""

    def __init__(self, app: ASGIApp, max_bytes: int) -> None:
        self.app, self.max_bytes = app, max_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        declared = dict(scope["headers"]).get(b"content-length")
        if declared is not None and (not declared.isdigit() or int(declared) > self.max_bytes):
            await self._refuse(send)
            return
        seen = 0
        started = refused = False

        async def counted() -> Message:
            nonlocal seen, refused
            if refused:
                return {"type": "http.disconnect"}
            message = await receive()
            if message["type"] == "http.request":
                seen += len(message.get("body", b""))
                if seen > self.max_bytes and not started:
                    refused = True
                    await self._refuse(send)
                    return {"type": "http.disconnect"}  # the app stops reading; nothing more is taken in
            return message

        async def watched(message: Message) -> None:
            nonlocal started
            if refused:
                return  # answered already (413)
            started = started or message["type"] == "http.response.start"
            await send(message)

        try:
            await self.app(scope, counted, watched)
        except Exception:
            if not refused:
                raise

    async def _refuse(self, send: Send) -> None:
        # Connection: close: the rest of the body is never read; the server drops the connection after the answer.
        body = json.dumps({"error": f"request body over {self.max_bytes} bytes"}).encode()
        headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode()),
                   (b"connection", b"close")]  # fmt: skip
        await send({"type": "http.response.start", "status": 413, "headers": headers})
        await send({"type": "http.response.body", "body": body})


def create_app(service: ServiceSurface) -> FastAPI:
    app = FastAPI(
        title="fabricd", version=__version__, description="Fabric controller for RoCE GPU fabrics.", responses=ERRORS
    )
    api = service.cfg.api
    max_list = api.max_list

    def authenticate(request: Request) -> Principal | None:
        """The credential's principal; None without one; 401 for a wrong one (never which part was wrong)."""
        got = request.headers.get("authorization")
        if got is None:
            return service.proxied(request.client.host if request.client else None, request.headers)
        scheme, _, value = got.partition(" ")
        if scheme.lower() != "bearer" or not value:
            raise HTTPException(401, "use Authorization: Bearer <token>", headers={"WWW-Authenticate": "Bearer"})
        who = service.principal(value)
        if who is None:
            raise HTTPException(401, "unknown or revoked token", headers={"WWW-Authenticate": "Bearer"})
        return who

    def need(role: Role) -> Callable[[Request], Principal]:
        def check(request: Request) -> Principal:
            who = authenticate(request)
            if who is None:
                if role == Role.viewer and api.anonymous_read:
                    return Principal(ANONYMOUS, Role.viewer)
                raise HTTPException(401, "this call needs a token (Authorization: Bearer <token>); "
                                    "ask an admin for one: fabricd token create --user YOU --role viewer",
                                    headers={"WWW-Authenticate": "Bearer"})  # fmt: skip
            if not who.may(role):
                raise HTTPException(403, f"{who.actor} is {who.role.name}; this call needs {role.name}")
            return who

        return check

    viewer, operator, admin = need(Role.viewer), need(Role.operator), need(Role.admin)

    def limit_q(default: int) -> Any:
        return Query(default, ge=1, le=max_list, description=f"at most {max_list} (api.max_list)")

    app.add_middleware(BodyLimit, max_bytes=MAX_BODY)

    @app.get("/api/v1/health")
    async def health() -> dict[str, Any]:
        return service.health()

    @app.get("/api/v1/findings", dependencies=[Depends(viewer)])
    async def findings(
        status: str | None = Query(None, pattern="^(active|cleared)$"),
        limit: int = limit_q(500),
        offset: int = Query(0, ge=0, le=MAX_OFFSET),
    ) -> Findings:
        return Findings(findings=service.state.findings.all(status, limit, offset))

    @app.get("/api/v1/actions", dependencies=[Depends(viewer)])
    async def actions(
        status: str | None = Query(None, pattern="^[a-z_]{1,32}$"),
        limit: int = limit_q(500),
        offset: int = Query(0, ge=0, le=MAX_OFFSET),
    ) -> Actions:
        return Actions(actions=service.state.actions.all(status, limit, offset))

    @app.get("/api/v1/tickets", dependencies=[Depends(viewer)])
    async def tickets(
        status: str | None = Query(None, pattern="^(open|resolved)$"),
        limit: int = limit_q(500),
        offset: int = Query(0, ge=0, le=MAX_OFFSET),
    ) -> Tickets:
        return Tickets(tickets=service.state.tickets.all(status, limit, offset))

    @app.get("/api/v1/tickets/{ticket_id}", dependencies=[Depends(viewer)])
    async def ticket(ticket_id: int = _id()) -> Ticket:
        t = service.state.tickets.get(ticket_id)
        if t is None:
            raise HTTPException(404, f"no ticket {ticket_id}")
        return t

    @app.get("/api/v1/ports/disabled", dependencies=[Depends(viewer)])
    async def disabled() -> DisabledPorts:
        return DisabledPorts(ports=service.state.holds.all())

    @app.get("/api/v1/topology/summary", dependencies=[Depends(viewer)])
    async def topology() -> Any:
        return service.topology_summary()

    @app.get("/api/v1/dci", dependencies=[Depends(viewer)])
    async def dci() -> Any:
        """The DR port monitor's last judgement per group: load share, drops and cost (docs/dci.md)."""
        return {"groups": [x.to_dict() for x in sorted(service.dci_state.live.values(), key=lambda x: x.group)]}

    @app.get("/api/v1/jobs", dependencies=[Depends(viewer)])
    async def jobs() -> Any:
        """Every job with its footprint, traffic per rail, outliers and the ports that need attention."""
        return {"jobs": [r.to_dict(ports=False) for r in service.job_reports()], "source": service.health()["jobs"]}

    @app.get("/api/v1/jobs/{job_id}", dependencies=[Depends(viewer)])
    async def job(job_id: str) -> Any:
        for r in service.job_reports():
            if r.footprint.job.id == job_id:
                return r.to_dict()
        raise HTTPException(404, f"no job {job_id}; list them with `fabricd jobs`")

    @app.get("/api/v1/tuning", dependencies=[Depends(viewer)])
    async def tuning() -> Any:
        return service.tuning_report()

    @app.get("/api/v1/tuning/history", dependencies=[Depends(viewer)])
    async def tuning_history(limit: int = limit_q(200), changes: bool = False) -> Any:
        """The tuning ledger, newest first: each change with its knobs before and after, mode, status and KPIs
        before and after (`changes`: leave observe's records out)."""
        return {"changes": service.tuning_history(limit, changes)}

    @app.get("/api/v1/audit", dependencies=[Depends(viewer)])
    async def audit(limit: int = limit_q(200), offset: int = Query(0, ge=0, le=MAX_OFFSET)) -> Audit:
        return Audit(audit=service.state.audit.entries(limit, offset))

    @app.post("/api/v1/tickets/{ticket_id}/resolve")
    async def resolve(ticket_id: int = _id(), who: Principal = Depends(operator)) -> Ticket:
        try:
            t = await service.remediation.requests.resolve(ticket_id, who.actor)
        except ActionError as e:
            raise HTTPException(404 if isinstance(e, UnknownIdError) else 409, str(e)) from None
        await service.publish(t)
        return t

    @app.post("/api/v1/holds/release")
    async def release_hold(body: HoldRelease, who: Principal = Depends(operator)) -> HoldReleased:
        """Give up fabricd's hold on a port that is up again (fabricd stops re-applying it); audited, on its ticket."""
        device, _, port = body.port.partition(":")  # not device:port: no such hold (404, like an unknown one)
        try:
            why = await service.remediation.requests.release_hold(Endpoint(device, port), who.actor, body.reason)
        except ActionError as e:
            raise HTTPException(404 if isinstance(e, UnknownIdError) else 409, str(e)) from None
        return HoldReleased(port=body.port, note=why)

    @app.get("/api/v1/maintenance", dependencies=[Depends(viewer)])
    async def maintenance(limit: int = limit_q(500)) -> Maintenance:
        drains = service.remediation.maintenance.maintenance(limit)
        now = time.time_ns()
        late = [d.id for d in drains if overran(d.until_ts, d.state, now)]
        return Maintenance(maintenance=drains, overran=late)

    @app.post("/api/v1/maintenance")
    async def drain(body: DrainRequest, who: Principal = Depends(operator)) -> DrainPlanned:
        """Drain a switch, link or port (docs/operations.md, Maintenance); dry_run: the steps only, nothing changed."""
        try:
            if body.force and not who.may(Role.admin):
                raise HTTPException(403, f"{who.actor} is {who.role.name}; forcing a drain past the guard needs admin")
            p = await service.remediation.maintenance.drain(
                body.kind, body.target, who.actor, body.reason, until=body.until, shut=body.shut,
                dry_run=body.dry_run, force=body.force,
            )  # fmt: skip
        except MaintenanceInputError as e:  # schema-valid but not possible: 404 names nothing known, else 409
            raise HTTPException(404 if isinstance(e, UnknownTargetError) else 409, str(e)) from None
        except ActionError as e:
            raise HTTPException(409, str(e)) from None
        return DrainPlanned(steps=p.steps, dry_run=p.dry_run, drain=p.drain, jobs=service.jobs_through(p.ports))

    @app.post("/api/v1/maintenance/undrain", status_code=202)
    async def undrain(body: UndrainRequest, who: Principal = Depends(operator)) -> DrainRecord:
        """Begin to end a drain (it ends once its ports came back as the blueprint has them; otherwise it stays, and
        says why): 202 at once with the drain, `undraining`, to poll at /api/v1/maintenance; a second request while
        one is under way joins it (202, the same drain)."""
        try:
            d, _ = service.remediation.maintenance.begin_undrain(body.target, who.actor)
        except MaintenanceInputError as e:  # schema-valid but not possible: 404 names nothing known, else 409
            raise HTTPException(404 if isinstance(e, UnknownTargetError) else 409, str(e)) from None
        except ActionError as e:
            raise HTTPException(409, str(e)) from None
        return d

    @app.post("/api/v1/actions/{action_id}/approve")
    async def approve(action_id: int = _id(), who: Principal = Depends(operator)) -> Action:
        try:
            a = await service.remediation.requests.approve(action_id, who.actor)
        except ActionError as e:
            raise HTTPException(404 if isinstance(e, UnknownIdError) else 409, str(e)) from None
        return a

    @app.post("/api/v1/actions/{action_id}/reject")
    async def reject(body: Rejection, action_id: int = _id(), who: Principal = Depends(operator)) -> Action:
        """Say no to a proposed action (it never runs); the reason goes on its ticket and in the audit log."""
        try:
            a = await service.remediation.requests.reject(action_id, who.actor, body.reason)
        except ActionError as e:
            raise HTTPException(404 if isinstance(e, UnknownIdError) else 409, str(e)) from None
        return a

    @app.post("/api/v1/mode")
    async def set_mode(body: ModeChange, who: Principal = Depends(admin)) -> ModeSet:
        """Switch remediation mode now (observe: never touch a switch); kept across restarts, audited."""
        mode = await service.remediation.requests.set_mode(body.mode, who.actor, body.reason)
        return ModeSet(mode=mode, by=who.actor)

    @app.get("/api/v1/tokens")
    async def tokens(_: Principal = Depends(admin)) -> Tokens:
        """Every user token (never the token or its hash), revoked ones with when."""
        return Tokens(tokens=service.state.access.tokens())

    @app.post("/api/v1/tokens", status_code=201)
    async def create_token(body: NewToken, who: Principal = Depends(admin)) -> CreatedToken:
        """A new token for `user` with `role`: the answer is the only place the token is ever shown."""
        if not valid_user(body.user):
            raise HTTPException(400, "user: letters, digits and . _ @ - only (a login or an e-mail)")
        token = new_token()
        row = service.state.access.add_token(body.user, body.role, token_hash(token), time.time_ns(), who.actor)
        return CreatedToken(**row.to_dict(), token=token)

    @app.delete("/api/v1/tokens/{token_id}")
    async def revoke_token(token_id: int = _id(), who: Principal = Depends(admin)) -> Revoked:
        if not service.state.access.revoke_token(token_id, time.time_ns(), who.actor):
            raise HTTPException(404, f"no live token {token_id}")
        return Revoked(revoked=token_id)

    @app.get("/metrics", response_class=Response, responses={200: {"content": {CONTENT_TYPE_LATEST: {}}}})
    async def metrics() -> Response:
        return Response(generate_latest(service.registry), media_type=CONTENT_TYPE_LATEST)

    @app.exception_handler(StarletteHTTPException)  # FastAPI's HTTPException too, and the router's 404 and 405
    async def _http_error(request: Request, exc: StarletteHTTPException) -> JSONResponse:
        """Every error answers {"error": one line}, as documented: ours, and the router's own."""
        headers = dict(exc.headers or {})
        detail = str(exc.detail)
        if exc.status_code == 404 and detail == "Not Found":
            detail = f"no route {request.url.path}; the API is listed at /docs (OpenAPI at /openapi.json)"
        elif exc.status_code == 405:
            allowed = _allowed(request)
            headers["Allow"] = ", ".join(allowed)
            detail = f"{request.method} is not allowed on {request.url.path}; allowed: {', '.join(allowed)}"
        return JSONResponse({"error": detail}, status_code=exc.status_code, headers=headers or None)

    def _allowed(request: Request) -> list[str]:
        """The methods of every route on this path (Starlette names only the first route's in a 405)."""
        methods: set[str] = set()
        for route in app.router.routes:
            match, _ = route.matches({**request.scope, "method": "GET"})
            if match is not Match.NONE and isinstance(route, APIRoute | Route):
                methods |= set(route.methods or ())
        if "GET" in methods:
            methods.add("HEAD")
        return sorted(methods)

    @app.exception_handler(StandbyError)
    async def _standby(_: Request, exc: StandbyError) -> JSONResponse:
        """A change asked of a standby: 503 naming why and where to go (the leader acts)."""
        return JSONResponse({"error": str(exc)}, status_code=503, headers={"Retry-After": "2"})

    @app.exception_handler(RequestValidationError)
    async def _bad_request(_: Request, exc: RequestValidationError) -> JSONResponse:
        """A bad query value or body: 400 naming the field and what it must be (never the value: it may be secret)."""
        first = exc.errors()[0] if exc.errors() else {}
        where = ".".join(str(x) for x in first.get("loc", ()) if x not in ("query", "body", "path"))
        return JSONResponse({"error": f"{where or 'request'}: {first.get('msg', 'invalid')}"}, status_code=400)

    web.mount(app, service)
    return app
