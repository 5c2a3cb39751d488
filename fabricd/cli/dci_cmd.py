"""`fabricd dci ...`: what a job loses across the long-haul DCI, and the NCCL settings for it (docs/dci.md)."""

from __future__ import annotations

import math
from dataclasses import replace
from enum import StrEnum
from pathlib import Path

import typer
from rich.table import Table

from fabricd.cli.output import EXIT_CLEAN, EXIT_FINDINGS, Format, console, emit_json
from fabricd.cli.service_cmd import ApiClient
from fabricd.detectors import Detector, Finding, run_trace
from fabricd.detectors import dci_ports as dci_detector
from fabricd.telemetry import Snapshot
from policies.dci_loss import UNTUNED_WINDOW_BYTES, DciPath, Result, Split, Workload, whatif
from policies.nccl_tuning import NcclPlan, plan
from topology.errors import FabricdError
from topology.fabric import Fabric
from topology.load import load_fabric
from topology.spec import DciSpec, FabricSpec, load_spec

app = typer.Typer(help="Long-haul DCI: compute lost across campuses, NCCL tuning.", no_args_is_help=True)

DISTANCES_KM = (1.0, 10.0, 50.0, 100.0, 120.0, 200.0, 300.0, 500.0, 1000.0)
BANDWIDTHS_TBPS = (0.4, 0.8, 1.6, 3.2, 4.8, 6.4, 9.6, 12.8, 25.6)


class Sweep(StrEnum):
    distance = "distance"
    bandwidth = "bandwidth"


class Nccl(StrEnum):
    tuned = "tuned"
    untuned = "untuned"


def _dci(spec: FabricSpec, name: str | None) -> DciSpec | None:
    if name is None:
        return spec.dci[0] if spec.dci else None
    for d in spec.dci:
        if d.name == name:
            return d
    known = ", ".join(d.name for d in spec.dci) or "none"
    raise FabricdError(f"--dci {name}: the spec has no such DCI (it has: {known})")


def _positive(name: str, value: float | None, *, high: float | None = None, low_inclusive: bool = False) -> None:
    if value is None:
        return
    ok = (value >= 0 if low_inclusive else value > 0) and math.isfinite(value)
    if not ok or (high is not None and value > high):
        bound = f" and at most {high:g}" if high is not None else ""
        kind = "non-negative" if low_inclusive else "positive"
        raise FabricdError(f"{name} must be a {kind} number{bound}, got {value:g}")


def _path(spec: FabricSpec | None, dci: DciSpec | None, distance: float | None, tbps: float | None) -> DciPath:
    dist = distance if distance is not None else (dci.distance_km if dci else None)
    bw = tbps if tbps is not None else (dci.dr_switches * dci.links_per_dr * dci.link_gbps / 1000 if dci else None)
    if dist is None or bw is None:
        where = "the spec has no dci" if spec is not None else "no --spec"
        raise FabricdError(f"{where}: give --distance-km and --dci-tbps, or a --spec with a dci entry")
    return DciPath(distance_km=dist, dci_tbps=bw)


