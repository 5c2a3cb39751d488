"""Is the cable on a port the blueprint's, before and after a repair brings it back? Pure rules over what LLDP and the
miscabled detector say; remediation (the enable's check) and remediation/requests.py (resolve) ask them.

A port held down hears no LLDP (IEEE 802.1AB deletes a neighbour when its port stops being operational), so the
cable a technician put in is known only once the port is up again and the peer's first LLDPDU arrived. Before that,
the miscabled detector may already have seen where the port's own cable went: another port hears the neighbour that
belongs on this one. After it, a repair is confirmed only by a fresh LLDP sample, when the port is one LLDP is
expected on.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable

from fabricd.detectors.miscabled import KIND as MISCABLED
from topology.fabric import Fabric
from topology.model import Endpoint

from .state.records import StoredFinding


def expects_lldp(fabric: Fabric, ep: Endpoint, heard_ports: Collection[str]) -> bool:
    """Whether a neighbour should be heard on `ep` once it is up: the switch streams LLDP for the port, or for
    another of its ports whose blueprint neighbour has the same role (a port held down since before fabricd
    started has no LLDP of its own yet; its kin show that such neighbours speak LLDP here). A port whose kind of
    neighbour never spoke LLDP (hosts without lldpd) cannot be judged."""
    if ep.port in heard_ports:
        return True
    want = fabric.peer(ep.device, ep.port)
    if want is None or want.device not in fabric:
        return False
    role = fabric.device(want.device).role
    for port in heard_ports:
        peer = fabric.peer(ep.device, port)
        if peer is not None and peer.device in fabric and fabric.device(peer.device).role is role:
            return True
    return False


def miscabled_on(fabric: Fabric, ep: Endpoint, findings: Iterable[StoredFinding]) -> StoredFinding | None:
    """An active miscabled finding about the cable of `ep`: it names the port, or LLDP elsewhere hears the
    neighbour the blueprint puts on it (its cable went to another port); None if there is none."""
    want = fabric.peer(ep.device, ep.port)
    for f in findings:
        if f.get("kind") != MISCABLED or f.get("status", "active") != "active":
            continue
        if str(ep) in f.get("ports", []):
            return f
        heard = f.get("evidence", {}).get("lldp", {})
        if not isinstance(heard, dict):
            continue
        if str(ep) in heard or (want is not None and str(want) in {str(v) for v in heard.values()}):
            return f
    return None
