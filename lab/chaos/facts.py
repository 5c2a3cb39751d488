"""What the chaos schedule and the checker know of a fabric: its blueprint, as named ports (`device:port`)."""

from __future__ import annotations

from dataclasses import dataclass, field

from topology.fabric import Fabric
from topology.model import TIER, Link, Role
from topology.underlay import Underlay


@dataclass(frozen=True)
class FabricFacts:
    name: str
    switches: tuple[str, ...]
    server_ports: tuple[str, ...]  # leaf ports facing a server NIC
    uplinks: tuple[str, ...]  # switch-to-switch links, named by their lower-tier end
    nics: tuple[str, ...]  # server:nicK, where a storm starts
    peer: dict[str, str]  # every cabled switch port -> the blueprint's far end
    rail: dict[str, int | None]  # switch -> rail
    uplinks_of: dict[str, tuple[str, ...]]  # switch -> its ports toward a higher tier
    speed: dict[str, float]  # port -> Gb/s
    cycles: tuple[tuple[str, ...], ...]  # leaf, spine, leaf, spine: a cycle a pfc_deadlock can pause
    # "switch peer-address" -> switch:port: where the blueprint's underlay (topology/underlay.py) puts each eBGP
    # session, so a BGP summary that names a peer only by its address is read onto its port
    bgp_port: dict[str, str] = field(default_factory=dict)

    @staticmethod
    def of(fabric: Fabric, name: str) -> FabricFacts:
        switches = sorted(d.name for d in fabric.switches())
        server_ports: list[str] = []
        uplinks: list[str] = []
        nics: list[str] = []
        peer: dict[str, str] = {}
        speed: dict[str, float] = {}
        up_of: dict[str, list[str]] = {s: [] for s in switches}
        for link in fabric.links:
            da, db = fabric.get(link.a.device), fabric.get(link.b.device)
            if da is None or db is None or da.is_remote or db.is_remote:
                continue
            for ep, other in ((link.a, link.b), (link.b, link.a)):
                peer[str(ep)] = str(other)
                speed[str(ep)] = float(link.speed_gbps or 1)
            lower, upper = (link.a, link.b) if TIER[da.role] <= TIER[db.role] else (link.b, link.a)
            if fabric.device(lower.device).role is Role.SERVER:
                server_ports.append(str(upper))
                nics.append(str(lower))
            else:
                uplinks.append(str(lower))
                if TIER[fabric.device(upper.device).role] > TIER[fabric.device(lower.device).role]:
                    up_of[lower.device].append(str(lower))
        rail = {s: fabric.device(s).rail for s in switches}
        underlay = Underlay(fabric)
        bgp_port = {f"{s} {x.peer_address}": str(x.local) for s in switches for x in underlay.sessions(s)}
        return FabricFacts(
            name,
            tuple(switches),
            tuple(sorted(server_ports)),
            tuple(sorted(uplinks)),
            tuple(sorted(nics)),
            peer,
            rail,
            {s: tuple(sorted(p)) for s, p in up_of.items()},
            speed,
            _cycles(fabric),
            bgp_port,
        )

    def is_switch_port(self, port: str) -> bool:
        return port.split(":", 1)[0] in self.rail


def _cycles(fabric: Fabric) -> tuple[tuple[str, ...], ...]:
    """Leaf -> spine -> leaf -> spine -> back: every such square of one rail (two leaves, two spines)."""
    out = []
    spines_of: dict[str, set[str]] = {}
    for leaf in fabric.devices(Role.LEAF):
        links = fabric.links_of(leaf.name)
        spines_of[leaf.name] = {
            ln.other(leaf.name).device for ln in links if _role(fabric, ln, leaf.name) is Role.SPINE
        }
    leaves = sorted(spines_of)
    for i, a in enumerate(leaves):
        for b in leaves[i + 1 :]:
            common = sorted(spines_of[a] & spines_of[b])
            if len(common) >= 2:
                out.append((a, common[0], b, common[1]))
    return tuple(out)


def _role(fabric: Fabric, link: Link, device: str) -> Role:
    return fabric.device(link.other(device).device).role
