"""SONiC's gNMI DB paths as fabricd reads them: rows of SAI counters (JSON_IETF strings) into fabricd's leaves, port
names back to the topology's, and the ingestor's path for them. Pure: no sockets."""

from __future__ import annotations

import json
from typing import Any

import pytest
from pygnmi.spec.v080 import gnmi_pb2

from fabricd.telemetry import CounterStore, Ingestor, Stat
from fabricd.telemetry.platforms import plan, profiles, subscription_leaves
from fabricd.telemetry.sonic import (
    advertised_port,
    decode,
    frr_states,
    known_path,
    pg_names,
    queue_names,
    sonic_profile,
    topology_port,
)

T0 = 1_700_000_000 * 10**9


@pytest.mark.parametrize(
    ("sonic", "topology"),
    [("Ethernet0", "Ethernet1/1"), ("Ethernet8", "Ethernet2/1"), ("Ethernet248", "Ethernet32/1"),
     ("Ethernet4", None), ("PortChannel1", None), ("Ethernet", None)],
)  # fmt: skip
def test_port_names_go_back_to_the_topology(sonic: str, topology: str | None) -> None:
    assert topology_port(sonic) == topology


PORT_ROW = {
    "SAI_PORT_STAT_IF_IN_OCTETS": "4200000",
    "SAI_PORT_STAT_IF_IN_UCAST_PKTS": "1000",
    "SAI_PORT_STAT_IF_IN_NON_UCAST_PKTS": "10",
    "SAI_PORT_STAT_IF_OUT_UCAST_PKTS": "900",
    "SAI_PORT_STAT_IF_OUT_NON_UCAST_PKTS": "9",
    "SAI_PORT_STAT_IF_IN_ERRORS": "3",
    "SAI_PORT_STAT_ETHER_STATS_CRC_ALIGN_ERRORS": "3",
    "SAI_PORT_STAT_IF_IN_FEC_NOT_CORRECTABLE_FRAMES": "1",
    "SAI_PORT_STAT_PFC_3_RX_PKTS": "77",
    "SAI_PORT_STAT_PFC_3_RX_PAUSE_DURATION_US": "1500",
    "SAI_PORT_STAT_PFC_4_TX_PKTS": "5",
    "SAI_PORT_STAT_SOMETHING_NEW": "8",  # an ASIC's extra counter: skipped
    "SAI_PORT_STAT_IF_OUT_OCTETS": "not a number",  # skipped
}


def test_a_port_row_decodes_into_fabricd_leaves() -> None:
    got = {(leaf, index): v for _, leaf, index, v in decode("COUNTERS_DB", ["COUNTERS", "Ethernet8"], PORT_ROW)}
    assert got == {
        ("if.in-octets", None): 4200000,
        ("if.in-unicast-pkts", None): 1000,
        ("if.out-unicast-pkts", None): 900,
        ("if.in-pkts", None): 1010,  # OpenConfig's in-pkts: unicast and the rest
        ("if.out-pkts", None): 909,
        ("if.in-errors", None): 3,
        ("eth.in-crc-errors", None): 3,
        ("fec.uncorrected-codewords", None): 1,
        ("pfc.in-frames", "3"): 77,
        ("pfc.pfc-on-total-rx-time", "3"): 1_500_000,  # microseconds -> nanoseconds
        ("pfc.out-frames", "4"): 5,
    }
    assert {port for port, *_ in decode("COUNTERS_DB", ["COUNTERS", "Ethernet8"], PORT_ROW)} == {"Ethernet2/1"}


