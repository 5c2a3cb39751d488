"""`fabricd run` (the service) and the commands that talk to a running one: status, findings, tickets,
actions, approve, resolve. They find the service through `--config fabricd.yaml` (its api: section) or `--api URL`."""

from __future__ import annotations

import asyncio
import os
import ssl
from enum import StrEnum
from pathlib import Path
from typing import Any

import httpx
import typer
from pydantic import ValidationError
from rich.table import Table
from rich.text import Text

from fabricd.cli.output import EXIT_CLEAN, EXIT_FINDINGS, Format, cell, console, emit_json, line, shown
from fabricd.service.config import TelemetrySettings, load_config, read_secret
from topology.errors import FabricdError

DEFAULT_CONFIG = Path("fabricd.yaml")
_CONFIG = typer.Option(None, "--config", "-c", help="fabricd.yaml of the service (default: ./fabricd.yaml).")
_API = typer.Option(None, "--api", help="Service URL, e.g. http://127.0.0.1:8340 (instead of --config).")
_TOKEN_ENV = typer.Option(
    "FABRICD_API_TOKEN",
    "--token-env",
    help="Environment variable holding your API token (fabricd token create); with --config, the service token "
    "from fabricd.yaml when it is not set.",
)
_FMT = typer.Option(Format.table, "--format", "-f", help="json for scripts, table for people.")


def run_command(
    config: Path = typer.Option(DEFAULT_CONFIG, "--config", "-c", help="Service configuration (YAML)."),
    workers: int | None = typer.Option(
        None, "--workers", help="Telemetry worker processes (overrides telemetry.workers; 1: in the service process)."
    ),
    new_state: bool = typer.Option(
        False,
        "--new-state",
        help="Set an empty or corrupt state file aside (kept beside it; a readable one only with --force) and "
        "start with an empty one; fabricd adopts what the switches' marks say it did (docs/operations.md).",
    ),
    force: bool = typer.Option(
        False, "--force", help="With --new-state: set the state file aside even though it is readable."
    ),
) -> None:
    """Run the fabricd service: telemetry, detectors, guarded remediation, tickets, REST API and /metrics."""
    from fabricd.service.daemon import Service
    from fabricd.service.logs import setup_logging

    if force and not new_state:
        raise typer.BadParameter("goes with --new-state (to set a readable state file aside)", param_hint="--force")
    cfg = load_config(config)
    if workers is not None:
        try:
            telemetry = TelemetrySettings.model_validate({**cfg.telemetry.model_dump(), "workers": workers})
        except ValidationError as e:
            msg = e.errors()[0]["msg"].removeprefix("Value error, ")
            raise typer.BadParameter(msg, param_hint="--workers") from None
        cfg = cfg.model_copy(update={"telemetry": telemetry})

    async def main() -> None:
        service = Service(cfg, new_state=new_state, force=force)
        setup_logging(cfg.log_format, cfg.log_level, service.secrets)
        await service.run()

    asyncio.run(main())


class ApiClient:
    """The service's API as the CLI sees it: your token (--token-env) or, with --config, the service token; https
    when the service serves TLS (trusting the system CAs and the service's own certificate, for a self-signed one)."""

    def __init__(self, config: Path | None, api: str | None, token_env: str) -> None:
        token: str | None = os.environ.get(token_env) or None
        self._verify: ssl.SSLContext | bool = True
        if api is None:
            cfg = load_config(config or DEFAULT_CONFIG)
            host = "127.0.0.1" if cfg.api.host in ("0.0.0.0", "::") else cfg.api.host
            scheme = "https" if cfg.api.tls is not None else "http"
            api = f"{scheme}://{host}:{cfg.api.port}"
            if cfg.api.tls is not None:
                ctx = ssl.create_default_context()
                ctx.load_verify_locations(cafile=str(cfg.api.tls.cert))
                self._verify = ctx
            if token is None and cfg.api.token is not None:
                token = read_secret(cfg.api.token, "api.token", cfg.source).get_secret_value()
        self.base = api.rstrip("/")
        self._headers = {"Authorization": f"Bearer {token}"} if token else {}

    def call(self, method: str, path: str, body: dict[str, Any] | None = None, /, **params: Any) -> Any:
        try:
            r = httpx.request(
                method,
                self.base + path,
                params=params or None,
                json=body,
                headers=self._headers,
                timeout=30,
                verify=self._verify,
            )
        except httpx.HTTPError as e:
            raise FabricdError(
                f"cannot reach the fabricd service at {self.base} ({type(e).__name__}); is it running?"
            ) from None
        if r.status_code >= 400:
            try:
                msg = r.json().get("error") or r.text
            except ValueError:
                msg = r.text
            raise FabricdError(f"{self.base}{path}: HTTP {r.status_code}: {shown(msg)}")
        return r.json()


