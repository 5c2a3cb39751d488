"""EOS BGP show commands of a twin switch over its underlay sessions (lab/bgp.py), in the JSON shapes real EOS returns
and its clients read (reference/platforms.md "BGP underlay"): ANTA's BGP tests read `show bgp summary|neighbors vrf
all`, napalm's get_bgp_neighbors `show ip bgp summary vrf all`, `show ipv6 bgp summary vrf all`, `show ip bgp
neighbors vrf all` and `show ipv6 bgp peers vrf all`. The underlay is IPv4 only: the IPv6 commands answer with the
default VRF and no peer."""

from __future__ import annotations

import ipaddress
from typing import Any

from topology.underlay import Session
from topology.units import NS

from .bgp import HOLD_TIME_S, KEEPALIVE_S, SessionState
from .model import Switch, Twin

Json = dict[str, Any]
PROTO_MODEL = {"configuredProtoModel": "multi-agent", "operatingProtoModel": "multi-agent"}
DROP_STATS = (
    "inDropAsloop", "inDropClusterIdLoop", "inDropMalformedMpbgp", "inDropOrigId", "inDropNhLocal", "inDropNhAfV6",
    "prefixDroppedMartianV4", "prefixDroppedMaxRouteLimitViolatedV4", "prefixDroppedMartianV6",
    "prefixDroppedMaxRouteLimitViolatedV6", "prefixLuDroppedV4", "prefixLuDroppedMartianV4",
    "prefixLuDroppedMaxRouteLimitViolatedV4", "prefixLuDroppedV6", "prefixLuDroppedMartianV6",
    "prefixLuDroppedMaxRouteLimitViolatedV6", "prefixEvpnDroppedUnsupportedRouteType",
    "prefixBgpLsDroppedReceptionUnsupported", "outDropV4LocalAddr", "outDropV6LocalAddr",
    "prefixVpnIpv4DroppedImportMatchFailure", "prefixVpnIpv4DroppedMaxRouteLimitViolated",
    "prefixVpnIpv6DroppedImportMatchFailure", "prefixVpnIpv6DroppedMaxRouteLimitViolated",
    "prefixEvpnDroppedImportMatchFailure", "prefixEvpnDroppedMaxRouteLimitViolated",
    "prefixRtMembershipDroppedLocalAsReject", "prefixRtMembershipDroppedMaxRouteLimitViolated",
)  # fmt: skip


def _speaker(twin: Twin, sw: Switch) -> tuple[str, int]:
    sp = twin.bgp.underlay.speakers[sw.name]
    return sp.router_id, sp.asn


def _messages(st: SessionState, now: int) -> int:
    return st.messages(now)


def _vrf(twin: Twin, sw: Switch, body: Json) -> Json:
    router_id, asn = _speaker(twin, sw)
    return {"vrfs": {"default": {"vrf": "default", "routerId": router_id, "asn": str(asn), **body}}}


def _description(s: Session) -> str:
    return f"{s.peer.device} {s.peer.port}"


def ip_summary(twin: Twin, sw: Switch, now: int, rows: list[int]) -> Json:
    """`show ip bgp summary [vrf all]`: one row of counters per IPv4 peer."""
    peers: Json = {}
    for s, st in twin.bgp.sessions_of(sw.name):
        received = twin.bgp.received(sw.name, s.local.port)
        peers[s.peer_address] = {
            "description": _description(s),
            "version": 4,
            "msgReceived": _messages(st, now),
            "msgSent": _messages(st, now),
            "inMsgQueue": 0,
            "outMsgQueue": 0,
            "asn": str(s.peer_asn),
            "prefixAccepted": received,
            "prefixReceived": received,
            "upDownTime": st.since_ns / NS,
            "underMaintenance": False,
            "peerState": twin.bgp.peer_state(s, st),
        }
    return _vrf(twin, sw, {"peers": peers})


def summary(twin: Twin, sw: Switch, now: int, rows: list[int]) -> Json:
    """`show bgp summary [vrf all]`: the multi-AFI summary, per peer its address families' state."""
    peers: Json = {}
    for s, st in twin.bgp.sessions_of(sw.name):
        received = twin.bgp.received(sw.name, s.local.port)
        peers[s.peer_address] = {
            "description": _description(s),
            "peerState": twin.bgp.peer_state(s, st),
            "peerAsn": str(s.peer_asn),
            "upDownTime": st.since_ns / NS,
            "underMaintenance": False,
            "ipv4Unicast": {
                "afiSafiState": "negotiated" if st.up else "advertised",
                "nlrisReceived": received,
                "nlrisAccepted": received,
            },
        }
    return _vrf(twin, sw, {"peers": peers})