def test_queue_watchdog_and_port_table_rows() -> None:
    queues = {"Ethernet0:3": {"SAI_QUEUE_STAT_PACKETS": "50", "SAI_QUEUE_STAT_WRED_ECN_MARKED_PACKETS": "2"},
              "Ethernet0:x": {"SAI_QUEUE_STAT_PACKETS": "1"}}  # fmt: skip
    assert sorted(decode("COUNTERS_DB", ["COUNTERS", "Ethernet0", "Queues"], queues)) == [
        ("Ethernet1/1", "queue.ecn-marked-pkts", "3", 2),
        ("Ethernet1/1", "queue.transmit-pkts", "3", 50),
    ]
    wd = {"Ethernet0:3": {"PFC_WD_QUEUE_STATS_DEADLOCK_DETECTED": "4", "PFC_WD_STATUS": "stormed"}}
    assert list(decode("COUNTERS_DB", ["COUNTERS", "Ethernet0", "Pfcwd"], wd)) == [
        ("Ethernet1/1", "wd.stuck-count", "3", 4)
    ]
    port = {"oper_status": "down", "admin_status": "up", "speed": "400000"}
    assert list(decode("APPL_DB", ["PORT_TABLE", "Ethernet0"], port)) == [
        ("Ethernet1/1", "oper-status", None, "DOWN"),
        ("Ethernet1/1", "admin-status", None, "UP"),
    ]
    assert list(decode("APPL_DB", ["LLDP_ENTRY_TABLE", "Ethernet0"], port)) == []
    dom = {"temperature": "41.50", "rx1power": "-2.3100", "rx2power": "-inf", "rx3power": "N/A", "tx1bias": "6.5"}
    assert sorted(decode("STATE_DB", ["TRANSCEIVER_DOM_SENSOR", "Ethernet0"], dom)) == [
        ("Ethernet1/1", "optics.input-power", "0", -2.31),
        ("Ethernet1/1", "optics.input-power", "1", -40.0),  # a dark lane reads as no light
        ("Ethernet1/1", "optics.temperature", None, 41.5),
    ]
    assert list(decode("COUNTERS_DB", ["COUNTERS", "Ethernet3"], PORT_ROW)) == []  # not a front-panel port


def _note(target: str, path: list[str], row: Any, ts: int = T0) -> bytes:
    n = gnmi_pb2.Notification(timestamp=ts)
    n.prefix.target = target
    u = n.update.add()
    for e in path:
        u.path.elem.add(name=e)
    u.val.json_ietf_val = row if isinstance(row, bytes) else json.dumps(row).encode()
    raw: bytes = gnmi_pb2.SubscribeResponse(update=n).SerializeToString()
    return raw


def test_the_ingestor_reads_sonic_rows_as_the_switch_s_leaves() -> None:
    ing = Ingestor(CounterStore())
    dev = "leaf-g0-r0"
    ing.ingest(_note("COUNTERS_DB", ["COUNTERS", "Ethernet0"], PORT_ROW), dev)
    later = {**PORT_ROW, "SAI_PORT_STAT_IF_IN_UCAST_PKTS": "3000"}
    ing.ingest(_note("COUNTERS_DB", ["COUNTERS", "Ethernet0"], later, T0 + 10**9), dev)
    ing.ingest(_note("APPL_DB", ["PORT_TABLE", "Ethernet0"], {"oper_status": "up", "admin_status": "up"}), dev)
    snap = ing.snapshot()
    assert snap.devices == (dev,)  # the target names the database, not a device
    assert snap.rate_of(dev, "Ethernet1/1", "if.in-pkts") == 2000.0
    i = snap.find(dev, "Ethernet1/1", "pfc.pfc-on-total-rx-time", 3)
    assert i is not None and snap.current(i) == 1_500_000
    o = snap.find(dev, "Ethernet1/1", "oper-status")
    assert o is not None and snap.text(o) == "UP"
    assert snap.stat(dev, Stat.MALFORMED) == 0 and snap.stat(dev, Stat.UNKNOWN) == 0


def test_bad_sonic_rows_are_counted_never_raise() -> None:
    ing = Ingestor(CounterStore())
    dev = "leaf-g0-r0"
    ing.ingest(_note("COUNTERS_DB", ["COUNTERS", "Ethernet0"], b"{not json"), dev)
    ing.ingest(_note("COUNTERS_DB", ["COUNTERS", "Ethernet0"], [1, 2]), dev)
    ing.ingest(_note("COUNTERS_DB", ["NO_SUCH_TABLE", "Ethernet0"], {"x": "1"}), dev)
    ing.ingest(_note("COUNTERS_DB", ["COUNTERS", "Ethernet0"], PORT_ROW, ts=0), dev)
    snap = ing.snapshot()
    assert snap.stat(dev, Stat.MALFORMED) == 3 and snap.stat(dev, Stat.UNKNOWN) == 1
    assert len(snap) == 0


