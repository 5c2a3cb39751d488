"""Servers by aggregation group and the rail leaves of each group, in a stable order (shared by exports)."""

from __future__ import annotations

import re

from topology.fabric import Fabric
from topology.layout import parse_name
from topology.model import Device, Role

_DIGITS = re.compile(r"(\d+)")


def natural_key(name: str) -> tuple[tuple[int, int | str], ...]:
    """Sort key that orders embedded numbers numerically (gpu-g2 before gpu-g10)."""
    return tuple((0, int(p)) if p.isdigit() else (1, p) for p in _DIGITS.split(name) if p)


def server_key(server: Device) -> tuple[int, int, tuple[tuple[int, int | str], ...]]:
    """Server index from fabricd's naming first (gpu-gG-NNN), then a natural name order."""
    parsed = parse_name(server.name)
    if parsed is not None and parsed.role is Role.SERVER and parsed.index is not None:
        return (0, parsed.index, natural_key(server.name))
    return (1, 0, natural_key(server.name))


def servers_by_group(fabric: Fabric) -> tuple[dict[int, list[Device]], list[Device]]:
    """({group: servers in index order}, servers without a group label), groups in ascending order."""
    grouped: dict[int, list[Device]] = {}
    ungrouped: list[Device] = []
    for server in fabric.devices(Role.SERVER):
        if server.group is None:
            ungrouped.append(server)
        else:
            grouped.setdefault(server.group, []).append(server)
    ordered = {g: sorted(grouped[g], key=server_key) for g in sorted(grouped)}
    return ordered, sorted(ungrouped, key=server_key)


def group_leaves(fabric: Fabric, group: int) -> list[str]:
    """Names of the leaves labelled with this group, in rail order."""
    leaves = fabric.devices(Role.LEAF, group=group)
    return [d.name for d in sorted(leaves, key=lambda d: (d.rail is None, d.rail or 0, natural_key(d.name)))]
