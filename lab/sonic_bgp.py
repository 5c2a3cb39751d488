"""A SONiC switch's BGP as its operators read it: SONiC runs FRR's bgpd, so `vtysh -c 'show ip bgp summary'` prints
FRR's own table, and `show ip bgp summary` (sonic-utilities) prints the same session data with its columns
(reference/platforms.md: Neighbor, V, AS, MsgRcvd, MsgSent, TblVer, InQ, OutQ, Up/Down, State/PfxRcd, NeighborName).
The text follows what real FRR 8.4 bgpd prints (tests/twin/lab/test_frr_shape.py runs it in two network namespaces
and compares): a number under State/PfxRcd means Established with that many prefixes, else the state's name
("Active", "Idle", "Idle (Admin)" for a session shut in the config)."""

from __future__ import annotations

import json
from typing import Any

from topology.underlay import Session
from topology.units import NS

from .bgp import SessionState
from .model import Twin

FRR_COLUMNS = "Neighbor        V         AS   MsgRcvd   MsgSent   TblVer  InQ OutQ  Up/Down State/PfxRcd   PfxSnt Desc"


def _updown(seconds: float) -> str:
    """FRR's peer_uptime: hh:mm:ss under a day, then XdYYh, then XwYdZZh."""
    s = max(0, int(seconds))
    if s < 86400:
        return f"{s // 3600:02d}:{(s % 3600) // 60:02d}:{s % 60:02d}"
    if s < 7 * 86400:
        return f"{s // 86400}d{(s % 86400) // 3600:02d}h"
    return f"{s // (7 * 86400)}w{(s % (7 * 86400)) // 86400}d{(s % 86400) // 3600:02d}h"


def _state(twin: Twin, s: Session, st: SessionState) -> str | None:
    """FRR's state word, None when Established (the column then holds the prefix count)."""
    if st.up:
        return None
    state = twin.bgp.peer_state(s, st)
    return "Idle (Admin)" if state == "Idle" and twin.bgp.shut_here(s) else state


def _rows(twin: Twin, device: str, now: int) -> list[tuple[Session, SessionState, int, str]]:
    out = []
    for s, st in twin.bgp.sessions_of(device):
        msgs = st.messages(now)
        out.append((s, st, msgs, _updown((now - st.since_ns) / NS)))
    return out


def _header(twin: Twin, device: str, title: str) -> list[str]:
    sp = twin.bgp.underlay.speakers[device]
    rows = twin.bgp.sessions_of(device)
    rib = sum(twin.bgp.received(device, s.local.port) for s, _ in rows) + len(sp.originated)
    return [
        "",
        title,
        f"BGP router identifier {sp.router_id}, local AS number {sp.asn} vrf-id 0",
        f"BGP table version {twin.bgp.version + len(sp.originated)}",
        f"RIB entries {rib}, using {rib * 192} bytes of memory",
        f"Peers {len(rows)}, using {len(rows) * 724} KiB of memory",
    ]


def frr_summary(twin: Twin, device: str) -> str:
    """`vtysh -c 'show ip bgp summary'`: FRR's text."""
    now = twin.clock()
    lines = _header(twin, device, "IPv4 Unicast Summary (VRF default):")
    lines += [
        "",
        "Neighbor        V         AS   MsgRcvd   MsgSent   TblVer  InQ OutQ  Up/Down State/PfxRcd   PfxSnt Desc",
    ]
    for s, st, msgs, updown in _rows(twin, device, now):
        state = _state(twin, s, st)
        received = str(twin.bgp.received(device, s.local.port)) if state is None else state
        sent = twin.bgp.sent(device, s.local.port)
        lines.append(
            f"{s.peer_address:<15} 4 {s.peer_asn:>10} {msgs:>9} {msgs:>9} {0:>8} {0:>4} {0:>4} {updown:>8} "
            f"{received:>12} {sent:>8} {s.peer.device}"
        )
    lines += ["", f"Total number of neighbors {len(twin.bgp.sessions_of(device))}"]
    return "\n".join(lines) + "\n"


