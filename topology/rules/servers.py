"""Server cabling: NIC k on the rail-k leaf of the server's aggregation group, every NIC cabled.

A misplaced cable is paired with the cable that sits where it belongs, so two swapped cables
come out as one violation whose fix says "swap them", naming both leaf ports.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass

from topology.layout import nic_rail, parse_name
from topology.model import Device, Endpoint, Role
from topology.rules.context import RuleContext
from topology.rules.violation import Code, Violation


@dataclass(frozen=True, slots=True)
class Misplaced:
    nic: Endpoint  # server:nicK
    group: int  # the server's aggregation group
    actual: Endpoint  # leaf:port it is on
    actual_leaf: Device
    want_leaf: str  # the leaf it belongs on
    want: Endpoint | None  # and the port, when the server follows the blueprint

    @property
    def rail(self) -> int:
        r = nic_rail(self.nic.port)
        assert r is not None
        return r


def check_servers(ctx: RuleContext) -> list[Violation]:
    out: list[Violation] = []
    spec = ctx.layout.spec
    misplaced: list[Misplaced] = []
    for server in ctx.fabric.devices(Role.SERVER, local_only=True):
        in_blueprint = ctx.layout.device(server.name) is not None
        index = _server_index(ctx, server) if in_blueprint else None
        cabled: set[int] = set()
        for link in ctx.fabric.links_of(server.name):
            near = link.a if link.a.device == server.name else link.b
            far = link.other(server.name, near.port)
            rail = nic_rail(near.port)
            if rail is None:
                continue  # not a NIC port
            cabled.add(rail)
            leaf = ctx.dev(far.device)
            if leaf is None or leaf.role is not Role.LEAF:
                continue  # cabled, but not to a leaf: TIER_VIOLATION says where it belongs
            group = server.group
            if group is None or (leaf.rail == rail and leaf.group == group):
                continue
            want_leaf = ctx.leaf_at.get((group, rail), ctx.layout.leaf_name(group, rail))
            want = ctx.layout.server_leaf_port(group, index, rail) if index is not None else None
            if want is not None and want.device != want_leaf:
                want = None  # the slot's leaf is not named as the blueprint says: only the leaf is known
            misplaced.append(Misplaced(near, group, far, leaf, want_leaf, want))
        if server.group is None:
            continue
        for rail in range(spec.rails):
            if rail in cabled:
                continue
            nic = Endpoint(server.name, f"nic{rail}")
            want_leaf = ctx.leaf_at.get((server.group, rail), ctx.layout.leaf_name(server.group, rail))
            where = str(ctx.layout.server_leaf_port(server.group, index, rail)) if index is not None else want_leaf
            out.append(
                Violation(
                    Code.MISSING_LINK,
                    f"{nic} is not cabled",
                    f"cable {nic} to {where}",
                    [server.name, want_leaf],
                    [str(nic)] + ([where] if index is not None else []),
                )
            )
    out.extend(_missing_servers(ctx))
    out.extend(_report_misplaced(ctx, misplaced))
    return out


def nic_home(ctx: RuleContext, server: Device, rail: int) -> str | None:
    """Where server NIC `rail` belongs: leaf:port for blueprint servers, the leaf otherwise."""
    if server.group is None:
        return None
    index = _server_index(ctx, server) if ctx.layout.device(server.name) is not None else None
    if index is not None:
        return str(ctx.layout.server_leaf_port(server.group, index, rail))
    return ctx.leaf_at.get((server.group, rail))


def _server_index(ctx: RuleContext, server: Device) -> int | None:
    p = parse_name(server.name)
    return p.index if p is not None else None


def _missing_servers(ctx: RuleContext) -> list[Violation]:
    """Servers of the spec that the cabling does not list at all."""
    out = []
    spec, lay = ctx.layout.spec, ctx.layout
    for g in range(spec.aggregation_groups):
        for i in range(spec.servers_per_group):
            name = lay.server_name(g, i)
            if name in ctx.fabric:
                continue
            ports = [str(lay.server_leaf_port(g, i, r)) for r in range(spec.rails)]
            out.append(
                Violation(
                    Code.MISSING_LINK,
                    f"server {name} has no cabled NIC (absent from the cabling)",
                    f"cable nic0..nic{spec.rails - 1} of {name} to {ports[0]} .. {ports[-1]}"
                    " (one rail leaf each), or check that its name follows the spec",
                    [name],
                    ports,
                )
            )
    return out


def _code(m: Misplaced) -> Code:
    return Code.RAIL_MISMATCH if m.actual_leaf.rail != m.rail else Code.GROUP_SPLIT


def _describe(ctx: RuleContext, m: Misplaced) -> str:
    leaf = m.actual_leaf
    if leaf.rail != m.rail:
        return f"{m.nic} (rail {m.rail}) is on {m.actual}, a rail-{leaf.rail} leaf"
    return f"{m.nic} is on {m.actual}, a leaf of group {leaf.group}, but its server is in group {m.group}"


def _report_misplaced(ctx: RuleContext, misplaced: list[Misplaced]) -> list[Violation]:
    out = []
    # Cables sitting on leaf X that want leaf Y, by (X, Y); exact port matches pair first.
    by_move: dict[tuple[str, str], list[Misplaced]] = defaultdict(list)
    for m in misplaced:
        by_move[(m.actual.device, m.want_leaf)].append(m)
    paired: set[int] = set()
    for m in misplaced:
        if id(m) in paired:
            continue
        back = [c for c in by_move.get((m.want_leaf, m.actual.device), []) if id(c) not in paired]
        if not back:
            continue
        exact = [c for c in back if c.actual == m.want and m.actual == c.want]
        partner = (exact or back)[0]
        paired.update((id(m), id(partner)))
        out.append(
            Violation(
                _code(m) if _code(m) is _code(partner) else Code.RAIL_MISMATCH,
                f"cables swapped: {_describe(ctx, m)}; {_describe(ctx, partner)}",
                f"swap the cables on {m.actual} and {partner.actual}",
                _unique([m.nic.device, partner.nic.device, m.actual.device, partner.actual.device]),
                [str(m.actual), str(partner.actual), str(m.nic), str(partner.nic)],
            )
        )
    for m in misplaced:
        if id(m) in paired:
            continue
        if m.want is not None:
            occupant = ctx.fabric.peer(m.want.device, m.want.port)
            taken = f" (it now holds {occupant}: move that cable first)" if occupant else " (that port is free)"
            fix = f"move the cable from {m.actual} to {m.want}{taken}"
            ports = [str(m.actual), str(m.nic), str(m.want)]
        else:
            fix = f"move the cable from {m.actual} to a free port on {m.want_leaf}"
            ports = [str(m.actual), str(m.nic)]
        out.append(
            Violation(
                _code(m),
                _describe(ctx, m) + f"; it belongs on {m.want_leaf}",
                fix,
                _unique([m.nic.device, m.actual.device, m.want_leaf]),
                ports,
            )
        )
    return out


def _unique(items: list[str]) -> list[str]:
    return list(dict.fromkeys(items))
