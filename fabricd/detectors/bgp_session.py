"""bgp_session: the routed underlay's sessions, over the OpenConfig BGP neighbour state (reference/platforms.md).

A session is matched to its port by the port's streamed ipv4 address (`/interfaces/.../ipv4/addresses/address[ip]`):
the neighbour whose address lies in a port's subnet is that port's peer, whatever addressing plan the fabric uses.
A switch that streams no address (SONiC: its state comes from STATE_DB's NEIGH_STATE_TABLE, keyed by the neighbour's
address alone) is matched by the underlay's plan (topology/underlay.py), which the fabric is then assumed to follow.
Three faults, one finding per session (both ends see it; the finding sits on the lower tier's end, a leaf's uplink):
- down: the session is not ESTABLISHED for `down_after_s` while its link is up (a link down is link_flap's);
- flapping: it left ESTABLISHED `flap_count` times within `flap_window_s`;
- prefixes collapsed: ESTABLISHED, yet it receives less than `collapse_ratio` of what it received before, for
  `collapse_after_s` (a peer that lost most of its own sessions, or a filter that went wrong).
`sessions_down` gives the guard the ports whose session is down now: their capacity is gone even with the link up.
"""

from __future__ import annotations

import ipaddress
import weakref
from collections.abc import Iterable
from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt

from fabricd.telemetry import Snapshot
from topology.fabric import Fabric
from topology.model import TIER, Endpoint
from topology.underlay import Underlay
from topology.units import NS

from .finding import Finding

I64 = npt.NDArray[np.int64]
F64 = npt.NDArray[np.float64]
U64 = npt.NDArray[np.uint64]

STATE = "bgp.session-state"
ADDRESS = "ipv4.prefix-length"
IP = "ipv4.ip"
PREFIXES = "bgp.prefixes-received"
PEER_AS = "bgp.peer-as"
TRANSITIONS = "bgp.established-transitions"
ESTABLISHED = "ESTABLISHED"
KIND = "bgp_session"


@dataclass(frozen=True)
class BgpSessionConfig:
    # A session down with its link up for this long is a finding: BFD or 3/9 s timers (platforms.md) take a dead
    # session down within about a second, and one that comes back within this time is a blip, counted as a drop.
    down_after_s: float = 3.0
    flap_count: int = 3
    flap_window_s: float = 120.0
    collapse_ratio: float = 0.5
    collapse_after_s: float = 3.0
    # A lower prefix count that lasts this long is the new normal (a planned change), no longer a collapse.
    rebaseline_s: float = 600.0
    lookback_s: float = 10.0  # state events are re-read this far back (streams arrive slightly out of order)
    # A session that drops within this long of its link going down dropped because of the link (link_flap's finding),
    # not on its own: it is not counted as a flap of the session.
    link_cause_s: float = 2.0
    # A session that comes back (its established-transitions counter rises) within this long of its link going down
    # ends a drop the link caused: BGP re-establishes only seconds after the link is back (reconnect, OPEN, the
    # twin's 5-13 s in chaos seeds 5150 and 8128). ASSUMPTION, no figure in the reference: a link down longer than
    # this whose session then returns counts that return as the session's own.
    link_return_s: float = 30.0


@dataclass
class _Session:
    down_since: int | None = None
    drops: list[int] = field(default_factory=list)  # when state samples showed it leave ESTABLISHED
    # when its established-transitions counter rose, and by how much: drops too short for a state sample to show
    returns: list[tuple[int, int]] = field(default_factory=list)
    transitions: int | None = None
    baseline: float = 0.0
    low_since: int | None = None


