"""pfc_storm: queues stuck by received pause, followed along the topology to the endpoint that starts the storm.

A queue is stuck by the PFC watchdog rule (`stuck_queues`: paused >= 99% of the interval with no egress, held for
`hold_samples` samples). A stuck queue is paused by its peer; if the peer is a switch, that switch pauses because
one of its own egress queues is stuck, so the walk continues there. Where the pause comes from an endpoint (or from
a switch with no stuck egress of its own) is the origin: one finding per origin, with every stuck port that leads
to it. A walk that only comes back to where it started is a cycle: a deadlock, never reported as a storm.
The stuck-queue tracker and `waits_on` (who waits on whom) are shared with pfc_deadlock, so the two agree.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from fabricd.telemetry import Snapshot
from topology.fabric import Fabric

from .finding import Finding
from .stuck_queues import Queue, StuckConfig, StuckQueues, by_switch, track, waits_on

# The watchdog rule's settings: pfc_deadlock judges stuck queues by the same ones (one tracker per Runner).
PfcStormConfig = StuckConfig


@dataclass
class PfcStormState:
    config: PfcStormConfig = field(default_factory=PfcStormConfig)
    tracker: StuckQueues = field(init=False)  # a Runner hands pfc_deadlock the same one (`stuck_queues.share`)

    def __post_init__(self) -> None:
        self.tracker = StuckQueues(self.config)


def detect(snapshot: Snapshot, fabric: Fabric, state: PfcStormState, now_ns: int) -> list[Finding]:
    track(snapshot, state.tracker, now_ns)
    stuck = by_switch(state.tracker.at_least(1))
    held = set(state.tracker.at_least(state.config.hold_samples))
    by_origin: dict[Queue, set[Queue]] = {}
    for q in sorted(held):
        for origin in _origins(q, stuck, fabric, frozenset()):
            by_origin.setdefault(origin, set()).add(q)
    return [
        _finding(origin, affected, state, fabric, now_ns)
        for origin, affected in sorted(by_origin.items())
        if origin in held
    ]


def _origins(q: Queue, stuck: dict[tuple[str, int], list[Queue]], fabric: Fabric, path: frozenset[Queue]) -> set[Queue]:
    """The stuck queues where the pause reaching `q` starts; empty if every way back is a cycle."""
    upstream = waits_on(q, stuck, fabric)
    if not upstream:
        return {q}  # paused by an endpoint (a NIC), by something the cabling does not know, or it starts here
    out: set[Queue] = set()
    for s in upstream:
        if s not in path and s != q:
            out |= _origins(s, stuck, fabric, path | {q})
    return out


def _finding(origin: Queue, affected: set[Queue], state: PfcStormState, fabric: Fabric, now_ns: int) -> Finding:
    device, port, prio = origin
    qs = state.tracker.get(origin)
    peer = fabric.peer(device, port)
    peer_dev = None if peer is None else fabric.get(peer.device)
    endpoint = peer_dev is None or not peer_dev.is_switch
    peer_text = "an unknown peer" if peer is None else f"{peer.device}:{peer.port}"
    role = "unknown" if peer_dev is None else peer_dev.role.value
    queues = sorted(affected | {origin})
    each = {q: state.tracker.get(q) for q in queues}
    return Finding(
        kind="pfc_storm",
        device=device,
        port=port,
        priority=prio,
        devices=tuple(sorted({q[0] for q in queues})),
        ports=tuple(f"{q[0]}:{q[1]}" for q in queues),
        start_ts=qs.onset,
        detected_ts=now_ns,
        severity="critical",
        confidence=0.9 if endpoint else 0.6,
        summary=f"PFC storm on priority {prio} from {peer_text} ({role}): {device}:{port} paused "
        f"{qs.pause_fraction:.0%} of the time with no egress; {len(queues)} stuck port(s)",
        evidence={
            "peer": None if peer is None else f"{peer.device}:{peer.port}",
            "peer_role": role,
            "pause_fraction": round(qs.pause_fraction, 4),
            "pfc_frames_per_s": round(qs.frames_per_s, 1),
            "tx_pkts_delta": qs.tx_delta,
            "held_samples": qs.count,
            "queues": {
                f"{q[0]}:{q[1]}": {
                    "pause_fraction": round(s.pause_fraction, 4),
                    "pfc_frames_per_s": round(s.frames_per_s, 1),
                    "tx_pkts_delta": s.tx_delta,
                    "held_samples": s.count,
                }
                for q, s in each.items()
            },
        },
    )
