"""What every rule needs: the fabric, the spec's layout, and slot indexes built once."""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field

from topology.fabric import Fabric
from topology.layout import Layout
from topology.model import Device, Link, Role

# A cable at least this long can only be a long-haul (DCI) link; campus cables stay well below.
LONG_HAUL_M = 10_000.0


@dataclass
class RuleContext:
    fabric: Fabric
    layout: Layout
    leaf_at: dict[tuple[int, int], str] = field(default_factory=dict)  # (group, rail) -> leaf
    spines_of_rail: dict[int, list[str]] = field(default_factory=lambda: defaultdict(list))

    @classmethod
    def build(cls, fabric: Fabric, layout: Layout) -> RuleContext:
        ctx = cls(fabric, layout)
        spec = layout.spec
        for d in fabric.devices(Role.LEAF, local_only=True):
            if d.group is not None and d.rail is not None:
                key = (d.group, d.rail)
                # Two devices claiming one slot: prefer the one with the blueprint name.
                if key not in ctx.leaf_at or d.name == layout.leaf_name(*key):
                    ctx.leaf_at[key] = d.name
        for d in fabric.devices(Role.SPINE, local_only=True):
            if d.rail is not None:
                ctx.spines_of_rail[d.rail].append(d.name)
        # Slots with no device at all still expect their blueprint device (its links are missing).
        for g in range(spec.aggregation_groups):
            for r in range(spec.rails):
                ctx.leaf_at.setdefault((g, r), layout.leaf_name(g, r))
        for r in range(spec.rails):
            present = set(ctx.spines_of_rail[r])
            for i in range(spec.spines_per_rail):
                name = layout.spine_name(r, i)
                if name not in present and len(ctx.spines_of_rail[r]) < spec.spines_per_rail:
                    ctx.spines_of_rail[r].append(name)
        return ctx

    def dev(self, name: str) -> Device | None:
        return self.fabric.get(name)

    def expected_speed(self, a: Device, b: Device) -> int | None:
        """The speed the spec gives a link between these two devices, if it gives one."""
        spec = self.layout.spec
        roles = {a.role, b.role}
        if roles == {Role.SERVER, Role.LEAF}:
            return spec.server_link_gbps
        if a.role is Role.DR and b.role is Role.DR:
            dci = self.layout.dci_of(a.name if not a.is_remote else b.name)
            return dci.link_gbps if dci else None
        if roles in (
            {Role.LEAF, Role.SPINE},
            {Role.SPINE, Role.SUPERSPINE},
            {Role.DR, Role.SUPERSPINE},
            {Role.DR, Role.SPINE},
        ):
            return spec.fabric_link_gbps
        return None

    def speed(self, link: Link) -> int:
        """Link speed, or the spec's speed for its class when the as-built does not say (LLDP)."""
        if link.speed_gbps is not None:
            return link.speed_gbps
        a, b = self.dev(link.a.device), self.dev(link.b.device)
        if a is None or b is None:
            return 0
        return self.expected_speed(a, b) or 0

    def is_long_haul(self, link: Link) -> bool:
        a, b = self.dev(link.a.device), self.dev(link.b.device)
        remote = bool((a and a.is_remote) or (b and b.is_remote))
        return remote or (link.length_m is not None and link.length_m >= LONG_HAUL_M)