@dataclass
class BgpSessionState:
    config: BgpSessionConfig = field(default_factory=BgpSessionConfig)
    sessions: dict[tuple[str, str], _Session] = field(default_factory=dict)
    seen: set[tuple[str, str, int]] = field(default_factory=set)
    # (device, port) -> the link's oper-status changes within the flap window: (ts, up)
    links: dict[tuple[str, str], list[tuple[int, bool]]] = field(default_factory=dict)
    routes: tuple[tuple[int, int], dict[str, list[Route]]] | None = None
    # (device, neighbour address) -> its local port under `routes` (cleared with them): sessions_down runs on the
    # action path, per snapshot, and a lookup parses the address
    ports: dict[tuple[str, str], str | None] = field(default_factory=dict)
    incidents: dict[tuple[tuple[str, ...], str], int] = field(default_factory=dict)  # (session, reason) -> onset
    # the session leaves' rows and values at the last pass, and the sessions (their store port rows) that were down,
    # dropping or low then: a pass judges only those and the sessions whose values changed, found by comparing
    # arrays (a 16k-GPU fabric has ~65k session ends)
    arrays: tuple[I64, U64, I64, F64, I64, U64] | None = None
    busy: set[int] = field(default_factory=set)
    last_now: int | None = None


@dataclass(frozen=True, slots=True)
class Observed:
    """One session as one end streams it."""

    device: str
    address: str  # the neighbour's
    port: str | None  # the local port whose subnet holds the neighbour (None: no streamed address matches)
    state: str


Route = tuple[int, int, str, str]  # (network, mask, port, the port's own address)


def routed_ports(snapshot: Snapshot) -> dict[str, list[Route]]:
    """Per device: (network, mask, port, address) of every port's streamed ipv4 address and prefix length."""
    out: dict[str, list[Route]] = {}
    for i in snapshot.select(leaf=ADDRESS).tolist():
        plen = snapshot.current(i)
        device, port, _, _ = snapshot.key(i)
        j = snapshot.find(device, port, IP)
        ip = snapshot.text(j) if j is not None else None
        if not isinstance(plen, float) or not ip:
            continue
        try:
            addr = int(ipaddress.IPv4Address(ip))
        except ValueError:
            continue
        mask = (0xFFFFFFFF << (32 - int(plen))) & 0xFFFFFFFF if 0 < plen <= 32 else 0
        out.setdefault(device, []).append((addr & mask, mask, port, ip))
    return out


def _routes(snapshot: Snapshot, state: BgpSessionState | None) -> dict[str, list[Route]]:
    """`routed_ports`, re-read only when an address series changed (they stream on change)."""
    rows = np.concatenate([snapshot.select(leaf=ADDRESS), snapshot.select(leaf=IP)])
    key = (len(rows), int(snapshot.ts[rows].max()) if len(rows) else 0)
    if state is not None and state.routes is not None and state.routes[0] == key:
        return state.routes[1]
    got = routed_ports(snapshot)
    if state is not None:
        state.routes = (key, got)
        state.ports = {}
    return got


_PLANS: weakref.WeakKeyDictionary[Fabric, dict[tuple[str, str], str]] = weakref.WeakKeyDictionary()


def planned_ports(fabric: Fabric) -> dict[tuple[str, str], str]:
    """(device, neighbour address) -> the local port, by the underlay's plan (worked out once per fabric)."""
    got = _PLANS.get(fabric)
    if got is None:
        underlay = Underlay(fabric)
        got = _PLANS[fabric] = {
            (s.local.device, s.peer_address): s.local.port for d in underlay.speakers for s in underlay.sessions(d)
        }
    return got


def port_of(routes: dict[str, list[Route]], device: str, address: str, fabric: Fabric | None = None) -> str | None:
    """The local port whose streamed subnet holds `address`; on a switch that streams no address, the port the
    underlay's plan gives the neighbour (when the fabric is known)."""
    if device not in routes and fabric is not None:
        return planned_ports(fabric).get((device, address))
    try:
        a = int(ipaddress.IPv4Address(address))
    except ValueError:
        return None
    for net, mask, port, _ in routes.get(device, ()):
        if mask and a & mask == net:
            return port
    return None


def own_address(routes: dict[str, list[Route]], device: str, port: str) -> str | None:
    return next((ip for _, _, p, ip in routes.get(device, ()) if p == port), None)


