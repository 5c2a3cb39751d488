"""`fabricd detect`: run the detectors over a recorded telemetry trace and/or probe results; the same code the
service runs live."""

from __future__ import annotations

from pathlib import Path

import typer
from rich.table import Table

from fabricd.cli.output import EXIT_CLEAN, EXIT_FINDINGS, Format, console, emit_json
from fabricd.detectors import Finding, run_trace
from fabricd.detectors.probes import read_probes
from fabricd.detectors.runner import PASS_GAP_S
from fabricd.detectors.silent_corruption import localize
from fabricd.jobs.annotate import annotate
from topology.errors import FabricdError
from topology.jobs import JobMap, load_jobs
from topology.load import load_fabric


def detect_command(
    spec: Path = typer.Option(..., "--spec", "-s", help="Fabric spec (YAML)."),
    cabling: Path | None = typer.Option(None, "--cabling", "-c", help="As-built cabling (default: blueprint)."),
    trace: Path | None = typer.Option(None, "--trace", "-t", help="Telemetry trace (JSON Lines, docs/formats.md)."),
    probes: Path | None = typer.Option(
        None, "--probes", help="Probe results (JSON Lines, docs/formats.md): localizes silent corruption."
    ),
    jobs: Path | None = typer.Option(
        None, "--jobs", help="Jobs (YAML/JSON, Slurm or kubectl JSON): each finding names the jobs it hits."
    ),
    tick: float = typer.Option(
        1.0, "--tick", help="Seconds of trace time between full detector ticks (the sample interval)."
    ),
    pass_gap: float = typer.Option(
        PASS_GAP_S,
        "--pass-gap",
        help="Between ticks, a pass soon after new samples, at most this often (0: ticks only).",
    ),
    fmt: Format = typer.Option(Format.table, "--format", "-f", help="json for scripts, table for people."),
) -> None:
    """Find link flaps, PFC storms and link corruption in a trace, silent corruption in probe results (with a trace
    too, elements whose error counters moved are left to link corruption); exit 0 none, 1 findings, 2 could not run."""
    if trace is None and probes is None:
        raise FabricdError(
            "live detection runs in the service; pass --trace T.jsonl and/or --probes P.jsonl to analyse recordings"
        )
    if not tick > 0:
        raise FabricdError(f"--tick must be a positive number of seconds, got {tick}")
    if not pass_gap >= 0:
        raise FabricdError(f"--pass-gap must be 0 or a positive number of seconds, got {pass_gap}")
    fabric_spec, fabric = load_fabric(spec, cabling)
    results = None if probes is None else read_probes(probes)
    if trace is not None:
        findings = run_trace(trace, fabric, tick_s=tick, pass_gap_s=pass_gap, probes=results, spec=fabric_spec)
    else:
        findings = localize(results or [], fabric)
    if jobs is not None:
        findings = annotate(findings, JobMap(load_jobs(jobs), fabric))
    if fmt is Format.json:
        emit_json({"findings": [f.to_dict() for f in findings]})
    else:
        _print(findings)
    raise typer.Exit(EXIT_FINDINGS if findings else EXIT_CLEAN)


def _print(findings: list[Finding]) -> None:
    out = console()
    if not findings:
        out.print("[green]no findings[/green]")
        return
    table = Table(header_style="bold")
    for col in ("kind", "severity", "where", "ports", "summary", "jobs"):
        table.add_column(col, overflow="fold")
    for f in findings:
        where = f"{f.device}:{f.port}" if f.port else f.device
        if f.priority is not None:
            where += f" prio {f.priority}"
        color = "red" if f.severity == "critical" else "yellow"
        jobs = ", ".join(f"{j.name} ({j.gpus} GPUs)" for j in f.jobs)
        table.add_row(f.kind, f"[{color}]{f.severity}[/{color}]", where, ", ".join(f.ports), f.summary, jobs)
    out.print(table)
    out.print(f"{len(findings)} finding(s)", markup=False)
