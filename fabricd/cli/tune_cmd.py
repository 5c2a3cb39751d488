"""`fabricd tune --spec S --trace T.jsonl`: judge the lossless queues of a recording and propose bounded changes to
ECN, the flowlet gap and a DR's CNP (docs/tuning.md), as a `plan`-like diff, with NIC/NCCL advice for what a switch
cannot set. `fabricd tune --config C` (or `--api URL`): the running service's last judged window. Read-only: nothing
is applied. Exit 0 nothing to change, 1 proposals or advice, 2 trouble. `fabricd tune history`: the changes the
service's loop recorded, applied, confirmed or rolled back (tune_history.py; exit 0)."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import typer
from rich.table import Table

from fabricd.cli.output import EXIT_CLEAN, EXIT_FINDINGS, Format, cell, console, emit_json, line
from fabricd.cli.service_cmd import ApiClient
from fabricd.cli.tune_history import print_history
from fabricd.tuning.observed import (
    DEFAULT_XOFF_BYTES,
    SampleLog,
    group_windows,
    lossless_ports,
    port_windows,
    replay_samples,
)
from fabricd.tuning.round import judge_round
from policies.intent import derive_intent
from policies.policy import load_policy
from topology.errors import FabricdError
from topology.load import load_fabric


def tune_command(
    what: str | None = typer.Argument(None, help="history: the service's tuning changes (default: what it would do)."),
    spec: Path | None = typer.Option(None, "--spec", "-s", help="Offline: the fabric spec the trace was recorded on."),
    trace: Path | None = typer.Option(None, "--trace", "-t", help="Offline: a telemetry trace (docs/formats.md)."),
    config: Path | None = typer.Option(None, "--config", help="Live: fabricd.yaml of the running service."),
    api: str | None = typer.Option(None, "--api", help="Live: service URL, e.g. http://127.0.0.1:8340."),
    token_env: str = typer.Option("FABRICD_API_TOKEN", "--token-env", help="Env var with the API token (--api)."),
    cabling: Path | None = typer.Option(None, "--cabling", help="Offline: as-built cabling (default: blueprint)."),
    policy: Path | None = typer.Option(None, "--policy", "-p", help="Policy file (its tuning: section)."),
    tick: float = typer.Option(1.0, "--tick", help="Seconds of trace time between samples."),
    window: float = typer.Option(
        0.0, "--window", help="Judge the last this many seconds of the trace (0: all of it, up to 4096 samples)."
    ),
    xoff_bytes: int = typer.Option(
        DEFAULT_XOFF_BYTES,
        "--xoff-bytes",
        help="Ingress fill at which a port sends XOFF (default: SONiC dynamic_th -2 of the twin's lossless pool).",
    ),
    fmt: Format = typer.Option(Format.table, "--format", "-f", help="json for scripts, table for people."),
    all_records: bool = typer.Option(False, "--all", help="history: observe mode's records too."),
    limit: int = typer.Option(200, "--limit", help="history: at most this many, newest first."),
) -> None:
    """What tuning would change, and why: from a recording, or the running service's last window; or `history`."""
    if what is not None:
        if what != "history":
            raise FabricdError(f"'{what}' is no tune subcommand; use `fabricd tune history` (or no argument)")
        if not 1 <= limit <= 10000:
            raise FabricdError(f"--limit {limit}: use 1..10000")
        query = {"limit": str(limit), **({} if all_records else {"changes": "true"})}
        print_history(ApiClient(config, api, token_env).call("GET", "/api/v1/tuning/history", **query)["changes"], fmt)
        raise typer.Exit(EXIT_CLEAN)
    if spec is None and trace is None:
        out = _live(config, api, token_env)
    elif spec is None or trace is None:
        raise FabricdError("offline needs both --spec and --trace (or neither, and --config or --api: the service)")
    else:
        out = _offline(spec, trace, cabling, policy, tick, window, xoff_bytes)
    if fmt is Format.json:
        emit_json(out)
    else:
        _print(out)
    raise typer.Exit(EXIT_FINDINGS if out["proposals"] or out["recommendations"] else EXIT_CLEAN)


def _live(config: Path | None, api: str | None, token_env: str) -> dict[str, Any]:
    report = ApiClient(config, api, token_env).call("GET", "/api/v1/tuning")
    if not report["enabled"]:
        raise FabricdError("the service runs no tuning loop: set tuning.enabled: true in its fabricd.yaml")
    if report["last"] is None:
        raise FabricdError(f"the service has judged no window yet: the first ends {report['window_s']} s after start")
    last: dict[str, Any] = report["last"]
    return last


def _offline(
    spec: Path, trace: Path, cabling: Path | None, policy: Path | None, tick: float, window: float, xoff_bytes: int
) -> dict[str, Any]:
    if not (tick > 0 and math.isfinite(tick)):
        raise FabricdError(f"--tick must be a positive number of seconds, got {tick}")
    if not (window >= 0 and math.isfinite(window)):
        raise FabricdError(f"--window must be 0 (all) or a positive number of seconds, got {window}")
    if xoff_bytes <= 0:
        raise FabricdError(f"--xoff-bytes must be a positive number of bytes, got {xoff_bytes}")
    fabric_spec, fabric = load_fabric(spec, cabling)
    pol = load_policy(policy)
    intent = derive_intent(fabric, fabric_spec, pol)
    keep = max(3, math.ceil(window / tick) + 1) if window else 4096
    log = SampleLog(((d.device, p.port) for d, p in lossless_ports(intent)), pol.lossless_priorities[0], keep)
    replay_samples(trace, fabric, log, tick)
    ports = port_windows(intent, fabric, log, pol, lambda _d, _p: xoff_bytes)
    groups = group_windows(intent, fabric, log)
    if not ports and not groups:
        raise FabricdError(
            f"{trace}: no lossless queue or ECMP group of {spec} has samples (a trace of another fabric, or recorded "
            "without the qos/pfc subscriptions?)"
        )
    return judge_round(ports, groups, pol).to_dict()


def _print(out: dict[str, Any]) -> None:
    con = console()
    con.print(line(f"{out['subjects']} ports and groups judged; {len(out['verdicts'])} rules fired"))
    if out["verdicts"]:
        t = Table(header_style="bold")
        for col in ("rule", "subject", "class", "why", "evidence", "source"):
            t.add_column(col)
        for v in out["verdicts"]:
            ev = ", ".join(f"{k}={x:.4g}" for k, x in v["evidence"].items())
            t.add_row(*(cell(x) for x in (v["rule"], v["subject"], v["class"], v["why"], ev, v["source"])))
        con.print(t)
    if out["proposals"]:
        con.print(line("proposed (nothing is applied):"))
        for p in out["proposals"]:
            for d in p["diff"]:
                con.print(line(d))
    else:
        con.print(line("no switch setting to change"))
    if out["recommendations"]:
        con.print(line("for the NICs and NCCL (fabricd cannot set these):"))
        for rec in out["recommendations"]:
            con.print(line(f"  {rec['name']} = {rec['value']} (default {rec['default']}): {rec['reason']}"))
            for how in rec["how"]:
                con.print(line(f"    {how}"))
    for n in out["notes"]:
        con.print(line(f"note: {n}"))
