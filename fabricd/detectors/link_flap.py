"""link_flap: RFC 2439-style dampening per link over oper-status events and carrier-transitions counters.

Each flap adds a penalty; the penalty decays exponentially with a half-life; a link whose penalty passes the
suppress threshold is a finding until the penalty decays below the reuse threshold. One flap is never a finding.
Both ends of a link feed one penalty (a flap seen from both ends counts once), so a link makes one finding.
A flap is a down event; carrier-transitions add only the changes the events did not show (flaps too short for them),
two changes a flap, which may fall into two samples; a down event that arrives after the sample that already counted
its change takes that flap over instead of adding one.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

import numpy as np

from fabricd.telemetry import CounterStore, Snapshot, StateEvent
from topology.fabric import Fabric
from topology.units import NS

from .finding import Finding


@dataclass(frozen=True)
class LinkFlapConfig:
    # Equivalent to EOS' errdisable default of 5 flaps in 10 s (reference/domain.md): with a 30 s half-life any 5
    # flaps within 10 s leave at least 1000 + 4000 * 2**(-10/30) = 4175 > 4100, while 4 flaps, even at once, reach
    # at most 4000 < 4100. Reuse at 750 (the usual RFC 2439 figure): the finding clears ~75 s after a burst ends.
    penalty: float = 1000.0
    half_life_s: float = 30.0
    suppress: float = 4100.0
    reuse: float = 750.0
    max_penalty: float = 16000.0  # caps how long a link stays suppressed after a long flapping spell (~2 min)
    # Both ends report one flap at nearly the same time; events this close at the two ends are one flap.
    same_flap_s: float = 0.5
    # Events are re-read this far back each tick (devices' streams arrive slightly out of time order).
    lookback_s: float = 10.0
    timeline_max: int = 64
    # A flap train the carrier-transitions counter shows over a time fabricd was not watching (link_flap_unwatched):
    # a remembered value older than this is history, not an incident.
    unwatched_max_s: float = 900.0


@dataclass
class _Flap:
    ts: int
    ends: set[str]
    source: str  # "event" | "counter" (a flap shorter than a sample, seen only by carrier-transitions)
    # end -> (prev_ts, ts] of the carrier-transitions sample that counted this flap there, until an event explains it
    counted: dict[str, tuple[int, int]] = field(default_factory=dict)


@dataclass
class _Link:
    ends: tuple[str, ...]
    penalty: float = 0.0
    penalty_ts: int = 0
    episode_start: int = 0
    flaps: list[_Flap] = field(default_factory=list)
    suppressed: bool = False
    crossed_ts: int = 0  # the flap that took the penalty over the suppress threshold (remediation latency from here)


@dataclass
class LinkFlapState:
    config: LinkFlapConfig = field(default_factory=LinkFlapConfig)
    links: dict[tuple[str, ...], _Link] = field(default_factory=dict)
    seen_events: set[tuple[str, str, int, str]] = field(default_factory=set)
    counter_ts: dict[int, int] = field(default_factory=dict)  # carrier-transitions series row -> last sample used
    # end -> times of the oper-status changes its events showed (both ways), within the lookback
    changes: dict[str, list[int]] = field(default_factory=dict)
    # carrier-transitions rows whose last unexplained change was half a flap (its other half is in a later sample)
    half_open: set[int] = field(default_factory=set)
    last_now: int | None = None
    event_cursor: int = 0  # the store's event total `on_store_events` read up to


def _down(e: StateEvent) -> bool:
    return e.leaf == "oper-status" and e.previous == "UP" and e.value != "UP"


def _change(e: StateEvent) -> bool:
    """A carrier transition: oper-status into or out of UP (what carrier-transitions counts)."""
    return e.leaf == "oper-status" and e.previous is not None and (e.previous == "UP") != (e.value == "UP")


def _link_ends(fabric: Fabric, device: str, port: str) -> tuple[str, ...]:
    link = fabric.link_of(device, port)
    if link is None:
        return (f"{device}:{port}",)
    return tuple(sorted((f"{link.a.device}:{link.a.port}", f"{link.b.device}:{link.b.port}")))


class _Tracker:
    def __init__(self, state: LinkFlapState, fabric: Fabric) -> None:
        self.state, self.fabric, self.cfg = state, fabric, state.config
        self.tol = int(self.cfg.same_flap_s * NS)

    def link(self, device: str, port: str) -> _Link:
        ends = _link_ends(self.fabric, device, port)
        found = self.state.links.get(ends)
        if found is None:
            found = self.state.links[ends] = _Link(ends)
        return found

    def decay(self, link: _Link, ts: int) -> None:
        if ts > link.penalty_ts:
            link.penalty *= 2.0 ** (-(ts - link.penalty_ts) / (self.cfg.half_life_s * NS))
            link.penalty_ts = ts

    def attach(self, link: _Link, end: str, lo: int, hi: int, ts: int, source: str) -> _Flap:
        """Count `end`'s flap: the same flap as one the other end already reported in [lo, hi], or a new one."""
        for f in link.flaps:
            if end not in f.ends and lo <= f.ts <= hi:
                f.ends.add(end)
                return f
        self.decay(link, ts)
        if not link.suppressed and link.penalty < self.cfg.reuse:
            link.episode_start, link.flaps = ts, []  # a new episode: older flaps no longer weigh
        flap = _Flap(ts, {end}, source)
        link.flaps.append(flap)
        del link.flaps[: -self.cfg.timeline_max]
        link.penalty = min(self.cfg.max_penalty, link.penalty + self.cfg.penalty)
        if link.penalty > self.cfg.suppress and not link.suppressed:
            link.suppressed, link.crossed_ts = True, ts
        return flap

    @staticmethod
    def explained(link: _Link, end: str, ts: int) -> bool:
        """A down event at `end` that arrives after the carrier-transitions sample that already counted its flap
        there (a device may send the sample first): that flap is this event's, now at its precise time."""
        for f in link.flaps:
            span = f.counted.get(end)
            if span is not None and span[0] < ts <= span[1]:
                del f.counted[end]
                if f.source == "counter" and not f.counted:
                    f.ts, f.source = ts, "event"
                return True
        return False