def test_the_sonic_profile_and_its_plan() -> None:
    subs = sonic_profile(10.0, {"pfc": 1.0})
    assert {(s.path, s.target, s.mode) for s in subs} == {
        ("/PORT_TABLE/Ethernet*", "APPL_DB", "on_change"),
        ("/COUNTERS/Ethernet*", "COUNTERS_DB", "sample"),
        ("/COUNTERS/Ethernet*/Queues", "COUNTERS_DB", "sample"),
        ("/RATES/Ethernet*", "COUNTERS_DB", "sample"),
        ("/TRANSCEIVER_DOM_SENSOR/Ethernet*", "STATE_DB", "sample"),
        ("/NEIGH_STATE_TABLE/*", "STATE_DB", "on_change"),
        ("/LLDP_ENTRY_TABLE/Ethernet*", "APPL_DB", "on_change"),
        # queue watermarks by OID, and the map naming the OIDs (reference/congestion-tuning.md §3.1)
        ("/COUNTERS_QUEUE_NAME_MAP", "COUNTERS_DB", "on_change"),
        ("/COUNTERS_PG_NAME_MAP", "COUNTERS_DB", "on_change"),
        ("/PERSISTENT_WATERMARKS/*", "COUNTERS_DB", "sample"),
    }
    assert [s.sample_interval_ns for s in subs if s.path.endswith("Queues")] == [10**9]
    p = plan("sonic", "SONiC.202411.x", profiles(10.0)["sonic"])
    assert p.skipped == () and {"oper-status", "if.in-pkts", "pfc.in-frames", "queue.transmit-pkts"} <= p.expected
    assert {"wd.stuck-count", "fec.pre-fec-ber"} <= p.expected  # the watchdog from the queue rows; BER from RATES
    assert subscription_leaves(subs[0]) == {"oper-status", "admin-status", "port.alias"}
    # the BGP neighbours' state from STATE_DB, late by bgpmon's 15 s; the ports' addresses from the underlay's plan
    assert "bgp.session-state" in p.expected and "bgp.session-state" not in {m.leaf for m in p.missing}
    assert [(m.leaf, "up to ~15 s late" in m.reason) for m in p.late] == [("bgp.session-state", True)]
    assert "underlay's plan" in {m.leaf: m.reason for m in p.missing}["ipv4.ip"]


@pytest.mark.parametrize(
    ("state", "leaf_value"),
    [("Established", "ESTABLISHED"), ("Active", "ACTIVE"), ("Idle (Admin)", "IDLE"), ("OpenSent", "OPENSENT"),
     ("Connect", "CONNECT"), ("", None), ("Clearing", None)],
)  # fmt: skip
def test_neigh_state_rows_are_the_openconfig_session_state(state: str, leaf_value: str | None) -> None:
    """STATE_DB NEIGH_STATE_TABLE|<address> `state` (FRR's word, as bgpmon writes it) is the neighbour's
    session-state series, keyed by its address as EOS's OpenConfig neighbours are; what is no FSM state is skipped."""
    got = list(decode("STATE_DB", ["NEIGH_STATE_TABLE", "10.0.0.0"], {"state": state}))
    assert got == ([("10.0.0.0", "bgp.session-state", None, leaf_value)] if leaf_value else [])


def test_the_ingestor_reads_neigh_state_rows() -> None:
    ing = Ingestor(CounterStore())
    dev = "leaf-g0-r0"
    ing.ingest(_note("STATE_DB", ["NEIGH_STATE_TABLE", "10.0.0.0"], {"state": "Established"}), dev)
    ing.ingest(_note("STATE_DB", ["NEIGH_STATE_TABLE", "10.0.0.0"], {"state": "Active"}, ts=T0 + 10**9), dev)
    snap = ing.snapshot()
    i = snap.find(dev, "10.0.0.0", "bgp.session-state")
    assert i is not None and snap.text(i) == "ACTIVE"
    assert snap.stat(dev, Stat.UNKNOWN) == 0


def _frr(*peers: tuple[str, Any], family: str = "ipv4Unicast") -> dict[str, Any]:
    """`show bgp summary json` as FRR 8.4's bgpd prints it (lab/sonic_bgp.py, compared in test_frr_shape), cut to
    the keys around the peers."""
    body = {"routerId": "10.1.0.1", "as": 65101, "vrfName": "default", "peerCount": len(peers), "failedPeers": 0,
            "peers": {a: {"remoteAs": 65001, "state": st, "peerState": "Admin" if st == "Idle (Admin)" else "OK",
                          "pfxRcd": 3, "hostname": "spine-0"} for a, st in peers}}  # fmt: skip
    return {family: body}


