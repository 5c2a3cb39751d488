"""pfc_storm: queues stuck by received pause, followed along the topology to the endpoint that starts the storm.

A queue is stuck by the PFC watchdog rule (`stuck_queues`: paused >= 99% of the interval with no egress, held for
`hold_samples` samples), or in the sample in which the switch's own watchdog declared it stuck while pause arrived.
A stuck queue is paused by its peer; if the peer is a switch, that switch pauses because one of its own egress
queues is stuck, so the walk continues there. Where the pause comes from an endpoint (usually a NIC) is the origin:
one finding per origin, with every stuck port that leads to it. A walk that only comes back to where it started is
a cycle: a deadlock, never reported as a storm.

A switch is an origin only on evidence that it pauses with no stuck egress of its own: it is fresh, none of its
other ports went up or down within the grace period (their queues are not judged then), it has been
sampled since the queue waiting on it was last judged stuck (its egress queue counters: an on-change event from it,
such as a flap on another of its ports, is no sample of them), and none of its egress queues that queue could wait on
was stuck at any time since that queue's onset. Switches sample at different moments, so without this a queue still
held from its last sample while its next hop has already cleared (the end of a storm or deadlock), or one already
held while its next hop's first stuck sample has not arrived (the start of a deadlock), looked like a storm from
that next hop. A walk never starts at, passes through or ends at a stale switch: its last judgement is old, so the
finding waits until it reports again rather than guessing.
The stuck-queue tracker and `waits_on` (who waits on whom) are shared with pfc_deadlock, so the two agree.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from fabricd.telemetry import NEVER, Snapshot
from topology.fabric import Fabric
from topology.units import NS

from .finding import Finding
from .stuck_queues import Queue, QueueState, StuckConfig, StuckQueues, by_switch, sampled_round, track, waits_on

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
    walk = _Walk(snapshot, fabric, state.tracker, now_ns)
    held = set(state.tracker.at_least(state.config.hold_samples))
    by_origin: dict[Queue, set[Queue]] = {}
    for q in sorted(held):
        for origin in walk.origins(q, frozenset()):
            by_origin.setdefault(origin, set()).add(q)
    return [
        _finding(origin, affected, state, fabric, now_ns)
        for origin, affected in sorted(by_origin.items())
        if origin in held
    ]


class _Walk:
    """Follows stuck queues to the origins of their pause over one tick's judgement."""

    def __init__(self, snapshot: Snapshot, fabric: Fabric, tracker: StuckQueues, now_ns: int) -> None:
        self.snapshot, self.fabric, self.tracker, self.now = snapshot, fabric, tracker, now_ns
        self.interval = int(tracker.config.sample_interval_s * NS)
        self.stuck = by_switch(tracker.at_least(1))
        # Every tracked queue ever judged stuck, by switch: when was each last stuck (for a switch origin's check).
        self.ever = by_switch(q for q in tracker.keys if tracker.stuck_ts[tracker.index[q]] > 0)
        self._stale: dict[str, bool] = {}
        # (switch, priority, toward) -> its last whole sample of those egress queues (looked up only if a switch
        # may be an origin)
        self._sampled: dict[tuple[str, int, str], int] = {}
        self._changed: set[tuple[str, str]] | None = None  # ports with an oper-status change in the grace period

    def stale(self, device: str) -> bool:
        s = self._stale.get(device)
        if s is None:
            s = self._stale[device] = self.snapshot.stale(device, self.now, self.interval)
        return s

    def origins(self, q: Queue, path: frozenset[Queue]) -> set[Queue]:
        """The stuck queues where the pause reaching `q` starts; empty if every way back is a cycle or unknown."""
        if self.stale(q[0]):
            return set()  # its judgement is old: neither an origin nor a way to one
        upstream = waits_on(q, self.stuck, self.fabric)
        if not upstream:
            return {q} if self._starts_at_peer(q) else set()
        out: set[Queue] = set()
        for s in upstream:
            if s not in path and s != q:
                out |= self.origins(s, path | {q})
        return out

    def _just_changed(self, device: str, toward: str) -> bool:
        """A port of `device` (not toward `toward`) changed oper-status within the grace period: its egress queues
        are not judged then (`stuck_queues`), so a stuck one there would not show. Chaos seed 8 (small-sonic): a
        storm from a NIC whose port an operator had just enabled; the leaf, pausing the spines for it, was called
        the origin 4.5 s before the NIC's queue could be judged."""
        changed = self._changed
        if changed is None:
            since = self.now - int(self.tracker.config.grace_s * NS)
            changed = self._changed = {
                (e.device, e.port) for e in self.snapshot.events_since(since, leaf="oper-status", changes_only=True)
            }
        for dev, port in changed:
            if dev == device:
                peer = self.fabric.peer(dev, port)
                if peer is None or peer.device != toward:
                    return True
        return False

    def _starts_at_peer(self, q: Queue) -> bool:
        """Whether q's peer, which has no stuck egress q waits on now, is where the pause starts."""
        peer = self.fabric.peer(q[0], q[1])
        peer_dev = None if peer is None else self.fabric.get(peer.device)
        if peer is None or peer_dev is None or not peer_dev.is_switch:
            return True  # an endpoint (a NIC), or something the cabling does not know
        if self.stale(peer.device):
            return False
        if self._just_changed(peer.device, q[0]):
            return False  # one of its own egress ports went up or down: not judged yet, so nothing says it is not
        i = self.tracker.index[q]
        key = (peer.device, q[2], q[0])
        sampled = self._sampled.get(key)
        if sampled is None:
            sampled = sampled_round(self.snapshot, peer.device, q[2], q[0], self.fabric, self.interval)
            if sampled == NEVER:  # it streams no queue counters: its last update is all there is
                sampled = self.snapshot.last_seen[self.snapshot.devices.index(peer.device)]
            self._sampled[key] = sampled
        need = int(self.tracker.stuck_ts[i])
        if self.tracker.declared_ts[i] == need:
            # q is stuck on its watchdog's declaration, between pause samples: the peer's own declaration (a storm
            # from further on) comes about as early and in another stream; half an interval of its samples after it
            # says it has none.
            need += self.interval // 2
        if sampled < need:
            return False  # its queues not all sampled since q was last stuck: a stuck sample may be on its way
        onset = self.tracker.onset[i]
        waited = waits_on(q, self.ever, self.fabric)  # the peer's egress q could wait on, stuck at some time
        return all(self.tracker.stuck_ts[self.tracker.index[s]] <= onset for s in waited)


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
        summary=f"PFC storm on priority {prio} from {peer_text} ({role}): {device}:{port} {_how(qs)}; "
        f"{len(queues)} stuck port(s)",
        evidence={
            "peer": None if peer is None else f"{peer.device}:{peer.port}",
            "peer_role": role,
            **qs.evidence(),
            "queues": {f"{q[0]}:{q[1]}": s.evidence() for q, s in each.items()},
        },
    )


def _how(qs: QueueState) -> str:
    if qs.watchdog:  # the interval holds the onset: it sent packets before it
        return f"declared stuck by its PFC watchdog (paused {qs.pause_fraction:.0%} of the last interval)"
    return f"paused {qs.pause_fraction:.0%} of the time with no egress"
