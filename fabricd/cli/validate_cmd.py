"""`fabricd validate`: check an as-built cabling against the spec's rail-optimized layout."""

from __future__ import annotations

from pathlib import Path

import typer
from rich.table import Table

from fabricd.cli.output import EXIT_CLEAN, EXIT_FINDINGS, EXIT_TROUBLE, Format, console, emit_json, err_console
from topology.errors import FabricdError, one_line
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
    inventory: Path | None = typer.Option(
        None,
        "--inventory",
        "-i",
        help="Read the cabling from the live switches' LLDP instead (through the drivers, every switch of the "
        "inventory); unreachable switches are named, the rest validated.",
    ),
    save_lldp: Path | None = typer.Option(
        None, "--save-lldp", help="With --inventory: also write the tables read to DIR/<switch>.json (--cabling DIR)."
    ),
    fmt: Format = typer.Option(Format.table, "--format", "-f", help="json for scripts, table for people."),
) -> None:
    """Check cabling against the rail-optimized layout; exit 0 clean, 1 violations, 2 bad input (or, with
    --inventory, switches that could not be read and no violation among the rest)."""
    if cabling is not None and inventory is not None:
        raise FabricdError("give --cabling (a file or directory) or --inventory (the live switches), not both")
    fabric_spec = load_spec(spec)
    unreachable: dict[str, str] = {}
    if inventory is not None:
        from drivers.inventory import load_inventory
        from fabricd.lldp_collect import collect_lldp
        from topology.loaders.lldp import cabling_from_lldp

        inv = load_inventory(inventory)
        collected = collect_lldp(inv, inv.names)
        unreachable = collected.unreachable
        for name, why in sorted(unreachable.items()):
            err_console().print(f"fabricd: warning: {name} not read: {one_line(why)}; its cables no switch that "
                                "was read sees are not judged", markup=False, highlight=False,
                                soft_wrap=True)  # fmt: skip
        if not collected.tables:
            raise FabricdError(f"{inventory}: no switch could be read ({len(unreachable)} tried); see the warnings")
        if save_lldp is not None:
            collected.save(save_lldp)
        as_built = cabling_from_lldp(collected.tables, f"LLDP of {len(collected.tables)} switches ({inventory})")
    else:
        as_built = load_as_built(fabric_spec, cabling)
    result = validate(fabric_spec, as_built, unread=unreachable.keys())
    if fmt is Format.json:
        doc = result.to_dict()
        if inventory is not None:
            doc["unreachable"] = [{"device": n, "error": why} for n, why in sorted(unreachable.items())]
        emit_json(doc)
    else:
        _print_table(result, len(unreachable))
    if result.violations:
        raise typer.Exit(EXIT_FINDINGS)
    raise typer.Exit(EXIT_TROUBLE if unreachable else EXIT_CLEAN)


def _print_table(result: ValidationResult, unread: int = 0) -> None:
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
    if unread:
        out.print(f"{unread} switch(es) not read (named above): {s.get('not_judged', 0)} finding(s) only they could "
                  "show are not judged")  # fmt: skip
    if not result.violations:
        where = " where it was read" if unread else ""
        out.print(f"[green]ok[/green]: the cabling matches the rail-optimized layout{where}")
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