def observe(
    snapshot: Snapshot, state: BgpSessionState | None = None, only: I64 | None = None, fabric: Fabric | None = None
) -> list[Observed]:
    """Every session the snapshot holds (or those of the `only` store port rows), with its local port (`fabric`:
    by its underlay's plan where a switch streams no address)."""
    routes = _routes(snapshot, state)
    out = []
    rows = snapshot.select(leaf=STATE)
    if only is not None:
        rows = rows[np.isin(snapshot.series_port[rows], only)]
    for i in rows.tolist():
        value = snapshot.text(i)
        if value is None:
            continue
        device, address, _, _ = snapshot.key(i)
        if state is None:
            port = port_of(routes, device, address, fabric)
        elif (device, address) in state.ports:
            port = state.ports[device, address]
        else:
            port = state.ports[device, address] = port_of(routes, device, address, fabric)
        out.append(Observed(device, address, port, value))
    return out


def sessions_down(snapshot: Snapshot, fabric: Fabric, state: BgpSessionState | None = None) -> frozenset[Endpoint]:
    """Both ends of every link whose BGP session is not ESTABLISHED now (what the guard counts as lost capacity);
    `state` keeps the ports' addresses between calls (re-read only when one changed)."""
    out: set[Endpoint] = set()
    for o in observe(snapshot, state, fabric=fabric):
        if o.state != ESTABLISHED and o.port is not None:
            out.add(Endpoint(o.device, o.port))
            peer = fabric.peer(o.device, o.port)
            if peer is not None:
                out.add(peer)
    return frozenset(out)


def detect(snapshot: Snapshot, fabric: Fabric, state: BgpSessionState, now: int) -> list[Finding]:
    cfg = state.config
    since = (state.last_now if state.last_now is not None else now) - int(cfg.lookback_s * NS)
    for e in snapshot.events_since(since, leaf=STATE, changes_only=True):
        key = (e.device, e.port, e.ts)
        if key in state.seen or e.previous != ESTABLISHED or e.value == ESTABLISHED:
            continue
        state.seen.add(key)
        s = state.sessions.setdefault((e.device, e.port), _Session())
        s.drops.append(e.ts)
        s.down_since = s.down_since or e.ts
    window = int(cfg.flap_window_s * NS)
    for e in snapshot.events_since(since, leaf="oper-status", changes_only=True):
        key = (e.device, e.port, e.ts)
        if key not in state.seen:
            state.seen.add(key)
            state.links.setdefault((e.device, e.port), []).append((e.ts, e.value == "UP"))
    # a drop or return still in the window is explained by a link change up to link_return_s before it: the link's
    # history is kept that much longer, or its drops turn into the session's own as the link's change ages out
    # (chaos seed 8128: "left ESTABLISHED 3 times" for a tick, 120 s after a link flap)
    keep = now - window - int((cfg.link_return_s + cfg.link_cause_s) * NS)
    state.links = {k: kept for k, v in state.links.items() if (kept := [x for x in v if x[0] >= keep])}
    state.seen = {k for k in state.seen if k[2] >= keep}
    only = _to_judge(snapshot, state)
    state.last_now = now
    if only is not None and not len(only):
        return []  # every session up and nothing changed
    found: list[_Verdict] = []
    busy: set[int] = set()
    for o in observe(snapshot, state, only, fabric):
        s = state.sessions.setdefault((o.device, o.address), _Session())
        s.drops = [t for t in s.drops if t >= now - window]
        _count_returns(snapshot, o, s, now - window)
        v = _judge(snapshot, cfg, o, s, now, state.links.get((o.device, o.port or ""), []))
        if v is not None:
            found.append(v)
        if v is not None or s.down_since is not None or s.low_since is not None or s.drops or s.returns:
            row = snapshot.port_row(o.device, o.address)
            if row is not None:
                busy.add(row)
    if only is None:
        state.busy = busy
    else:  # the sessions judged now replace what was known of them; the others keep theirs
        state.busy = (state.busy - set(only.tolist())) | busy
    return _one_per_link(found, fabric, state, _routes(snapshot, state), now)