@app.command("whatif")
def whatif_command(
    params: float = typer.Option(..., "--params", help="Model parameters, e.g. 7e9."),
    gpus: int = typer.Option(..., "--gpus", help="GPUs of the job, half on each campus."),
    split: Split = typer.Option(..., "--split", help="pp: pipeline cut at the DCI; dp: data-parallel replicas split."),
    spec: Path | None = typer.Option(None, "--spec", "-s", help="Fabric spec: its DCI gives distance and bandwidth."),
    dci: str | None = typer.Option(None, "--dci", help="Which DCI of the spec (default: the first)."),
    zero: int = typer.Option(0, "--zero", help="DeepSpeed ZeRO stage 0-3 (3 all-gathers parameters across)."),
    distance_km: float | None = typer.Option(None, "--distance-km", help="Fibre distance (default: the spec's)."),
    dci_tbps: float | None = typer.Option(None, "--dci-tbps", help="DCI bandwidth, one direction (default: spec)."),
    microbatches: int | None = typer.Option(None, "--microbatches", help="Micro-batches per iteration (pp)."),
    iteration_s: float | None = typer.Option(None, "--iteration-s", help="Compute time per iteration, no DCI."),
    alpha_lb: float = typer.Option(1.0, "--alpha-lb", help="Load balance across DR ports, 0 < a <= 1."),
    k: float = typer.Option(1.0, "--k", help="Transmission factor >= 1 (retransmission, windows)."),
    tp: int = typer.Option(8, "--tp", help="Tensor-parallel size (inside a server)."),
    nccl: Nccl = typer.Option(Nccl.tuned, "--nccl", help="tuned: window >= BDP; untuned: NCCL's 2 MiB."),
    target_loss: float | None = typer.Option(None, "--target-loss", help="Also solve the DCI Tb/s for this loss."),
    sweep: Sweep | None = typer.Option(None, "--sweep", help="One row per distance or bandwidth point."),
    plot: Path | None = typer.Option(None, "--plot", help="Write PP and DP loss against the sweep (.svg or .png)."),
    fmt: Format = typer.Option(Format.table, "--format", "-f", help="json for scripts, table for people."),
) -> None:
    """Compute lost when a job spans both campuses (model and assumptions: docs/dci.md). Exit 0, 2 bad input."""
    _positive("--params", params)
    _positive("--gpus", gpus)
    _positive("--microbatches", microbatches)
    _positive("--iteration-s", iteration_s)
    _positive("--distance-km", distance_km, high=20000)
    _positive("--dci-tbps", dci_tbps)
    _positive("--alpha-lb", alpha_lb, high=1.0)
    _positive("--target-loss", target_loss, high=0.99)
    _positive("--tp", tp)
    if not (k >= 1 and math.isfinite(k)):
        raise FabricdError(f"--k must be a number >= 1 (1 = lossless, no retransmission), got {k:g}")
    if zero not in (0, 1, 2, 3):
        raise FabricdError(f"--zero must be 0, 1, 2 or 3, got {zero}")
    if gpus % (2 * tp):
        raise FabricdError(
            f"--gpus {gpus}: needs a multiple of {tp * 2} (tp {tp} x 2 campuses) so each campus holds whole servers"
        )
    if plot is not None and plot.suffix.lower() not in (".svg", ".png"):
        raise FabricdError(f"--plot {plot}: name a .svg or .png file")
    if plot is not None and sweep is None:
        raise FabricdError("--plot needs --sweep distance|bandwidth (the plot shows loss against the sweep)")
    fabric_spec = load_spec(spec) if spec is not None else None
    if dci is not None and fabric_spec is None:
        raise FabricdError("--dci names a DCI of a spec: give --spec too")
    the_dci = _dci(fabric_spec, dci) if fabric_spec is not None else None
    path = _path(fabric_spec, the_dci, distance_km, dci_tbps)
    path = replace(path, alpha_lb=alpha_lb, k=k, window_bytes=UNTUNED_WINDOW_BYTES if nccl is Nccl.untuned else None)
    work = Workload(params, gpus, split, zero=zero, tp=tp, microbatches=microbatches, iteration_s=iteration_s)
    if sweep is None:
        result = whatif(work, path, target_loss)
        if fmt is Format.json:
            emit_json(result.to_dict())
        else:
            _print_one(result)
        return
    rows = _sweep(work, path, sweep, target_loss)
    if plot is not None:
        from fabricd.cli.dci_plot import plot_sweep  # matplotlib only when asked for a plot

        plot_sweep(rows, sweep.value, work, path, plot)
    if fmt is Format.json:
        emit_json({"sweep": sweep.value, "rows": rows})
    else:
        _print_sweep(rows, sweep)


