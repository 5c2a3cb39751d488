"""A BGP session's drain policy, as both platforms write it (EOS's config and FRR's, which SONiC runs): a route map
that tags what is advertised with RFC 8326's GRACEFUL_SHUTDOWN community and prepends the switch's own AS, so a peer
de-prefers that session's paths whether or not it honours the community
(/work/shared/reference/maintenance-lldp-bgp-state.md: receivers must be configured to act on 65535:0; a longer AS
path drops the session out of an eBGP multipath set by itself)."""

from __future__ import annotations

DRAIN_MAP = "FABRICD-DRAIN"
GRACEFUL_SHUTDOWN = "65535:0"  # RFC 8326 section 3
PREPEND = 3  # times the own AS is prepended: longer than any other path through the fabric's tiers


def drain_route_map(asn: int) -> list[str]:
    """The route map's lines (its entry, then its sets), the same in EOS and FRR."""
    return [
        f"route-map {DRAIN_MAP} permit 10",
        f"set community {GRACEFUL_SHUTDOWN} additive",
        "set as-path prepend " + " ".join([str(asn)] * PREPEND),
    ]


def drain_map_used_by_others(running: str, peer_address: str) -> bool:
    """Whether another BGP neighbour than `peer_address` still sends through the drain route map (the running
    config's `neighbor X route-map FABRICD-DRAIN out` lines, EOS's and FRR's alike)."""
    for line in running.splitlines():
        w = line.split()
        if len(w) == 5 and w[0] == "neighbor" and w[2] == "route-map" and w[3] == DRAIN_MAP and w[1] != peer_address:
            return True
    return False
