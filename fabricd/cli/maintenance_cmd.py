"""`fabricd drain`, `fabricd undrain`, `fabricd maintenance`: planned maintenance on a running service, through its
API (docs/operations.md, Maintenance). The service checks and records; this prints."""

from __future__ import annotations

import time
from enum import StrEnum
from pathlib import Path

import typer

from fabricd.cli.output import EXIT_CLEAN, EXIT_FINDINGS, Format, console, emit_json, line, shown
from fabricd.cli.service_cmd import _API, _CONFIG, _FMT, _TOKEN_ENV, ApiClient, _table
from topology.errors import FabricdError


class Kind(StrEnum):
    switch = "switch"
    link = "link"
    port = "port"


def drain_command(
    kind: Kind = typer.Argument(..., help="What to drain: switch, link (by either end) or port."),
    target: str = typer.Argument(..., help="The switch's name, or device:port."),
    reason: str = typer.Option(..., "--reason", help="Why: goes in the audit log and on the page."),
    until: str | None = typer.Option(
        None,
        "--until",
        help="When the work should end (ISO 8601, UTC): past it, "
        "the drain is reported as overran (never ended by fabricd).",
    ),
    shut: bool = typer.Option(False, "--shut", help="A switch drain: shut its ports too once traffic moved away."),
    dry_run: bool = typer.Option(False, "--dry-run", help="Print the steps; change nothing."),
    force: bool = typer.Option(False, "--force", help="Admin only: drain even though the guard refuses (audited)."),
    config: Path | None = _CONFIG,
    api: str | None = _API,
    token_env: str = _TOKEN_ENV,
) -> None:
    """Take a switch, link or port out of service for planned work: the guard counts its capacity with every
    fault, hold and other drain, traffic is shifted away, then (a link or port, or --shut) the ports go down, held
    as maintenance. Refused, with the reason, when a switch would keep too little uplink capacity."""
    body = {"kind": kind.value, "target": target, "reason": reason, "until": until, "shut": shut, "dry_run": dry_run,
            "force": force}  # fmt: skip
    r = ApiClient(config, api, token_env).call("POST", "/api/v1/maintenance", body)
    out = console()
    d = r["drain"]
    out.print(line(f"dry run: drain of {kind.value} {target} would take these steps (nothing changed):"
                   if r["dry_run"] else f"drain {d['id']} of {kind.value} {target}: {d['state']}"))  # fmt: skip
    jobs = r.get("jobs") or []
    out.print(line(f"jobs whose traffic it carries: {', '.join(jobs) if jobs else 'none known'}"))
    for i, step in enumerate(r["steps"], 1):
        mark = "" if r["dry_run"] else (" (done)" if d is not None and i <= d["done"] else "")
        out.print(line(f"  {i}. {step}{mark}"))


# an undrain checks LLDP, BGP and the counters while watched (tens of seconds); its ports' enables too
_UNDRAIN_WAIT_S = 600.0


def undrain_command(
    target: str = typer.Argument(..., help="What was drained: the switch's name, or device:port as drained."),
    config: Path | None = _CONFIG,
    api: str | None = _API,
    token_env: str = _TOKEN_ENV,
) -> None:
    """End a drain once its ports came back as the blueprint has them (up, facing their blueprint neighbour by
    LLDP, BGP established, counters clean); otherwise it stays drained and says what is wrong."""
    client = ApiClient(config, api, token_env)
    d = client.call("POST", "/api/v1/maintenance/undrain", {"target": target})
    deadline = time.monotonic() + _UNDRAIN_WAIT_S
    while d["state"] == "undraining" and time.monotonic() < deadline:  # the service answered at once: poll it
        time.sleep(0.5)
        d = next((x for x in client.call("GET", "/api/v1/maintenance")["maintenance"] if x["id"] == d["id"]), d)
    if d["state"] == "undraining":
        raise FabricdError(f"drain {d['id']} of {d['kind']} {d['target']} is still undraining after "
                           f"{_UNDRAIN_WAIT_S:g} s; see `fabricd maintenance`")  # fmt: skip
    if d["state"] != "undrained":
        why = shown(str(d["detail"]).removeprefix("undrain refused: "))
        raise FabricdError(f"{d['kind']} {d['target']} stays {d['state']}: {why}")
    console().print(line(f"drain {d['id']} of {d['kind']} {d['target']}: {d['state']}"))


def maintenance_command(
    what: str = typer.Argument("list", help="list (the default): the drains, newest first."),
    config: Path | None = _CONFIG,
    api: str | None = _API,
    token_env: str = _TOKEN_ENV,
    fmt: Format = _FMT,
) -> None:
    """Planned maintenance: who drained what, why, since and until when, its state; exit 1 when one overran."""
    if what != "list":
        raise typer.BadParameter(f"{what!r}: the only one is list", param_hint="WHAT")
    r = ApiClient(config, api, token_env).call("GET", "/api/v1/maintenance")
    late = set(r["overran"])
    rows = [
        {**d, "since": _utc(d["created_ts"]), "until": _utc(d["until_ts"]),
         "state": f"{d['state']} (OVERRAN)" if d["id"] in late else d["state"],
         "step": f"{d['done']}/{len(d['steps'])}"}
        for d in r["maintenance"]
    ]  # fmt: skip
    if fmt is Format.json:
        emit_json(r)
    else:
        _table(rows, ("id", "kind", "target", "state", "step", "actor", "reason", "since", "until", "detail"))
    raise typer.Exit(EXIT_FINDINGS if late else EXIT_CLEAN)


def _utc(ns: int | None) -> str | None:
    return None if ns is None else time.strftime("%Y-%m-%d %H:%M:%SZ", time.gmtime(ns / 1e9))
