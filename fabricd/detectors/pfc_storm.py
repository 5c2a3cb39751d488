"""pfc_storm: queues stuck by received pause, followed along the topology to the endpoint that starts the storm.

Per (device, port, priority) and per new sample, the watchdog rule (reference/platforms.md, SONiC Mellanox/VS):
the port received pause for >= 99% of the interval (or, without the pause-time leaf, PFC frames rose) while the
egress queue's `transmit-pkts` did not move; held for `hold_samples` consecutive samples (the detection time).
A stuck queue is paused by its peer; if the peer is a switch, that switch pauses because one of its own egress
queues is stuck, so the walk continues there. Where the pause comes from an endpoint (or from a switch with no
stuck egress of its own) is the origin: one finding per origin, with every stuck port that leads to it.
A walk that only comes back to where it started is a cycle: a deadlock, never reported as a storm.
`track` (the stuck rule) and `waits_on` (who waits on whom) are shared with pfc_deadlock, so the two agree.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

import numpy as np

from fabricd.telemetry import Snapshot
from topology.fabric import Fabric

from .finding import Finding

NS = 1_000_000_000
Queue = tuple[str, str, int]  # (device, port, priority)


@dataclass(frozen=True)
class PfcStormConfig:
    pause_fraction: float = 0.99  # SONiC (Mellanox): rx pause > 0.99 x poll time
    # SONiC's detection time is 200 ms, but traces sample every ~1 s: two consecutive stuck samples.
    hold_samples: int = 2
    # Known false storms right after a flap (platforms.md): no decision for this long after an oper-status change.
    grace_s: float = 5.0
    sample_interval_s: float = 1.0  # for staleness: a device silent for 3 intervals is not judged


@dataclass
class QueueState:
    last_ts: int = 0  # timestamp of the last sample judged (a sample is judged once)
    count: int = 0  # consecutive stuck samples
    onset: int = 0
    pause_fraction: float = 0.0
    frames_per_s: float = 0.0
    tx_delta: float = 0.0


@dataclass
class PfcStormState:
    config: PfcStormConfig = field(default_factory=PfcStormConfig)
    queues: dict[Queue, QueueState] = field(default_factory=dict)


def _candidates(snapshot: Snapshot, queues: dict[Queue, QueueState]) -> set[Queue]:
    """Queues whose peer sent pause in their last sample, plus those already tracked (to update or clear)."""
    out = set(queues)
    for leaf in ("pfc.pfc-on-total-rx-time", "pfc.in-frames"):
        rows = snapshot.select(leaf=leaf)
        for i in rows[np.nan_to_num(snapshot.delta(rows), nan=0.0) > 0].tolist():
            device, port, _, index = snapshot.key(i)
            if index is not None and index.isdigit():
                out.add((device, port, int(index)))
    return out


def _judge(snapshot: Snapshot, q: Queue, qs: QueueState, cfg: PfcStormConfig, grace: set[tuple[str, str]]) -> None:
    device, port, prio = q
    pause = snapshot.find(device, port, "pfc.pfc-on-total-rx-time", prio)
    frames = snapshot.find(device, port, "pfc.in-frames", prio)
    tx = snapshot.find(device, port, "queue.transmit-pkts", prio)  # traffic class N -> tx-queue N (EOS default map)
    lead = pause if pause is not None else frames
    if lead is None or tx is None:
        qs.count = 0
        return
    ts = int(snapshot.ts[lead])
    if ts <= qs.last_ts:
        return  # no new sample since the last judgement
    qs.last_ts = ts
    oper = snapshot.find(device, port, "oper-status")
    status = None if oper is None else snapshot.text(oper)
    if (status is not None and status != "UP") or (device, port) in grace:
        qs.count = 0  # a down port, or just after a flap: known false storms
        return
    rows = {"lead": lead, "tx": tx} | ({"frames": frames} if frames is not None else {})
    d = dict(zip(rows, snapshot.delta(np.array(list(rows.values()), dtype=np.int64)).tolist(), strict=True))
    dt = ts - int(snapshot.prev_ts[lead])
    if any(np.isnan(v) for v in d.values()) or dt <= 0:
        qs.count = 0  # counter reset or first sample: no decision, and a reboot ends any hold
        return
    frames_d = d.get("frames", 0.0)
    qs.pause_fraction = d["lead"] / dt if pause is not None else 0.0
    qs.frames_per_s = frames_d * NS / dt
    qs.tx_delta = d["tx"]
    # With the pause-time leaf, pausing means paused nearly all the interval: frames alone would also count the
    # XON that ends a pause (the XOFF->XON false storm). Frames are the rule only where pause time is missing.
    pausing = qs.pause_fraction >= cfg.pause_fraction if pause is not None else frames_d > 0
    if pausing and qs.tx_delta == 0:
        if qs.count == 0:
            qs.onset = int(snapshot.prev_ts[lead])
        qs.count += 1
    else:
        qs.count = 0


def _grace_ports(snapshot: Snapshot, cfg: PfcStormConfig, now_ns: int) -> set[tuple[str, str]]:
    return {
        (e.device, e.port)
        for e in snapshot.events_since(now_ns - int(cfg.grace_s * NS))
        if e.leaf == "oper-status" and e.previous is not None  # the first value seen is no change
    }


def track(snapshot: Snapshot, queues: dict[Queue, QueueState], cfg: PfcStormConfig, now_ns: int) -> None:
    """Judge each candidate queue's new sample with the watchdog rule (updates `queues` in place)."""
    grace = _grace_ports(snapshot, cfg, now_ns)
    interval = int(cfg.sample_interval_s * NS)
    for q in sorted(_candidates(snapshot, queues)):
        if snapshot.stale(q[0], now_ns, interval):
            continue  # no new data to judge; keep what we knew
        _judge(snapshot, q, queues.setdefault(q, QueueState()), cfg, grace)
    for q in [q for q, qs in queues.items() if qs.count == 0 and qs.last_ts < now_ns - 60 * NS]:
        del queues[q]  # quiet for a minute: forget it


