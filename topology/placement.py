"""Topology-affinity placement: which servers a job should get, and how much of its collective traffic would cross
the spine tier (pure functions of the fabric and the free servers).

Ranks follow Megatron's order: tensor parallel fastest (inside one server: GPU k of a server is on rail k), then data
parallel, then pipeline stages. A pipeline replica (its `pp` stages of `tp` GPUs) goes whole into one aggregation
group, so every pipeline's point-to-point traffic stays under one leaf per rail; replicas fill the groups with the
most free servers first, so the data-parallel groups (same stage and TP rank across replicas) span as few groups as
possible. The score counts what crosses the spine tier: pipeline neighbours in different groups, and per data-parallel
group the ring edges between groups (a ring over k groups crosses k - 1 + 1 times when k > 1, counted as k).
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass

from topology.errors import FabricdError
from topology.exports._groups import server_key
from topology.fabric import Fabric
from topology.model import Role


@dataclass(frozen=True)
class Shape:
    gpus: int
    pp: int
    dp: int
    tp: int

    @property
    def replica_gpus(self) -> int:
        return self.pp * self.tp


def shape(gpus: int, rails: int, pp: int | None, dp: int | None, tp: int | None) -> Shape:
    """Fill in what is not given (tp: one server; pp: 1; dp: the rest) and check that it multiplies out."""
    t = tp or min(rails, gpus)
    p = pp or 1
    if gpus <= 0 or t <= 0 or p <= 0:
        raise FabricdError("--gpus, --tp and --pp must be positive")
    d = dp if dp is not None else gpus // (t * p)
    if p * d * t != gpus:
        raise FabricdError(f"--pp {p} x --dp {d} x --tp {t} = {p * d * t}, not --gpus {gpus}; make them multiply out")
    if t > rails or rails % t:
        raise FabricdError(f"--tp {t}: tensor parallel stays inside a server of {rails} GPUs; use a divisor of {rails}")
    if gpus % rails:
        raise FabricdError(f"--gpus {gpus}: a job takes whole servers of {rails} GPUs; use a multiple of {rails}")
    return Shape(gpus, p, d, t)


@dataclass(frozen=True)
class Score:
    pp_pairs_crossing: int  # pipeline neighbour GPU pairs in different groups
    dp_groups_spanning: int  # data-parallel groups spread over more than one group
    dp_edges_crossing: int  # ring edges of data-parallel groups between groups
    groups_used: int

    @property
    def crossing(self) -> int:
        """Collective edges that cross the spine tier: the placement's cost."""
        return self.pp_pairs_crossing + self.dp_edges_crossing

    def to_dict(self) -> dict[str, int]:
        return {
            "crossing": self.crossing,
            "pp_pairs_crossing": self.pp_pairs_crossing,
            "dp_groups_spanning": self.dp_groups_spanning,
            "dp_edges_crossing": self.dp_edges_crossing,
            "groups_used": self.groups_used,
        }


def score(servers: Sequence[str], s: Shape, fabric: Fabric) -> Score:
    """The cost of running `s` on these servers, ranks assigned in order (Megatron: tp, then dp, then pp)."""
    rails = s.gpus // len(servers) if servers else 1
    group = [fabric.device(n).group for n in servers]
    if len(servers) * rails != s.gpus:
        raise FabricdError(f"{len(servers)} servers do not hold {s.gpus} GPUs; give gpus / {rails} servers")

    def gpu_group(rank: int) -> int | None:
        return group[rank // rails]

    def rank(pp: int, dp: int, tp: int) -> int:
        return (pp * s.dp + dp) * s.tp + tp

    pp_cross = sum(
        1
        for p in range(s.pp - 1)
        for d in range(s.dp)
        for t in range(s.tp)
        if gpu_group(rank(p, d, t)) != gpu_group(rank(p + 1, d, t))
    )
    spanning = edges = 0
    for p in range(s.pp):
        for t in range(s.tp):
            gs = {gpu_group(rank(p, d, t)) for d in range(s.dp)}
            if len(gs) > 1:
                spanning += 1
                edges += len(gs)
    return Score(pp_cross, spanning, edges, len(set(group)))


def _servers(fabric: Fabric, free: Sequence[str] | None) -> dict[int, list[str]]:
    names = [d.name for d in fabric.devices(Role.SERVER)] if free is None else list(free)
    by_group: dict[int, list[str]] = {}
    unknown = [n for n in names if n not in fabric or fabric.device(n).role is not Role.SERVER]
    if unknown:
        raise FabricdError(f"free servers not in the fabric: {', '.join(unknown[:5])}; check the free list")
    for n in names:
        g = fabric.device(n).group
        by_group.setdefault(-1 if g is None else g, []).append(n)
    for g in by_group:
        by_group[g].sort(key=lambda n: server_key(fabric.device(n)))
    return by_group


def place(fabric: Fabric, s: Shape, rails: int, free: Sequence[str] | None = None) -> list[str]:
    """Servers for the job in rank order. A server holds rails / tp consecutive data-parallel replicas of one stage
    (a bundle); a bundle's pp stages take pp servers of one group; bundles fill the fullest groups first."""
    per_server = rails // s.tp  # (stage, replica) blocks on one server: consecutive replicas of one stage
    if s.dp % per_server:
        raise FabricdError(
            f"--dp {s.dp}: with --tp {s.tp} a server holds {per_server} replicas of a stage; use a multiple of "
            f"{per_server} for --dp, or --tp {rails}"
        )
    bundles = s.dp // per_server
    need = s.gpus // rails
    by_group = _servers(fabric, free)
    have = sum(len(v) for v in by_group.values())
    if have < need:
        raise FabricdError(f"the job needs {need} servers; {have} are free")
    slots: list[list[str]] = []  # pp servers of one group each, fullest groups first
    for g in sorted(by_group, key=lambda g: (-len(by_group[g]), g)):
        members = by_group[g]
        slots += [members[i * s.pp : (i + 1) * s.pp] for i in range(len(members) // s.pp)]
    if len(slots) < bundles:
        raise FabricdError(
            f"the free servers hold {len(slots)} whole pipelines of {s.pp} servers in one group; the job needs "
            f"{bundles}: free servers in fewer groups, or lower --pp"
        )
    chosen = slots[:bundles]
    return [chosen[b][p] for p in range(s.pp) for b in range(bundles)]


def random_baseline(fabric: Fabric, s: Shape, rails: int, free: Sequence[str] | None, draws: int, seed: int) -> float:
    """Mean crossing of `draws` random allocations of the same free servers (what a topology-blind scheduler does)."""
    pool = [n for v in _servers(fabric, free).values() for n in v]
    rng = random.Random(seed)
    need = s.gpus // rails
    return sum(score(rng.sample(pool, need), s, fabric).crossing for _ in range(draws)) / draws
