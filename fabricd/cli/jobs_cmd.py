"""`fabricd jobs [--show ID]`: each training job's fabric footprint, its traffic per rail, the ports where it
suffers, and the slow node or rail among its peers (docs/jobs.md). From the running service, or offline from a
jobs file and a recorded trace."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import typer
from rich.table import Table
from rich.text import Text

from fabricd.cli.output import CELL_LIMIT, EXIT_CLEAN, EXIT_FINDINGS, Format, cell, console, emit_json, line, shown
from fabricd.cli.service_cmd import ApiClient
from fabricd.jobs.report import report
from fabricd.telemetry import CounterStore, Ingestor, replay
from topology.errors import FabricdError
from topology.jobs import JobMap, load_jobs
from topology.load import load_fabric


def jobs_command(
    show: str | None = typer.Option(None, "--show", help="One job in full: every port, outliers with evidence."),
    config: Path | None = typer.Option(None, "--config", "-c", help="fabricd.yaml of the running service."),
    api: str | None = typer.Option(
        None, "--api", help="Service URL, e.g. http://127.0.0.1:8340 (instead of --config)."
    ),
    token_env: str = typer.Option("FABRICD_API_TOKEN", "--token-env", help="Env var with the API token (--api)."),
    spec: Path | None = typer.Option(None, "--spec", "-s", help="Offline: the fabric spec."),
    cabling: Path | None = typer.Option(None, "--cabling", help="Offline: as-built cabling (default: blueprint)."),
    jobs: Path | None = typer.Option(None, "--jobs", help="Offline: jobs (YAML/JSON, squeue or kubectl JSON)."),
    trace: Path | None = typer.Option(None, "--trace", "-t", help="Offline: a recorded trace (its end is 'now')."),
    fmt: Format = typer.Option(Format.table, "--format", "-f", help="json for scripts, table for people."),
) -> None:
    """Jobs and where the fabric hurts them; exit 1 when a job has an outlier port, 0 when none, 2 trouble."""
    offline = [x is not None for x in (spec, jobs, trace)]
    if any(offline) and not all(offline):
        raise FabricdError("offline needs all of --spec, --jobs and --trace (or none: ask the running service)")
    if all(offline):
        assert spec is not None and jobs is not None and trace is not None
        _, fabric = load_fabric(spec, cabling)
        job_map = JobMap(load_jobs(jobs), fabric)
        ingestor = Ingestor(CounterStore())
        replay(trace, ingestor, known={d.name for d in fabric.devices()})
        snap = ingestor.snapshot()
        reports = {fp.job.id: report(fp, snap) for fp in job_map.footprints.values()}
        if show is not None:
            if show not in reports:
                raise FabricdError(f"--show {show}: no such job in {jobs} (it has: {', '.join(reports) or 'none'})")
            rows: list[dict[str, Any]] = [reports[show].to_dict()]
        else:
            rows = [r.to_dict(ports=False) for r in reports.values()]
    else:
        client = ApiClient(config, api, token_env)
        if show is not None:
            rows = [client.call("GET", f"/api/v1/jobs/{show}")]
        else:
            answer = client.call("GET", "/api/v1/jobs")
            if not answer["source"]["configured"]:
                raise FabricdError("the service has no jobs: set jobs.path or jobs.command in fabricd.yaml")
            rows = answer["jobs"]
    if fmt is Format.json:
        emit_json(rows[0] if show is not None else {"jobs": rows})
    elif show is not None:
        _print_one(rows[0])
    else:
        _print_all(rows)
    raise typer.Exit(EXIT_FINDINGS if any(r["outliers"] for r in rows) else EXIT_CLEAN)


def _print_all(rows: list[dict[str, Any]]) -> None:
    out = console()
    table = Table(header_style="bold")
    for col in (
        "job",
        "name",
        "priority",
        "GPUs",
        "groups",
        "rails",
        "Gb/s",
        "rail imbalance",
        "outliers",
        "attention",
    ):
        table.add_column(col, overflow="fold")
    for r in rows:
        outl = ", ".join(f"{o['nic']} ({o['metric']})" for o in r["outliers"]) or "-"
        table.add_row(
            cell(r["id"]), cell(r["name"]), cell(r["priority"] or "-"), str(r["gpus"]), ",".join(map(str, r["groups"])),
            ",".join(map(str, r["rails"])), f"{r['gbps']:.0f}", f"{r['rail_imbalance'] * 100:.0f} %",
            Text(shown(outl, CELL_LIMIT), style="red" if r["outliers"] else ""), str(len(r["attention"])),
        )  # fmt: skip
    out.print(table)


def _print_one(r: dict[str, Any]) -> None:
    out = console()
    out.print(Text.assemble((shown(r["id"]), "bold"), line(
        f" {r['name']}: {r['servers']} servers, {r['gpus']} GPUs, groups "
        f"{','.join(map(str, r['groups']))}, rails {','.join(map(str, r['rails']))}, {len(r['leaves'])} leaves"
        + (f", {len(r['spines'])} spines" if r["spines"] else "")
        + (f"; not in the fabric: {', '.join(r['unknown_nodes'])}" if r["unknown_nodes"] else "")
    )))  # fmt: skip
    rails = ", ".join(f"rail {k}: {v:.0f} Gb/s" for k, v in r["per_rail_gbps"].items())
    out.print(f"traffic per rail: {rails} (imbalance {r['rail_imbalance'] * 100:.0f} %)", markup=False)
    if r["outliers"]:
        out.print("[red]slow node / rail[/red]:")
        for o in r["outliers"]:
            out.print(line(f"  {o['nic']} on {o['port']}: {o['why']}"))
    else:
        out.print("[green]no outlier among the job's ports[/green]")
    table = Table(header_style="bold", title="ports facing the job's NICs")
    for col in ("port", "NIC", "rail", "to NIC Gb/s", "from NIC Gb/s", "paused", "ECN/s", "drops/s", "error rate"):
        table.add_column(col)
    flagged = {o["port"] for o in r["outliers"]}
    for p in r["ports"]:
        style = "red" if p["port"] in flagged else ""
        table.add_row(
            p["port"], p["nic"], str(p["rail"]), f"{p['to_nic_gbps']:.1f}", f"{p['from_nic_gbps']:.1f}",
            f"{p['paused'] * 100:.1f} %", f"{p['ecn_per_s']:.0f}", f"{p['drops_per_s']:.0f}", f"{p['error_rate']:.1e}",
            style=style,
        )  # fmt: skip
    out.print(table)
    if r["unseen_ports"]:
        out.print(line(f"no telemetry yet from: {', '.join(r['unseen_ports'])}"))
