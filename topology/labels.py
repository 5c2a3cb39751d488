"""Fill in missing labels (rail, aggregation group) from the spec's naming, then from the graph.

Cabling files carry labels; LLDP tables and foreign containerlab files usually do not. Every label
filled in is recorded in `Cabling.inferred` with where it came from, so a report can say so.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from dataclasses import replace

from topology.layout import nic_rail, parse_name
from topology.model import Cabling, Device, Role


def _majority(values: list[int]) -> int | None:
    if not values:
        return None
    return Counter(values).most_common(1)[0][0]


def complete_labels(cabling: Cabling) -> Cabling:
    """A copy of the cabling whose leaves, spines and servers carry rail/group wherever it can be inferred."""
    devices = {d.name: d for d in cabling.devices}
    notes: list[dict[str, object]] = list(cabling.inferred)

    def set_label(name: str, field: str, value: int, source: str) -> None:
        dev = devices[name]
        devices[name] = replace(dev, rail=value) if field == "rail" else replace(dev, group=value)
        notes.append({"device": name, "field": field, "value": value, "from": source})

    wants = {Role.LEAF: ("rail", "group"), Role.SPINE: ("rail",), Role.SERVER: ("group",)}
    # 1. from names that follow fabricd's naming
    for name, dev in list(devices.items()):
        fields = wants.get(dev.role, ())
        parsed = parse_name(name) if fields else None
        if parsed is None or parsed.role is not dev.role:
            continue
        for field in fields:
            value = getattr(parsed, field)
            if getattr(dev, field) is None and value is not None:
                set_label(name, field, value, "name")

    def lacking(dev: Device) -> bool:
        return any(getattr(dev, f) is None for f in wants.get(dev.role, ()))

    if not any(lacking(d) for d in devices.values()):
        return _with_notes(cabling, devices, notes)

    # 2. from the graph: a leaf's rail is the NIC index most of its servers use on it; its group the group
    # most of those servers are in; a spine's rail is the rail of most of its leaves; a server's group
    # is the group of most of its leaves.
    nic_rails: dict[str, list[int]] = defaultdict(list)
    leaf_servers: dict[str, list[str]] = defaultdict(list)
    server_leaves: dict[str, list[str]] = defaultdict(list)
    spine_leaves: dict[str, list[str]] = defaultdict(list)
    for link in cabling.links:
        for near, far in ((link.a, link.b), (link.b, link.a)):
            dn, df = devices.get(near.device), devices.get(far.device)
            if dn is None or df is None:
                continue
            if dn.role is Role.LEAF and df.role is Role.SERVER:
                rail = nic_rail(far.port)
                if rail is not None:
                    nic_rails[dn.name].append(rail)
                leaf_servers[dn.name].append(df.name)
                server_leaves[df.name].append(dn.name)
            elif dn.role is Role.SPINE and df.role is Role.LEAF:
                spine_leaves[dn.name].append(df.name)

    def infer(name: str, field: str, candidates: list[int | None]) -> None:
        value = _majority([v for v in candidates if v is not None])
        if value is not None:
            set_label(name, field, value, "graph")

    for name, dev in list(devices.items()):
        if dev.role is Role.LEAF and dev.rail is None:
            infer(name, "rail", list(nic_rails.get(name, [])))
    for name, dev in list(devices.items()):
        if dev.role is Role.LEAF and dev.group is None:
            infer(name, "group", [devices[s].group for s in leaf_servers.get(name, [])])
    for name, dev in list(devices.items()):
        if dev.role is Role.SERVER and dev.group is None:
            infer(name, "group", [devices[lf].group for lf in server_leaves.get(name, [])])
    # A leaf whose servers had no group yet can take it from them now.
    for name, dev in list(devices.items()):
        if dev.role is Role.LEAF and dev.group is None:
            infer(name, "group", [devices[s].group for s in leaf_servers.get(name, [])])
    for name, dev in list(devices.items()):
        if dev.role is Role.SPINE and dev.rail is None:
            infer(name, "rail", [devices[lf].rail for lf in spine_leaves.get(name, [])])

    return _with_notes(cabling, devices, notes)


def _with_notes(cabling: Cabling, devices: dict[str, Device], notes: list[dict[str, object]]) -> Cabling:
    if len(notes) == len(cabling.inferred):
        return cabling
    ordered = [devices[d.name] for d in cabling.devices]
    return Cabling(ordered, cabling.links, cabling.source, notes)