def _sweep(work: Workload, path: DciPath, sweep: Sweep, target: float | None) -> list[dict[str, object]]:
    points = DISTANCES_KM if sweep is Sweep.distance else BANDWIDTHS_TBPS
    current = path.distance_km if sweep is Sweep.distance else path.dci_tbps
    rows = []
    for x in sorted({*points, current}):
        at = replace(path, distance_km=x) if sweep is Sweep.distance else replace(path, dci_tbps=x)
        row = whatif(work, at, target).to_dict()
        other = replace(work, split=Split.DP if work.split is Split.PP else Split.PP)
        row[f"{work.split.value}_loss"] = row["compute_loss"]
        row[f"{other.split.value}_loss"] = round(whatif(other, at).compute_loss, 6)
        rows.append(row)
    return rows


def _pct(x: object) -> str:
    return f"{float(x) * 100:.2f} %" if isinstance(x, int | float) else "-"


def _print_one(r: Result) -> None:
    out = console()
    w, p = r.workload, r.path
    out.print(
        f"{w.split.value.upper()} split, {w.params:.3g} params on {w.gpus} GPUs (tp {w.tp}, pp {w.pp}, dp {w.dp}"
        f"{', ZeRO-' + str(w.zero) if w.zero else ''}) over {p.distance_km:g} km, {p.dci_tbps:g} Tb/s, "
        f"alpha_LB {p.alpha_lb:g}, k {p.k:g}, NCCL {'untuned' if p.window_bytes else 'tuned'}",
        markup=False,
        highlight=False,
    )
    table = Table(header_style="bold")
    for col in ("cross-DCI phase", "per iteration", "bytes per pair", "pairs", "adds"):
        table.add_column(col)
    for ph in r.phases:
        size, adds = f"{ph.bytes_per_pair / 1e6:.2f} MB", f"{ph.exposed_s * 1e3:.2f} ms"
        table.add_row(ph.name, str(ph.count), size, str(ph.pairs), adds)
    out.print(table)
    out.print(
        f"RTT {r.rtt_ms:.2f} ms; each pair gets {r.per_pair_gbps:.1f} Gb/s; compute {r.compute_s * 1e3:.0f} ms + "
        f"cross-DCI {r.cross_dc_seconds_per_iteration * 1e3:.2f} ms per iteration: compute loss "
        f"{r.compute_loss * 100:.2f} %",
        markup=False,
        highlight=False,
    )
    if r.target_loss is not None:
        need = r.required_dci_tbps
        out.print(
            f"to stay at or under {r.target_loss * 100:g} %: "
            + (
                f"{need:.2f} Tb/s of DCI"
                if need is not None
                else "no bandwidth is enough (round trips alone exceed it: shorten the link or change the split)"
            ),
            markup=False,
            highlight=False,
        )


def _print_sweep(rows: list[dict[str, object]], sweep: Sweep) -> None:
    out = console()
    table = Table(header_style="bold")
    x = "distance_km" if sweep is Sweep.distance else "dci_tbps"
    cols = [x, "rtt_ms", "per_pair_gbps", "cross_dc_seconds_per_iteration", "pp_loss", "dp_loss"]
    if "required_dci_tbps" in rows[0]:
        cols.append("required_dci_tbps")
    for c in cols:
        table.add_column(c)
    for row in rows:
        table.add_row(*[_pct(row[c]) if c.endswith("_loss") else str(row[c]) for c in cols])
    out.print(table)


