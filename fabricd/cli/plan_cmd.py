"""`fabricd plan`: per switch, the diff from running to intended config and the commands that would be
pushed. Changes nothing. Exit 0 no changes, 1 changes, 2 trouble (any device that could not be planned)."""

from __future__ import annotations

from contextlib import nullcontext
from pathlib import Path

import typer
from hier_config.exceptions import DuplicateChildError
from rich.progress import Progress
from rich.table import Table

from drivers.base import DevicePlan, Driver
from drivers.inventory import load_inventory
from drivers.plan_cache import OfflinePlanner, PlanCache, default_cache_dir, paused_gc
from drivers.registry import get_driver
from fabricd.cli.inputs import selected_switches
from fabricd.cli.output import EXIT_CLEAN, EXIT_FINDINGS, EXIT_TROUBLE, console, emit_json, err_console
from fabricd.cli.tuned import CONFIG, WITHOUT, tuned
from fabricd.rollout import plan_all, targets
from policies.intent import DeviceIntent, derive_intent
from policies.policy import load_policy
from topology.errors import FabricdError
from topology.load import load_fabric


def plan_command(
    spec: Path = typer.Option(..., "--spec", "-s", help="Fabric spec (YAML)."),
    inventory: Path | None = typer.Option(None, "--inventory", "-i", help="Inventory: plan live through the driver."),
    running_dir: Path | None = typer.Option(
        None, "--running-dir", help="Saved running configs: DIR/<device>.cfg (EOS) or .json (SONiC config_db), offline."
    ),
    policy: Path | None = typer.Option(None, "--policy", "-p", help="Policy (YAML); default: built-in defaults."),
    cabling: Path | None = typer.Option(None, "--cabling", "-c", help="As-built cabling (default: blueprint)."),
    device: list[str] = typer.Option([], "--device", "-d", help="Only these devices (repeatable)."),
    fmt: str = typer.Option("text", "--format", "-f", help="text for people, json for scripts."),
    show: str = typer.Option("diff", "--show", help="text: the unified diff, the commands, or both."),
    cache_dir: Path | None = typer.Option(
        None, "--cache-dir", help="Offline plan cache folder (default: $XDG_CACHE_HOME/fabricd or ~/.cache/fabricd)."
    ),
    no_cache: bool = typer.Option(False, "--no-cache", help="Offline: plan every switch afresh, store nothing."),
    config: Path | None = CONFIG,
    without_tuning: bool = WITHOUT,
) -> None:
    """Dry run: what would change on each switch, as a unified diff and the exact EOS commands."""
    if fmt not in ("text", "json"):
        raise FabricdError(f"--format '{fmt}' is unknown; use text or json")
    if show not in SHOW:
        raise FabricdError(f"--show '{show}' is unknown; use {', '.join(SHOW)}")
    if running_dir is None and inventory is None:
        raise FabricdError("pass --inventory FILE to plan live, or --running-dir DIR with saved running configs")
    if running_dir is not None and not running_dir.is_dir():
        raise FabricdError(f"{running_dir}: not a directory; pass the folder of saved <device>.cfg/.json files")
    # Offline, the whole run builds large acyclic structures (80k ports at 16k GPUs): without the cyclic GC
    # rescanning them it takes half the time. Live plans wait on the network, so they keep the GC.
    with paused_gc() if running_dir is not None else nullcontext():
        fabric_spec, fabric = load_fabric(spec, cabling)
        intent = derive_intent(fabric, fabric_spec, load_policy(policy), selected_switches(fabric, device))
        intent = tuned(intent, fabric, config, without_tuning, fmt)
        plans: list[DevicePlan] = []
        with Progress(console=err_console(), transient=True, disable=len(intent.devices) < 20) as progress:
            task = progress.add_task("planning", total=len(intent.devices))
            if running_dir is not None:
                cache = PlanCache(None if no_cache else (cache_dir or default_cache_dir()), warn=_warn)
                planner = OfflinePlanner(cache)
                try:
                    for dev in intent.devices:
                        plans.append(_plan_one(planner, get_driver(dev.platform), dev, running_dir))
                        progress.advance(task)
                finally:
                    cache.close()
            else:
                assert inventory is not None
                items = targets(intent.devices, load_inventory(inventory))
                plans = plan_all(items, progress=lambda: progress.advance(task))
        print_plans(plans, fmt, show)
        del fabric, intent  # freed now by reference counting, so the GC has little left to scan when it resumes
    failed = [p for p in plans if p.error]
    for p in failed:  # the table (or JSON) on stdout is for reading; what went wrong also goes where errors go
        err_console().print(f"fabricd: error: {p.device}: {p.error}", markup=False, highlight=False, soft_wrap=True)
    if failed:
        raise typer.Exit(EXIT_TROUBLE)
    raise typer.Exit(EXIT_FINDINGS if any(p.changed for p in plans) else EXIT_CLEAN)


SHOW = ("diff", "commands", "both")


def print_plans(plans: list[DevicePlan], fmt: str, show: str = "diff") -> None:
    """JSON carries both; text shows the unified diff (for review), the commands (to paste), or both."""
    if fmt == "json":
        emit_json({"devices": [p.to_dict() for p in plans]})
    else:
        _print(plans, show)


def _warn(message: str) -> None:
    err_console().print(f"warning: {message}", markup=False, highlight=False)


def _plan_one(planner: OfflinePlanner, driver: Driver, dev: DeviceIntent, running_dir: Path) -> DevicePlan:
    """One device's plan; a device whose running config cannot be read fails alone."""
    device = dev.device
    path = running_dir / f"{device}{driver.running_suffix}"
    try:
        running = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return DevicePlan(device, error=f"{path}: no saved running config; save `show running-config` there")
    except (OSError, UnicodeDecodeError) as exc:
        return DevicePlan(device, error=f"{path}: cannot read ({exc})")
    try:
        return planner.plan(driver, dev, running)
    except DuplicateChildError as exc:
        return DevicePlan(device, error=f"{path}: cannot parse the running config ({exc})")


def _print(plans: list[DevicePlan], show: str) -> None:
    out = console()
    for p in plans:
        if p.changed:
            out.rule(f"{p.device}")
            if show in ("diff", "both"):
                out.print(p.diff, markup=False, highlight=False)
            if show in ("commands", "both"):
                if show == "both":
                    out.print("commands:", style="bold")
                out.print("\n".join(p.commands), markup=False, highlight=False)
    table = Table(title="plan", header_style="bold")
    for col in ("device", "result", "commands"):
        table.add_column(col)
    for p in plans:
        result = f"[red]error[/red]: {p.error}" if p.error else ("changes" if p.changed else "no change")
        table.add_row(p.device, result, str(len(p.commands)))
    out.print(table)
