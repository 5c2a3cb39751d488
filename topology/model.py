"""Plain data types of the fabric: devices, endpoints, links and a cabling (devices + links)."""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum


class Role(StrEnum):
    SERVER = "server"
    LEAF = "leaf"
    SPINE = "spine"
    SUPERSPINE = "superspine"
    DR = "dr"


SWITCH_ROLES = frozenset({Role.LEAF, Role.SPINE, Role.SUPERSPINE, Role.DR})
# Tier of each role in the up-down order of the Clos; a DR hangs off the top campus tier.
TIER = {Role.SERVER: 0, Role.LEAF: 1, Role.SPINE: 2, Role.SUPERSPINE: 3, Role.DR: 4}


@dataclass(frozen=True, slots=True)
class Device:
    name: str
    role: Role
    rail: int | None = None
    group: int | None = None
    platform: str | None = None
    # None: this campus. A name: the device is at another campus (far end of a DCI link); not ours to manage.
    site: str | None = None

    @property
    def is_switch(self) -> bool:
        return self.role in SWITCH_ROLES

    @property
    def is_remote(self) -> bool:
        return self.site is not None

    def to_dict(self) -> dict[str, object]:
        out: dict[str, object] = {"name": self.name, "role": self.role.value}
        if self.rail is not None:
            out["rail"] = self.rail
        if self.group is not None:
            out["group"] = self.group
        if self.platform is not None:
            out["platform"] = self.platform
        if self.site is not None:
            out["site"] = self.site
        return out


@dataclass(frozen=True, slots=True)
class Endpoint:
    device: str
    port: str

    def __str__(self) -> str:
        return f"{self.device}:{self.port}"


@dataclass(frozen=True, slots=True)
class Link:
    a: Endpoint
    b: Endpoint
    speed_gbps: int | None = None
    length_m: float | None = None

    def other(self, device: str, port: str | None = None) -> Endpoint:
        """The far end of the link as seen from `device` (and `port`, for a link that loops back)."""
        if self.a.device == device and (port is None or self.a.port == port):
            return self.b
        return self.a

    def to_dict(self) -> dict[str, object]:
        out: dict[str, object] = {
            "a": {"device": self.a.device, "port": self.a.port},
            "b": {"device": self.b.device, "port": self.b.port},
        }
        if self.speed_gbps is not None:
            out["speed_gbps"] = self.speed_gbps
        if self.length_m is not None:
            out["length_m"] = int(self.length_m) if float(self.length_m).is_integer() else self.length_m
        return out


@dataclass(slots=True)
class Cabling:
    """Devices and links as a blueprint lists them or as they were found (the as-built)."""

    devices: list[Device]
    links: list[Link]
    source: str = "<memory>"
    # How missing labels were filled in, e.g. {"device": "leaf-a", "field": "rail", "value": 3, "from": "graph"}.
    inferred: list[dict[str, object]] = field(default_factory=list)

    def to_dict(self) -> dict[str, object]:
        return {
            "devices": [d.to_dict() for d in self.devices],
            "links": [link.to_dict() for link in self.links],
        }
