"""Roles of as-built devices whose names do not follow fabricd's naming, inferred from the graph.

Shared by the LLDP and containerlab loaders. A device's role comes, in this order, from what the
source states (containerlab labels), from fabricd naming (`topology.layout.parse_name`), from what the
source implies (an LLDP neighbour on a `nicK` port, a containerlab `linux` node: a server), and only
then from its neighbours, one tier at a time, bottom up:

  leaf        a switch with a server neighbour
  spine       a switch with a leaf neighbour
  dr          a name with a "dr" token (dr-x, site-dr1, DR01) and no server or leaf neighbour
  superspine  a switch with a spine neighbour
  dr          a switch with a superspine or DR neighbour (a DR of a 3-tier fabric, the far end of a DCI link)

Limits: leaves are only found when servers show up as neighbours; in a two-tier fabric a DR whose
name has no "dr" token is taken for a superspine. Name such devices by fabricd naming or give the
cabling as YAML with roles.
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Callable, Iterable

from topology.errors import CablingError
from topology.layout import parse_name
from topology.model import Link, Role

_DR_TOKEN = re.compile(r"(?:^|[^a-z])dr(?:[^a-z]|$)", re.IGNORECASE)

Rule = Callable[[str, set[Role]], bool]

_RULES: list[tuple[Role, Rule]] = [
    (Role.LEAF, lambda _name, near: Role.SERVER in near),
    (Role.SPINE, lambda _name, near: Role.LEAF in near),
    (Role.DR, lambda name, near: bool(_DR_TOKEN.search(name)) and not near & {Role.SERVER, Role.LEAF}),
    (Role.SUPERSPINE, lambda _name, near: Role.SPINE in near),
    (Role.DR, lambda _name, near: bool(near & {Role.SUPERSPINE, Role.DR})),
]


def role_from_name(name: str) -> Role | None:
    parsed = parse_name(name)
    return parsed.role if parsed is not None else None


def site_from_name(name: str, role: Role) -> str | None:
    """The campus of a far-end DR named remote-{DCI}-dr-{D}; None for every device of this campus."""
    parsed = parse_name(name)
    if parsed is not None and parsed.remote and parsed.role is role:
        return parsed.dci
    return None


def infer_roles(
    names: Iterable[str], known: dict[str, Role], links: list[Link], source: str
) -> tuple[dict[str, Role], list[dict[str, object]]]:
    """Every device's role: `known` ones as given, the rest from the graph (one note each).

    Raises CablingError naming a device whose role its neighbours do not tell.
    """
    roles = dict(known)
    neighbours: dict[str, set[str]] = defaultdict(set)
    for link in links:
        neighbours[link.a.device].add(link.b.device)
        neighbours[link.b.device].add(link.a.device)
    unknown = [n for n in names if n not in roles]
    notes: list[dict[str, object]] = []
    for role, rule in _RULES:
        found = [n for n in unknown if rule(n, {roles[m] for m in neighbours[n] if m in roles})]
        for name in found:
            roles[name] = role
            notes.append({"device": name, "field": "role", "value": role.value, "from": "graph"})
        unknown = [n for n in unknown if n not in roles]
    if unknown:
        name = unknown[0]
        near = sorted(neighbours[name])
        seen = ", ".join(f"{m} ({roles[m].value if m in roles else '?'})" for m in near[:5]) or "none"
        more = f" and {len(unknown) - 1} more" if len(unknown) > 1 else ""
        raise CablingError(
            source,
            f"cannot tell the role of '{name}'{more} from its neighbours ({seen}); name it by fabricd naming"
            " (leaf-g{G}-r{R}, spine-r{R}-{S}, ssp-{X}, dr-{DCI}-{D}; docs/topology.md) or load a cabling"
            " YAML file that gives its role",
        )
    return roles, notes