@app.command("nccl")
def nccl_command(
    spec: Path | None = typer.Option(None, "--spec", "-s", help="Fabric spec: its DCI gives distance and rates."),
    dci: str | None = typer.Option(None, "--dci", help="Which DCI of the spec (default: the first)."),
    distance_km: float | None = typer.Option(None, "--distance-km", help="Fibre distance (default: the spec's)."),
    dci_tbps: float | None = typer.Option(None, "--dci-tbps", help="DCI bandwidth, one direction (default: spec)."),
    nic_gbps: float | None = typer.Option(None, "--nic-gbps", help="GPU NIC speed (default: spec server links, 400)."),
    pairs: int = typer.Option(1, "--pairs", help="GPU pairs crossing at once (1: one pair at NIC line rate)."),
    fmt: Format = typer.Option(Format.table, "--format", "-f", help="json, table, or env (export lines)."),
    env: bool = typer.Option(False, "--env", help="Print only the export lines for a job script."),
) -> None:
    """NCCL settings for the long-haul path from its bandwidth-delay product, with the predicted latency of
    1, 16 and 256 MB messages before and after, and why each number."""
    _positive("--distance-km", distance_km, high=20000)
    _positive("--dci-tbps", dci_tbps)
    _positive("--nic-gbps", nic_gbps)
    _positive("--pairs", pairs)
    fabric_spec = load_spec(spec) if spec is not None else None
    if dci is not None and fabric_spec is None:
        raise FabricdError("--dci names a DCI of a spec: give --spec too")
    the_dci = _dci(fabric_spec, dci) if fabric_spec is not None else None
    path = _path(fabric_spec, the_dci, distance_km, dci_tbps)
    line = nic_gbps or (fabric_spec.server_link_gbps if fabric_spec else 400.0)
    # The deepest queue a DR port can build: its share of the DR's buffer drained at the DR's long-haul rate.
    queue_s = the_dci.dr_buffer_mb * 1e6 * 8 / (the_dci.links_per_dr * the_dci.link_gbps * 1e9) if the_dci else 0.0
    result = plan(path, line, pairs, queue_s)
    if env:
        print(result.env())
    elif fmt is Format.json:
        emit_json(result.to_dict())
    else:
        _print_nccl(result, path)


def _print_nccl(p: NcclPlan, path: DciPath) -> None:
    out = console()
    out.print(
        f"{path.distance_km:g} km: RTT {p.rtt_ms:.2f} ms, {p.pair_gbps:.0f} Gb/s per GPU pair, BDP "
        f"{p.bdp_bytes / 2**20:.1f} MiB; in flight {p.window_before / 2**20:g} MiB -> {p.window_after / 2**20:g} MiB",
        markup=False,
        highlight=False,
    )
    table = Table(header_style="bold")
    for col in ("setting", "default", "value", "why"):
        table.add_column(col, overflow="fold")
    for s in p.settings:
        table.add_row(s.name, str(s.default), str(s.value), s.reason)
    out.print(table)
    lat = Table(header_style="bold", title="message latency across the DCI (one GPU pair)")
    for col in ("message", "before", "after", "faster"):
        lat.add_column(col)
    for x in p.latencies:
        lat.add_row(f"{x.bytes / 2**20:g} MiB", f"{x.before_ms:.2f} ms", f"{x.after_ms:.2f} ms", f"{x.speedup:.1f}x")
    out.print(lat)
    out.print(p.env(), markup=False, highlight=False)


DCI_KINDS = ("dci_imbalance", "dci_drops")


