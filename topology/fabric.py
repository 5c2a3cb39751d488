"""The Fabric: a networkx multigraph of devices and links with typed accessors and ECMP paths."""

from __future__ import annotations

import itertools
from collections import defaultdict

import networkx as nx

from topology.errors import FabricdError
from topology.model import TIER, Cabling, Device, Endpoint, Link, Role


class Fabric:
    """Devices and links of one fabric (blueprint or as-built).

    `graph` is a networkx MultiGraph: nodes are device names with attribute `device` (a Device),
    edges carry `link` (a Link); parallel cables are parallel edges. Ports are indexed so that
    "which link is on device:port" is a dict lookup, not a graph scan.
    """

    def __init__(self, cabling: Cabling):
        self.cabling = cabling
        self._devices: dict[str, Device] = {d.name: d for d in cabling.devices}
        # A port carrying more than one link is a cabling fault (PORT_REUSE), so keep them all.
        self._port_links: dict[tuple[str, str], list[Link]] = {}
        self._device_links: dict[str, list[Link]] = defaultdict(list)
        for link in cabling.links:
            for ep in (link.a, link.b):
                self._port_links.setdefault((ep.device, ep.port), []).append(link)
            self._device_links[link.a.device].append(link)
            if link.b.device != link.a.device:
                self._device_links[link.b.device].append(link)
        self._graph: nx.MultiGraph | None = None

    # ---- graph ---------------------------------------------------------------------------------
    @property
    def graph(self) -> nx.MultiGraph:
        """The networkx view (built on first use; rule checks work from the indexes instead)."""
        if self._graph is None:
            g = nx.MultiGraph()
            g.add_nodes_from((name, {"device": dev}) for name, dev in self._devices.items())
            g.add_edges_from((ln.a.device, ln.b.device, {"link": ln}) for ln in self.cabling.links)
            self._graph = g
        return self._graph

    # ---- devices -------------------------------------------------------------------------------
    def __contains__(self, name: object) -> bool:
        return name in self._devices

    def __len__(self) -> int:
        return len(self._devices)

    def device(self, name: str) -> Device:
        try:
            return self._devices[name]
        except KeyError:
            raise FabricdError(f"unknown device '{name}'; check the name against the cabling") from None

    def get(self, name: str) -> Device | None:
        return self._devices.get(name)

    def devices(
        self,
        role: Role | str | None = None,
        *,
        rail: int | None = None,
        group: int | None = None,
        local_only: bool = False,
    ) -> list[Device]:
        """Devices filtered by role, rail and aggregation group, in cabling order."""
        r = Role(role) if role is not None else None
        return [
            d
            for d in self._devices.values()
            if (r is None or d.role is r)
            and (rail is None or d.rail == rail)
            and (group is None or d.group == group)
            and not (local_only and d.is_remote)
        ]

    def switches(self) -> list[Device]:
        return [d for d in self._devices.values() if d.is_switch and not d.is_remote]

    # ---- links ---------------------------------------------------------------------------------
    @property
    def links(self) -> list[Link]:
        return self.cabling.links

    def links_of(self, device: str) -> list[Link]:
        return self._device_links.get(device, [])

    def links_on_port(self, device: str, port: str) -> list[Link]:
        return self._port_links.get((device, port), [])

    def link_of(self, device: str, port: str) -> Link | None:
        """The link on device:port (the first, if the port is wrongly reused)."""
        found = self._port_links.get((device, port))
        return found[0] if found else None

    def reused_ports(self) -> list[tuple[str, str, list[Link]]]:
        """(device, port, links) for every port that more than one link claims."""
        return [(d, p, links) for (d, p), links in self._port_links.items() if len(links) > 1]

    def peer(self, device: str, port: str) -> Endpoint | None:
        link = self.link_of(device, port)
        return link.other(device, port) if link else None

    def ports(self, device: str) -> list[str]:
        out = []
        for link in self.links_of(device):
            for ep in (link.a, link.b):
                if ep.device == device:
                    out.append(ep.port)
        return out

    def neighbors(self, device: str) -> list[str]:
        """Distinct neighbour device names, in port order of first appearance."""
        seen: dict[str, None] = {}
        for link in self.links_of(device):
            seen.setdefault(link.other(device).device, None)
        return list(seen)

    # ---- paths ---------------------------------------------------------------------------------
    def _switch_graph(self) -> nx.Graph:
        """Campus switches only (servers and remote devices are never transit), one edge per pair."""
        g = nx.Graph()
        for link in self.cabling.links:
            da, db = self._devices.get(link.a.device), self._devices.get(link.b.device)
            if da and db and da.is_switch and db.is_switch and not da.is_remote and not db.is_remote:
                g.add_edge(da.name, db.name)
        return g

    def ecmp_paths(self, src: str, dst: str, limit: int = 1024) -> list[list[str]]:
        """Switch hop lists of the equal-cost up-down paths between two server NICs ("server:nicK").

        Only valley-free paths count (up the tiers, then down), as a Clos routes; at most `limit`.
        """
        a, b = (self._nic_leaf(x) for x in (src, dst))
        if a == b:
            return [[a]]
        g = self._switch_graph()
        if a not in g or b not in g:
            return []
        paths: list[list[str]] = []
        try:
            for path in nx.all_shortest_paths(g, a, b):
                if self._valley_free(path):
                    paths.append(path)
                    if len(paths) >= limit:
                        break
        except nx.NetworkXNoPath:
            return []
        return paths

    def _valley_free(self, path: list[str]) -> bool:
        tiers = [TIER[self._devices[n].role] for n in path]
        going_down = False
        for x, y in itertools.pairwise(tiers):
            if y < x:
                going_down = True
            elif going_down or y == x:
                return False
        return True

    def _nic_leaf(self, nic: str) -> str:
        device, _, port = nic.partition(":")
        if not port:
            raise FabricdError(f"'{nic}': name a server NIC as server:nicK")
        link = self.link_of(device, port)
        if link is None:
            raise FabricdError(f"'{nic}' is not cabled in this fabric")
        return link.other(device, port).device
