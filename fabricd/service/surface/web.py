"""The fabric page at `/`: server-rendered (Jinja2) from the same state the API reads, live through one small
script that swaps in fresh HTML fragments every second (`/ui/live`); without the script every part is a plain
page, link or form. No JavaScript build, no front-end library: two fetches and an innerHTML do not need one.

Log in with an API token (`fabricd token create`): the page keeps a server-side session behind an HttpOnly,
SameSite=Strict cookie (Secure under TLS), and every form carries the session's CSRF token. Sessions live in the
state (the id hashed): a restart or a standby taking over keeps people logged in, and revoking the token a session
was opened with ends it. Roles as in the API: viewers see, operators approve and reject.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import hmac
import json
import math
import secrets
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import jinja2
from fastapi import FastAPI, Form, HTTPException, Request
from fastapi.responses import HTMLResponse, JSONResponse, RedirectResponse, Response
from fastapi.staticfiles import StaticFiles

from drivers.eos.render import port_admin_lines
from fabricd.detectors import bgp_session, miscabled
from fabricd.telemetry import NEVER, Snapshot
from topology.model import Endpoint

from ..maintenance.plan import overran
from ..remediation.errors import ActionError
from ..state import Action, StoredFinding
from ..state.tuning import TuneRecord
from .access import ANONYMOUS, Principal, Role, token_hash
from .fabric_view import FabricView, build
from .person_text import PersonTextError, check_text
from .surface import ServiceSurface

HERE = Path(__file__).resolve().parent
COOKIE = "fabricd_session"
SESSION_S = 12 * 3600
MODES: dict[str, Literal["observe", "approve", "auto"]] = {"observe": "observe", "approve": "approve", "auto": "auto"}
LIVE = ("grid", "approvals", "maintenance", "tuning", "findings", "actions", "tickets", "audit")


@dataclass
class Session:
    who: Principal
    csrf: str
    sid: str


def _when(ts: object) -> str:
    return dt.datetime.fromtimestamp(int(str(ts)) / 1e9, tz=dt.UTC).strftime("%Y-%m-%d %H:%M:%S") if ts else ""


def diff_lines(op: str, port: str) -> list[tuple[str, str, str]]:
    """Side-by-side lines of a port action's config change (EOS syntax: the lines the driver commits): (running,
    after, kind) with kind same | del | add."""
    head, before = port_admin_lines(port, op != "enable")
    _, after = port_admin_lines(port, op == "enable")
    return [(head, head, "same"), (f"   {before}", "", "del"), ("", f"   {after}", "add")]


def tune_diff(rec: TuneRecord | None) -> list[tuple[str, str, str]]:
    """Side-by-side lines of a tuning change awaiting approval: each knob of the subject before and after."""
    if rec is None:
        return []
    out = [(rec.subject, rec.subject, "same")]
    for c in rec.changes:
        out += [(f"   {c['knob']} {c['before']}", "", "del"), ("", f"   {c['knob']} {c['after']}", "add")]
    return out


def tuning_rows(records: list[TuneRecord]) -> list[dict[str, str]]:
    """The tuning section: each change with its KPIs before and after (the target KPI first, then the guards)."""
    out = []
    for r in records:
        keys = list(dict.fromkeys(k for k in (r.target, "pause_us_per_s", "throughput_bytes_per_s") if k))
        out.append({
            "id": str(r.id), "when": _when(r.created_ts), "subject": r.subject, "mode": r.mode, "status": r.status,
            "change": "; ".join(f"{c['knob']} {c['before']} -> {c['after']}" for c in r.changes), "why": r.why,
            "before": ", ".join(f"{k}={r.kpis_before[k]:.4g}" for k in keys if k in r.kpis_before),
            "after": ", ".join(f"{k}={r.kpis_after[k]:.4g}" for k in keys if k in r.kpis_after),
        })  # fmt: skip
    return out


def _fmt(x: float | None, digits: int = 2, sci: bool = False) -> str:
    if x is None or not math.isfinite(x):
        return ""
    return f"{x:.1e}" if sci else f"{x:.{digits}f}"


def port_rows(snap: Snapshot, service: ServiceSurface, device: str) -> list[dict[str, Any]]:
    """The switch page's port table from the telemetry snapshot: current rates and gauges per cabled port."""

    def rate(port: str, leaf: str, index: str | None = None) -> float | None:
        return snap.rate_of(device, port, leaf, index)

    def gauge(port: str, leaf: str, worst: Any = min, index: str | None = None) -> float | None:
        vals = [float(snap.gauge[i]) for i in snap.select(device=device, port=port, leaf=leaf, index=index).tolist()
                if snap.ts[i] != NEVER]  # fmt: skip
        return worst(vals) if vals else None

    held = {p["port"] for p in service.state.holds.all() if p["device"] == device}
    to_reapply = {r["port"]: r for r in service.remediation.reconciler.to_reapply()}
    returned = {r.port: r.why for r in service.remediation.floor.returned()}  # given back to keep a floor
    lossless = str(service.lossless)
    bgp = {o.port: o.state for o in bgp_session.observe(snap, fabric=service.fabric)
           if o.device == device and o.port is not None}  # fmt: skip
    heard: dict[str, Endpoint] = {}
    for i in snap.select(device=device, leaf=miscabled.NAME).tolist():
        _, port, _, index = snap.key(i)
        j = snap.find(device, port, miscabled.PORT_ID, index)
        pid = (snap.text(j) if j is not None else None) or "?"
        heard[port] = miscabled.heard(snap, snap.text(i) or "?", pid)
    out = []
    for port in service.fabric.ports(device):
        i = snap.find(device, port, "oper-status")
        rx, tx = rate(port, "if.in-octets"), rate(port, "if.out-octets")
        paused = rate(port, "pfc.pfc-on-total-rx-time", lossless)
        pausing = rate(port, "pfc.pfc-on-total-tx-time", lossless)
        watermark = gauge(port, "queue.max-queue-len", max, lossless)
        out.append(
            {
                "port": port,
                "peer": str(service.fabric.peer(device, port) or ""),
                "oper": snap.text(i) if i is not None else None,
                "bgp": bgp.get(port, ""),
                "lldp": str(heard[port]) if port in heard else "",
                "lldp_wrong": port in heard
                and (want := service.fabric.peer(device, port)) is not None
                and not miscabled.same_end(heard[port], want),
                "held": port in held,
                "to_reapply": (r := to_reapply.get(f"{device}:{port}")) and f"{r['rule']}: {r['reason']}",
                "rx_gbps": _fmt(None if rx is None else rx * 8 / 1e9),
                "tx_gbps": _fmt(None if tx is None else tx * 8 / 1e9),
                "paused": _fmt(None if paused is None else paused / 1e9 * 100, 1) + ("%" if paused is not None else ""),
                "returned": returned.get(f"{device}:{port}", ""),
                "pausing": _fmt(None if pausing is None else pausing / 1e9 * 100, 1)
                + ("%" if pausing is not None else ""),
                "ecn": _fmt(rate(port, "queue.ecn-marked-pkts", lossless), 1),
                "queue_kb": _fmt(None if watermark is None else watermark / 1024, 1),
                "fcs": _fmt(rate(port, "if.in-fcs-errors"), 1),
                "ber": _fmt(gauge(port, "fec.pre-fec-ber", max), sci=True),
                "power": _fmt(gauge(port, "optics.input-power", min), 1),
                "temp": _fmt(gauge(port, "optics.temperature", max), 1),
            }
        )
    return out


