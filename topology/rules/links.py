"""Per-link and per-device checks: tiers, reused ports, speeds, unknown devices, DCI placement."""

from __future__ import annotations

from topology.layout import nic_rail
from topology.model import Device, Link, Role
from topology.rules.context import RuleContext
from topology.rules.servers import nic_home
from topology.rules.violation import Code, Violation

_TIER_HINT = {
    Role.SERVER: "server NICs go to the leaf of their rail",
    Role.LEAF: "leaf uplinks go to spines of the leaf's rail",
    Role.SPINE: "spine uplinks go to superspines",
    Role.SUPERSPINE: "superspines connect spines (and DR switches)",
    Role.DR: "DR switches connect the top campus tier and the long-haul links",
}


def _allowed_pairs(ctx: RuleContext) -> set[frozenset[Role]]:
    pairs = {frozenset({Role.SERVER, Role.LEAF}), frozenset({Role.LEAF, Role.SPINE})}
    if ctx.layout.spec.superspines:
        pairs |= {frozenset({Role.SPINE, Role.SUPERSPINE}), frozenset({Role.SUPERSPINE, Role.DR})}
    else:
        pairs.add(frozenset({Role.SPINE, Role.DR}))
    return pairs


def check_links(ctx: RuleContext) -> list[Violation]:
    out: list[Violation] = []
    allowed = _allowed_pairs(ctx)
    for link in ctx.fabric.links:
        a, b = ctx.dev(link.a.device), ctx.dev(link.b.device)
        if a is None or b is None:
            continue
        long_haul = ctx.is_long_haul(link)
        if long_haul:
            out.extend(_dci(link, a, b, ctx))
        elif frozenset({a.role, b.role}) not in allowed:
            out.append(_tier(ctx, link, a, b))
            continue
        want = ctx.expected_speed(a, b)
        if link.speed_gbps is not None and want is not None and link.speed_gbps != want:
            out.append(
                Violation(
                    Code.SPEED_MISMATCH,
                    f"{link.a} - {link.b} runs at {link.speed_gbps}G; the spec says {want}G for this tier",
                    f"set both ports to {want}G (or fix the optic/cable), or correct speed_gbps in the cabling",
                    [a.name, b.name],
                    [str(link.a), str(link.b)],
                )
            )
    out.extend(_port_reuse(ctx))
    out.extend(_unknown_devices(ctx))
    out.extend(_extra_servers(ctx))
    return out


def _tier(ctx: RuleContext, link: Link, a: Device, b: Device) -> Violation:
    low, high = sorted((a, b), key=lambda d: list(Role).index(d.role))
    fix = f"remove this cable; {_TIER_HINT[low.role]}"
    if low.role is Role.SERVER:
        nic = link.a if link.a.device == low.name else link.b
        rail = nic_rail(nic.port)
        home = nic_home(ctx, low, rail) if rail is not None and rail < ctx.layout.spec.rails else None
        if home:
            fix = f"move {nic} from {link.other(nic.device, nic.port)} to {home}"
    return Violation(
        Code.TIER_VIOLATION,
        f"{link.a} ({a.role.value}) is cabled to {link.b} ({b.role.value}): a {low.role.value}-{high.role.value}"
        " link breaks the Clos tiers",
        fix,
        [a.name, b.name],
        [str(link.a), str(link.b)],
    )


def _dci(link: Link, a: Device, b: Device, ctx: RuleContext) -> list[Violation]:
    out = []
    local_non_dr = [(d, ep) for d, ep in ((a, link.a), (b, link.b)) if not d.is_remote and d.role is not Role.DR]
    if local_non_dr:
        ends = ", ".join(f"{d.name} ({d.role.value})" for d, _ in local_non_dr)
        out.append(
            Violation(
                Code.DCI_NOT_ON_DR,
                f"long-haul link {link.a} - {link.b} ends on {ends}, which cannot hold its PFC headroom"
                " or generate CNP",
                "terminate long-haul links on a DR switch; connect the campus to the DR instead",
                [a.name, b.name],
                [str(ep) for _, ep in local_non_dr],
            )
        )
    if link.length_m is None:
        dr = a if a.role is Role.DR and not a.is_remote else b
        dci = ctx.layout.dci_of(dr.name)
        hint = f" (the spec says {dci.distance_km:g} km: length_m: {dci.distance_km * 1000:.0f})" if dci else ""
        out.append(
            Violation(
                Code.DCI_LENGTH_MISSING,
                f"long-haul link {link.a} - {link.b} has no length_m; PFC headroom and CNP placement depend on it",
                f"add length_m to this link in the cabling{hint}",
                [a.name, b.name],
                [str(link.a), str(link.b)],
            )
        )
    return out


