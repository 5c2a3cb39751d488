"""`fabricd intent`: the vendor-neutral per-port lossless settings, with the reason for every number."""

from __future__ import annotations

from pathlib import Path

import typer
from rich.table import Table

from fabricd.cli.inputs import selected_switches
from fabricd.cli.output import Format, console, emit_json
from policies.intent import Intent, PortIntent, derive_intent
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


def _cells(p: PortIntent) -> tuple[str, ...]:
    return (
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


def _runs(names: list[str], order: dict[str, int]) -> str:
    """Port names as runs of neighbours on the switch: `Ethernet1/1 .. Ethernet4/1`, others listed."""
    out: list[str] = []
    run: list[str] = []
    for name in names:
        if run and order[name] != order[run[-1]] + 1:
            out.append(f"{run[0]} .. {run[-1]}" if len(run) > 2 else ", ".join(run))
            run = []
        run.append(name)
    if run:
        out.append(f"{run[0]} .. {run[-1]}" if len(run) > 2 else ", ".join(run))
    return ", ".join(out)


def _print(intent: Intent) -> None:
    """One row per group of ports that share every setting and every reason (a leaf: its server ports, its
    uplinks), then the reasons once per group."""
    out = console()
    for dev in intent.devices:
        order = {p.port: i for i, p in enumerate(dev.ports)}
        groups: dict[tuple[tuple[str, ...], tuple[tuple[str, str], ...]], list[PortIntent]] = {}
        for p in dev.ports:
            groups.setdefault((_cells(p), tuple(p.reasons.items())), []).append(p)
        table = Table(title=f"{dev.device} ({dev.role.value}, {dev.platform})", header_style="bold")
        for col in ("ports", "peers", "class", "len", "Gb/s", "PFC", "headroom", "ECN min-max", "CNP", "watchdog",
                    "DLB"):  # fmt: skip
            table.add_column(col, overflow="fold")
        for (cells, _), ports in groups.items():
            peers = ports[0].peer if len(ports) == 1 else f"{len(ports)} peers: {ports[0].peer} .. {ports[-1].peer}"
            table.add_row(_runs([p.port for p in ports], order), peers, *cells)
        out.print(table)
        for (_, reasons), ports in groups.items():
            out.print(f"  {_runs([p.port for p in ports], order)}:", markup=False, highlight=False)
            for field, why in reasons:
                out.print(f"    {field}: {why}", markup=False, highlight=False)
