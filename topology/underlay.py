"""The routed underlay a rail-optimized Clos runs: eBGP on every switch-to-switch link (RFC 7938).

A pure function of the fabric, so the twin and anything that renders it agree without talking:
- ASNs (RFC 7938 section 5.2: private ASNs, one per spine tier, one per leaf): superspines share 65000; the spines of
  rail r share 65100 + r (each rail is its own plane); the DR switches of the k-th DCI share 65200 + k and the far
  campus's DRs 65300 + k; every leaf has its own 4-byte private ASN 4200000000 + i (4-byte so that any number of
  leaves fits; RFC 6996 reserves 4200000000-4294967294).
- One /31 per link, in link order from 10.0.0.0 up; the upper tier's end takes the even address. Router ids (and
  loopbacks) from 10.255.0.0 up in device order.
- What each switch originates: its loopback /32, and a leaf also its servers' /24.
"""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass
from functools import cached_property

from topology.fabric import Fabric
from topology.model import TIER, Device, Endpoint, Link, Role

SUPERSPINE_ASN = 65000
SPINE_ASN_BASE = 65100
DR_ASN_BASE = 65200
REMOTE_ASN_BASE = 65300
LEAF_ASN_BASE = 4_200_000_000
LINK_BASE = ipaddress.IPv4Address("10.0.0.0")
ROUTER_ID_BASE = ipaddress.IPv4Address("10.255.0.0")
SERVER_NET_BASE = ipaddress.IPv4Address("172.16.0.0")


@dataclass(frozen=True, slots=True)
class Session:
    """One eBGP session, as one end (`local`) sees it."""

    local: Endpoint
    peer: Endpoint
    local_address: str
    peer_address: str
    local_asn: int
    peer_asn: int


@dataclass(frozen=True, slots=True)
class Speaker:
    device: str
    asn: int
    router_id: str
    originated: tuple[str, ...]  # the prefixes it announces


class Underlay:
    """The eBGP underlay of `fabric`: speakers (every switch, this campus and the far ends of DCI links) and one
    session per switch-to-switch link, seen from both ends."""

    def __init__(self, fabric: Fabric) -> None:
        self.fabric = fabric
        switches = sorted((d for d in fabric.devices() if d.is_switch), key=lambda d: d.name)
        dcis = sorted({d.site for d in switches if d.site is not None})
        leaves = sorted(d.name for d in switches if d.role is Role.LEAF and not d.is_remote)
        self.speakers: dict[str, Speaker] = {}
        for i, d in enumerate(switches):
            asn = _asn(d, leaves, dcis, fabric)
            prefixes = [f"{ROUTER_ID_BASE + i}/32"]
            if d.role is Role.LEAF and not d.is_remote:
                prefixes.append(f"{SERVER_NET_BASE + 256 * leaves.index(d.name)}/24")
            self.speakers[d.name] = Speaker(d.name, asn, str(ROUTER_ID_BASE + i), tuple(prefixes))
        links = [lk for lk in fabric.links if lk.a.device in self.speakers and lk.b.device in self.speakers]
        links.sort(key=lambda lk: tuple(sorted((str(lk.a), str(lk.b)))))
        self._by_port: dict[tuple[str, str], Session] = {}
        self.links: list[Link] = links
        for i, link in enumerate(links):
            upper, lower = _ends(link, fabric)
            even, odd = str(LINK_BASE + 2 * i), str(LINK_BASE + 2 * i + 1)
            for here, there, mine, theirs in ((upper, lower, even, odd), (lower, upper, odd, even)):
                self._by_port[(here.device, here.port)] = Session(
                    here, there, mine, theirs, self.speakers[here.device].asn, self.speakers[there.device].asn
                )

    def session(self, device: str, port: str) -> Session | None:
        """The session on a port (None for a port facing a server)."""
        return self._by_port.get((device, port))

    @cached_property
    def _sessions_by_device(self) -> dict[str, list[Session]]:
        out: dict[str, list[Session]] = {}
        for (d, _), s in self._by_port.items():
            out.setdefault(d, []).append(s)
        return out

    def sessions(self, device: str) -> list[Session]:
        """The sessions of `device`, in port order of the fabric."""
        return self._sessions_by_device.get(device, [])


def _asn(d: Device, leaves: list[str], dcis: list[str], fabric: Fabric) -> int:
    if d.is_remote:
        return REMOTE_ASN_BASE + dcis.index(d.site or "")
    if d.role is Role.SUPERSPINE:
        return SUPERSPINE_ASN
    if d.role is Role.SPINE:
        return SPINE_ASN_BASE + (d.rail or 0)
    if d.role is Role.DR:
        far = {fabric.device(p.device).site for lk in fabric.links_of(d.name) for p in (lk.a, lk.b)}
        sites = sorted(s for s in far if s is not None)
        return DR_ASN_BASE + (dcis.index(sites[0]) if sites else 0)
    return LEAF_ASN_BASE + leaves.index(d.name)


def _ends(link: Link, fabric: Fabric) -> tuple[Endpoint, Endpoint]:
    """(upper tier end, lower tier end); between equals (a DCI link) this campus's end is the upper."""
    a, b = fabric.device(link.a.device), fabric.device(link.b.device)
    if (TIER[a.role], not a.is_remote) >= (TIER[b.role], not b.is_remote):
        return link.a, link.b
    return link.b, link.a