def _to_judge(snapshot: Snapshot, state: BgpSessionState) -> I64 | None:
    """The store port rows of the sessions to judge this pass: those whose state, prefix count or transitions
    changed since the last pass, and those busy then; None: all (the set of sessions changed)."""
    rows, pr, tr = snapshot.select(leaf=STATE), snapshot.select(leaf=PREFIXES), snapshot.select(leaf=TRANSITIONS)
    now = (rows, snapshot.value[rows].copy(), pr, snapshot.gauge[pr].copy(), tr, snapshot.value[tr].copy())
    before, state.arrays = state.arrays, now
    if before is None or any(
        not np.array_equal(a, b) for a, b in ((rows, before[0]), (pr, before[2]), (tr, before[4]))
    ):
        return None
    port = snapshot.series_port
    gauge_moved = (now[3] != before[3]) & ~(np.isnan(now[3]) & np.isnan(before[3]))
    changed = np.concatenate([port[rows[now[1] != before[1]]], port[pr[gauge_moved]], port[tr[now[5] != before[5]]]])
    return np.union1d(changed, np.fromiter(state.busy, dtype=np.int64, count=len(state.busy))).astype(np.int64)


def _count_returns(snapshot: Snapshot, o: Observed, s: _Session, oldest: int) -> None:
    """Rises of the session's established-transitions counter: each is a drop that ended (a reset starts over)."""
    i = snapshot.find(o.device, o.address, TRANSITIONS)
    value = snapshot.current(i) if i is not None else None
    if isinstance(value, int):
        if s.transitions is not None and value > s.transitions:
            s.returns.append((int(snapshot.ts[i]), value - s.transitions))
        s.transitions = value
    s.returns = [r for r in s.returns if r[0] >= oldest]


def _judge(
    snapshot: Snapshot, cfg: BgpSessionConfig, o: Observed, s: _Session, now: int, link: list[tuple[int, bool]]
) -> _Verdict | None:
    """`link`: the port's recent oper-status changes. The session's own faults only: a drop the link's going down
    explains is not a flap, and a session is down on its own only once it stayed down `down_after_s` with its link
    up (BGP takes seconds to come back after its link does: that is not a fault)."""
    link_up = True
    if o.port is not None:
        oper = snapshot.find(o.device, o.port, "oper-status")
        link_up = oper is None or snapshot.text(oper) in (None, "UP")
    received = _number(snapshot, o.device, o.address, PREFIXES)
    evidence: dict[str, object] = {
        "state": o.state,
        "link": "UP" if link_up else "DOWN",
        "drops": len(s.drops),
        "prefixes_received": received,
        "peer_as": _number(snapshot, o.device, o.address, PEER_AS),
    }
    if o.state != ESTABLISHED:
        s.low_since = None
        if s.down_since is None:
            s.down_since = now  # down since before fabricd saw it
    else:
        s.down_since = None
    cause = int(cfg.link_cause_s * NS)

    back = int(cfg.link_return_s * NS)

    def by_link(t: int) -> bool:
        return any(not up and abs(t - ts) <= cause for ts, up in link)

    def returned_from_link(t: int) -> bool:
        """A return at `t` ends a drop its link caused: the link went down not long before it."""
        return any(not up and t - back <= ts <= t + cause for ts, up in link)

    own = [t for t in s.drops if not by_link(t)]
    # a drop shorter than the state's sample shows only in the counter: count whichever saw more
    returned = [(t, n) for t, n in s.returns if not returned_from_link(t)]
    drops = max(len(own), sum(n for _, n in returned))
    evidence["drops"] = drops
    if drops >= cfg.flap_count:
        first = min([*own, *(t for t, _ in returned)])
        what = f"left ESTABLISHED {drops} times in {cfg.flap_window_s:g} s with its link up"
        return _Verdict(o, "flapping", first, "warning", what, evidence)
    if s.down_since is not None:
        link_back = max((ts for ts, up in link if up), default=0)
        down_for = (now - max(s.down_since, link_back)) / NS
        if link_up and down_for >= cfg.down_after_s:
            evidence["down_for_s"] = round(down_for, 1)
            what = f"is {o.state} for {down_for:.0f} s while the link is up: its capacity is lost"
            return _Verdict(o, "down", s.down_since, "critical", what, evidence)
        return None
    if received is None:
        return None
    if s.baseline and received < cfg.collapse_ratio * s.baseline:
        s.low_since = s.low_since or now
        low_for = (now - s.low_since) / NS
        if low_for >= cfg.rebaseline_s:
            s.baseline, s.low_since = received, None
            return None
        if low_for >= cfg.collapse_after_s:
            evidence["prefixes_before"] = s.baseline
            what = f"receives {received:g} prefixes, down from {s.baseline:g}"
            return _Verdict(o, "prefixes_collapsed", s.low_since, "warning", what, evidence)
        return None
    s.low_since = None
    s.baseline = max(s.baseline, received)
    return None


