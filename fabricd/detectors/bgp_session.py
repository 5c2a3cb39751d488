"""bgp_session: the routed underlay's sessions, over the OpenConfig BGP neighbour state (reference/platforms.md).

A session is matched to its port by the port's streamed ipv4 address (`/interfaces/.../ipv4/addresses/address[ip]`):
the neighbour whose address lies in a port's subnet is that port's peer, whatever addressing plan the fabric uses.
Three faults, one finding per session (both ends see it; the finding sits on the lower tier's end, a leaf's uplink):
- down: the session is not ESTABLISHED for `down_after_s` while its link is up (a link down is link_flap's);
- flapping: it left ESTABLISHED `flap_count` times within `flap_window_s`;
- prefixes collapsed: ESTABLISHED, yet it receives less than `collapse_ratio` of what it received before, for
  `collapse_after_s` (a peer that lost most of its own sessions, or a filter that went wrong).
`sessions_down` gives the guard the ports whose session is down now: their capacity is gone even with the link up.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable
from dataclasses import dataclass, field

from fabricd.telemetry import Snapshot
from topology.fabric import Fabric
from topology.model import TIER, Endpoint
from topology.units import NS

from .finding import Finding

STATE = "bgp.session-state"
ADDRESS = "ipv4.prefix-length"
PREFIXES = "bgp.prefixes-received"
PEER_AS = "bgp.peer-as"
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


@dataclass
class _Session:
    down_since: int | None = None
    drops: list[int] = field(default_factory=list)
    baseline: float = 0.0
    low_since: int | None = None


@dataclass
class BgpSessionState:
    config: BgpSessionConfig = field(default_factory=BgpSessionConfig)
    sessions: dict[tuple[str, str], _Session] = field(default_factory=dict)
    seen: set[tuple[str, str, int]] = field(default_factory=set)
    routes: tuple[tuple[int, int], dict[str, list[tuple[int, int, str]]]] | None = None
    last_now: int | None = None


@dataclass(frozen=True, slots=True)
class Observed:
    """One session as one end streams it."""

    device: str
    address: str  # the neighbour's
    port: str | None  # the local port whose subnet holds the neighbour (None: no streamed address matches)
    state: str


def routed_ports(snapshot: Snapshot) -> dict[str, list[tuple[int, int, str]]]:
    """Per device: (network, mask, port) of every streamed ipv4 address."""
    out: dict[str, list[tuple[int, int, str]]] = {}
    for i in snapshot.select(leaf=ADDRESS).tolist():
        plen = snapshot.current(i)
        device, port, _, ip = snapshot.key(i)
        if not isinstance(plen, float) or ip is None:
            continue
        try:
            addr = int(ipaddress.IPv4Address(ip))
        except ValueError:
            continue
        mask = (0xFFFFFFFF << (32 - int(plen))) & 0xFFFFFFFF if 0 < plen <= 32 else 0
        out.setdefault(device, []).append((addr & mask, mask, port))
    return out


def _routes(snapshot: Snapshot, state: BgpSessionState | None) -> dict[str, list[tuple[int, int, str]]]:
    """`routed_ports`, re-read only when an address series changed (they stream on change)."""
    rows = snapshot.select(leaf=ADDRESS)
    key = (len(rows), int(snapshot.ts[rows].max()) if len(rows) else 0)
    if state is not None and state.routes is not None and state.routes[0] == key:
        return state.routes[1]
    got = routed_ports(snapshot)
    if state is not None:
        state.routes = (key, got)
    return got


def port_of(routes: dict[str, list[tuple[int, int, str]]], device: str, address: str) -> str | None:
    try:
        a = int(ipaddress.IPv4Address(address))
    except ValueError:
        return None
    for net, mask, port in routes.get(device, ()):
        if mask and a & mask == net:
            return port
    return None


def observe(snapshot: Snapshot, state: BgpSessionState | None = None) -> list[Observed]:
    """Every session the snapshot holds, with its local port."""
    routes = _routes(snapshot, state)
    out = []
    for i in snapshot.select(leaf=STATE).tolist():
        value = snapshot.text(i)
        if value is None:
            continue
        device, address, _, _ = snapshot.key(i)
        out.append(Observed(device, address, port_of(routes, device, address), value))
    return out


def sessions_down(snapshot: Snapshot, fabric: Fabric) -> frozenset[Endpoint]:
    """Both ends of every link whose BGP session is not ESTABLISHED now (what the guard counts as lost capacity)."""
    out: set[Endpoint] = set()
    for o in observe(snapshot):
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
    state.seen = {k for k in state.seen if k[2] >= now - window}
    found: list[Finding] = []
    for o in observe(snapshot, state):
        s = state.sessions.setdefault((o.device, o.address), _Session())
        s.drops = [t for t in s.drops if t >= now - window]
        f = _judge(snapshot, fabric, cfg, o, s, now)
        if f is not None:
            found.append(f)
    state.last_now = now
    return _one_per_link(found, fabric)


def _judge(
    snapshot: Snapshot, fabric: Fabric, cfg: BgpSessionConfig, o: Observed, s: _Session, now: int
) -> Finding | None:
    link_up = True
    if o.port is not None:
        oper = snapshot.find(o.device, o.port, "oper-status")
        link_up = oper is None or snapshot.text(oper) in (None, "UP")
    received = _number(snapshot, o.device, o.address, PREFIXES)
    evidence: dict[str, object] = {
        "peer_address": o.address,
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
    if len(s.drops) >= cfg.flap_count:
        return _finding(fabric, o, "flapping", s.drops[0], now, evidence, "warning",
                        f"left ESTABLISHED {len(s.drops)} times in {cfg.flap_window_s:g} s")  # fmt: skip
    if s.down_since is not None:
        down_for = (now - s.down_since) / NS
        if link_up and down_for >= cfg.down_after_s:
            evidence["down_for_s"] = round(down_for, 1)
            what = f"is {o.state} for {down_for:.0f} s while the link is up: its capacity is lost"
            return _finding(fabric, o, "down", s.down_since, now, evidence, "critical", what)
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
            return _finding(fabric, o, "prefixes_collapsed", s.low_since, now, evidence, "warning",
                            f"receives {received:g} prefixes, down from {s.baseline:g}")  # fmt: skip
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


def _finding(
    fabric: Fabric, o: Observed, reason: str, start: int, now: int, evidence: dict[str, object], severity: str,
    what: str,
) -> Finding:  # fmt: skip
    evidence = {"reason": reason, **evidence}
    here = f"{o.device}:{o.port}" if o.port else o.device
    peer = fabric.peer(o.device, o.port) if o.port else None
    there = f"{peer} " if peer is not None else ""
    ports = sorted(p for p in (f"{o.device}:{o.port}" if o.port else None, str(peer) if peer else None) if p)
    devices = sorted({o.device, *([peer.device] if peer else [])})
    return Finding(
        kind=KIND, device=o.device, port=o.port, devices=tuple(devices), ports=tuple(ports), start_ts=start,
        detected_ts=now, severity=severity, confidence=0.95 if o.port else 0.7, evidence=evidence,
        summary=f"BGP session {here} -> {there}({o.address}) {what}",
    )  # fmt: skip


def _one_per_link(found: Iterable[Finding], fabric: Fabric) -> list[Finding]:
    """Both ends of a session report it: keep the lower tier's end (a leaf's uplink), else the first by name."""
    best: dict[tuple[str, ...], Finding] = {}
    for f in found:
        key = tuple(f.ports) if f.ports else (f.device, str(f.evidence.get("peer_address")))
        old = best.get(key)
        if old is None or _rank(f, fabric) < _rank(old, fabric):
            best[key] = f
    return sorted(best.values(), key=lambda f: (f.device, f.port or ""))


def _rank(f: Finding, fabric: Fabric) -> tuple[int, str]:
    d = fabric.get(f.device)
    return (TIER[d.role] if d is not None else 9, f.device)
