"""The safety guard: may fabricd take this port down without hurting the fabric? Pure: data in, verdict out.

Rules, each a named limit so a refusal says which one held:
- rate: at most `max_actions_per_hour` disables in the last hour;
- budgets: ports fabricd holds down per switch, per rail and fabric-wide;
- capacity: every switch on the link keeps `min_uplink_fraction` of its uplink capacity, counting ports that
  are already down for any reason (CorrOpt's rule: never trade a corrupting link for congestion);
- redundancy: never both ends of a link, never the last working member of a parallel bundle.
"""

from __future__ import annotations

from collections.abc import Container, Iterable
from dataclasses import dataclass

from topology.fabric import Fabric
from topology.model import TIER, Endpoint, Link

from .config import SafetyLimits


@dataclass(frozen=True)
class Verdict:
    allowed: bool
    rule: str  # "ok" or the limit that refused
    reason: str


@dataclass(frozen=True)
class GuardInput:
    """What the guard knows at decision time."""

    held_down: frozenset[Endpoint]  # ports fabricd holds down (disabled or an action in flight)
    oper_down: frozenset[Endpoint]  # ports telemetry sees down for any reason
    disables_last_hour: int
    # ports whose BGP session is down with the link up: no routed traffic, so no capacity (detectors/bgp_session.py)
    routed_down: frozenset[Endpoint] = frozenset()
    # ports out of service for planned maintenance (maintenance.py): their capacity is gone as surely as a fault's
    drained: frozenset[Endpoint] = frozenset()


@dataclass(frozen=True)
class Budget:
    """How much of a named limit is in use now (the busiest switch or rail for the per-switch and per-rail ones)."""

    limit: str  # the Verdict rule that refuses once used >= allowed
    used: int
    allowed: int


def budgets(fabric: Fabric, limits: SafetyLimits, known: GuardInput) -> list[Budget]:
    """The rate and budget limits `check_disable` enforces, with what is used of each."""
    per_switch: dict[str, int] = {}
    per_rail: dict[int, int] = {}
    for ep in known.held_down:
        per_switch[ep.device] = per_switch.get(ep.device, 0) + 1
        d = fabric.get(ep.device)
        if d is not None and d.rail is not None:
            per_rail[d.rail] = per_rail.get(d.rail, 0) + 1
    return [
        Budget("rate", known.disables_last_hour, limits.max_actions_per_hour),
        Budget("switch_budget", max(per_switch.values(), default=0), limits.max_down_per_switch),
        Budget("rail_budget", max(per_rail.values(), default=0), limits.max_down_per_rail),
        Budget("fabric_budget", len(known.held_down), limits.max_down_fabric),
    ]


def is_uplink(fabric: Fabric, device: str, link: Link) -> bool:
    """A link toward a higher tier (leaf->spine, spine->superspine) or toward another campus (DCI)."""
    here = fabric.get(device)
    there = fabric.get(link.other(device).device)
    if here is None or there is None:
        return False
    return there.is_remote or TIER[there.role] > TIER[here.role]


def _speed(link: Link) -> float:
    return float(link.speed_gbps or 1)


def check_disable(fabric: Fabric, limits: SafetyLimits, target: Endpoint, known: GuardInput) -> Verdict:
    link = fabric.link_of(target.device, target.port)
    if link is None:
        return Verdict(False, "unknown_port", f"{target} is not a cabled port of the fabric; not touching it")
    peer = link.other(target.device, target.port)
    if known.disables_last_hour >= limits.max_actions_per_hour:
        return Verdict(
            False,
            "rate",
            f"{known.disables_last_hour} ports disabled in the last hour (limit {limits.max_actions_per_hour})",
        )
    if peer in known.held_down:
        return Verdict(False, "redundancy", f"the other end {peer} is already held down by fabricd")
    switches = [ep.device for ep in (target, peer) if (d := fabric.get(ep.device)) and d.is_switch]
    for sw in switches:
        n = sum(1 for ep in known.held_down if ep.device == sw)
        if n >= limits.max_down_per_switch:
            return Verdict(
                False, "switch_budget", f"{sw} already has {n} ports held down (limit {limits.max_down_per_switch})"
            )
    rail = next((r for sw in switches if (r := fabric.device(sw).rail) is not None), None)
    if rail is not None:
        n = sum(1 for ep in known.held_down if (d := fabric.get(ep.device)) is not None and d.rail == rail)
        if n >= limits.max_down_per_rail:
            return Verdict(
                False, "rail_budget", f"rail {rail} already has {n} ports held down (limit {limits.max_down_per_rail})"
            )
    if len(known.held_down) >= limits.max_down_fabric:
        return Verdict(
            False,
            "fabric_budget",
            f"{len(known.held_down)} ports held down fabric-wide (limit {limits.max_down_fabric})",
        )
    gone = known.held_down | known.oper_down | known.routed_down | known.drained | {target, peer}
    bundle = _parallel(fabric, link)
    if len(bundle) > 1 and all(_is_down(lk, gone) for lk in bundle):
        return Verdict(False, "redundancy", f"{target} is the last working link of its bundle to {peer.device}")
    for sw in switches:
        verdict = _capacity(fabric, limits, sw, link, gone, known.routed_down)
        if not verdict.allowed:
            return verdict
    return Verdict(True, "ok", "capacity and budgets allow it")


