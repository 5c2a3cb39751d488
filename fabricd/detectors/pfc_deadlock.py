"""pfc_deadlock: a cycle of stuck lossless queues, each waiting on the next switch (a cyclic buffer dependency).

A queue is stuck by the PFC watchdog rule (`stuck_queues`, the one tracker pfc_storm reads too): its port received
pause for >= 99% of the interval (or PFC frames rose where the pause-time leaf is missing) while its `transmit-pkts`
did not move, held for `hold_samples` samples; or the switch's watchdog declared it stuck in that sample. A held
egress of switch A toward switch B waits on B's held egresses of the same priority that do not lead back to A
(`stuck_queues.waits_on`): B pauses A because those do not drain.
The wait-for graph over hops (A's held queues toward B; parallel cables are one hop) has an edge (A,B) -> (B,C) for
C != A, and a cycle in it exactly when the pause has no origin: one finding per elementary cycle. Hops, not
switches, because a switch can sit in two waits that do not chain (A->B and B->A held, each waiting elsewhere).
pfc_storm follows the same edges and reports only walks that end at an origin, so a cycle is never a storm and a
storm (whose walk ends at an endpoint) is never a deadlock.

The finding's `ports` are the held queues hop by hop in cycle order (parallel cables of a hop side by side),
starting at the smallest switch name: the rotation `topology.deadlock` names a predicted cycle with.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field

import networkx as nx

from fabricd.telemetry import Snapshot
from topology.deadlock import port_key, rotate_to_min
from topology.fabric import Fabric
from topology.units import NS

from .finding import Finding
from .pfc_storm import PfcStormConfig
from .stuck_queues import StuckQueues, by_switch, track, waits_on

Hop = tuple[str, str, int]  # (switch, the switch its held queues face, priority)


@dataclass(frozen=True)
class PfcDeadlockConfig:
    stuck: PfcStormConfig = field(default_factory=PfcStormConfig)  # what a stuck queue is: pfc_storm's rule
    max_cycles: int = 32  # per tick: a real deadlock is one or a few cycles; this bounds a pathological graph
    max_hops: int = 16


@dataclass
class PfcDeadlockState:
    config: PfcDeadlockConfig = field(default_factory=PfcDeadlockConfig)
    tracker: StuckQueues = field(init=False)  # a Runner hands pfc_storm the same one (`stuck_queues.share`)

    def __post_init__(self) -> None:
        self.tracker = StuckQueues(self.config.stuck)


def detect(snapshot: Snapshot, fabric: Fabric, state: PfcDeadlockState, now_ns: int) -> list[Finding]:
    cfg = state.config
    track(snapshot, state.tracker, now_ns)
    held = by_switch(state.tracker.at_least(cfg.stuck.hold_samples))
    # A stale switch's held queues are old news (the tracker keeps them): a cycle through it is not reported, or a
    # deadlock that cleared while the switch was silent would stay open for as long as it stays silent.
    interval = int(cfg.stuck.sample_interval_s * NS)
    held = {key: qs for key, qs in held.items() if not snapshot.stale(key[0], now_ns, interval)}
    hop_ports: dict[Hop, list[str]] = {}  # (A, B, priority) -> A's held ports toward B that wait on B
    for queues in held.values():
        for q in queues:
            peer = fabric.peer(q[0], q[1])
            if peer is not None and waits_on(q, held, fabric):
                hop_ports.setdefault((q[0], peer.device, q[2]), []).append(q[1])
    out_of: dict[tuple[str, int], list[Hop]] = {}
    for hop in hop_ports:
        out_of.setdefault((hop[0], hop[2]), []).append(hop)
    g = nx.DiGraph()
    g.add_edges_from((h, n) for h in hop_ports for n in out_of.get((h[1], h[2]), ()) if n[1] != h[0])
    cycles = itertools.islice(nx.simple_cycles(g, length_bound=cfg.max_hops), cfg.max_cycles)
    found = [_finding(rotate_to_min([h[0] for h in c]), c[0][2], hop_ports, state, now_ns) for c in cycles]
    return sorted(found, key=lambda f: f.ports)


def _finding(
    order: tuple[str, ...],
    prio: int,
    hop_ports: dict[Hop, list[str]],
    state: PfcDeadlockState,
    now_ns: int,
) -> Finding:
    hops = list(itertools.pairwise((*order, order[0])))
    ports = [f"{a}:{p}" for a, b in hops for p in sorted(hop_ports[(a, b, prio)], key=port_key)]
    queues = [(a, p, prio) for a, b in hops for p in sorted(hop_ports[(a, b, prio)], key=port_key)]
    qs = [state.tracker.get(q) for q in queues]
    device, port = ports[0].split(":", 1)
    path = " -> ".join((*order, order[0]))
    return Finding(
        kind="pfc_deadlock",
        device=device,
        port=port,
        priority=prio,
        devices=tuple(sorted(order)),
        ports=tuple(ports),
        start_ts=min(s.onset for s in qs),
        detected_ts=now_ns,
        severity="critical",
        confidence=0.9,
        summary=f"PFC deadlock on priority {prio}: {path} each wait on the next with no egress and no endpoint "
        f"pausing ({len(ports)} stuck queues); look for a failed link that makes routes bounce down and up",
        evidence={
            "cycle": list(order),
            "hops": [{"from": a, "to": b, "ports": sorted(hop_ports[(a, b, prio)], key=port_key)} for a, b in hops],
            "held_samples": min(s.count for s in qs),
            "queues": {f"{q[0]}:{q[1]}": s.evidence() for q, s in zip(queues, qs, strict=True)},
        },
    )