def _number(snapshot: Snapshot, device: str, port: str, leaf: str) -> float | None:
    i = snapshot.find(device, port, leaf)
    if i is None:
        return None
    v = snapshot.current(i)
    return float(v) if isinstance(v, int | float) else None


@dataclass(frozen=True)
class _Verdict:
    """One end's judgement of its session, before both ends' are merged into one finding."""

    o: Observed
    reason: str
    start: int
    severity: str
    what: str
    evidence: dict[str, object]


def _one_per_link(
    verdicts: Iterable[_Verdict], fabric: Fabric, state: BgpSessionState, routes: dict[str, list[Route]], now: int
) -> list[Finding]:
    """Both ends of a session judge it, and their samples arrive apart: one finding per session, always on the lower
    tier's end of the link (a leaf's uplink), whichever end saw it, starting at the first end's onset and kept while
    either end still sees the incident."""
    groups: dict[tuple[str, ...], list[_Verdict]] = {}
    for v in verdicts:
        peer = fabric.peer(v.o.device, v.o.port) if v.o.port else None
        key = tuple(sorted((f"{v.o.device}:{v.o.port}", str(peer)))) if peer else (v.o.device, v.o.address)
        groups.setdefault(key, []).append(v)
    out, live = [], set()
    for key, vs in groups.items():
        vs.sort(key=lambda v: _rank(v.o.device, fabric))
        v = vs[0]
        here = Endpoint(v.o.device, v.o.port) if v.o.port else None
        peer = fabric.peer(here.device, here.port) if here is not None else None
        address = v.o.address
        if here is not None and peer is not None and _rank(peer.device, fabric) < _rank(here.device, fabric):
            # only the upper end sees it now: told from the lower end, whose neighbour is the upper end's address
            planned = {port: a for (d, a), port in planned_ports(fabric).items() if d == peer.device}
            address = own_address(routes, here.device, here.port) or planned.get(peer.port, address)
            here, peer = peer, here
        incident = (key, v.reason)
        live.add(incident)
        start = state.incidents.setdefault(incident, min(x.start for x in vs))
        where = str(here) if here is not None else v.o.device
        there = f"{peer} " if peer is not None else ""
        ports = tuple(sorted(str(e) for e in (here, peer) if e is not None))
        out.append(Finding(
            kind=KIND, device=here.device if here else v.o.device, port=here.port if here else None,
            devices=tuple(sorted({p.split(":", 1)[0] for p in ports} or {v.o.device})), ports=ports, start_ts=start,
            detected_ts=now, severity=v.severity, confidence=0.95 if here else 0.7,
            evidence={"reason": v.reason, **v.evidence, "peer_address": address, "seen_from": [x.o.device for x in vs]},
            summary=f"BGP session {where} -> {there}({address}) {v.what}",
        ))  # fmt: skip
    state.incidents = {k: t for k, t in state.incidents.items() if k in live}
    return sorted(out, key=lambda f: (f.device, f.port or ""))


def _rank(device: str, fabric: Fabric) -> tuple[int, str]:
    d = fabric.get(device)
    return (TIER[d.role] if d is not None else 9, device)
