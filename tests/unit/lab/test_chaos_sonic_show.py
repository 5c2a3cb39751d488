"""The chaos checker's SONiC reading (lab/chaos/sonic_show.py) as tables: sonic-utilities' show text in, the
checker's PortObs out, on the blueprint of examples/small-sonic.yaml (leaf-g0-r0: Ethernet1/1 and 2/1 face servers,
Ethernet3/1 spine-r0-0 over 10.0.0.0/31, Ethernet4/1 spine-r0-1 over 10.0.0.2/31)."""

from __future__ import annotations

import pytest

from lab.chaos.facts import FabricFacts
from lab.chaos.history import PortObs
from lab.chaos.observe import parse_ports
from lab.chaos.sonic_show import Names, blueprint_names, parse_sonic_ports, table, with_aliases
from tests.conftest import DATA, EXAMPLES
from topology.blueprint import generate_blueprint
from topology.fabric import Fabric
from topology.spec import load_spec

FACTS = FabricFacts.of(Fabric(generate_blueprint(load_spec(EXAMPLES / "small-sonic.yaml"))), "small-sonic")
LEAF = "leaf-g0-r0"
MARK = "[fabricd: down a12 t7 link_flap]"

# intfutil's description view: tabulate "simple", right-aligned, N/A where PORT_TABLE has no description
DESC = f"""\
  Interface    Oper    Admin    Alias                       Description
-----------  ------  -------  -------  --------------------------------
  Ethernet0      up       up     etp1                               N/A
  Ethernet8    down     down     etp2  {MARK}
 Ethernet16      up       up     etp3                  to spine r0 0 up
 Ethernet24    down       up     etp4                               N/A
 Ethernet32      up       up     etp5                               N/A
"""
LLDP = """\
Capability codes: (R) Router, (B) Bridge, (O) Other
LocalPort   RemoteDevice  RemotePortID  Capability  RemotePortDescr
----------  ------------  ------------  ----------  ---------------
Ethernet0   gpu-g0-000    nic0          O           nic0
Ethernet16  spine-r0-0    Ethernet1/1   BR          Ethernet1/1
--------------------------------------------------
Total entries displayed:  2
"""
BGP = """\

IPv4 Unicast Summary:
BGP router identifier 10.255.0.0, local AS number 4200000000 vrf-id 0
BGP table version 2
RIB entries 10, using 1920 bytes of memory
Peers 2, using 1448 KiB of memory
Peer groups 0, using 0 bytes of memory


Neighbor  V  AS     MsgRcvd  MsgSent  TblVer  InQ  OutQ  Up/Down   State/PfxRcd  NeighborName
--------  -  -----  -------  -------  ------  ---  ----  --------  ------------  ------------
10.0.0.0  4  65100  4        4        0       0    0     00:00:12  4             spine-r0-0
10.0.0.2  4  65100  0        0        0       0    0     00:00:03  Idle (Admin)  spine-r0-1

Total number of neighbors 2
"""


def names() -> Names:
    return blueprint_names(FACTS, [d for d in FACTS.switches if d.startswith("leaf-")])


def test_tables_are_cut_at_the_dashes() -> None:
    rows = table(DESC)
    assert [r["Interface"] for r in rows] == ["Ethernet0", "Ethernet8", "Ethernet16", "Ethernet24", "Ethernet32"]
    assert rows[1]["Description"] == MARK and rows[2]["Description"] == "to spine r0 0 up"
    assert [r["LocalPort"] for r in table(LLDP)] == ["Ethernet0", "Ethernet16"]  # not the closing rule and count
    assert [r["State/PfxRcd"] for r in table(BGP)] == ["4", "Idle (Admin)"]
    # a switch's own `show interfaces status` as sonic-mgmt records it (cells wider than their words, a
    # PortChannel in Vlan): the same cut
    real = table((DATA / "sonic_outputs" / "show_interfaces_status.txt").read_text())
    assert [(r["Interface"], r["Oper"], r["Asym PFC"]) for r in real] == [("Ethernet0", "up", "off"),
                                                                        ("Ethernet4", "down", "off")]  # fmt: skip
    assert table("") == [] and table("bash: show: command not found\n") == []