@app.command("ports")
def ports_command(
    spec: Path | None = typer.Option(None, "--spec", "-s", help="Fabric spec (with --trace)."),
    cabling: Path | None = typer.Option(None, "--cabling", help="As-built cabling (default: blueprint)."),
    trace: Path | None = typer.Option(None, "--trace", "-t", help="A recorded trace (default: ask the service)."),
    config: Path | None = typer.Option(None, "--config", "-c", help="fabricd.yaml of the running service."),
    api: str | None = typer.Option(
        None, "--api", help="Service URL, e.g. http://127.0.0.1:8340 (instead of --config)."
    ),
    token_env: str = typer.Option("FABRICD_API_TOKEN", "--token-env", help="Env var with the API token (--api)."),
    plot: Path | None = typer.Option(None, "--plot", help="Each DR port's share of its group's load (.svg/.png)."),
    fmt: Format = typer.Option(Format.table, "--format", "-f", help="json for scripts, table for people."),
) -> None:
    """Why are some DR ports dropping while others idle? Each DCI's DR ports: load share, drops, alpha_LB, what it
    costs in compute, and the active dci_imbalance / dci_drops findings with their cause and fix. From the running
    service, or from a recorded trace (--spec --trace). Exit 0 balanced and clean, 1 findings, 2 trouble."""
    if plot is not None and plot.suffix.lower() not in (".svg", ".png"):
        raise FabricdError(f"--plot {plot}: name a .svg or .png file")
    if trace is not None:
        if spec is None:
            raise FabricdError("--trace needs --spec (the fabric the trace was recorded on)")
        _, fabric = load_fabric(spec, cabling)
        state = dci_detector.DciPortsState()
        last: list[Finding] = []  # what the last pass over the trace found active: the state at its end

        def detect(snapshot: Snapshot, fab: Fabric, st: dci_detector.DciPortsState, now: int) -> list[Finding]:
            last[:] = dci_detector.detect(snapshot, fab, st, now)
            return last

        run_trace(trace, fabric, detectors=[Detector("dci_ports", detect, lambda: state)])
        groups = [x.to_dict() for x in sorted(state.live.values(), key=lambda x: x.group)]
        findings = [f.to_dict() for f in last]
    else:
        client = ApiClient(config, api, token_env)
        groups = client.call("GET", "/api/v1/dci")["groups"]
        rows = client.call("GET", "/api/v1/findings", status="active")["findings"]
        findings = [f for f in rows if f.get("kind") in DCI_KINDS]
    if not groups:
        raise FabricdError(
            "no DR ports judged: the fabric has no dci, or the DR switches have not streamed a full window yet"
        )
    if plot is not None:
        from fabricd.cli.dci_plot import plot_ports

        plot_ports(groups, plot)
    if fmt is Format.json:
        emit_json({"groups": groups, "findings": findings})
    else:
        _print_ports(groups, findings)
    raise typer.Exit(EXIT_FINDINGS if findings else EXIT_CLEAN)


def _print_ports(groups: list[dict[str, object]], findings: list[dict[str, object]]) -> None:
    out = console()
    for g in groups:
        out.print(
            f"[bold]{g['group']}[/bold]: alpha_LB {g['alpha_lb']}, "
            f"loads differ by {float(str(g['skew'])) * 100:.0f} %, "
            f"{float(str(g['utilisation'])) * 100:.0f} % of line rate, drop rate {g['drop_rate']}; costs "
            f"~{float(str(g['extra_compute_loss'])) * 100:.2f} % compute"
        )
        table = Table(header_style="bold")
        for col in ("port", "state", "Gb/s", "share", "", "drops", "drop rate"):
            table.add_column(col)
        ports = g["ports"]
        assert isinstance(ports, list)
        for x in ports:
            share = float(x["share"])
            bar = "#" * max(0, round(share * 20))
            colour = "red" if x["drops"] else ("yellow" if abs(share - 1) > 0.05 else "green")
            table.add_row(
                x["port"],
                "up" if x["up"] else "[red]DOWN[/red]",
                f"{x['gbps']:.1f}",
                f"{share:.2f}",
                f"[{colour}]{bar}[/{colour}]",
                str(x["drops"]),
                f"{x['drop_rate']:.2g}",
            )
        out.print(table)
    if not findings:
        out.print("[green]balanced, no drops: no finding[/green]")
    for f in findings:
        ev = f.get("evidence") or {}
        assert isinstance(ev, dict)
        out.print(f"[yellow]{f['kind']}[/yellow] {f['summary']}", highlight=False)
        out.print(f"  cause: {ev.get('cause')}; fix: {ev.get('fix')}", markup=False, highlight=False)