def status_command(config: Path | None = _CONFIG, api: str | None = _API, token_env: str = _TOKEN_ENV,
                   fmt: Format = _FMT) -> None:  # fmt: skip
    """Health of a running service: telemetry, mode, open tickets, disabled ports."""
    h = ApiClient(config, api, token_env).call("GET", "/api/v1/health")
    if fmt is Format.json:
        emit_json(h)
    else:
        out = console()
        # every line carries the service's words (and people's: reasons, names): as data, never markup
        colour = {"ok": "green", "failing": "red"}.get(h["status"], "yellow")
        out.print(Text.assemble((shown(h["status"]), colour), line(f"  fabricd {h['version']}  mode {h['mode']}  up "
                                                                   f"{h['uptime_s']} s")))  # fmt: skip
        for text in status_lines(h):
            out.print(line(text))
    raise typer.Exit(EXIT_CLEAN if h["status"] == "ok" else EXIT_FINDINGS)


def status_lines(h: dict[str, Any]) -> list[str]:
    """The health document after its first line, as `fabricd status` prints it."""
    lines: list[str] = []
    tel = h["telemetry"]
    state = h.get("state") or {}
    if state and not state.get("writable", True):
        lines.append(f"state: cannot be written ({state['write_failures']} failed writes): {state['last_error']}; "
                     "fabricd takes no action until it can")  # fmt: skip
    lines += quarantine_lines(state.get("quarantined") or [])
    lines.append(f"telemetry: {tel['synced']}/{tel['devices']} switches synced, {len(tel['stale'])} stale")
    unheld = tel.get("unheld") or []  # bus mode: no collector streams them
    if unheld:
        lines.append(f"  held by no collector ({len(unheld)}; start or check `fabricd collector`): "
                     + ", ".join(unheld[:20]))  # fmt: skip
    silent = [d for d in tel["stale"] if d not in set(unheld)]
    if silent:
        lines.append("  stale: " + ", ".join(silent[:20]))
    lines += coverage_lines(tel.get("coverage") or [])
    det = h.get("detectors") or {}
    if det.get("source") == "shards":
        silent = det.get("silent_shards") or []
        lines.append(
            f"detectors: {det['shards']} shard(s), "
            + (f"silent: {', '.join(map(str, silent))} (their groups are unwatched)" if silent else "all reporting")
        )
    stale = h.get("stale_holds") or 0
    up_again = f" ({stale} up again: reconciling)" if stale else ""
    lines.append(f"open tickets: {h['open_tickets']}   ports held down: {h['disabled_ports'] - stale}{up_again}")
    for a in h.get("in_flight") or []:
        note = f": {a['detail']}" if a.get("detail") else ""
        lines.append(f"  in flight: {a['op']} {a['port']} (action {a['action_id']}, {a['for_s']:g} s){note}")
    for r in h.get("to_reapply") or []:
        lines.append(f"  to re-apply: {r['port']} (ticket {r['ticket_id'] or '-'}): the guard refuses ({r['rule']}): "
                     f"{r['reason']}; retried every pass")  # fmt: skip
    floor = h.get("floor") or {}
    for r in floor.get("returned") or []:
        lines.append(f"  returned: {r['port']} (ticket {r['ticket_id'] or '-'}): {r['why']}")
    for u in floor.get("under_floor") or []:
        lines.append(f"  under its floor: {u['why']}")
    for d in h.get("maintenance") or []:
        late = " OVERRAN its --until" if d["overran"] else ""
        what = f"maintenance: drain {d['id']} of {d['kind']} {d['target']}: {d['state']}{late}"
        lines.append(what + f" (step {d['step']}, by {d['actor']}: {d['reason']})"
                     + (f": {d['detail']}" if d["detail"] else ""))  # fmt: skip
    ha = h.get("ha") or {}
    if ha.get("enabled"):
        if ha["role"] == "leader":
            lines.append(f"hot standby: {ha['instance']} is the leader and acts")
        else:
            lines.append(f"hot standby: {ha['instance']} is a standby; the leader is {ha.get('leader') or 'none'}")
    return lines


