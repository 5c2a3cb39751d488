"""`fabricd validate`: check an as-built cabling against the spec's rail-optimized layout."""

from __future__ import annotations

from pathlib import Path

import typer
from rich.table import Table

from fabricd.cli.output import EXIT_CLEAN, EXIT_FINDINGS, Format, console, emit_json
from topology.load import load_as_built
from topology.spec import load_spec
from topology.validate import ValidationResult, validate


def validate_command(
    spec: Path = typer.Option(..., "--spec", "-s", help="Fabric spec (YAML)."),
    cabling: Path | None = typer.Option(
        None,
        "--cabling",
        "-c",
        help="As-built cabling: cabling YAML/JSON, a containerlab file, or a directory of LLDP tables "
        "(one napalm get_lldp_neighbors_detail JSON per switch). Default: the spec's own blueprint.",
    ),
    fmt: Format = typer.Option(Format.table, "--format", "-f", help="json for scripts, table for people."),
) -> None:
    """Check cabling against the rail-optimized layout; exit 0 clean, 1 violations, 2 bad input."""
    fabric_spec = load_spec(spec)
    as_built = load_as_built(fabric_spec, cabling)
    result = validate(fabric_spec, as_built)
    if fmt is Format.json:
        emit_json(result.to_dict())
    else:
        _print_table(result)
    raise typer.Exit(EXIT_FINDINGS if result.violations else EXIT_CLEAN)


def _print_table(result: ValidationResult) -> None:
    out = console()
    s = result.summary
    devices = s["devices"]
    assert isinstance(devices, dict)
    counts = ", ".join(f"{n} {role}" for role, n in devices.items() if n)
    out.print(f"[bold]{s['fabric']}[/bold]: {s['cabling']} — {counts}, {s['links']} links")
    inferred = s["labels_inferred"]
    assert isinstance(inferred, dict)
    if inferred.get("from_graph"):
        out.print(
            f"labels inferred: {inferred['from_name']} from names, {inferred['from_graph']} from the graph "
            "(check those: --format json lists them)"
        )
    if not result.violations:
        out.print("[green]ok[/green]: the cabling matches the rail-optimized layout")
        return
    table = Table(show_lines=False, header_style="bold")
    for col in ("severity", "code", "message", "fix"):
        table.add_column(col, overflow="fold")
    for v in result.violations:
        color = "red" if v.severity == "error" else "yellow"
        table.add_row(f"[{color}]{v.severity}[/{color}]", v.code.value, v.message, v.fix)
    out.print(table)
    by_code = s["by_code"]
    assert isinstance(by_code, dict)
    out.print(
        f"{s['errors']} error(s), {s['warnings']} warning(s): "
        + ", ".join(f"{code} {n}" for code, n in by_code.items())
    )