def show_summary(twin: Twin, device: str) -> str:
    """`show ip bgp summary` (sonic-utilities): FRR's header, then its own table with the neighbour's name."""
    now = twin.clock()
    lines = _header(twin, device, "IPv4 Unicast Summary:")
    lines += ["Peer groups 0, using 0 bytes of memory", "", ""]
    headers = ["Neighbor", "V", "AS", "MsgRcvd", "MsgSent", "TblVer", "InQ", "OutQ", "Up/Down", "State/PfxRcd",
               "NeighborName"]  # fmt: skip
    rows = []
    for s, st, msgs, updown in _rows(twin, device, now):
        state = _state(twin, s, st)
        received = str(twin.bgp.received(device, s.local.port)) if state is None else state
        rows.append([s.peer_address, "4", str(s.peer_asn), str(msgs), str(msgs), "0", "0", "0", updown, received,
                     s.peer.device])  # fmt: skip
    widths = [max([len(h), *(len(r[i]) for r in rows)]) for i, h in enumerate(headers)]
    lines.append("  ".join(h.ljust(w) for h, w in zip(headers, widths, strict=True)).rstrip())
    lines.append("  ".join("-" * w for w in widths))
    lines += ["  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() for r in rows]
    lines += ["", f"Total number of neighbors {len(rows)}"]
    return "\n".join(lines) + "\n"


def frr_summary_json(twin: Twin, device: str) -> str:
    """`vtysh -c 'show bgp summary json'`: FRR 8.4's object (what bgpmon reads, and the source where STATE_DB is
    empty); its keys and state words are real bgpd's (tests/twin/lab/test_frr_shape.py)."""
    now = twin.clock()
    sp = twin.bgp.underlay.speakers[device]
    rows = twin.bgp.sessions_of(device)
    rib = sum(twin.bgp.received(device, s.local.port) for s, _ in rows) + len(sp.originated)
    peers: dict[str, Any] = {}
    for s, st in rows:
        msgs = st.messages(now)
        state = twin.bgp.frr_state(s, st)
        up_ms = max(0, (now - st.since_ns) // 1_000_000)
        peers[s.peer_address] = {
            "hostname": s.peer.device, "remoteAs": s.peer_asn, "localAs": s.local_asn, "version": 4,
            "msgRcvd": msgs, "msgSent": msgs, "tableVersion": 0, "outq": 0, "inq": 0,
            "peerUptime": _updown(up_ms / 1000), "peerUptimeMsec": up_ms,
            "peerUptimeEstablishedEpoch": st.since_ns // NS,
            "pfxRcd": twin.bgp.received(device, s.local.port), "pfxSnt": twin.bgp.sent(device, s.local.port),
            "state": state, "peerState": "Admin" if state == "Idle (Admin)" else "OK",
            "connectionsEstablished": st.transitions, "connectionsDropped": st.transitions - (1 if st.up else 0),
            "desc": s.peer.device, "idType": "ipv4",
        }  # fmt: skip
    failed = sum(1 for _, st in rows if not st.up)
    body = {
        "routerId": sp.router_id, "as": sp.asn, "vrfId": 0, "vrfName": "default",
        "tableVersion": twin.bgp.version + len(sp.originated), "ribCount": rib, "ribMemory": rib * 192,
        "peerCount": len(rows), "peerMemory": len(rows) * 741464, "peers": peers, "failedPeers": failed,
        "displayedPeers": len(rows), "totalPeers": len(rows), "dynamicPeers": 0,
        "bestPath": {"multiPathRelax": "false"},
    }  # fmt: skip
    return json.dumps({"ipv4Unicast": body}, indent=2) + "\n"


def show_summary_of(frr: dict[str, Any]) -> str:
    """`show ip bgp summary` (sonic-utilities) from FRR's own `show bgp summary json` (the real daemons')."""
    peers = frr.get("peers", {})
    lines = ["", "IPv4 Unicast Summary:",
             f"BGP router identifier {frr.get('routerId', '')}, local AS number {frr.get('as', '')} vrf-id 0",
             f"BGP table version {frr.get('tableVersion', 0)}",
             f"RIB entries {frr.get('ribCount', 0)}, using {frr.get('ribMemory', 0)} bytes of memory",
             f"Peers {len(peers)}, using {frr.get('peerMemory', 0) // 1024} KiB of memory",
             "Peer groups 0, using 0 bytes of memory", "", ""]  # fmt: skip
    headers = ["Neighbor", "V", "AS", "MsgRcvd", "MsgSent", "TblVer", "InQ", "OutQ", "Up/Down", "State/PfxRcd",
               "NeighborName"]  # fmt: skip
    rows = []
    for address, p in peers.items():
        state = str(p.get("state", ""))
        got = str(p.get("pfxRcd", 0)) if state == "Established" else state
        name = str(p.get("desc", p.get("hostname", "")))
        rows.append([address, "4", str(p.get("remoteAs", "")), str(p.get("msgRcvd", 0)), str(p.get("msgSent", 0)),
                     "0", "0", "0", str(p.get("peerUptime", "")), got, name])  # fmt: skip
    widths = [max([len(h), *(len(r[i]) for r in rows)]) for i, h in enumerate(headers)]
    lines.append("  ".join(h.ljust(w) for h, w in zip(headers, widths, strict=True)).rstrip())
    lines.append("  ".join("-" * w for w in widths))
    lines += ["  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() for r in rows]
    lines += ["", f"Total number of neighbors {len(rows)}"]
    return "\n".join(lines) + "\n"