@pytest.mark.parametrize(
    ("summary", "states"),
    [
        (_frr(("10.0.0.0", "Established"), ("10.0.0.2", "Active")), {"10.0.0.0": "ESTABLISHED", "10.0.0.2": "ACTIVE"}),
        (_frr(("10.0.0.0", "Idle (Admin)")), {"10.0.0.0": "IDLE"}),  # `neighbor X shutdown` at this end
        (_frr(("10.0.0.0", "Idle")), {"10.0.0.0": "IDLE"}),
        (_frr(("10.0.0.0", "Connect"), ("10.0.0.2", "OpenSent"), ("10.0.0.4", "OpenConfirm")),
         {"10.0.0.0": "CONNECT", "10.0.0.2": "OPENSENT", "10.0.0.4": "OPENCONFIRM"}),
        (_frr(("10.0.0.0", "Clearing"), ("10.0.0.2", ""), ("10.0.0.4", 7)), {}),  # no FSM word: left out
        ({}, {}),  # FRR with no IPv4 neighbour prints `{}`: no ipv4Unicast
        (_frr(("fc00::1", "Established"), family="ipv6Unicast"), {}),  # another family is not the underlay's
        ({"ipv4Unicast": {"peers": []}}, {}),
        ({"ipv4Unicast": "x"}, {}),
        (_frr(("10.0.0.0", "Established")) | {"ipv4Unicast": {"routerId": "10.1.0.1"}}, {}),  # no peers key
        ("not an object", {}),
        (None, {}),
    ],
)  # fmt: skip
def test_frr_summary_json_gives_each_neighbour_s_openconfig_state(summary: Any, states: dict[str, str]) -> None:
    """`vtysh -c 'show bgp summary json'` (read over SSH where STATE_DB has no NEIGH_STATE_TABLE row) gives each IPv4
    neighbour's state as the table's rows decode: FRR's word as OpenConfig's session-state, by address."""
    assert frr_states(summary) == states


@pytest.mark.parametrize(
    ("version", "rates"),
    [("SONiC.202305.2", False), ("SONiC.202311.x", False), ("SONiC.202405.7", False), ("SONiC.202411.x", True),
     ("SONiC.202511.x", True), (None, True)],
)  # fmt: skip
def test_the_plan_follows_the_release(version: str | None, rates: bool) -> None:
    """RATES (pre-FEC BER) is a virtual path from 202411: before, the plan leaves it out and says why; the watchdog
    is read from the queue rows on every release (Pfcwd yields nothing before 202411: reference/sonic-releases.md)."""
    p = plan("sonic", version, profiles(10.0)["sonic"])
    assert ("/RATES/Ethernet*" in {s.path for s in p.subscriptions}) is rates
    assert "/COUNTERS/Ethernet*/Pfcwd" not in {s.path for s in p.subscriptions}
    assert "wd.stuck-count" in p.expected
    missing = {m.leaf: m.reason for m in p.missing}
    if rates:
        assert "fec.pre-fec-ber" not in missing
    else:
        release = version.split(".")[1] if version else ""
        assert p.skipped == (("/RATES/Ethernet*", missing["fec.pre-fec-ber"]),)
        assert missing["fec.pre-fec-ber"] == (
            f"not in SONiC {release} (from 202411; reference/sonic-releases.md: RATES/Ethernet* from 202411)"
        )


def test_rates_rows_and_watchdog_fields_on_queue_rows() -> None:
    rates = {"FEC_PRE_BER": "1.25e-08", "FEC_POST_BER": "0.00e+00", "SAI_PORT_STAT_IF_IN_OCTETS_last": "5"}
    assert list(decode("COUNTERS_DB", ["RATES", "Ethernet8"], rates)) == [
        ("Ethernet2/1", "fec.pre-fec-ber", None, 1.25e-08)
    ]
    assert list(decode("COUNTERS_DB", ["RATES", "Ethernet8"], {"FEC_PRE_BER": "nan"})) == []
    queues = {"Ethernet0:3": {"SAI_QUEUE_STAT_PACKETS": "7", "PFC_WD_QUEUE_STATS_DEADLOCK_DETECTED": "2",
                              "PFC_WD_STATUS": "stormed"}}  # fmt: skip
    assert sorted(decode("COUNTERS_DB", ["COUNTERS", "Ethernet0", "Queues"], queues)) == [
        ("Ethernet1/1", "queue.transmit-pkts", "3", 7),
        ("Ethernet1/1", "wd.stuck-count", "3", 2),
    ]


