"""`fabricd check ...`: what-if checks of the fabric model (no switch is contacted)."""

from __future__ import annotations

from pathlib import Path

import typer
from rich.table import Table

from fabricd.cli.output import EXIT_CLEAN, EXIT_FINDINGS, Format, console, emit_json
from topology.deadlock import MAX_CYCLES, DeadlockRisk, deadlock_risk, resolve_failed
from topology.load import load_fabric

app = typer.Typer(help="What-if checks of the fabric model.", no_args_is_help=True)


@app.command("deadlock-risk")
def deadlock_risk_command(
    spec: Path = typer.Option(..., "--spec", "-s", help="Fabric spec (YAML)."),
    cabling: Path | None = typer.Option(None, "--cabling", "-c", help="As-built cabling (default: blueprint)."),
    failed: list[str] = typer.Option(
        [], "--failed", help="A failed link: devA:port--devB:port (one cable) or devA--devB (all). Repeatable."
    ),
    max_cycles: int = typer.Option(MAX_CYCLES, "--max-cycles", min=1, help="Report at most this many cycles."),
    fmt: Format = typer.Option(Format.table, "--format", "-f", help="json for scripts, table for people."),
) -> None:
    """PFC deadlock risk with the --failed links down: cycles of egress queues that bouncing routes close.

    Exit 0 no risk, 1 risk (each cycle named with the failed links causing it), 2 bad input.
    JSON: {"ok": bool, "failed": [link, ...], "risks": [{"cycle": ["device:port", ...], "devices", "parallel",
    "bounces", "failed", "pairs", "summary"}]}.
    """
    _, fabric = load_fabric(spec, cabling)
    fails = resolve_failed(fabric, failed)
    risks = deadlock_risk(fabric, fails, max_cycles=max_cycles)
    if fmt is Format.json:
        emit_json({"ok": not risks, "failed": [f.name for f in fails], "risks": [r.to_dict() for r in risks]})
    else:
        _print(risks, [f.name for f in fails])
    raise typer.Exit(EXIT_FINDINGS if risks else EXIT_CLEAN)


def _print(risks: list[DeadlockRisk], failed: list[str]) -> None:
    out = console()
    down = ", ".join(failed) if failed else "no failed links"
    if not risks:
        out.print(f"[green]no deadlock risk[/green] with {down}: every leaf pair keeps a valley-free route")
        return
    table = Table(header_style="bold")
    for col in ("cycle (egress queues)", "bounces", "caused by"):
        table.add_column(col, overflow="fold")
    for r in risks:
        table.add_row(r.name, ", ".join(r.bounces), ", ".join(r.failed) or "the cabling as given")
    out.print(table)
    out.print(f"{len(risks)} deadlock cycle(s) with {down}", markup=False)
