"""A twin SONiC switch's STATE_DB NEIGH_STATE_TABLE follows bgpmon (sonic-bgpcfgd): empty after a boot, then FRR's
state words as of bgpmon's last read, every 15 s (reference/maintenance-lldp-bgp-state.md); sonic-gnmi serves the
rows keyed by the neighbour's address. Driven by an explicit clock."""

from __future__ import annotations

import json

from lab.bgp import BGPMON_INTERVAL_NS
from lab.faults import FaultInjector
from lab.model import Twin
from lab.sonic_bgp import frr_summary_json
from lab.sonic_gnmi import rows
from tests.conftest import EXAMPLES
from topology.blueprint import generate_blueprint
from topology.fabric import Fabric
from topology.spec import load_spec
from topology.underlay import Underlay
from topology.units import NS

T0 = 1_700_000_000 * NS
FABRIC = Fabric(generate_blueprint(load_spec(EXAMPLES / "small-sonic.yaml")))
LEAF = "leaf-g0-r0"  # SONiC
S = Underlay(FABRIC).sessions(LEAF)[0]


class Clock:
    def __init__(self) -> None:
        self.now = T0

    def __call__(self) -> int:
        return self.now


def table(twin: Twin) -> dict[str, str]:
    sw = twin.switch(LEAF)
    return {path[1]: row["state"] for path, row in rows(twin, sw, "STATE_DB", ["NEIGH_STATE_TABLE", "*"], twin.now)}


def test_neigh_state_table_is_bgpmons_view_every_15_s() -> None:
    clock = Clock()
    twin = Twin(FABRIC, clock=clock)
    faults = FaultInjector(twin)
    assert table(twin) == {}  # bgpmon cleared it at start and has not read FRR yet
    assert twin.bgpmon.tables.keys() == {n for n, sw in twin.switches.items() if sw.platform == "sonic"}
    clock.now += BGPMON_INTERVAL_NS
    twin.advance()
    first = table(twin)
    assert first == {s.peer_address: "Established" for s in Underlay(FABRIC).sessions(LEAF)}
    faults.inject("bgp_down", {"port": str(S.local)})
    clock.now += BGPMON_INTERVAL_NS - NS  # FRR knows at once; STATE_DB only at bgpmon's next read
    twin.advance()
    assert table(twin) == first
    assert json.loads(frr_summary_json(twin, LEAF))["ipv4Unicast"]["peers"][S.peer_address]["state"] == "Active"
    clock.now += NS
    twin.advance()
    assert table(twin)[S.peer_address] == "Active"
    assert sum(v == "Established" for v in table(twin).values()) == len(first) - 1
    one = rows(twin, twin.switch(LEAF), "STATE_DB", ["NEIGH_STATE_TABLE", S.peer_address], twin.now)
    assert one == [(["NEIGH_STATE_TABLE", S.peer_address], {"state": "Active"})]

    faults.inject("reboot", {"device": LEAF, "down_s": 1})
    assert table(twin) == {}  # bgpmon starts again with the switch
    clock.now += BGPMON_INTERVAL_NS
    twin.advance()
    assert table(twin)[S.peer_address] == "Active" and len(table(twin)) == len(first)


def test_frr_summary_json_has_real_bgpds_keys_and_words() -> None:
    """The keys and state words of FRR 8.4's `show bgp summary json` (tests/twin/lab/test_frr_shape.py compares them
    with real bgpd): a session shut in this end's config is "Idle (Admin)" with peerState "Admin"."""
    twin = Twin(FABRIC, clock=Clock())
    got = json.loads(frr_summary_json(twin, LEAF))["ipv4Unicast"]
    peer = got["peers"][S.peer_address]
    assert (peer["remoteAs"], peer["localAs"], peer["state"], peer["peerState"]) == (
        S.peer_asn,
        S.local_asn,
        "Established",
        "OK",
    )
    twin.bgp.set_shut(LEAF, frozenset({S.peer_address}))
    twin.touch()
    twin.advance()
    peer = json.loads(frr_summary_json(twin, LEAF))["ipv4Unicast"]["peers"][S.peer_address]
    assert (peer["state"], peer["peerState"], peer["pfxRcd"]) == ("Idle (Admin)", "Admin", 0)


def test_a_silent_bgpmon_writes_no_row_while_vtysh_answers() -> None:
    """`lab up --sonic-no-neigh-state`: FRR in unified or split mode, where bgpmon writes nothing; FRR's
    `show bgp summary json` still lists every neighbour (what fabricd then reads over SSH)."""
    clock = Clock()
    twin = Twin(FABRIC, clock=clock)
    twin.bgpmon.silent = True
    for _ in range(3):
        clock.now += BGPMON_INTERVAL_NS
        twin.advance()
        assert table(twin) == {}
    peers = json.loads(frr_summary_json(twin, LEAF))["ipv4Unicast"]["peers"]
    assert {a: p["state"] for a, p in peers.items()} == {
        s.peer_address: "Established" for s in Underlay(FABRIC).sessions(LEAF)
    }
