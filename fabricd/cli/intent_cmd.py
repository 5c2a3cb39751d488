"""`fabricd intent`: the vendor-neutral per-port lossless settings, with the reason for every number."""

from __future__ import annotations

from pathlib import Path

import typer
from rich.table import Table

from fabricd.cli.inputs import selected_switches
from fabricd.cli.output import Format, console, emit_json
from policies.intent import Intent, derive_intent
from policies.policy import load_policy
from topology.load import load_fabric


def intent_command(
    spec: Path = typer.Option(..., "--spec", "-s", help="Fabric spec (YAML)."),
    policy: Path | None = typer.Option(None, "--policy", "-p", help="Policy (YAML); default: built-in defaults."),
    cabling: Path | None = typer.Option(None, "--cabling", "-c", help="As-built cabling (default: blueprint)."),
    device: list[str] = typer.Option([], "--device", "-d", help="Only these devices (repeatable)."),
    fmt: Format = typer.Option(Format.table, "--format", "-f", help="json for scripts, table for people."),
) -> None:
    """Derive PFC/ECN/CNP/watchdog/DLB intent per switch port; changes nothing."""
    fabric_spec, fabric = load_fabric(spec, cabling)
    pol = load_policy(policy)
    intent = derive_intent(fabric, fabric_spec, pol, selected_switches(fabric, device))
    if fmt is Format.json:
        emit_json(intent.model_dump(mode="json"))
    else:
        _print(intent)


def _mb(n: int) -> str:
    return f"{n / 1e6:.2f} MB" if n >= 1e6 else f"{n / 1e3:.0f} KB"


def _print(intent: Intent) -> None:
    out = console()
    for dev in intent.devices:
        table = Table(title=f"{dev.device} ({dev.role.value}, {dev.platform})", header_style="bold")
        for col in ("port", "peer", "class", "len", "Gb/s", "PFC", "headroom", "ECN min-max", "CNP", "watchdog", "DLB"):
            table.add_column(col)
        for p in dev.ports:
            table.add_row(
                p.port,
                p.peer,
                p.link_class.value,
                f"{p.length_m / 1000:g} km" if p.length_m >= 1000 else f"{p.length_m:g} m",
                str(p.speed_gbps),
                ",".join(map(str, p.pfc.no_drop)) if p.pfc.enabled else "off",
                _mb(p.pfc.headroom_bytes) if p.pfc.enabled else "-",
                f"{_mb(p.ecn.min_bytes)}-{_mb(p.ecn.max_bytes)}" if p.ecn.enabled else "off",
                p.cnp.source,
                f"{p.watchdog.action} {p.watchdog.timeout_ms} ms" if p.watchdog.enabled else "off",
                f"{p.dlb.mode} {p.dlb.inactivity_us} us" if p.dlb.mode != "off" else "off",
            )
        out.print(table)
        for p in dev.ports:
            if p.link_class.value == "dci":
                for field, why in p.reasons.items():
                    out.print(f"  {p.port} {field}: {why}", markup=False, highlight=False)