def _port_reuse(ctx: RuleContext) -> list[Violation]:
    out = []
    for device, port, links in ctx.fabric.reused_ports():
        peers = [str(ln.other(device, port)) for ln in links]
        out.append(
            Violation(
                Code.PORT_REUSE,
                f"{device}:{port} appears in {len(links)} links (to {', '.join(peers)})",
                "a port holds one cable: correct the cabling record, or move the extra cables to free ports",
                [device, *(p.split(":")[0] for p in peers)],
                [f"{device}:{port}", *peers],
            )
        )
    return out


def _unknown_devices(ctx: RuleContext) -> list[Violation]:
    out = []
    spec = ctx.layout.spec
    for dev in ctx.fabric.devices():
        if ctx.layout.device(dev.name) is not None:
            continue
        why = _unplaceable(dev, spec.rails, spec.aggregation_groups, spec.superspines, bool(spec.dci))
        if why is None:
            continue
        out.append(
            Violation(
                Code.UNKNOWN_DEVICE,
                f"{dev.name} ({dev.role.value}) is not part of the spec '{spec.name}': {why}",
                "remove it from the fabric, rename it to the spec's naming (docs/topology.md), or fix the spec",
                [dev.name],
                [],
                severity="warning",
            )
        )
    return out


def _extra_servers(ctx: RuleContext) -> list[Violation]:
    """Servers a group holds beyond the spec's `servers_per_group`: the ones that are not the spec's own (by name)
    get a check of their own, instead of vanishing into the group and showing only as its oversubscription."""
    spec = ctx.layout.spec
    groups: dict[int, list[Device]] = {}
    for dev in ctx.fabric.devices():
        if dev.role is Role.SERVER and dev.group is not None and dev.group < spec.aggregation_groups:
            groups.setdefault(dev.group, []).append(dev)
    out = []
    for group, servers in sorted(groups.items()):
        if len(servers) <= spec.servers_per_group:
            continue
        foreign = sorted(d.name for d in servers if ctx.layout.device(d.name) is None)
        extra = len(servers) - spec.servers_per_group
        if not foreign:
            continue
        per_group = spec.servers_per_group
        where = f"aggregation group {group} holds {len(servers)} servers where the spec '{spec.name}' has {per_group}"
        if len(servers) - len(foreign) >= spec.servers_per_group:  # the spec's own fill the group: these are extra
            for name in foreign:
                out.append(
                    Violation(
                        Code.UNKNOWN_DEVICE,
                        f"{name} (server) is not part of the spec: {where}, and those are all cabled",
                        "uncable it, or raise servers_per_group in the spec if the group really holds more",
                        [name],
                        [],
                        severity="warning",
                    )
                )
        else:
            out.append(
                Violation(
                    Code.UNKNOWN_DEVICE,
                    f"{extra} of {', '.join(foreign)} (servers) are not part of the spec: {where}",
                    "uncable the servers the group should not hold, or raise servers_per_group in the spec",
                    foreign,
                    [],
                    severity="warning",
                )
            )
    return out


def _unplaceable(dev: Device, rails: int, groups: int, superspines: int, has_dci: bool) -> str | None:
    """Why the spec has no place for this device, or None when its labels fit a slot."""
    if dev.role in (Role.LEAF, Role.SPINE) and dev.rail is None:
        return "its rail is unknown"
    if dev.rail is not None and dev.rail >= rails:
        return f"rail {dev.rail} but the spec has {rails} rails"
    if dev.role in (Role.LEAF, Role.SERVER) and dev.group is None:
        return "its aggregation group is unknown"
    if dev.group is not None and dev.group >= groups:
        return f"group {dev.group} but the spec has {groups} aggregation groups"
    if dev.role is Role.SUPERSPINE and not superspines:
        return "the spec has no superspine tier"
    if dev.role is Role.DR and not has_dci:
        return "the spec has no dci"
    if dev.role is Role.DR:
        return "its name matches no DR of the spec's dci entries"
    return None