def test_counted_and_recorded_like_every_other_update() -> None:
    """SONiC counters skip the TypedValue bytes on their way to the store, but not the books: updates are counted
    per switch, and a trace recorder still gets every one (with a recorder they take the common path)."""
    dev = "leaf-g0-r0"
    plain = Ingestor(CounterStore())
    plain.ingest(_note("COUNTERS_DB", ["COUNTERS", "Ethernet0"], PORT_ROW), dev)
    plain.ingest(_note("APPL_DB", ["PORT_TABLE", "Ethernet0"], {"oper_status": "up", "admin_status": "up"}), dev)
    snap = plain.snapshot()
    assert snap.stat(dev, Stat.UPDATES) == 11 + 2 and snap.stat(dev, Stat.NOTIFICATIONS) == 2

    recorded: list[tuple[str, str, Any, int]] = []

    class Sink:
        def record(self, device: str, path: str, value: Any, ts: int) -> None:
            recorded.append((device, path, value, ts))

    traced = Ingestor(CounterStore(), recorder=Sink())
    traced.ingest(_note("COUNTERS_DB", ["COUNTERS", "Ethernet0"], PORT_ROW), dev)
    traced.flush()
    assert len(recorded) == 11
    assert (dev, "/interfaces/interface[name=Ethernet1/1]/state/counters/in-pkts", 1010, T0) in recorded
    t = traced.snapshot()
    i = t.find(dev, "Ethernet1/1", "if.in-pkts")
    assert i is not None and t.current(i) == 1010 and t.stat(dev, Stat.UPDATES) == 11


def test_lldp_entry_rows_and_port_aliases_are_read() -> None:
    """APPL_DB LLDP_ENTRY_TABLE (lldp_syncd's fields) is the port's LLDP neighbour; PORT_TABLE's alias is kept, the
    name a SONiC neighbour's LLDP advertises the port by (advertised_port reads it back)."""
    row = {"lldp_rem_sys_name": "spine-r0-0", "lldp_rem_port_id": "Ethernet1/1", "lldp_rem_chassis_id": "x"}
    assert list(decode("APPL_DB", ["LLDP_ENTRY_TABLE", "Ethernet16"], row)) == [
        ("Ethernet3/1", "lldp.system-name", "1", "spine-r0-0"),
        ("Ethernet3/1", "lldp.port-id", "1", "Ethernet1/1"),
    ]
    got = list(decode("APPL_DB", ["PORT_TABLE", "Ethernet16"], {"oper_status": "up", "alias": "etp3"}))
    assert ("Ethernet3/1", "port.alias", None, "etp3") in got
    assert advertised_port("etp3", {"etp3": "Ethernet3/1"}) == "Ethernet3/1"
    assert advertised_port("Ethernet16", {}) == "Ethernet3/1"  # a SONiC name without alias
    assert advertised_port("Ethernet3/1", {"etp3": "Ethernet3/1"}) == "Ethernet3/1"  # already the topology's


def test_a_deleted_lldp_row_forgets_the_neighbour() -> None:
    """sonic-gnmi deletes LLDP_ENTRY_TABLE|Ethernet0 when lldpd forgets the neighbour (its port went down, 802.1AB):
    fabricd no longer knows one there (it kept the last name before)."""
    ing = Ingestor(CounterStore())
    dev = "leaf-g0-r0"
    row = {"lldp_rem_sys_name": "gpu-g0-000", "lldp_rem_port_id": "nic0"}
    ing.ingest(_note("APPL_DB", ["LLDP_ENTRY_TABLE", "Ethernet0"], row), dev)
    ing.ingest(_note("STATE_DB", ["NEIGH_STATE_TABLE", "10.0.0.0"], {"state": "Established"}), dev)
    snap = ing.snapshot()
    i = snap.find(dev, "Ethernet1/1", "lldp.system-name", "1")
    assert i is not None and snap.text(i) == "gpu-g0-000"
    for target, path in (
        ("APPL_DB", ["LLDP_ENTRY_TABLE", "Ethernet0"]),
        ("STATE_DB", ["NEIGH_STATE_TABLE", "10.0.0.0"]),
    ):
        n = gnmi_pb2.Notification(timestamp=T0 + 10**9)
        n.prefix.target = target
        d = n.delete.add()
        for e in path:
            d.elem.add(name=e)
        ing.ingest(gnmi_pb2.SubscribeResponse(update=n).SerializeToString(), dev)
    snap = ing.snapshot()
    for port, leaf, index in (("Ethernet1/1", "lldp.system-name", "1"), ("10.0.0.0", "bgp.session-state", None)):
        i = snap.find(dev, port, leaf, index)
        assert i is None or not snap.text(i), (port, leaf)
    assert snap.stat(dev, Stat.DELETES) == 2