def by_switch(queues: Iterable[Queue]) -> dict[tuple[str, int], list[Queue]]:
    """Queues grouped by (device, priority), for `waits_on`."""
    out: dict[tuple[str, int], list[Queue]] = {}
    for q in sorted(queues):
        out.setdefault((q[0], q[2]), []).append(q)
    return out


def waits_on(q: Queue, stuck: dict[tuple[str, int], list[Queue]], fabric: Fabric) -> list[Queue]:
    """The stuck egress queues of q's peer switch that q waits on: same priority, not back toward q's switch
    (traffic does not turn back on the link it came in on). Empty when the peer is an endpoint, unknown to the
    cabling, or has nothing stuck: then the pause reaching q starts at the peer."""
    device, port, prio = q
    peer = fabric.peer(device, port)
    peer_dev = None if peer is None else fabric.get(peer.device)
    if peer is None or peer_dev is None or not peer_dev.is_switch:
        return []
    out = []
    for s in stuck.get((peer.device, prio), ()):
        back = fabric.peer(s[0], s[1])
        if back is None or back.device != device:
            out.append(s)
    return out


def detect(snapshot: Snapshot, fabric: Fabric, state: PfcStormState, now_ns: int) -> list[Finding]:
    cfg = state.config
    track(snapshot, state.queues, cfg, now_ns)
    stuck = by_switch(q for q, qs in state.queues.items() if qs.count > 0)
    held = {q for q, qs in state.queues.items() if qs.count >= cfg.hold_samples}
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
    qs = state.queues[origin]
    peer = fabric.peer(device, port)
    peer_dev = None if peer is None else fabric.get(peer.device)
    endpoint = peer_dev is None or not peer_dev.is_switch
    peer_text = "an unknown peer" if peer is None else f"{peer.device}:{peer.port}"
    role = "unknown" if peer_dev is None else peer_dev.role.value
    queues = sorted(affected | {origin})
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
                    "pause_fraction": round(state.queues[q].pause_fraction, 4),
                    "pfc_frames_per_s": round(state.queues[q].frames_per_s, 1),
                    "tx_pkts_delta": state.queues[q].tx_delta,
                    "held_samples": state.queues[q].count,
                }
                for q in queues
            },
        },
    )