def check_drain(
    fabric: Fabric, limits: SafetyLimits, ports: Iterable[Endpoint], known: GuardInput, spared: str | None = None
) -> Verdict:
    """May these ports go out of service together for maintenance? Their links count as lost with every fault,
    BGP-down uplink, hold and other drain; each switch at their far (and near) ends keeps `min_uplink_fraction`, and
    no bundle loses its last member. `spared`: the switch being drained whole (it carries nothing; its own uplinks
    are not judged). The budgets of `check_disable` are fabricd's own actions', not a person's planned work."""
    taking = frozenset(ports)
    gone = known.held_down | known.oper_down | known.routed_down | known.drained | taking
    links = {lk for ep in taking if (lk := fabric.link_of(ep.device, ep.port)) is not None}
    for link in sorted(links, key=lambda lk: (str(lk.a), str(lk.b))):
        bundle = _parallel(fabric, link)
        ends = {link.a.device, link.b.device}
        if len(bundle) > 1 and spared not in ends and all(_is_down(lk, gone) for lk in bundle):
            far, near = sorted(ends)
            return Verdict(False, "redundancy", f"it takes the last working link between {far} and {near}")
    judged = sorted({d for lk in links for d in (lk.a.device, lk.b.device) if d != spared})
    for sw in judged:
        dev = fabric.get(sw)
        if dev is None or not dev.is_switch:
            continue
        up = next((lk for lk in links if sw in (lk.a.device, lk.b.device) and is_uplink(fabric, sw, lk)), None)
        if up is None:
            continue
        verdict = _capacity(fabric, limits, sw, up, gone, known.routed_down)
        if not verdict.allowed:
            return verdict
    return Verdict(True, "ok", "capacity allows it")


def _is_down(link: Link, gone: Container[Endpoint]) -> bool:
    """A link is down when either end is (fabricd holding down the far end takes it away from this switch too)."""
    return link.a in gone or link.b in gone


def _parallel(fabric: Fabric, link: Link) -> list[Link]:
    ends = {link.a.device, link.b.device}
    return [lk for lk in fabric.links_of(link.a.device) if {lk.a.device, lk.b.device} == ends]


def _capacity(
    fabric: Fabric,
    limits: SafetyLimits,
    device: str,
    link: Link,
    gone: Iterable[Endpoint],
    routed_down: Container[Endpoint] = frozenset(),
) -> Verdict:
    if not is_uplink(fabric, device, link):
        return Verdict(True, "ok", "")
    down = set(gone)
    uplinks = [lk for lk in fabric.links_of(device) if is_uplink(fabric, device, lk)]
    total = sum(_speed(lk) for lk in uplinks)
    left = sum(_speed(lk) for lk in uplinks if not _is_down(lk, down))
    if total and left / total < limits.min_uplink_fraction:
        routed = sum(1 for lk in uplinks if lk != link and (lk.a in routed_down or lk.b in routed_down))
        why = f"; {routed} uplink(s) counted lost because their BGP session is down" if routed else ""
        return Verdict(
            False,
            "capacity",
            f"{device} would keep {left:g} of {total:g} Gb/s uplink capacity ({left / total:.0%}),"
            f" below the {limits.min_uplink_fraction:.0%} limit{why}",
        )
    return Verdict(True, "ok", "")