def detect(snapshot: Snapshot, fabric: Fabric, state: LinkFlapState, now_ns: int) -> list[Finding]:
    cfg = state.config
    tr = _Tracker(state, fabric)
    since = (state.last_now if state.last_now is not None else now_ns) - int(cfg.lookback_s * NS)
    state.seen_events = {k for k in state.seen_events if k[2] >= since}
    for end in list(state.changes):
        state.changes[end] = kept = [t for t in state.changes[end] if t >= since]
        if not kept:
            del state.changes[end]
    # Oper-status events first: they are the precise timeline; counters only add what the events missed.
    _take(tr, snapshot.events_since(since, leaf="oper-status", changes_only=True))  # a first value is no flap
    rows = snapshot.select(leaf="if.carrier-transitions")
    moved = rows[np.nan_to_num(snapshot.delta(rows), nan=0.0) > 0]
    for i in moved.tolist():
        ts, prev_ts = int(snapshot.ts[i]), int(snapshot.prev_ts[i])
        if state.counter_ts.get(i, 0) >= ts:
            continue  # this sample was counted on an earlier tick
        state.counter_ts[i] = ts
        device, port, _, _ = snapshot.key(i)
        end = f"{device}:{port}"
        link = tr.link(device, port)
        # Transitions the events did not show are flaps too short for them. A flap is a down and an up: two
        # transitions, which may fall into two samples; a lone one counts as a flap once (a link left down counts).
        shown = sum(1 for t in state.changes.get(end, ()) if prev_ts < t <= ts)
        missed = int(snapshot.value[i] - snapshot.prev_value[i]) - shown
        if missed > 0 and i in state.half_open:
            missed -= 1  # the other half of a flap already counted
            state.half_open.discard(i)
        if missed <= 0:
            continue
        if missed % 2:
            state.half_open.add(i)
        for _ in range(math.ceil(missed / 2)):
            tr.attach(link, end, prev_ts - tr.tol, ts + tr.tol, ts, "counter").counted[end] = (prev_ts, ts)
    state.last_now = now_ns
    out = []
    for ends, link in list(state.links.items()):
        tr.decay(link, now_ns)
        if link.suppressed and link.penalty < cfg.reuse:
            link.suppressed = False
        if link.suppressed:
            out.append(_finding(link, fabric, cfg, now_ns))
        elif link.penalty < 1.0:
            del state.links[ends]
    return out