def test_queue_watermarks_are_read_by_the_oid_the_name_map_gives() -> None:
    """PERSISTENT_WATERMARKS/<oid> `SAI_QUEUE_STAT_SHARED_WATERMARK_BYTES` is the queue's max-queue-len (a gauge, as
    EOS's OpenConfig leaf), once COUNTERS_QUEUE_NAME_MAP has named the OID; before it, or for another OID, nothing."""
    names = queue_names(["COUNTERS_QUEUE_NAME_MAP"], {"Ethernet8:3": "oid:0x15000000000001c", "Ethernet8:4": "oid:0x2"})
    assert names == {"oid:0x15000000000001c": "Ethernet8:3", "oid:0x2": "Ethernet8:4"}
    row = {"SAI_QUEUE_STAT_SHARED_WATERMARK_BYTES": "1350000"}
    path = ["PERSISTENT_WATERMARKS", "oid:0x15000000000001c"]
    assert list(decode("COUNTERS_DB", path, row, None, names)) == [
        ("Ethernet2/1", "queue.max-queue-len", "3", 1350000.0)
    ]
    assert list(decode("COUNTERS_DB", path, row)) == []
    assert list(decode("COUNTERS_DB", ["PERSISTENT_WATERMARKS", "oid:0x9"], row, None, names)) == []
    assert known_path("COUNTERS_DB", path) and known_path("COUNTERS_DB", ["COUNTERS_QUEUE_NAME_MAP"])
    assert queue_names(["COUNTERS", "Ethernet8"], {}) is None
    assert list(decode("COUNTERS_DB", ["COUNTERS_QUEUE_NAME_MAP"], {"Ethernet8:3": "oid:0x1"})) == []


def test_pg_watermarks_are_read_by_the_oid_the_pg_name_map_gives() -> None:
    """PERSISTENT_WATERMARKS/<pg oid>: the PG's shared and XOFF-room (headroom) watermarks (reference/congestion-
    tuning.md §3.1, SAI_INGRESS_PRIORITY_GROUP_STAT_*_WATERMARK_BYTES) once COUNTERS_PG_NAME_MAP named the OID; a
    queue OID in the same table stays a queue watermark; an OID neither map names, nothing."""
    pgs = pg_names(["COUNTERS_PG_NAME_MAP"], {"Ethernet8:3": "oid:0x1a0000000000030"})
    assert pgs == {"oid:0x1a0000000000030": "Ethernet8:3"}
    queues = queue_names(["COUNTERS_QUEUE_NAME_MAP"], {"Ethernet8:3": "oid:0x15000000000001c"})
    row = {
        "SAI_INGRESS_PRIORITY_GROUP_STAT_SHARED_WATERMARK_BYTES": "41000",
        "SAI_INGRESS_PRIORITY_GROUP_STAT_XOFF_ROOM_WATERMARK_BYTES": "12288",
    }
    path = ["PERSISTENT_WATERMARKS", "oid:0x1a0000000000030"]
    assert list(decode("COUNTERS_DB", path, row, None, queues, pgs)) == [
        ("Ethernet2/1", "pg.shared-watermark", "3", 41000.0),
        ("Ethernet2/1", "pg.headroom-watermark", "3", 12288.0),
    ]
    assert list(decode("COUNTERS_DB", path, row, None, queues)) == []  # before the PG map came
    q_row = {"SAI_QUEUE_STAT_SHARED_WATERMARK_BYTES": "5"}
    q_path = ["PERSISTENT_WATERMARKS", "oid:0x15000000000001c"]
    assert list(decode("COUNTERS_DB", q_path, q_row, None, queues, pgs)) == [
        ("Ethernet2/1", "queue.max-queue-len", "3", 5.0)
    ]
    assert known_path("COUNTERS_DB", ["COUNTERS_PG_NAME_MAP"])
    assert pg_names(["COUNTERS_QUEUE_NAME_MAP"], {}) is None