def quarantine_lines(entries: list[dict[str, str]]) -> list[str]:
    """The state rows that cannot be decoded, as the health document lists them: one line each (the first 20)."""
    if not entries:
        return []
    lines = [f"state: {len(entries)} record(s) cannot be decoded: kept in the file, left out (quarantined); repair "
             "or delete them (docs/operations.md)"]  # fmt: skip
    lines += [f"  {e['table']} {e['id']}: {e['reason']}" for e in entries[:20]]
    if len(entries) > 20:
        lines.append(f"  and {len(entries) - 20} more (--format json lists them)")
    return lines


def _names(devices: list[str], limit: int = 6) -> str:
    shown = ", ".join(devices[:limit])
    return shown + (f" and {len(devices) - limit} more" if len(devices) > limit else "")


def coverage_lines(entries: list[dict[str, Any]]) -> list[str]:
    """The health document's telemetry coverage as a few lines: switches that share a gap share a line."""
    if not entries:
        return []
    gaps: dict[tuple[str, str], list[str]] = {}  # (what, detail) -> switches
    for e in entries:
        reasons = {m["leaf"]: m["reason"] for m in e["missing"]}
        for d in e["degraded"]:
            by_reason: dict[str, list[str]] = {}
            for leaf in d["leaves"]:
                by_reason.setdefault(reasons.get(leaf, "not streamed"), []).append(leaf)
            detail = "; ".join(f"no {', '.join(leaves)}: {why}" for why, leaves in by_reason.items())
            gaps.setdefault((f"{d['detector']} {'blind' if d['blind'] else 'degraded'}", detail), []).append(
                e["device"]
            )
        for r in e["rejected"]:
            gaps.setdefault(("refused", f"{r['path']} ({r['reason']})"), []).append(e["device"])
        for x in e.get("late") or []:
            gaps.setdefault((f"{x['detector']} late", f"{x['leaf']} {x['reason']}"), []).append(e["device"])
    lines = [f"telemetry coverage: {len(entries)} switch(es) stream less than their profile"]
    for (what, detail), devices in sorted(gaps.items()):
        lines.append(f"  {what} on {_names(devices)}: {detail}")
    return lines


def findings_command(config: Path | None = _CONFIG, api: str | None = _API, token_env: str = _TOKEN_ENV,
                     active: bool = typer.Option(False, "--active", help="Only incidents still active."),
                     fmt: Format = _FMT) -> None:  # fmt: skip
    """Findings the service has made (newest first)."""
    params = {"status": "active"} if active else {}
    rows = ApiClient(config, api, token_env).call("GET", "/api/v1/findings", **params)["findings"]
    if fmt is Format.json:
        emit_json({"findings": rows})
    else:
        _table(rows, ("id", "kind", "status", "device", "port", "severity", "summary"))
    raise typer.Exit(EXIT_FINDINGS if rows else EXIT_CLEAN)


def tickets_command(config: Path | None = _CONFIG, api: str | None = _API, token_env: str = _TOKEN_ENV,
                    show: int | None = typer.Option(None, "--show", help="Show one ticket with its evidence."),
                    open_only: bool = typer.Option(False, "--open", help="Only open tickets."),
                    fmt: Format = _FMT) -> None:  # fmt: skip
    """Repair tickets (list, or one with --show)."""
    client = ApiClient(config, api, token_env)
    if show is not None:
        t = client.call("GET", f"/api/v1/tickets/{show}")
        if fmt is Format.json:
            emit_json(t)
        else:
            out = console()
            out.print(Text.assemble((shown(f"#{t['id']} {t['title']}"), "bold"),
                                    line(f"  ({t['status']}, {t['recurrences']} recurrences)")))  # fmt: skip
            body = t["body"]
            for key in ("status_note", "likely_repair", "likely_common_cause"):
                if body.get(key):
                    out.print(line(f"{key.replace('_', ' ')}: {body[key]}"))
            for a in body.get("actions", []):
                out.print(line(f"  action {a['action_id']} {a['op']} {a['port']}: {a['status']} - {a['note']}"))
            out.print_json(data=body.get("evidence", {}), ensure_ascii=True)  # JSON escapes every control
        raise typer.Exit(EXIT_CLEAN)
    rows = client.call("GET", "/api/v1/tickets", **({"status": "open"} if open_only else {}))["tickets"]
    if fmt is Format.json:
        emit_json({"tickets": rows})
    else:
        _table(rows, ("id", "status", "kind", "device", "port", "recurrences", "title"))
    raise typer.Exit(EXIT_FINDINGS if any(r["status"] == "open" for r in rows) else EXIT_CLEAN)