def ipv6_summary(twin: Twin, sw: Switch, now: int, rows: list[int]) -> Json:
    return _vrf(twin, sw, {"peers": {}})


def neighbors(twin: Twin, sw: Switch, now: int, rows: list[int]) -> Json:
    """`show [ip] bgp neighbors [vrf all]`: per peer its state, timers, TCP queues and capabilities."""
    router_id, _ = _speaker(twin, sw)
    peer_list = []
    for s, st in twin.bgp.sessions_of(sw.name):
        state = twin.bgp.peer_state(s, st)
        peer: Json = {
            "peerAddress": s.peer_address,
            "asn": str(s.peer_asn),
            "localAsn": str(s.local_asn),
            "routerId": twin.bgp.underlay.speakers[s.peer.device].router_id if st.up else "0.0.0.0",
            "localRouterId": router_id,
            "vrf": "default",
            "description": _description(s),
            "state": state,
            "lastState": "OpenConfirm" if st.up else "Established",
            "establishedTime": int((now - st.since_ns) / NS) if st.up else 0,
            "establishedTransitions": st.transitions,
            "updownTime": st.since_ns / NS,
            "prefixesReceived": twin.bgp.received(sw.name, s.local.port),
            "prefixesSent": twin.bgp.sent(sw.name, s.local.port),
            "v6PrefixesReceived": 0,
            "v6PrefixesSent": 0,
            "holdTime": HOLD_TIME_S,
            "keepaliveTime": KEEPALIVE_S,
            "configuredHoldTime": HOLD_TIME_S,
            "configuredKeepaliveTime": KEEPALIVE_S,
            "maintenance": False,
            "peerTcpInfo": {
                "state": "ESTABLISHED" if st.up else "CLOSED",
                "inputQueueLength": 0,
                "outputQueueLength": 0,
            },
            "neighborCapabilities": {
                "multiprotocolCaps": {
                    "ipv4Unicast": {"advertised": True, "received": st.up, "enabled": st.up},
                },
                "fourOctetAsnCap": {"advertised": True, "received": st.up, "enabled": st.up},
                "routeRefreshCap": {"advertised": True, "received": st.up, "enabled": st.up},
            },
            # nothing dropped, no malformed update (the twin's sessions exchange clean routes)
            "dropStats": dict.fromkeys(DROP_STATS, 0),
            "peerInUpdateErrors": {
                "inUpdErrWithdraw": 0,
                "inUpdErrIgnore": 0,
                "inUpdErrDisableAfiSafi": 0,
                "disabledAfiSafi": "None",
                "lastUpdErrTime": 0,
            },
        }
        if st.up:
            peer["updateGroupIndex"] = 0
        if state == "Idle":
            peer["idleReason"] = twin.bgp.idle_reason(s, st)
        peer_list.append(peer)
    return {"vrfs": {"default": {"peerList": peer_list}}}


def ipv6_peers(twin: Twin, sw: Switch, now: int, rows: list[int]) -> Json:
    return {"vrfs": {"default": {"peerList": []}}}


# --- CLI text -------------------------------------------------------------------------------------------------------
def _updown(seconds: float) -> str:
    s = int(seconds)
    if s >= 86400:
        return f"{s // 86400}d{(s % 86400) // 3600:02d}h"
    return f"{s // 3600:02d}:{(s % 3600) // 60:02d}:{s % 60:02d}"


def ip_summary_text(data: Json, now: int) -> list[str]:
    out: list[str] = []
    for name, vrf in data["vrfs"].items():
        out += [
            f"BGP summary information for VRF {name}",
            f"Router identifier {vrf['routerId']}, local AS number {vrf['asn']}",
            "Neighbor Status Codes: m - Under maintenance",
            "  Description              Neighbor         V AS           MsgRcvd   MsgSent  InQ OutQ  Up/Down State   "
            "PfxRcd PfxAcc",
        ]
        for addr, p in vrf["peers"].items():
            state = "Estab" if p["peerState"] == "Established" else p["peerState"]
            out.append(
                f"  {p['description'][:24]:<24} {addr:<16} 4 {p['asn']:<12} {p['msgReceived']:>9} {p['msgSent']:>9}"
                f" {p['inMsgQueue']:>4} {p['outMsgQueue']:>4} {_updown(now / NS - p['upDownTime']):>8} {state:<7}"
                f" {p['prefixReceived']:<6} {p['prefixAccepted']}"
            )
    return out


