"""Link classes from the topology: server (leaf-NIC), fabric (switch-switch in a campus), dci (long haul)."""

from __future__ import annotations

from enum import StrEnum

from topology.model import Device, Link, Role

# A cable at least this long can only be long haul; campus cables stay well below (same rule as validate).
LONG_HAUL_M = 10_000.0


class LinkClass(StrEnum):
    SERVER = "server"
    FABRIC = "fabric"
    DCI = "dci"


def link_class(link: Link, a: Device, b: Device) -> LinkClass:
    if a.is_remote or b.is_remote or (link.length_m is not None and link.length_m >= LONG_HAUL_M):
        return LinkClass.DCI
    if Role.SERVER in (a.role, b.role):
        return LinkClass.SERVER
    return LinkClass.FABRIC
