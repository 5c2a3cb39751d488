"""`fabricd place`: servers for a job so every pipeline stays in one aggregation group and data parallelism spans as
few groups as possible; or the score of an allocation a scheduler made (docs/jobs.md)."""

from __future__ import annotations

from pathlib import Path

import typer
from rich.table import Table

from fabricd.cli.output import Format, console, emit_json
from topology.errors import FabricdError
from topology.exports.hostlist import compress_hostlist, expand_hostlist
from topology.fabric import Fabric
from topology.load import load_fabric
from topology.placement import place, random_baseline, score, shape


def _names(text: str) -> list[str]:
    return [n for word in text.split() for n in expand_hostlist(word)]


def _groups(fabric: Fabric, servers: list[str]) -> list[int]:
    return sorted({g for n in servers if (g := fabric.device(n).group) is not None})


def place_command(
    spec: Path = typer.Option(..., "--spec", "-s", help="Fabric spec (YAML)."),
    gpus: int = typer.Option(..., "--gpus", help="GPUs the job needs (whole servers)."),
    pp: int | None = typer.Option(None, "--pp", help="Pipeline stages (default 1)."),
    dp: int | None = typer.Option(None, "--dp", help="Data-parallel replicas (default: the rest)."),
    tp: int | None = typer.Option(None, "--tp", help="Tensor parallel, inside a server (default: its GPUs)."),
    cabling: Path | None = typer.Option(None, "--cabling", "-c", help="As-built cabling (default: blueprint)."),
    free: Path | None = typer.Option(None, "--free", help="Free servers: names or Slurm hostlists, by whitespace."),
    allocation: str | None = typer.Option(
        None, "--score", help="Score this allocation (hostlist, in rank order) instead of placing."
    ),
    draws: int = typer.Option(200, "--draws", min=1, max=100_000, help="Random allocations for the baseline."),
    seed: int = typer.Option(1, "--seed", help="Seed of the random baseline."),
    fmt: Format = typer.Option(Format.table, "--format", "-f", help="json for scripts, table for people."),
) -> None:
    """Place a job (or score an allocation) against the fabric's tiers, and compare with random placement."""
    fabric_spec, fabric = load_fabric(spec, cabling)
    rails = fabric_spec.rails
    s = shape(gpus, rails, pp, dp, tp)
    pool = None
    if free is not None:
        try:
            pool = _names(free.read_text(encoding="utf-8"))
        except OSError as e:
            raise FabricdError(f"{free}: cannot read the free list ({e.strerror}); check the path") from None
    if allocation is not None:
        servers = _names(allocation)
        unknown = [n for n in servers if n not in fabric]
        if unknown:
            raise FabricdError(f"--score: not servers of this fabric: {', '.join(unknown[:5])}")
        what = "given"
    else:
        servers = place(fabric, s, rails, pool)
        what = "placed"
    sc = score(servers, s, fabric)
    bundles = len(servers) // s.pp  # servers per stage: each holds rails / tp replicas of that stage
    pipes = [[servers[p * bundles + b] for p in range(s.pp)] for b in range(bundles)]
    base = random_baseline(fabric, s, rails, pool, draws, seed)
    factor = None if sc.crossing == 0 else base / sc.crossing
    result = {
        "shape": {"gpus": s.gpus, "pp": s.pp, "dp": s.dp, "tp": s.tp},
        "allocation": what,
        "servers": servers,
        "hostlist": compress_hostlist(servers),
        "score": sc.to_dict(),
        "random_crossing_mean": round(base, 2),
        "random_draws": draws,
        "better_than_random": None if factor is None else round(factor, 2),
        "pipelines": [
            {"pipeline": b, "servers": pipe, "groups": _groups(fabric, pipe)} for b, pipe in enumerate(pipes)
        ],
    }
    if fmt is Format.json:
        emit_json(result)
        return
    out = console()
    out.print(
        f"{what} {len(servers)} servers for {s.gpus} GPUs (pp {s.pp} x dp {s.dp} x tp {s.tp}): {result['hostlist']}",
        markup=False,
        highlight=False,
    )
    table = Table(header_style="bold", title="pipelines (each its stages in order; one group = no spine hop)")
    for col in ("pipeline", "servers (stage 0 ..)", "groups"):
        table.add_column(col, overflow="fold")
    for b, pipe in enumerate(pipes[:64]):
        table.add_row(str(b), " ".join(pipe), ",".join(map(str, _groups(fabric, pipe))))
    if len(pipes) > 64:
        table.add_row("...", f"{len(pipes) - 64} more (--format json lists all)", "")
    out.print(table)
    vs = "no collective crosses the spine tier" if factor is None else f"{factor:.1f}x fewer than random"
    out.print(
        f"crossing the spine tier: {sc.crossing} collective edges ({sc.pp_pairs_crossing} pipeline pairs, "
        f"{sc.dp_edges_crossing} data-parallel ring edges in {sc.dp_groups_spanning} groups spanning AGs), "
        f"{sc.groups_used} aggregation groups; random placement: {base:.1f} on average over {draws} draws ({vs})",
        markup=False,
        highlight=False,
    )
