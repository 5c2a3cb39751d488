"""EOS BGP show commands of a twin switch over its underlay sessions (lab/bgp.py), in the JSON shapes real EOS returns
and its clients read (reference/platforms.md "BGP underlay"): ANTA's BGP tests read `show bgp summary|neighbors vrf
all`, napalm's get_bgp_neighbors `show ip bgp summary vrf all`, `show ipv6 bgp summary vrf all`, `show ip bgp
neighbors vrf all` and `show ipv6 bgp peers vrf all`. The underlay is IPv4 only: the IPv6 commands answer with the
default VRF and no peer."""

from __future__ import annotations

from typing import Any

from topology.underlay import Session
from topology.units import NS

from .bgp import HOLD_TIME_S, KEEPALIVE_S, SessionState
from .model import Switch, Twin

Json = dict[str, Any]
_MSG_BASE = 4  # OPEN, KEEPALIVE, UPDATE, End-of-RIB: what a session exchanges before its keepalives


def _speaker(twin: Twin, sw: Switch) -> tuple[str, int]:
    sp = twin.bgp.underlay.speakers[sw.name]
    return sp.router_id, sp.asn


def _messages(st: SessionState, now: int) -> int:
    return _MSG_BASE + max(0, now - st.since_ns) // (KEEPALIVE_S * NS) if st.up else _MSG_BASE


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
