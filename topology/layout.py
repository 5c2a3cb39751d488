"""The layout a spec implies: device names, labels, port numbering and parallel-link counts.

Names (deterministic functions of the spec; documented in docs/topology.md):
  server      gpu-g{G}-{NNN}        server NNN (zero-padded, at least 3 digits) of aggregation group G
  leaf        leaf-g{G}-r{R}        the rail-R leaf of aggregation group G
  spine       spine-r{R}-{S}        spine S of rail R
  superspine  ssp-{X}
  dr          dr-{DCI}-{D}          DR switch D terminating the long-haul links to campus DCI
  far end     remote-{DCI}-dr-{D}   the other campus's DR (site DCI; not managed by this fabricd)
Ports: servers have nic0..nic{R-1} (nicK is rail K); switches use Ethernet{N}/1, numbered from 1:
  leaf        server s on Ethernet{s+1}/1, then uplinks to spines in spine order (parallel links adjacent)
  spine       leaves in group order, then superspines in order
  superspine  spines in (rail, index) order, then DR switches
  dr          campus-side links in top-tier order, then long-haul links
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from functools import cached_property

from topology.model import Device, Endpoint, Role
from topology.spec import DciSpec, FabricSpec

_LEAF = re.compile(r"^leaf-g(\d+)-r(\d+)$")
_SPINE = re.compile(r"^spine-r(\d+)-(\d+)$")
_SSP = re.compile(r"^ssp-(\d+)$")
_SERVER = re.compile(r"^gpu-g(\d+)-(\d+)$")
_DR = re.compile(r"^dr-(.+)-(\d+)$")
_REMOTE_DR = re.compile(r"^remote-(.+)-dr-(\d+)$")
_NIC = re.compile(r"^nic(\d+)$")


def eth(n: int) -> str:
    return f"Ethernet{n}/1"


def nic_rail(port: str) -> int | None:
    """Rail of a server port named nicK, else None."""
    m = _NIC.match(port)
    return int(m.group(1)) if m else None


@dataclass(frozen=True, slots=True)
class ParsedName:
    role: Role
    rail: int | None = None
    group: int | None = None
    index: int | None = None
    dci: str | None = None
    remote: bool = False


def parse_name(name: str) -> ParsedName | None:
    """Labels encoded in a name that follows fabricd's naming, else None."""
    if m := _SERVER.match(name):
        return ParsedName(Role.SERVER, group=int(m.group(1)), index=int(m.group(2)))
    if m := _LEAF.match(name):
        return ParsedName(Role.LEAF, group=int(m.group(1)), rail=int(m.group(2)))
    if m := _SPINE.match(name):
        return ParsedName(Role.SPINE, rail=int(m.group(1)), index=int(m.group(2)))
    if m := _SSP.match(name):
        return ParsedName(Role.SUPERSPINE, index=int(m.group(1)))
    if m := _REMOTE_DR.match(name):
        return ParsedName(Role.DR, index=int(m.group(2)), dci=m.group(1), remote=True)
    if m := _DR.match(name):
        return ParsedName(Role.DR, index=int(m.group(2)), dci=m.group(1))
    return None