def actions_command(config: Path | None = _CONFIG, api: str | None = _API, token_env: str = _TOKEN_ENV,
                    fmt: Format = _FMT) -> None:  # fmt: skip
    """Remediation actions: taken, refused, observed, waiting for approval."""
    rows = ApiClient(config, api, token_env).call("GET", "/api/v1/actions")["actions"]
    if fmt is Format.json:
        emit_json({"actions": rows})
    else:
        _table(rows, ("id", "op", "device", "port", "mode", "status", "reason"))
    raise typer.Exit(EXIT_CLEAN)


def approve_command(
    action_id: int = typer.Argument(..., help="Action id (see `fabricd actions`)."),
    config: Path | None = _CONFIG,
    api: str | None = _API,
    token_env: str = _TOKEN_ENV,
) -> None:
    """Approve an action waiting in `approve` mode; the guard checks again before it runs."""
    a = ApiClient(config, api, token_env).call("POST", f"/api/v1/actions/{action_id}/approve")
    console().print(line(f"action {a['id']}: {a['status']} ({a['op']} {a['device']}:{a['port']})"))


def reject_command(
    action_id: int = typer.Argument(..., help="Action id (see `fabricd actions`)."),
    reason: str = typer.Option(..., "--reason", help="Why not: goes on the ticket and in the audit log."),
    config: Path | None = _CONFIG,
    api: str | None = _API,
    token_env: str = _TOKEN_ENV,
) -> None:
    """Reject an action waiting in `approve` mode: it never runs."""
    a = ApiClient(config, api, token_env).call("POST", f"/api/v1/actions/{action_id}/reject", {"reason": reason})
    console().print(line(f"action {a['id']}: {a['status']} ({a['detail']})"))


class Mode(StrEnum):
    observe = "observe"
    approve = "approve"
    auto = "auto"


def mode_command(
    mode: Mode = typer.Argument(..., help="observe (never touch a switch), approve (a person approves), auto."),
    reason: str = typer.Option(..., "--reason", help="Why: goes in the audit log."),
    config: Path | None = _CONFIG,
    api: str | None = _API,
    token_env: str = _TOKEN_ENV,
) -> None:
    """Switch the running service's remediation mode now (admin); it holds across restarts until changed again."""
    r = ApiClient(config, api, token_env).call("POST", "/api/v1/mode", {"mode": mode.value, "reason": reason})
    console().print(line(f"remediation mode: {r['mode']} (by {r['by']})"))


def release_command(
    port: str = typer.Argument(..., help="The held port, device:port (see `fabricd status`)."),
    reason: str = typer.Option(..., "--reason", help="Why: goes on the ticket and in the audit log."),
    config: Path | None = _CONFIG,
    api: str | None = _API,
    token_env: str = _TOKEN_ENV,
) -> None:
    """Give up fabricd's hold on a port that is up again (one the guard would not let fabricd take down again):
    fabricd stops re-applying it. A port still down comes back by resolving its ticket."""
    r = ApiClient(config, api, token_env).call("POST", "/api/v1/holds/release", {"port": port, "reason": reason})
    console().print(line(f"{r['port']}: {r['note']}"))


def resolve_command(
    ticket_id: int = typer.Argument(..., help="Ticket id (see `fabricd tickets`)."),
    config: Path | None = _CONFIG,
    api: str | None = _API,
    token_env: str = _TOKEN_ENV,
) -> None:
    """Mark a repair done: the ticket closes and the ports it held down come back, on probation."""
    client = ApiClient(config, api, token_env)
    try:
        before = client.call("GET", f"/api/v1/tickets/{ticket_id}")
    except FabricdError:
        before = {}  # the resolve itself says what is wrong
    t = client.call("POST", f"/api/v1/tickets/{ticket_id}/resolve")
    # what the resolve set going: the enables of the ports the ticket holds down (a fast one may be done already)
    running = client.call("GET", "/api/v1/actions", status="running")["actions"]
    mine = [a for a in running if a["op"] == "enable" and a["ticket_id"] == t["id"]]
    ports = ", ".join(f"{a['device']}:{a['port']}" for a in mine)
    if ports:
        back = f"held-down ports are being re-enabled: {ports}"
    elif before.get("status") == "resolved":
        back = "it was resolved before and holds no port down: nothing re-enabled"
    else:
        back = "held-down ports are being re-enabled"
    console().print(line(f"ticket {t['id']}: {t['status']}; {back}"))


def _table(rows: list[dict[str, Any]], cols: tuple[str, ...]) -> None:
    out = console()
    if not rows:
        out.print("[green]none[/green]")
        return
    table = Table(header_style="bold")
    for c in cols:
        table.add_column(c, overflow="fold")
    for r in rows:
        table.add_row(*(cell(r.get(c)) for c in cols))  # data: never markup, controls escaped, capped
    out.print(table)
