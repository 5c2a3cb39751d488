"""`fabricd apply`: show the live plan, ask, then push canary-first in batches under a revert timer.

Exit 0: nothing to change; 1: changes applied everywhere asked; 2: any device failed, was rolled back,
was unreachable or was skipped after a failure.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path

import typer
from rich.table import Table

from drivers.inventory import load_inventory
from fabricd.cli.inputs import selected_switches
from fabricd.cli.output import EXIT_CLEAN, EXIT_FINDINGS, EXIT_TROUBLE, console, emit_json, err_console
from fabricd.cli.plan_cmd import print_plans
from fabricd.cli.tuned import CONFIG, WITHOUT, tuned
from fabricd.rollout import ApplyOptions, DeviceResult, apply_all, plan_all, targets
from policies.intent import derive_intent
from policies.policy import load_policy
from topology.errors import FabricdError
from topology.load import load_fabric

_FAILED = ("rolled_back", "rejected", "unreachable", "failed", "skipped")


def apply_command(
    spec: Path = typer.Option(..., "--spec", "-s", help="Fabric spec (YAML)."),
    inventory: Path = typer.Option(..., "--inventory", "-i", help="Inventory: how to reach each switch."),
    policy: Path | None = typer.Option(None, "--policy", "-p", help="Policy (YAML); default: built-in defaults."),
    cabling: Path | None = typer.Option(None, "--cabling", "-c", help="As-built cabling (default: blueprint)."),
    device: list[str] = typer.Option([], "--device", "-d", help="Only these devices (repeatable)."),
    yes: bool = typer.Option(False, "--yes", "-y", help="Do not ask before pushing."),
    revert_in: int = typer.Option(300, "--revert-in", help="Seconds before an unconfirmed commit reverts by itself."),
    batch: int = typer.Option(4, "--batch", help="Devices pushed in parallel after the canary."),
    fmt: str = typer.Option("text", "--format", "-f", help="text for people, json for scripts."),
    config: Path | None = CONFIG,
    without_tuning: bool = WITHOUT,
) -> None:
    """Push the intended lossless config: canary first, then batches; verify, confirm, or roll back."""
    if fmt not in ("text", "json"):
        raise FabricdError(f"--format '{fmt}' is unknown; use text or json")
    if not 30 <= revert_in <= 3600:
        raise FabricdError(f"--revert-in {revert_in}: use 30..3600 s (long enough to verify, short enough to be safe)")
    if batch < 1:
        raise FabricdError(f"--batch {batch}: push at least one device at a time")
    fabric_spec, fabric = load_fabric(spec, cabling)
    intent = derive_intent(fabric, fabric_spec, load_policy(policy), selected_switches(fabric, device))
    intent = tuned(intent, fabric, config, without_tuning, fmt)
    items = targets(intent.devices, load_inventory(inventory))
    plans = plan_all(items)
    if fmt == "text":
        print_plans(plans, fmt)
    changed = {p.device for p in plans if p.changed}
    unplanned = [p for p in plans if p.error]
    if not changed:
        if fmt == "json":
            emit_json({"devices": [p.to_dict() for p in plans], "applied": False})
        raise typer.Exit(EXIT_TROUBLE if unplanned else EXIT_CLEAN)
    if not yes:
        if not sys.stdin.isatty():
            raise FabricdError("not a terminal, so no one can confirm: review the plan and rerun with --yes")
        if not typer.confirm(f"push to {len(changed)} device(s), canary first, revert timer {revert_in} s?"):
            raise typer.Exit(EXIT_CLEAN)
    todo = [t for t in items if t.device in changed]
    results = apply_all(todo, ApplyOptions(revert_in_s=revert_in, batch=batch), progress=_progress(fmt))
    results += [DeviceResult(p.device, "unreachable", error=p.error) for p in unplanned]
    if fmt == "json":
        emit_json({"devices": [r.to_dict() for r in results], "applied": True})
    else:
        _summary(results)
    raise typer.Exit(EXIT_TROUBLE if any(r.status in _FAILED for r in results) else EXIT_FINDINGS)


def _progress(fmt: str) -> Callable[[DeviceResult], None]:
    def report(r: DeviceResult) -> None:
        if fmt == "text":
            err_console().print(f"{r.device}: {r.status}" + (f" ({r.error})" if r.error else ""), markup=False)

    return report


def _summary(results: list[DeviceResult]) -> None:
    table = Table(title="apply", header_style="bold")
    for col in ("device", "result", "commands", "steps / error"):
        table.add_column(col)
    for r in results:
        style = "green" if r.status == "applied" else ("red" if r.status in _FAILED else "")
        detail = r.error or "; ".join(r.steps)
        table.add_row(r.device, f"[{style}]{r.status}[/{style}]" if style else r.status,
                      str(len(r.plan.commands) if r.plan else 0), detail)  # fmt: skip
    console().print(table)