class Layout:
    """Everything the spec says about names, ports and link counts, computed arithmetically."""

    def __init__(self, spec: FabricSpec):
        self.spec = spec
        s = spec
        self._server_width = max(3, len(str(s.servers_per_group - 1)))
        # Parallel links so each tier's down:up capacity ratio stays within the spec's oversubscription.
        leaf_down = s.servers_per_group * s.server_link_gbps
        self.leaf_spine_parallel = math.ceil(leaf_down / s.oversubscription / (s.spines_per_rail * s.fabric_link_gbps))
        spine_down = s.aggregation_groups * self.leaf_spine_parallel * s.fabric_link_gbps
        self.spine_superspine_parallel = (
            math.ceil(spine_down / s.oversubscription / (s.superspines * s.fabric_link_gbps)) if s.superspines else 0
        )
        self._dci_index = {d.name: i for i, d in enumerate(s.dci)}

    # ---- names -------------------------------------------------------------------------------
    def server_name(self, group: int, index: int) -> str:
        return f"gpu-g{group}-{index:0{self._server_width}d}"

    @staticmethod
    def leaf_name(group: int, rail: int) -> str:
        return f"leaf-g{group}-r{rail}"

    @staticmethod
    def spine_name(rail: int, index: int) -> str:
        return f"spine-r{rail}-{index}"

    @staticmethod
    def superspine_name(index: int) -> str:
        return f"ssp-{index}"

    @staticmethod
    def dr_name(dci: str, index: int) -> str:
        return f"dr-{dci}-{index}"

    @staticmethod
    def remote_dr_name(dci: str, index: int) -> str:
        return f"remote-{dci}-dr-{index}"

    # ---- tiers -------------------------------------------------------------------------------
    @cached_property
    def top_tier(self) -> list[str]:
        """The campus tier DR switches attach to: superspines, or every spine in a two-tier fabric."""
        s = self.spec
        if s.superspines:
            return [self.superspine_name(x) for x in range(s.superspines)]
        return [self.spine_name(r, i) for r in range(s.rails) for i in range(s.spines_per_rail)]

    def dr_parallel(self, dci: DciSpec) -> int:
        """Campus-side links per DR per top-tier switch: at least the DR's long-haul capacity (1:1)."""
        need = dci.links_per_dr * dci.link_gbps
        return math.ceil(need / (len(self.top_tier) * self.spec.fabric_link_gbps))

    # ---- the device a name stands for ------------------------------------------------------------
    def device(self, name: str) -> Device | None:
        """The blueprint device of this name (with its labels), or None if the spec has no such device."""
        p = parse_name(name)
        s = self.spec
        if p is None:
            return None
        plat = s.platforms
        if p.role is Role.SERVER:
            assert p.group is not None and p.index is not None
            fits = p.group < s.aggregation_groups and p.index < s.servers_per_group
            if fits and name == self.server_name(p.group, p.index):
                return Device(name, Role.SERVER, group=p.group)
            return None
        if p.role is Role.LEAF:
            assert p.group is not None and p.rail is not None
            if p.group < s.aggregation_groups and p.rail < s.rails and name == self.leaf_name(p.group, p.rail):
                return Device(name, Role.LEAF, rail=p.rail, group=p.group, platform=plat.leaf)
            return None
        if p.role is Role.SPINE:
            assert p.rail is not None and p.index is not None
            if p.rail < s.rails and p.index < s.spines_per_rail and name == self.spine_name(p.rail, p.index):
                return Device(name, Role.SPINE, rail=p.rail, platform=plat.spine)
            return None
        if p.role is Role.SUPERSPINE:
            assert p.index is not None
            if p.index < s.superspines and name == self.superspine_name(p.index):
                return Device(name, Role.SUPERSPINE, platform=plat.superspine)
            return None
        assert p.index is not None and p.dci is not None
        i = self._dci_index.get(p.dci)
        if i is None or p.index >= s.dci[i].dr_switches:
            return None
        if p.remote:
            return Device(name, Role.DR, site=p.dci)
        return Device(name, Role.DR, platform=plat.dr)

    def dci_of(self, dr_name: str) -> DciSpec | None:
        p = parse_name(dr_name)
        if p is None or p.dci is None:
            return None
        i = self._dci_index.get(p.dci)
        return self.spec.dci[i] if i is not None else None

    # ---- ports --------------------------------------------------------------------------------
    def server_leaf_port(self, group: int, index: int, rail: int) -> Endpoint:
        """Where NIC `rail` of server `index` of `group` belongs."""
        return Endpoint(self.leaf_name(group, rail), eth(index + 1))

    def leaf_uplink_port(self, spine_index: int, parallel: int) -> str:
        return eth(self.spec.servers_per_group + 1 + spine_index * self.leaf_spine_parallel + parallel)

    def spine_downlink_port(self, group: int, parallel: int) -> str:
        return eth(group * self.leaf_spine_parallel + parallel + 1)

    def spine_uplink_port(self, superspine: int, parallel: int) -> str:
        base = self.spec.aggregation_groups * self.leaf_spine_parallel
        return eth(base + 1 + superspine * self.spine_superspine_parallel + parallel)

    def superspine_downlink_port(self, rail: int, spine_index: int, parallel: int) -> str:
        k = rail * self.spec.spines_per_rail + spine_index
        return eth(k * self.spine_superspine_parallel + parallel + 1)