def mount(app: FastAPI, service: ServiceSurface) -> None:
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(HERE / "templates"), autoescape=True, undefined=jinja2.StrictUndefined
    )
    env.filters["when"] = _when
    secure = service.cfg.api.tls is not None
    app.mount("/static", StaticFiles(directory=HERE / "static"), name="static")

    def session(request: Request) -> Session | None:
        sid = request.cookies.get(COOKIE)
        if not sid or len(sid) > 128:
            return None
        found = service.state.access.session(token_hash(sid), time.time_ns())
        if found is None:
            return None
        actor, role, csrf = found
        return Session(Principal(actor, Role[role]), csrf, sid)

    def viewer(request: Request, create: bool = False) -> tuple[Principal, str] | None:
        s = session(request)
        if s is not None:
            return s.who, s.csrf
        via = service.proxied(request.client.host if request.client else None, request.headers)
        if via is not None:
            if not create:
                return via, ""  # reads only: forms need the session the page's own load starts
            new = start(via)  # SSO in front: the page still needs a session for its CSRF tokens
            request.state.new_session = new
            return new.who, new.csrf
        if service.cfg.api.anonymous_read:
            return Principal(ANONYMOUS, Role.viewer), ""
        return None

    def render(name: str, **ctx: Any) -> str:
        return env.get_template(name).render(mode=service.remediation.requests.mode, **ctx)

    def view(active: list[StoredFinding] | None = None) -> FabricView:
        return build(
            service.fabric,
            service.state.findings.all("active", limit=100_000) if active is None else active,
            {Endpoint(p["device"], p["port"]) for p in service.state.holds.all()},
            service.view.oper_down(),
            service.telemetry.stale_devices(),
        )

    def drains() -> list[dict[str, Any]]:
        """Planned maintenance (maintenance.py): the active drains and the last ended ones."""
        now = time.time_ns()
        return [
            {"id": d.id, "kind": d.kind, "target": d.target, "state": d.state, "step": f"{d.done}/{len(d.steps)}",
             "actor": d.actor, "reason": d.reason, "since": _when(d.created_ts), "until": _when(d.until_ts),
             "detail": d.detail, "overran": overran(d.until_ts, d.state, now)}
            for d in service.state.drains.all(None, 20)
        ]  # fmt: skip

    def diffs(a: Action) -> list[tuple[str, str, str]]:
        return tune_diff(service.state.tuning.of_action(a.id)) if a.op == "tune" else diff_lines(a.op, a.port)

    def context(request: Request, who: Principal, csrf: str, flash: str = "") -> dict[str, Any]:
        q = request.query_params
        filters = {k: q.get(k, "active" if k == "status" else "")[:64] for k in ("kind", "device", "status", "job")}
        active = service.state.findings.all("active", limit=100_000)  # the grid's and, by default, the list's
        found = (
            active[:500]
            if filters["status"] == "active"
            else service.state.findings.all(filters["status"] or None, 500)
        )
        kinds = sorted({str(f["kind"]) for f in found})
        jobs = sorted({str(j["id"]) for f in found for j in f.get("jobs") or []})
        if filters["kind"]:
            found = [f for f in found if f["kind"] == filters["kind"]]
        if filters["device"]:
            found = [f for f in found if filters["device"] in (f.get("devices") or [f.get("device") or ""])]
        if filters["job"]:
            found = [f for f in found if filters["job"] in {str(j["id"]) for j in f.get("jobs") or []}]
        pending = service.state.actions.with_status("awaiting_approval")
        return {
            "who": who, "csrf": csrf, "view": view(active), "findings": found, "filters": filters, "kinds": kinds,
            "jobs": jobs, "pending": pending, "diffs": {a.id: diffs(a) for a in pending},
            "tuning": tuning_rows(service.state.tuning.history(20, applied_only=True)),
            "tuning_on": service.cfg.tuning.enabled,
            "can_act": who.may(Role.operator), "actions": service.state.actions.all(limit=50),
            "tickets": service.state.tickets.all(limit=50), "audit": service.state.audit.entries(50), "flash": flash,
            "drains": drains(),
        }  # fmt: skip

    def start(who: Principal, token: str | None = None) -> Session:
        """A page session for `who`; opened with a user token (`token`), it ends when that token is revoked."""
        new = Session(who, secrets.token_urlsafe(32), secrets.token_urlsafe(32))
        now = time.time_ns()
        held = token_hash(token) if token and service.state.access.token_by_hash(token_hash(token)) else None
        service.state.access.add_session(token_hash(new.sid), who.actor, who.role.name, new.csrf,
                                         now + SESSION_S * 10**9, held, now)  # fmt: skip
        return new

    def with_cookie(r: Response, s: Session) -> Response:
        r.set_cookie(COOKIE, s.sid, max_age=SESSION_S, httponly=True, samesite="strict", secure=secure, path="/")
        return r

    @app.get("/", response_class=HTMLResponse, include_in_schema=False)
    async def page(request: Request) -> Response:
        got = viewer(request, create=True)
        if got is None:
            return HTMLResponse(render("login.html", who=None, csrf="", error=""))
        r = HTMLResponse(render("page.html", **context(request, *got)))
        new = getattr(request.state, "new_session", None)
        return with_cookie(r, new) if new is not None else r

    @app.get("/ui/live", include_in_schema=False)
    async def live(request: Request) -> Response:
        got = viewer(request)
        if got is None:
            return JSONResponse({"error": "log in"}, status_code=401)
        ctx = context(request, *got)
        body = json.dumps({part: render(f"{part}.html", **ctx) for part in LIVE}).encode()
        # Most seconds nothing changed: the browser revalidates with If-None-Match and gets a bodiless 304.
        tag = '"' + hashlib.blake2b(body, digest_size=16).hexdigest() + '"'
        headers = {"ETag": tag, "Cache-Control": "no-cache, private"}
        if request.headers.get("if-none-match") == tag:
            return Response(status_code=304, headers=headers)
        return Response(body, media_type="application/json", headers=headers)

    @app.get("/ui/switch/{device}", response_class=HTMLResponse, include_in_schema=False)
    async def switch(device: str, request: Request) -> Response:
        got = viewer(request)
        if got is None:
            return RedirectResponse("/", status_code=303)
        sw = view().switches.get(device)
        if sw is None:
            raise HTTPException(404, f"no switch {device} in the fabric")
        snap = service.ingestor.snapshot()
        return HTMLResponse(
            render("switch.html", who=got[0], csrf=got[1], sw=sw, ports=port_rows(snap, service, device))
        )

    @app.post("/login", include_in_schema=False)
    async def login(token: str = Form("", max_length=512)) -> Response:
        who = service.principal(token.strip()) if token.strip() else None
        if who is None:
            html = render("login.html", who=None, csrf="", error="unknown or revoked token")
            return HTMLResponse(html, status_code=401)
        new = start(who, token.strip())
        service.state.audit.record(time.time_ns(), "logged in to the page", "token login", actor=who.actor)
        return with_cookie(RedirectResponse("/", status_code=303), new)

    def checked(request: Request, csrf: str, needed: Role) -> Session:
        s = session(request)
        if s is None:
            raise HTTPException(401, "log in first")
        if not hmac.compare_digest(csrf, s.csrf):
            raise HTTPException(403, "stale or missing form token; reload the page")
        if not s.who.may(needed):
            raise HTTPException(403, f"{s.who.actor} is {s.who.role.name}; this needs {needed.name}")
        return s

    @app.post("/logout", include_in_schema=False)
    async def logout(request: Request, csrf: str = Form("")) -> Response:
        s = checked(request, csrf, Role.viewer)
        service.state.access.drop_session(token_hash(s.sid))
        service.state.audit.record(time.time_ns(), "logged out of the page", "logout", actor=s.who.actor)
        r = RedirectResponse("/", status_code=303)
        r.delete_cookie(COOKIE, path="/")
        return r

    async def act(request: Request, action_id: int, csrf: str, reason: str | None) -> Response:
        s = checked(request, csrf, Role.operator)
        reason = None if reason is None else _form_text("reason", reason)
        try:
            if reason is None:
                a = await service.remediation.requests.approve(action_id, s.who.actor)
                flash = f"action {a.id}: {a.status}"
            else:
                a = await service.remediation.requests.reject(action_id, s.who.actor, reason)
                flash = f"action {a.id}: rejected"
        except ActionError as e:
            flash = str(e)
        ctx = context(request, s.who, s.csrf, flash)
        return HTMLResponse(render("page.html", **ctx), status_code=200)

    @app.post("/ui/mode", include_in_schema=False)
    async def set_mode(
        request: Request, csrf: str = Form(""), mode: str = Form(""), reason: str = Form("", max_length=500)
    ) -> Response:
        s = checked(request, csrf, Role.admin)
        chosen = MODES.get(mode)
        if chosen is None or not reason.strip():
            raise HTTPException(400, "mode: observe, approve or auto, with a reason")
        reason = _form_text("reason", reason)
        await service.remediation.requests.set_mode(chosen, s.who.actor, reason)
        return RedirectResponse("/", status_code=303)

    @app.post("/ui/actions/{action_id}/approve", include_in_schema=False)
    async def approve(action_id: int, request: Request, csrf: str = Form("")) -> Response:
        return await act(request, action_id, csrf, None)

    @app.post("/ui/actions/{action_id}/reject", include_in_schema=False)
    async def reject(
        action_id: int, request: Request, csrf: str = Form(""), reason: str = Form("", max_length=500)
    ) -> Response:
        return await act(request, action_id, csrf, reason)


def _form_text(field: str, value: str) -> str:
    """A person's text from a form, checked as the API checks its bodies (person_text.py): 400 naming the field."""
    try:
        return check_text(value)
    except PersonTextError as e:
        raise HTTPException(400, f"{field}: {e}") from None