# --- routes -------------------------------------------------------------------------------------------------------
def _route(kind: str, vias: list[Json], preference: int) -> Json:
    return {"routeType": kind, "hardwareProgrammed": True, "kernelProgrammed": True, "routeLeaked": False,
            "directlyConnected": kind == "connected", "preference": preference, "metric": 0, "vias": vias}  # fmt: skip


def route_table(twin: Twin, sw: Switch) -> Json:
    """The default VRF's IPv4 routes: each routed port's /31 (connected), the loopback and server subnet it announces
    (connected), and the BGP routes of lab/bgp.py with their ECMP next hops."""
    routes: Json = {}
    for s in twin.bgp.underlay.sessions(sw.name):
        if bool(sw.oper_up[sw.index[s.local.port]]):
            net = ipaddress.ip_network(f"{s.local_address}/31", strict=False)
            routes[str(net)] = _route("connected", [{"interface": s.local.port, "nexthopAddr": ""}], 0)
    sp = twin.bgp.underlay.speakers.get(sw.name)
    for prefix in sp.originated if sp is not None else ():
        routes[prefix] = _route("connected", [{"interface": "Loopback0" if prefix.endswith("/32") else "Vlan10",
                                               "nexthopAddr": ""}], 0)  # fmt: skip
    for prefix, hops in twin.bgp.rib(sw.name).items():
        if hops and prefix not in routes:
            vias = [{"nexthopAddr": h.peer_address, "interface": h.local.port} for h in hops]
            routes[prefix] = _route("eBGP", vias, 200)
    return dict(sorted(routes.items(), key=lambda kv: ipaddress.ip_network(kv[0])))


def _route_vrf(routes: Json) -> Json:
    return {"routes": routes, "allRoutesProgrammedHardware": True, "allRoutesProgrammedKernel": True,
            "defaultRouteState": "notSet"}  # fmt: skip


def show_route(twin: Twin, sw: Switch, args: list[str]) -> Json | None:
    """`show ip route [vrf all|default|V] [summary | PREFIX | ADDRESS | bgp | connected]`; None if not one of these."""
    vrf = "default"
    if args[:1] == ["vrf"] and len(args) > 1:
        vrf, args = args[1], args[2:]
    known = vrf in ("default", "all")
    table = route_table(twin, sw) if known else {}
    if args == ["summary"]:
        bgp = sum(1 for r in table.values() if r["routeType"] == "eBGP")
        connected = len(table) - bgp
        body = {"totalRoutes": len(table), "connected": connected, "static": 0, "staticPersistent": 0,
                "staticNonPersistent": 0, "vcs": 0, "internal": 0, "dynamicPolicy": 0, "maskLen": {},
                "bgpCounts": {"bgpTotal": bgp, "bgpExternal": bgp, "bgpInternal": 0, "bgpLocal": 0},
                "ospfCounts": {"ospfTotal": 0}, "ospfv3Counts": {"ospfv3Total": 0}, "isisCounts": {"isisTotal": 0},
                "ripCounts": 0, "aggregate": 0}  # fmt: skip
        return {"vrfs": {"default": body} if known else {}, "protoModelStatus": dict(PROTO_MODEL)}
    if args in (["bgp"], ["connected"]):
        want = "eBGP" if args == ["bgp"] else "connected"
        table = {p: r for p, r in table.items() if r["routeType"] == want}
    elif args:
        if len(args) > 1:
            return None
        try:
            target = ipaddress.ip_network(args[0], strict=False)
        except ValueError:
            return None
        matches = [p for p in table if target.subnet_of(ipaddress.ip_network(p))]  # type: ignore[arg-type]
        best = max(matches, key=lambda p: ipaddress.ip_network(p).prefixlen, default=None)
        table = {best: table[best]} if best is not None else {}
    return {"vrfs": {"default": _route_vrf(table)} if known else {}}


