"""Spec -> complete cabling (devices + links): the blueprint every as-built is compared with."""

from __future__ import annotations

from topology.layout import Layout, eth
from topology.model import Cabling, Device, Endpoint, Link, Role
from topology.spec import FabricSpec


def generate_blueprint(spec: FabricSpec) -> Cabling:
    """Every device and cable the spec implies, with deterministic names and port numbers (see layout)."""
    lay = Layout(spec)
    s = spec
    devices: list[Device] = []
    links: list[Link] = []
    add_link = links.append
    cab = s.cable_m

    spine_names = [[lay.spine_name(r, i) for i in range(s.spines_per_rail)] for r in range(s.rails)]
    # Port strings repeat across thousands of switches: build each once and share it.
    eth_cache = [eth(n) for n in range(0, 4097)]

    def port(n: int) -> str:
        return eth_cache[n] if n < len(eth_cache) else eth(n)

    nics = [f"nic{k}" for k in range(s.rails)]

    for g in range(s.aggregation_groups):
        leaves = [lay.leaf_name(g, r) for r in range(s.rails)]
        devices.extend(Device(leaves[r], Role.LEAF, rail=r, group=g, platform=s.platforms.leaf) for r in range(s.rails))
        for i in range(s.servers_per_group):
            server = lay.server_name(g, i)
            devices.append(Device(server, Role.SERVER, group=g))
            leaf_port = port(i + 1)
            for r in range(s.rails):
                add_link(
                    Link(
                        Endpoint(server, nics[r]),
                        Endpoint(leaves[r], leaf_port),
                        s.server_link_gbps,
                        cab.server,
                    )
                )

    par = lay.leaf_spine_parallel
    up_base = s.servers_per_group + 1
    for r in range(s.rails):
        for i in range(s.spines_per_rail):
            devices.append(Device(spine_names[r][i], Role.SPINE, rail=r, platform=s.platforms.spine))
        for g in range(s.aggregation_groups):
            leaf = lay.leaf_name(g, r)
            for i, spine in enumerate(spine_names[r]):
                for p in range(par):
                    add_link(
                        Link(
                            Endpoint(leaf, port(up_base + i * par + p)),
                            Endpoint(spine, port(g * par + p + 1)),
                            s.fabric_link_gbps,
                            cab.leaf_spine,
                        )
                    )

    # Next free port on each top-tier switch, for the DR links after the fabric links.
    next_port: dict[str, int] = {}
    if s.superspines:
        pss = lay.spine_superspine_parallel
        spine_up_base = s.aggregation_groups * par + 1
        for x in range(s.superspines):
            ssp = lay.superspine_name(x)
            devices.append(Device(ssp, Role.SUPERSPINE, platform=s.platforms.superspine))
            for r in range(s.rails):
                for i, spine in enumerate(spine_names[r]):
                    k = r * s.spines_per_rail + i
                    for q in range(pss):
                        add_link(
                            Link(
                                Endpoint(spine, port(spine_up_base + x * pss + q)),
                                Endpoint(ssp, port(k * pss + q + 1)),
                                s.fabric_link_gbps,
                                cab.spine_superspine,
                            )
                        )
            next_port[ssp] = s.rails * s.spines_per_rail * pss + 1
    else:
        for row in spine_names:
            for spine in row:
                next_port[spine] = s.aggregation_groups * par + 1

    top = lay.top_tier
    for dci in s.dci:
        pdr = lay.dr_parallel(dci)
        for d in range(dci.dr_switches):
            dr = lay.dr_name(dci.name, d)
            remote = lay.remote_dr_name(dci.name, d)
            devices.append(Device(dr, Role.DR, platform=s.platforms.dr))
            devices.append(Device(remote, Role.DR, site=dci.name))
            n = 1
            for t in top:
                for _ in range(pdr):
                    add_link(Link(Endpoint(dr, port(n)), Endpoint(t, port(next_port[t])), s.fabric_link_gbps, cab.dr))
                    next_port[t] += 1
                    n += 1
            for ln in range(dci.links_per_dr):
                add_link(
                    Link(
                        Endpoint(dr, port(n + ln)),
                        Endpoint(remote, port(ln + 1)),
                        dci.link_gbps,
                        dci.distance_km * 1000.0,
                    )
                )
    return Cabling(devices=devices, links=links, source=f"blueprint of {s.name}")