def _take(tr: _Tracker, events: Iterable[StateEvent]) -> set[tuple[str, ...]]:
    """Count the oper-status changes not counted before (by either entry point); returns the links they touched."""
    state, touched = tr.state, set()
    for e in events:
        key = (e.device, e.port, e.ts, e.value)
        if key in state.seen_events or not _change(e):
            continue
        state.seen_events.add(key)
        end = f"{e.device}:{e.port}"
        state.changes.setdefault(end, []).append(e.ts)
        if _down(e):
            link = tr.link(e.device, e.port)
            touched.add(link.ends)
            if not tr.explained(link, end, e.ts):
                tr.attach(link, end, e.ts - tr.tol, e.ts + tr.tol, e.ts, "event")
    return touched


def on_events(events: Sequence[StateEvent], fabric: Fabric, state: LinkFlapState, now_ns: int) -> list[Finding]:
    """The event-driven entry: count just these new oper-status changes (as they land, ON_CHANGE) and return the
    findings of the links they took over the suppress threshold (or that stay over it). No snapshot and no counter
    rows: the next `detect` sees the same events as counted and adds what carrier-transitions alone show."""
    tr = _Tracker(state, fabric)
    out = []
    for ends in sorted(_take(tr, events)):
        link = state.links[ends]
        tr.decay(link, now_ns)
        if link.suppressed and link.penalty >= state.config.reuse:
            out.append(_finding(link, fabric, state.config, now_ns))
    return out


def on_store_events(store: CounterStore, fabric: Fabric, state: LinkFlapState, now_ns: int) -> list[Finding]:
    """`on_events` over the oper-status changes the store received since the last call (the live pass loop's
    entry: it reads the store's event ring in place, no snapshot)."""
    events, state.event_cursor = store.events_after(state.event_cursor, "oper-status")
    return on_events(events, fabric, state, now_ns) if events else []


def _origin_end(ends: tuple[str, ...], fabric: Fabric) -> str:
    """A switch end (the one fabricd can act on), the smaller name first: deterministic for one link."""

    def on_switch(end: str) -> bool:
        dev = fabric.get(end.split(":", 1)[0])
        return dev is not None and dev.is_switch

    return min(ends, key=lambda e: (not on_switch(e), e))


def _finding(link: _Link, fabric: Fabric, cfg: LinkFlapConfig, now_ns: int) -> Finding:
    origin = _origin_end(link.ends, fabric)
    device, port = origin.split(":", 1)
    n = len(link.flaps)
    span = (link.flaps[-1].ts - link.flaps[0].ts) / NS if n else 0.0
    where = " <-> ".join(link.ends)
    return Finding(
        kind="link_flap",
        device=device,
        port=port,
        devices=tuple(sorted({e.split(":", 1)[0] for e in link.ends})),
        ports=link.ends,
        start_ts=link.episode_start,
        detected_ts=now_ns,
        severity="critical" if link.penalty >= 2 * cfg.suppress else "warning",
        confidence=1.0 if any(f.source == "event" for f in link.flaps) else 0.8,
        summary=f"link {where} flapped {n} times in {span:.1f} s (dampening penalty {link.penalty:.0f} "
        f"> suppress {cfg.suppress:.0f})",
        evidence={
            "flaps": n,
            "timeline": [f.ts for f in link.flaps],
            "sources": {s: sum(1 for f in link.flaps if f.source == s) for s in ("event", "counter")},
            "penalty": round(link.penalty, 1),
            "suppressed_ts": link.crossed_ts,
            "suppress_threshold": cfg.suppress,
            "reuse_threshold": cfg.reuse,
            "half_life_s": cfg.half_life_s,
        },
    )