def routes_text(data: Json, command: str) -> str:
    """EOS's `show ip route` text: the codes legend, then one line per route and one per further next hop."""
    if "summary" in command.split():
        vrf = data["vrfs"].get("default", {})
        rows = [("connected", vrf.get("connected", 0)), ("static (persistent)", 0), ("ospf", 0),
                ("bgp", vrf.get("bgpCounts", {}).get("bgpTotal", 0)), ("isis", 0)]  # fmt: skip
        lines = ["VRF: default", "   Route Source                                Number Of Routes",
                 "------------------------------------- -------------------------"]  # fmt: skip
        lines += [f"{name:<37} {n:>25}" for name, n in rows]
        lines.append(f"{'Total Routes':<37} {vrf.get('totalRoutes', 0):>25}")
        return "\n".join(lines) + "\n"
    out = ["VRF: default", "Codes: C - connected, S - static, K - kernel,",
           "       B E - eBGP, B I - iBGP, B - Other BGP", "", "Gateway of last resort is not set", ""]  # fmt: skip
    for prefix, r in data["vrfs"].get("default", {}).get("routes", {}).items():
        vias = r["vias"]
        if r["routeType"] == "connected":
            out.append(f" C        {prefix} is directly connected, {vias[0]['interface']}")
            continue
        head = f" B E      {prefix} [{r['preference']}/{r['metric']}]"
        for i, v in enumerate(vias):
            out.append(f"{head if i == 0 else ' ' * len(head)} via {v['nexthopAddr']}, {v['interface']}")
    return "\n".join(out) + "\n"


# --- the BGP table ------------------------------------------------------------------------------------------------
def _path(twin: Twin, s: Session, prefix: str, head: bool) -> Json:
    origin = next(n for n, sp in twin.bgp.underlay.speakers.items() if prefix in sp.originated)
    asns = " ".join(str(a) for a in twin.bgp.as_path(s, origin))
    return {
        "nextHop": s.peer_address, "peerEntry": {"peerAddr": s.peer_address, "peerRouterId": "0.0.0.0"},
        "asPathEntry": {"asPathType": "External", "asPath": f"{asns} i"}, "importedOrigin": "",
        "routeType": {"valid": True, "active": head, "ecmpHead": head, "ecmp": True, "ecmpContributor": True,
                      "origin": "Igp", "stale": False, "suppressed": False, "backup": False, "luRoute": False},
        "localPreference": 100, "med": 0, "weight": 0, "tag": 0, "reasonNotBestpath": None if head else "ecmpPath",
    }  # fmt: skip


def _entries(twin: Twin, rib: dict[str, list[Session]]) -> Json:
    out: Json = {}
    for prefix, hops in sorted(rib.items(), key=lambda kv: ipaddress.ip_network(kv[0])):
        if not hops:
            continue
        net = ipaddress.ip_network(prefix)
        paths = [_path(twin, s, prefix, i == 0) for i, s in enumerate(hops)]
        out[prefix] = {"address": str(net.network_address), "maskLength": net.prefixlen, "totalPaths": len(paths),
                       "totalActivePaths": len(paths), "bgpRoutePaths": paths}  # fmt: skip
    return out


def bgp_table(twin: Twin, sw: Switch, args: list[str]) -> Json | None:
    """`show ip bgp [vrf all|default] [PREFIX]`: the routes BGP learned, every ECMP path with its AS path."""
    if args[:1] == ["vrf"] and len(args) > 1:
        if args[1] not in ("all", "default"):
            return {"vrfs": {}}
        args = args[2:]
    rib = twin.bgp.rib(sw.name)
    if args:
        try:
            want = ipaddress.ip_network(args[0], strict=False)
        except ValueError:
            return None
        rib = {p: h for p, h in rib.items() if want.subnet_of(ipaddress.ip_network(p))}  # type: ignore[arg-type]
    router_id, asn = _speaker(twin, sw)
    return {"vrfs": {"default": {"vrf": "default", "routerId": router_id, "asn": str(asn),
                                 "bgpRouteEntries": _entries(twin, rib)}}}  # fmt: skip


def neighbor_routes(twin: Twin, sw: Switch, args: list[str]) -> Json | None:
    """`show bgp neighbors PEER routes|advertised-routes [vrf V]`: what the session received or sends."""
    if len(args) < 2 or args[1] not in ("routes", "received-routes", "advertised-routes"):
        return None
    got = next(((s, st) for s, st in twin.bgp.sessions_of(sw.name) if s.peer_address == args[0]), None)
    router_id, asn = _speaker(twin, sw)
    if got is None:
        return {"vrfs": {}}
    s, st = got
    if not st.up:
        rib: dict[str, list[Session]] = {}
    elif args[1] == "advertised-routes":
        rib = {p: [s] for p, hops in twin.bgp.rib(sw.name).items() if hops and s not in hops}
        sp = twin.bgp.underlay.speakers[sw.name]
        rib.update({p: [s] for p in sp.originated})
    else:
        rib = {p: [s] for p, hops in twin.bgp.rib(sw.name).items() if s in hops}
    entries = _entries_for(twin, rib, s, args[1] == "advertised-routes")
    return {"vrfs": {"default": {"vrf": "default", "routerId": router_id, "asn": str(asn), "bgpRouteEntries": entries}}}


