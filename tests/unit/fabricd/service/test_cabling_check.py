"""cabling_check's rules as tables: where LLDP is expected after a repair, and which miscabled finding is about a
port's cable."""

from __future__ import annotations

from typing import Any, cast

import pytest

from fabricd.service.cabling_check import expects_lldp, miscabled_on
from fabricd.service.state.records import StoredFinding
from topology.fabric import Fabric
from topology.model import Endpoint, Role

LEAF = "leaf-g0-r0"
SERVER_PORT = Endpoint(LEAF, "Ethernet1/1")  # faces gpu-g0-000:nic0


def _uplink(fabric: Fabric) -> str:
    """A port of LEAF facing a spine."""
    for lk in fabric.links_of(LEAF):
        here, far = (lk.a, lk.b) if lk.a.device == LEAF else (lk.b, lk.a)
        if fabric.device(far.device).role is Role.SPINE:
            return here.port
    raise AssertionError("no uplink")


@pytest.mark.parametrize(
    ("heard", "port", "expected"),
    [
        ({"Ethernet1/1"}, "Ethernet1/1", True),  # the port's own neighbour was heard
        ({"Ethernet2/1"}, "Ethernet1/1", True),  # another server port speaks LLDP: servers here run it
        (set(), "Ethernet1/1", False),  # the switch streams no LLDP at all
        ({"UPLINK"}, "Ethernet1/1", False),  # only spines heard: hosts may not run lldpd
        ({"Ethernet2/1"}, "UPLINK", False),  # only hosts heard, not the spines (no LLDP stream for uplinks)
    ],
)
def test_expects_lldp(small_fabric: Fabric, heard: set[str], port: str, expected: bool) -> None:
    up = _uplink(small_fabric)
    heard = {up if p == "UPLINK" else p for p in heard}
    assert expects_lldp(small_fabric, Endpoint(LEAF, up if port == "UPLINK" else port), heard) is expected


def _finding(**kw: Any) -> StoredFinding:
    base = {"id": 7, "kind": "miscabled", "status": "active", "ports": [], "evidence": {"lldp": {}}, "summary": "s"}
    return cast(StoredFinding, {**base, **kw})


@pytest.mark.parametrize(
    ("finding", "about"),
    [
        (_finding(ports=[str(SERVER_PORT)]), True),  # names the port
        (_finding(evidence={"lldp": {str(SERVER_PORT): "gpu-g1-000:nic0"}}), True),  # LLDP on it hears another
        (_finding(evidence={"lldp": {"leaf-g0-r1:Ethernet1/1": "gpu-g0-000:nic0"}}), True),  # its cable elsewhere
        (_finding(evidence={"lldp": {"leaf-g0-r1:Ethernet1/1": "gpu-g0-001:nic1"}}), False),  # someone else's
        (_finding(ports=[str(SERVER_PORT)], status="cleared"), False),  # cleared: the cable is right again
        (_finding(ports=[str(SERVER_PORT)], kind="link_flap"), False),
        (_finding(evidence={"lldp": "garbled"}), False),
    ],
)
def test_miscabled_on(small_fabric: Fabric, finding: StoredFinding, about: bool) -> None:
    got = miscabled_on(small_fabric, SERVER_PORT, [finding])
    assert (got is finding) if about else got is None
