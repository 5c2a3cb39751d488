"""Switch tiers: leaf-spine full mesh inside each rail, spine-superspine mesh, DR attachment,
parallel-link counts and capacity ratios."""

from __future__ import annotations

from collections import Counter

from topology.layout import nic_rail, parse_name
from topology.model import Device, Link, Role
from topology.rules.context import RuleContext
from topology.rules.violation import Code, Violation


def check_mesh(ctx: RuleContext) -> list[Violation]:
    out: list[Violation] = []
    out.extend(_leaf_spine(ctx))
    out.extend(_spine_superspine(ctx))
    out.extend(_dr(ctx))
    out.extend(_oversubscription(ctx))
    return out


def _count_to(ctx: RuleContext, device: str, role: Role) -> tuple[Counter[str], list[tuple[Link, Device]]]:
    """Links from `device` to devices of `role`: count per neighbour, and each (link, neighbour)."""
    counts: Counter[str] = Counter()
    pairs = []
    for link in ctx.fabric.links_of(device):
        far = ctx.dev(link.other(device).device)
        if far is not None and far.role is role:
            counts[far.name] += 1
            pairs.append((link, far))
    return counts, pairs


def _leaf_spine(ctx: RuleContext) -> list[Violation]:
    out = []
    lay = ctx.layout
    need = lay.leaf_spine_parallel
    for (group, rail), leaf in sorted(ctx.leaf_at.items()):
        counts, pairs = _count_to(ctx, leaf, Role.SPINE)
        blueprint = lay.device(leaf) is not None
        missing: list[tuple[str, int]] = []  # (spine, how many links short)
        for spine in ctx.spines_of_rail.get(rail, []):
            short = need - counts.get(spine, 0)
            if short > 0:
                missing.append((spine, short))
        cross = [(link, sp) for link, sp in pairs if sp.rail is not None and sp.rail != rail]
        # A cross-rail cable's fix is the spine of its own rail that lacks a link: pair them up.
        for link, sp in cross:
            near = link.a if link.a.device == leaf else link.b
            if missing:
                spine, short = missing[0]
                missing[0] = (spine, short - 1)
                if missing[0][1] == 0:
                    missing.pop(0)
                target = spine
                ports = _expected_pair_ports(ctx, leaf, spine, group, blueprint)
                where = f"{target}:{ports[1]}" if ports else target
            else:
                where = f"a spine of rail {rail}"
            out.append(
                Violation(
                    Code.CROSS_RAIL_UPLINK,
                    f"{near} (rail {rail} leaf) goes to {link.other(leaf, near.port)}, a spine of rail {sp.rail}",
                    f"move the cable from {link.other(leaf, near.port)} to {where}",
                    [leaf, sp.name] + ([where.split(":")[0]] if ":" in where else []),
                    [str(near), str(link.other(leaf, near.port))],
                )
            )
        for spine, short in missing:
            have = need - short
            ends = _missing_ends(ctx, leaf, spine, group, rail, blueprint, short)
            out.append(
                Violation(
                    Code.MISSING_LINK,
                    f"{leaf} has {have} of {need} links to {spine}"
                    + (f" (missing {', '.join(f'{a} - {b}' for a, b in ends)})" if ends else ""),
                    (
                        f"cable {', '.join(f'{a} to {b}' for a, b in ends)}"
                        if ends
                        else f"add {short} link(s) between {leaf} and {spine}"
                    )
                    + " (leaf-spine full mesh inside each rail)",
                    [leaf, spine],
                    [p for pair in ends for p in pair],
                )
            )
    return out


def _expected_pair_ports(
    ctx: RuleContext, leaf: str, spine: str, group: int, blueprint: bool
) -> tuple[str, str] | None:
    free = _free_blueprint_ports(ctx, leaf, spine, group, blueprint)
    return free[0] if free else None


def _free_blueprint_ports(
    ctx: RuleContext, leaf: str, spine: str, group: int, blueprint: bool
) -> list[tuple[str, str]]:
    """The blueprint's (leaf port, spine port) pairs between these two that no link uses yet."""
    lay = ctx.layout
    sp = ctx.layout.device(spine)
    if not blueprint or sp is None:
        return []
    parsed = parse_name(spine)
    assert parsed is not None and parsed.index is not None
    out = []
    for p in range(lay.leaf_spine_parallel):
        lp, spp = lay.leaf_uplink_port(parsed.index, p), lay.spine_downlink_port(group, p)
        if ctx.fabric.link_of(leaf, lp) is None or ctx.fabric.link_of(spine, spp) is None:
            out.append((lp, spp))
    return out


