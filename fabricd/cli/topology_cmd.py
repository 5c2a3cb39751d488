"""`fabricd topology ...`: blueprint generation and exports."""

from __future__ import annotations

import os
from pathlib import Path

import typer

from fabricd.cli.output import err_console, write_or_print
from topology.blueprint import generate_blueprint
from topology.cabling_io import dump_cabling
from topology.errors import FabricdError
from topology.exports import EXPORT_FORMATS, export
from topology.exports.clab import ceos_startup_config, clab_topology
from topology.load import load_fabric
from topology.sourcefile import write_atomic
from topology.spec import load_spec

app = typer.Typer(help="Blueprints and exports of the fabric model.", no_args_is_help=True)


@app.command("blueprint")
def blueprint_command(
    spec: Path = typer.Option(..., "--spec", "-s", help="Fabric spec (YAML)."),
    output: Path = typer.Option(..., "--output", "-o", help="Where to write: .json or .yaml/.yml."),
) -> None:
    """Write the complete cabling the spec implies (devices + links, deterministic names)."""
    cabling = generate_blueprint(load_spec(spec))
    dump_cabling(cabling, output)
    err_console().print(f"wrote {output}: {len(cabling.devices)} devices, {len(cabling.links)} links")


@app.command("export")
def export_command(
    spec: Path = typer.Option(..., "--spec", "-s", help="Fabric spec (YAML)."),
    cabling: Path | None = typer.Option(None, "--cabling", "-c", help="As-built cabling (default: blueprint)."),
    fmt: str = typer.Option(..., "--format", "-f", help=f"One of: {', '.join(EXPORT_FORMATS)}."),
    output: Path | None = typer.Option(None, "--output", "-o", help="Write to this file instead of stdout."),
    startup_dir: Path | None = typer.Option(
        None, "--startup-dir", help="clab only: write a cEOS startup config per switch here (gNMI, eAPI on)."
    ),
) -> None:
    """Export the fabric: Slurm topology.conf, NCCL host order, containerlab topology, or JSON."""
    if fmt not in EXPORT_FORMATS:
        raise FabricdError(f"--format '{fmt}' is unknown; use one of: {', '.join(EXPORT_FORMATS)}")
    if startup_dir is not None and fmt != "clab":
        raise FabricdError("--startup-dir goes with --format clab only")
    fabric_spec, fabric = load_fabric(spec, cabling)
    if startup_dir is None:
        write_or_print(export(fmt, fabric, fabric_spec), output)
        return
    try:
        startup_dir.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise FabricdError(f"--startup-dir {startup_dir}: cannot create it ({e.strerror})") from None
    for device in fabric.switches():
        if not device.is_remote:
            write_atomic(startup_dir / f"{device.name}.cfg", ceos_startup_config(device, fabric))
    # Paths in a containerlab file are relative to the topology file.
    base = output.parent if output is not None else Path.cwd()
    rel = os.path.relpath(startup_dir.resolve(), base.resolve())
    write_or_print(clab_topology(fabric, fabric_spec, startup_dir=rel), output)