@pytest.mark.parametrize(
    ("port", "expected"),
    [
        # a server port: up, no description, its NIC heard, no BGP on it
        ("Ethernet1/1", PortObs(True, True, "", "gpu-g0-000:nic0", None)),
        # fabricd's shutdown: admin down, its mark; LLDP forgot the neighbour with the link
        ("Ethernet2/1", PortObs(False, False, MARK, None, None)),
        # an uplink: the operator's description with spaces, the spine heard, the session Established (a number)
        ("Ethernet3/1", PortObs(True, True, "to spine r0 0 up", "spine-r0-0:Ethernet1/1", True)),
        # the link down under an admin-up port; its session shut in FRR's config: Idle (Admin)
        ("Ethernet4/1", PortObs(True, False, "", None, False)),
    ],
)
def test_a_sonic_switchs_ports(port: str, expected: PortObs) -> None:
    got = parse_sonic_ports(LEAF, DESC, LLDP, BGP, FACTS, names())
    assert got[f"{LEAF}:{port}"] == expected
    assert set(got) == {f"{LEAF}:Ethernet{n}/1" for n in (1, 2, 3, 4)}  # Ethernet32 is cabled to nothing


def test_a_bgp_peer_off_the_blueprints_addresses_is_placed_by_its_name() -> None:
    renumbered = BGP.replace("10.0.0.0", "10.9.0.1").replace("10.0.0.2", "10.9.0.3")
    got = parse_sonic_ports(LEAF, DESC, LLDP, renumbered, FACTS, names())
    assert got[f"{LEAF}:Ethernet3/1"].bgp_up is True and got[f"{LEAF}:Ethernet4/1"].bgp_up is False
    stranger = renumbered.replace("spine-r0-0", "spine-r9-9")
    assert parse_sonic_ports(LEAF, DESC, LLDP, stranger, FACTS, names())[f"{LEAF}:Ethernet3/1"].bgp_up is None


def test_a_sonic_neighbour_is_named_by_the_blueprint_whatever_its_lldp_advertises() -> None:
    """lldpmgrd advertises a SONiC port's alias (etpN), else its SONiC name: both read as the blueprint's name, on a
    SONiC switch's table as on an EOS spine's eAPI answer."""
    known = names()
    known["leaf-g1-r0"] = with_aliases(known["leaf-g1-r0"], DESC.replace("   etp3", "fgE0/16"))
    lldp = LLDP.replace("spine-r0-0    Ethernet1/1", "leaf-g1-r0    fgE0/16    ")  # same widths
    assert parse_sonic_ports(LEAF, DESC, lldp, BGP, FACTS, known)[f"{LEAF}:Ethernet3/1"].neighbor == (
        "leaf-g1-r0:Ethernet3/1"
    )
    desc = {"interfaceDescriptions": {"Ethernet1/1": {"interfaceStatus": "up", "lineProtocolStatus": "up"}}}
    for advertised in ("etp3", "Ethernet16"):
        lldp_json = {"lldpNeighbors": [{"port": "Ethernet1/1", "neighborDevice": LEAF, "neighborPort": advertised}]}
        known[LEAF] = with_aliases(known[LEAF], DESC)
        got = parse_ports("spine-r0-0", desc, lldp_json, {}, FACTS, known)
        assert got["spine-r0-0:Ethernet1/1"].neighbor == f"{LEAF}:Ethernet3/1"
    # a name no SONiC switch has stays as heard (wrong_neighbour judges it)
    lldp_json = {"lldpNeighbors": [{"port": "Ethernet1/1", "neighborDevice": LEAF, "neighborPort": "etp9"}]}
    assert parse_ports("spine-r0-0", desc, lldp_json, {}, FACTS, known)["spine-r0-0:Ethernet1/1"].neighbor == (
        f"{LEAF}:etp9"
    )