def _entries_for(twin: Twin, rib: dict[str, list[Session]], s: Session, sent: bool) -> Json:
    """What the session received (its paths as the BGP table holds them), or sent (this end as next hop)."""
    if not sent:
        return _entries(twin, rib)
    out: Json = {}
    for prefix in sorted(rib, key=ipaddress.ip_network):
        net = ipaddress.ip_network(prefix)
        out[prefix] = {"address": str(net.network_address), "maskLength": net.prefixlen, "totalPaths": 1,
                       "bgpRoutePaths": [{"nextHop": s.local_address, "routeType": {"valid": True, "active": True,
                                          "ecmpHead": True, "ecmp": False, "ecmpContributor": False,
                                          "origin": "Igp"}}]}  # fmt: skip
    return out


def instance(twin: Twin, sw: Switch, now: int, rows: list[int]) -> Json:
    """`show bgp instance vrf all`: the instance's settings; nothing redistributed (the twin announces networks)."""
    router_id, asn = _speaker(twin, sw)
    body = {"bgpRouterId": router_id, "bgpAsn": str(asn), "maxEcmpPaths": 64, "maxPaths": 64,
            "afiSafiConfig": {}, "redistributionConfig": {}}  # fmt: skip
    return {"vrfs": {"default": body}}


def neighbors_text(twin: Twin, sw: Switch, now: int) -> str:
    """`show ip bgp neighbors [vrf all]` as EOS prints it (the blocks napalm's get_bgp_neighbors_detail reads)."""
    router_id, _asn = _speaker(twin, sw)
    out: list[str] = []
    for s, st in twin.bgp.sessions_of(sw.name):
        state = twin.bgp.peer_state(s, st)
        peer_id = twin.bgp.underlay.speakers[s.peer.device].router_id if st.up else "0.0.0.0"
        msgs = _messages(st, now)
        sent, received = twin.bgp.sent(sw.name, s.local.port), twin.bgp.received(sw.name, s.local.port)
        since = (now - st.since_ns) / NS
        updown = f"up for {_updown(since)}" if st.up else f"down for {_updown(since)}"
        out += [
            f"BGP neighbor is {s.peer_address}, remote AS {s.peer_asn}, external link",
            f"  Description: {_description(s)}",
            f"  BGP version 4, remote router ID {peer_id}, VRF default",
            "  Negotiated BGP version 4" if st.up else "  Negotiated BGP version 0",
            f"  Hold time is {HOLD_TIME_S}, keepalive interval is {KEEPALIVE_S} seconds",
            f"  Configured hold time is {HOLD_TIME_S}, keepalive interval is {KEEPALIVE_S} seconds",
            f"  BGP state is {state}, {updown}",
            f"  Number of transitions to established: {st.transitions}",
            f"  Last state was {'OpenConfirm' if st.up else 'Established'}",
            f"  Last event was {'RecvKeepAlive' if st.up else 'Stop'}",
            "  Neighbor Capabilities:",
            "    Multiprotocol IPv4 Unicast: advertised and received and negotiated",
            "  Message Statistics:", "    InQ depth is 0", "    OutQ depth is 0",
            "                         Sent      Rcvd",
            f"    Opens:           {1:>10} {1:>9}", f"    Updates:         {2:>10} {2:>9}",
            f"    Keepalives:      {msgs - 3:>10} {msgs - 3:>9}", f"    Total messages:  {msgs:>10} {msgs:>9}",
            "  Prefix Statistics:", "                         Sent      Rcvd",
            f"    IPv4 Unicast:    {sent:>10} {received:>9}", f"    IPv6 Unicast:    {0:>10} {0:>9}",
            "  Inbound route map is none", "  Outbound route map is none",
            f"Local AS is {s.local_asn}, local router ID {router_id}", "TTL is 1",
            f"Local TCP address is {s.local_address}, local port is 179",
            f"Remote TCP address is {s.peer_address}, remote port is {40000 + int(s.peer_address.split('.')[-1])}",
            "Auto-Local-Addr is disabled", "",
        ]  # fmt: skip
    return "\n".join(out) + "\n"