def _missing_ends(
    ctx: RuleContext, leaf: str, spine: str, group: int, rail: int, blueprint: bool, short: int
) -> list[tuple[str, str]]:
    free = _free_blueprint_ports(ctx, leaf, spine, group, blueprint)
    return [(f"{leaf}:{lp}", f"{spine}:{sp}") for lp, sp in free[:short]]


def _spine_superspine(ctx: RuleContext) -> list[Violation]:
    out: list[Violation] = []
    lay, spec = ctx.layout, ctx.layout.spec
    if not spec.superspines:
        return out
    need = lay.spine_superspine_parallel
    ssps = [d.name for d in ctx.fabric.devices(Role.SUPERSPINE, local_only=True)]
    for x in range(spec.superspines):
        name = lay.superspine_name(x)
        if name not in ssps:
            ssps.append(name)
    for rail in range(spec.rails):
        for spine in ctx.spines_of_rail.get(rail, []):
            counts, _ = _count_to(ctx, spine, Role.SUPERSPINE)
            for ssp in ssps:
                have = counts.get(ssp, 0)
                if have < need:
                    out.append(
                        Violation(
                            Code.MISSING_LINK,
                            f"{spine} has {have} of {need} links to {ssp}",
                            f"add {need - have} link(s) between {spine} and {ssp} (spine-superspine full mesh)",
                            [spine, ssp],
                            [],
                        )
                    )
    return out


def _dr(ctx: RuleContext) -> list[Violation]:
    out = []
    lay = ctx.layout
    top = lay.top_tier
    for dci in lay.spec.dci:
        need_up = lay.dr_parallel(dci)
        for d in range(dci.dr_switches):
            dr = lay.dr_name(dci.name, d)
            counts: Counter[str] = Counter()
            long_haul = 0
            for link in ctx.fabric.links_of(dr):
                far = ctx.dev(link.other(dr).device)
                if far is None:
                    continue
                if ctx.is_long_haul(link):
                    long_haul += 1
                else:
                    counts[far.name] += 1
            for t in top:
                if counts.get(t, 0) < need_up:
                    out.append(
                        Violation(
                            Code.MISSING_LINK,
                            f"{dr} has {counts.get(t, 0)} of {need_up} links to {t}",
                            f"add {need_up - counts.get(t, 0)} link(s) between {dr} and {t}",
                            [dr, t],
                            [],
                        )
                    )
            if long_haul < dci.links_per_dr:
                out.append(
                    Violation(
                        Code.MISSING_LINK,
                        f"{dr} has {long_haul} of {dci.links_per_dr} long-haul links to {dci.name}",
                        f"add {dci.links_per_dr - long_haul} long-haul link(s) on {dr} (each with length_m)",
                        [dr, lay.remote_dr_name(dci.name, d)],
                        [],
                    )
                )
    return out


def _oversubscription(ctx: RuleContext) -> list[Violation]:
    out = []
    spec = ctx.layout.spec
    limit = spec.oversubscription
    checks: list[tuple[Role, Role, Role]] = [(Role.LEAF, Role.SERVER, Role.SPINE)]
    if spec.superspines:
        checks.append((Role.SPINE, Role.LEAF, Role.SUPERSPINE))
    for role, down_role, up_role in checks:
        for dev in ctx.fabric.devices(role, local_only=True):
            down = up = 0
            for link in ctx.fabric.links_of(dev.name):
                far = ctx.dev(link.other(dev.name).device)
                if far is None:
                    continue
                if far.role is down_role:
                    # A miscabled server NIC is reported (and fixed) on its own; it does not count here.
                    if down_role is Role.SERVER and not _belongs(dev, far, link):
                        continue
                    down += ctx.speed(link)
                elif far.role is up_role:
                    up += ctx.speed(link)
            if down == 0:
                continue
            ratio = down / up if up else float("inf")
            if ratio > limit * (1 + 1e-9):
                need_up = down / limit
                lacking = need_up - up
                out.append(
                    Violation(
                        Code.OVERSUBSCRIBED,
                        f"{dev.name}: {down / 1000:g} Tb/s down, {up / 1000:g} Tb/s up "
                        f"({'no uplinks' if not up else f'{ratio:.2f}:1'}); the spec allows {limit:g}:1",
                        f"add {lacking / 1000:g} Tb/s of uplinks to {up_role.value}s"
                        f" (about {int(-(-lacking // spec.fabric_link_gbps))} x {spec.fabric_link_gbps}G)",
                        [dev.name],
                        [],
                    )
                )
    return out


def _belongs(leaf: Device, server: Device, link: Link) -> bool:
    rail = nic_rail(link.other(leaf.name).port)
    return rail == leaf.rail and server.group == leaf.group
