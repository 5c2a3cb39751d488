"""Counter rules, events, bad input and snapshots, all through the ingestion path (bytes in, store out)."""

from __future__ import annotations

import base64
import math
import struct
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
from pygnmi.spec.v080 import gnmi_pb2

from fabricd.telemetry import CounterStore, Ingestor, Stat
from fabricd.telemetry.series import NEVER

from . import IF, QOS, T0, S, notification

DEV = "leaf-g0-r0"
PORT = "Ethernet1/1"
FCS = "/state/counters/in-fcs-errors"
PFC3 = "/ethernet/pfc/priorities/priority[index=3]/state/in-frames"
TOP = 2**64


def feed(samples: list[tuple[int, Any]], rel: str = FCS) -> tuple[Ingestor, Any]:
    ing = Ingestor(CounterStore(capacity=4))
    for ts, v in samples:
        ing.ingest(notification(DEV, ts, IF.format(port=PORT), [(rel, v)]), DEV)
    snap = ing.snapshot()
    return ing, snap


# (samples (seconds after T0, value), last value, rate, prev_ts known, resets, wraps, duplicates, out of order)
COUNTER_CASES = {
    "first sample: baseline only": ([(0, 100)], 100, math.nan, False, 0, 0, 0, 0),
    "steady": ([(0, 100), (10, 200), (20, 400)], 400, 20.0, True, 0, 0, 0, 0),
    "reset to zero": ([(0, 5000), (10, 6000), (20, 10)], 10, math.nan, False, 1, 0, 0, 0),
    "after a reset the new baseline counts": ([(0, 5000), (10, 10), (20, 110)], 110, 10.0, True, 1, 0, 0, 0),
    "64-bit wrap": ([(0, TOP - 100), (10, 900)], 900, 100.0, True, 0, 1, 0, 0),
    "near top but a big drop is a reset": ([(0, TOP - 100), (10, 2**60)], 2**60, math.nan, False, 1, 0, 0, 0),
    "duplicate timestamp ignored": ([(0, 100), (10, 200), (10, 999)], 200, 10.0, True, 0, 0, 1, 0),
    "out of order ignored": ([(0, 100), (20, 300), (10, 150)], 300, 10.0, True, 0, 0, 0, 1),
    "unchanged counter: rate 0": ([(0, 7), (1, 7)], 7, 0.0, True, 0, 0, 0, 0),
}


@pytest.mark.parametrize("case", COUNTER_CASES.values(), ids=COUNTER_CASES.keys())
def test_counter_rules(case: tuple[Any, ...]) -> None:
    samples, value, rate, has_prev, resets, wraps, dups, ooo = case
    _, snap = feed([(T0 + s * S, v) for s, v in samples])
    i = snap.find(DEV, PORT, "if.in-fcs-errors")
    assert i is not None
    assert int(snap.value[i]) == value
    got = float(snap.rate[i])
    assert (math.isnan(got) and math.isnan(rate)) or got == pytest.approx(rate)
    assert not got < 0
    assert (snap.prev_ts[i] != NEVER) == has_prev
    assert snap.stat(DEV, Stat.RESETS) == resets
    assert snap.stat(DEV, Stat.WRAPS) == wraps
    assert snap.stat(DEV, Stat.DUPLICATES) == dups
    assert snap.stat(DEV, Stat.OUT_OF_ORDER) == ooo


def test_same_series_twice_in_one_batch_applies_in_order() -> None:
    ing = Ingestor(CounterStore())
    for k, v in enumerate((100, 200, 400, 50)):  # the last one is a reset
        ing.ingest(notification(DEV, T0 + k * S, IF.format(port=PORT), [(FCS, v)]), DEV)
    snap = ing.snapshot()  # one flush holds all four
    i = snap.find(DEV, PORT, "if.in-fcs-errors")
    assert i is not None and int(snap.value[i]) == 50 and math.isnan(snap.rate[i])
    assert snap.stat(DEV, Stat.RESETS) == 1


def test_pfc_queue_and_gauges_are_found_by_port_leaf_index() -> None:
    ing = Ingestor(CounterStore())
    xcvr = "/components/component[name=Ethernet1/1 transceiver]"
    optics = "/transceiver/physical-channels/channel[index=0]/state/input-power/instant"
    for k in range(2):
        ts = T0 + k * S
        ing.ingest(notification(DEV, ts, IF.format(port=PORT), [(PFC3, 1000 * k), (FCS, 0)]), DEV)
        ing.ingest(
            notification(DEV, ts, QOS.format(port=PORT), [("/output/queues/queue[name=3]/state/transmit-pkts", 5 * k)]),
            DEV,
        )
        ing.ingest(notification(DEV, ts, xcvr, [(optics, -2.5)]), DEV)
    snap = ing.snapshot()
    pfc = snap.find(DEV, PORT, "pfc.in-frames", 3)
    q = snap.find(DEV, PORT, "queue.transmit-pkts", "3")
    rx = snap.find(DEV, PORT, "optics.input-power", 0)
    assert pfc is not None and q is not None and rx is not None
    assert snap.rate[pfc] == 1000.0 and snap.rate[q] == 5.0
    assert snap.gauge[rx] == -2.5 and snap.current(rx) == -2.5
    assert snap.path(pfc) == IF.format(port=PORT) + PFC3
    assert set(snap.select(device=DEV, leaf="pfc.in-frames").tolist()) == {pfc}
    assert len(snap.select(port=PORT)) == 4
    assert snap.find(DEV, PORT, "pfc.in-frames", 4) is None


def test_oper_status_events_with_timestamps() -> None:
    ing = Ingestor(CounterStore())
    oper = "/state/oper-status"
    for k, v in enumerate(("UP", "UP", "DOWN", "UP")):
        ing.ingest(notification(DEV, T0 + k * S, IF.format(port=PORT), [(oper, v)]), DEV)
    snap = ing.snapshot()
    ev = [(e.port, e.leaf, e.previous, e.value, e.ts) for e in snap.events_since(T0)]
    assert ev == [
        (PORT, "oper-status", None, "UP", T0),
        (PORT, "oper-status", "UP", "DOWN", T0 + 2 * S),
        (PORT, "oper-status", "DOWN", "UP", T0 + 3 * S),
    ]
    assert [e.value for e in snap.events_since(T0 + 2 * S + 1)] == ["UP"]
    i = snap.find(DEV, PORT, "oper-status")
    assert i is not None and snap.text(i) == "UP"


def test_event_ring_is_bounded() -> None:
    ing = Ingestor(CounterStore(event_capacity=4))
    for k in range(10):
        ing.ingest(
            notification(DEV, T0 + k, IF.format(port=PORT), [("/state/oper-status", "UP" if k % 2 else "DOWN")]), DEV
        )
    assert [e.ts for e in ing.snapshot().events_since(0)] == [T0 + k for k in range(6, 10)]


def test_unknown_paths_counted_and_ignored() -> None:
    ing = Ingestor(CounterStore())
    for k in range(3):
        ing.ingest(notification(DEV, T0 + k, IF.format(port=PORT), [("/state/counters/brand-new", 1), (FCS, 1)]), DEV)
    ing.ingest(notification(DEV, T0 + 5, "/system/state", [("/hostname", "x")]), DEV)
    snap = ing.snapshot()
    assert snap.stat(DEV, Stat.UNKNOWN) == 4
    assert len(snap) == 1


def _tv(**kw: Any) -> Any:
    return gnmi_pb2.TypedValue(**kw)


def test_value_encodings() -> None:
    ing = Ingestor(CounterStore())
    rel_gauge = "/ethernet/phys/phy[index=1]/ingress/fec/state/pre-fec-ber"
    encodings = [
        _tv(uint_val=10),
        _tv(int_val=20),
        _tv(json_ietf_val=b'"30"'),
        _tv(json_val=b"40"),
    ]
    for k, tv in enumerate(encodings):
        ing.ingest(
            notification(DEV, T0 + k * S, IF.format(port=PORT), [(FCS, tv), (rel_gauge, _tv(float_val=0.5))]), DEV
        )
    snap = ing.snapshot()
    i = snap.find(DEV, PORT, "if.in-fcs-errors")
    g = snap.find(DEV, PORT, "fec.pre-fec-ber", 1)
    assert i is not None and g is not None
    assert int(snap.value[i]) == 40 and snap.rate[i] == 10.0
    assert snap.gauge[g] == 0.5
    assert snap.stat(DEV, Stat.MALFORMED) == 0


BER = "/ethernet/phys/phy[index=1]/ingress/fec/state/pre-fec-ber"


@pytest.mark.parametrize(
    ("tv", "want"),
    [
        (_tv(double_val=2.5e-7), 2.5e-7),
        (_tv(float_val=0.5), 0.5),  # deprecated in gNMI 0.8, still sent by older agents
        (_tv(decimal_val=gnmi_pb2.Decimal64(digits=25, precision=8)), 2.5e-7),
        (_tv(bytes_val=struct.pack(">f", 2.5e-7)), float(np.float32(2.5e-7))),  # openconfig ieeefloat32, PROTO
        (_tv(json_ietf_val=b'"' + base64.b64encode(struct.pack(">f", 1e-5)) + b'"'), float(np.float32(1e-5))),
        (_tv(json_ietf_val=b"2.5e-07"), 2.5e-7),
        (_tv(json_val=b'"3e-06"'), 3e-6),
    ],
)
def test_gauge_encodings_real_switches_send(tv: Any, want: float) -> None:
    ing = Ingestor(CounterStore())
    ing.ingest(notification(DEV, T0, IF.format(port=PORT), [(BER, tv)]), DEV)
    snap = ing.snapshot()
    g = snap.find(DEV, PORT, "fec.pre-fec-ber", 1)
    assert g is not None and snap.gauge[g] == pytest.approx(want, rel=1e-9)
    assert snap.stat(DEV, Stat.MALFORMED) == 0


@pytest.mark.parametrize(
    "tv",
    [
        _tv(bytes_val=b"\x00\x01"),  # not 4 bytes
        _tv(bytes_val=struct.pack(">f", float("nan"))),
        _tv(json_ietf_val=b'"not base64!"'),
    ],
)
def test_bad_float32_is_malformed(tv: Any) -> None:
    ing = Ingestor(CounterStore())
    ing.ingest(notification(DEV, T0, IF.format(port=PORT), [(BER, tv)]), DEV)
    assert ing.snapshot().stat(DEV, Stat.MALFORMED) == 1


def test_a_leaf_list_text_value() -> None:
    ing = Ingestor(CounterStore())
    names = gnmi_pb2.ScalarArray(element=[_tv(string_val="spine-r0-0"), _tv(string_val="spine-r0-1")])
    lldp = "/lldp/interfaces/interface[name=Ethernet1/1]"
    ing.ingest(
        notification(DEV, T0, lldp, [("/neighbors/neighbor[id=1]/state/system-name", _tv(leaflist_val=names))]), DEV
    )
    snap = ing.snapshot()
    i = snap.find(DEV, PORT, "lldp.system-name", "1")
    assert i is not None and snap.text(i) == "spine-r0-0,spine-r0-1"


BAD = {
    "garbage bytes": b"\xff\xfe\x00garbage",
    "truncated": notification(DEV, T0, IF.format(port=PORT), [(FCS, 5)])[:-3],
    "string for a counter": notification(DEV, T0, IF.format(port=PORT), [(FCS, "lots")]),
    "negative int for a counter": notification(DEV, T0, IF.format(port=PORT), [(FCS, _tv(int_val=-5))]),
    "double for a counter": notification(DEV, T0, IF.format(port=PORT), [(FCS, 5.0)]),
    "bool for a counter": notification(DEV, T0, IF.format(port=PORT), [(FCS, _tv(bool_val=True))]),
    "number for oper-status": notification(DEV, T0, IF.format(port=PORT), [("/state/oper-status", 1)]),
    "missing val": notification(DEV, T0, IF.format(port=PORT), [(FCS, None)]),
    "huge path": notification(DEV, T0, IF.format(port=PORT), [("/state/counters/" + "x" * 5000, 1)]),
    "huge prefix": notification(DEV, T0, IF.format(port="E" * 5000), [(FCS, 1)]),
    "zero timestamp": notification(DEV, 0, IF.format(port=PORT), [(FCS, 1)]),
    "empty message": b"",
}


@pytest.mark.parametrize("data", BAD.values(), ids=BAD.keys())
def test_malformed_input_is_counted_never_raises(data: bytes) -> None:
    ing = Ingestor(CounterStore())
    ing.ingest(notification(DEV, T0 - S, IF.format(port=PORT), [(FCS, 1)]), DEV)
    ing.ingest(data, DEV, now=T0)
    ing.ingest(notification(DEV, T0 + S, IF.format(port=PORT), [(FCS, 11)]), DEV)
    snap = ing.snapshot()
    assert snap.stat(DEV, Stat.MALFORMED) == 1
    i = snap.find(DEV, PORT, "if.in-fcs-errors")
    assert i is not None and int(snap.value[i]) == 11
    assert snap.rate[i] == 5.0  # the bad message left no trace in the rate


def test_malformed_logged_once_per_device_per_minute(caplog: pytest.LogCaptureFixture) -> None:
    ing = Ingestor(CounterStore())
    for k in range(5):
        ing.ingest(b"\xff" * 8, DEV, now=T0 + k * S)
    ing.ingest(b"\xff" * 8, DEV, now=T0 + 61 * S)
    ing.ingest(b"\xff" * 8, "other", now=T0)
    assert len(caplog.records) == 3
    assert ing.snapshot().stat(DEV, Stat.MALFORMED) == 6


def test_fast_and_protobuf_paths_agree() -> None:
    """The raw walker and the protobuf parser must give the same store (the second gets unusual field order)."""
    msgs = []
    for k in range(4):
        msgs.append(notification(DEV, T0 + k * S, IF.format(port=PORT), [(FCS, 100 * k * k), (PFC3, 2**64 - 10 + k)]))
    fast = Ingestor(CounterStore())
    for m in msgs:
        fast.ingest(m, DEV)
    slow = Ingestor(CounterStore())
    for m in msgs:
        slow._general(m, DEV, None)  # the reference path
    a, b = fast.snapshot(), slow.snapshot()
    for f in ("value", "ts", "prev_value", "prev_ts", "rate"):
        assert str(getattr(a, f).tolist()) == str(getattr(b, f).tolist())
    assert a.stats.tolist() == b.stats.tolist()


def test_sync_response_heartbeat_and_staleness() -> None:
    ing = Ingestor(CounterStore())
    assert ing.snapshot().stale(DEV, T0, 10 * S)
    ing.ingest(gnmi_pb2.SubscribeResponse(sync_response=True), DEV)
    ing.ingest(notification(DEV, T0, IF.format(port=PORT), [(FCS, 1)]), DEV)
    snap = ing.snapshot()
    assert snap.stat(DEV, Stat.SYNCS) == 1 and snap.synced[0]
    assert not snap.stale(DEV, T0 + 30 * S, 10 * S)
    assert snap.stale(DEV, T0 + 31 * S, 10 * S)
    ing.ingest(gnmi_pb2.SubscribeResponse(update=gnmi_pb2.Notification(timestamp=T0 + 40 * S)), DEV)  # heartbeat
    assert not ing.store.stale(DEV, T0 + 45 * S, 10 * S)


def test_device_from_channel_when_prefix_has_no_target() -> None:
    ing = Ingestor(CounterStore())
    ing.ingest(notification(None, T0, IF.format(port=PORT), [(FCS, 1)]), "spine-r0-0")
    ing.ingest(notification(None, T0, "", [(IF.format(port="Ethernet9/1") + FCS, 1)]), "spine-r0-0")
    snap = ing.snapshot()
    assert snap.find("spine-r0-0", PORT, "if.in-fcs-errors") is not None
    assert snap.find("spine-r0-0", "Ethernet9/1", "if.in-fcs-errors") is not None


def test_delete_starts_the_series_over() -> None:
    ing = Ingestor(CounterStore())
    ing.ingest(notification(DEV, T0, IF.format(port=PORT), [(FCS, 1000)]), DEV)
    ing.ingest(notification(DEV, T0 + S, IF.format(port=PORT), [], deletes=("/",)), DEV)
    ing.ingest(notification(DEV, T0 + 2 * S, IF.format(port=PORT), [(FCS, 5)]), DEV)
    snap = ing.snapshot()
    i = snap.find(DEV, PORT, "if.in-fcs-errors")
    assert i is not None and int(snap.value[i]) == 5 and math.isnan(snap.rate[i])
    assert snap.stat(DEV, Stat.DELETES) == 1 and snap.stat(DEV, Stat.RESETS) == 0


def test_delete_of_an_lldp_neighbour_entry_forgets_its_leaves() -> None:
    """802.1AB: a port that goes down deletes its neighbour; EOS deletes the list entry (a subtree), not each leaf.
    Both leaves under it are forgotten (a repair check must not read the neighbour from before the link went down);
    another port's neighbour and the entry's siblings of other ids stay."""
    lldp = "/lldp/interfaces/interface[name={port}]"
    nbr = "/neighbors/neighbor[id={id}]/state/"
    ing = Ingestor(CounterStore())
    for port in (PORT, "Ethernet9/1"):
        ups = [(nbr.format(id=1) + "system-name", "gpu-g0-001"), (nbr.format(id=1) + "port-id", "nic0"),
               (nbr.format(id=2) + "system-name", "other")]  # fmt: skip
        ing.ingest(notification(DEV, T0, lldp.format(port=port), ups), DEV)
    ing.ingest(notification(DEV, T0 + S, lldp.format(port=PORT), [], deletes=("/neighbors/neighbor[id=1]",)), DEV)
    snap = ing.snapshot()
    for leaf in ("lldp.system-name", "lldp.port-id"):
        i = snap.find(DEV, PORT, leaf, "1")
        assert i is not None and not snap.text(i) and int(snap.ts[i]) < T0
        j = snap.find(DEV, "Ethernet9/1", leaf, "1")
        assert j is not None and snap.text(j) != ""
    k = snap.find(DEV, PORT, "lldp.system-name", "2")
    assert k is not None and snap.text(k) == "other"


def test_snapshot_does_not_change_after_more_ingestion() -> None:
    ing = Ingestor(CounterStore(capacity=2))
    ing.ingest(notification(DEV, T0, IF.format(port=PORT), [(FCS, 1), ("/state/oper-status", "UP")]), DEV)
    ing.ingest(notification(DEV, T0 + S, IF.format(port=PORT), [(FCS, 3)]), DEV)
    snap = ing.snapshot()
    before = (
        snap.value.tolist(),
        str(snap.rate.tolist()),
        snap.ts.tolist(),
        len(snap.events_since(0)),
        snap.stats.tolist(),
    )
    for k in range(2, 50):  # grows arrays, adds ports, events, and rewrites the same series
        port = f"Ethernet{k}/1"
        ing.ingest(notification(DEV, T0 + k * S, IF.format(port=port), [(FCS, k), ("/state/oper-status", "DOWN")]), DEV)
        ing.ingest(
            notification(
                DEV,
                T0 + k * S,
                IF.format(port=PORT),
                [(FCS, 10 * k), ("/state/oper-status", "DOWN" if k % 2 else "UP")],
            ),
            DEV,
        )
    ing.flush()
    after = (
        snap.value.tolist(),
        str(snap.rate.tolist()),
        snap.ts.tolist(),
        len(snap.events_since(0)),
        snap.stats.tolist(),
    )
    assert before == after
    assert not snap.value.flags.writeable
    assert len(ing.snapshot()) == 2 + 2 * 48


def test_a_snapshot_does_not_see_ports_added_after_it() -> None:
    store = CounterStore()
    d = store.device_id("leaf-a")
    code = store.code("if.in-fcs-errors", None)
    store.series_at(np.array([store.port_row(d, "Ethernet1/1")]), np.array([code]))
    before = store.snapshot()
    store.series_at(np.array([store.port_row(d, "Ethernet2/1")]), np.array([code]))
    after = store.snapshot()
    assert before.find("leaf-a", "Ethernet1/1", "if.in-fcs-errors") == 0
    assert before.find("leaf-a", "Ethernet2/1", "if.in-fcs-errors") is None  # the shared index grew; this view did not
    assert after.find("leaf-a", "Ethernet2/1", "if.in-fcs-errors") == 1


def _frozen(snap: Any) -> str:
    cols = (snap.value, snap.gauge, snap.ts, snap.prev_value, snap.prev_ts, snap.rate, snap.series_port, snap.stats)
    return repr([c.tolist() for c in cols] + [snap.events_since(0)])


def test_a_snapshot_keeps_its_values_through_every_kind_of_write() -> None:
    """The store copies a column a snapshot shares only when it writes that column: each kind of write leaves every
    earlier snapshot as it was, and the columns it does not write stay shared (no copy)."""
    ber = "/ethernet/phys/phy[index=1]/ingress/fec/state/pre-fec-ber"
    ing = Ingestor(CounterStore(event_capacity=2))  # a ring of 2: a new event overwrites one a snapshot holds
    store = ing.store

    def feed(k: int, rels: list[tuple[str, Any]]) -> None:
        for port in ("Ethernet1/1", "Ethernet2/1"):
            ing.ingest(notification(DEV, T0 + k * S, IF.format(port=port), rels), DEV)
        ing.flush()

    feed(0, [(FCS, 1), (ber, 1e-9), ("/state/oper-status", "UP")])
    snaps = [ing.snapshot()]
    frozen = [_frozen(snaps[0])]

    feed(1, [(FCS, 5)])  # counters only
    assert np.shares_memory(snaps[0].gauge, store.arrays["gauge"])  # not written: still shared
    assert np.shares_memory(snaps[0].series_port, store.arrays["s_port"])
    assert not np.shares_memory(snaps[0].value, store.arrays["value"])
    steps: list[Callable[[], None]] = [
        lambda: feed(2, [(ber, 2e-9)]),  # gauges only
        lambda: feed(3, [(FCS, 9), (ber, 3e-9)]),  # both
        lambda: store.put_series(np.array([0, 1]), {"value": np.array([7, 8], dtype=np.uint64)}),  # workers' mirror
        lambda: store.count(0, Stat.MALFORMED),
        lambda: store.put_events(np.array([2]), np.array([1]), np.array([0]), np.array([T0 + 9 * S])),
        lambda: feed(4, [(FCS, 11), ("/state/oper-status", "DOWN")]),  # a state change: everything
        lambda: feed(5, [(FCS, 13), ("/state/counters/in-octets", 1)]),  # new series
    ]
    for step in steps:
        snaps.append(ing.snapshot())
        frozen.append(_frozen(snaps[-1]))
        step()
        ing.flush()
        assert [_frozen(s) for s in snaps] == frozen
    last = ing.snapshot()
    i = last.find(DEV, "Ethernet1/1", "if.in-fcs-errors")
    assert i is not None and int(last.value[i]) == 13 and last.stat(DEV, Stat.MALFORMED) == 1
    new = last.find(DEV, "Ethernet1/1", "if.in-octets")  # allocated from the copies' growth slack: a clean row
    assert new is not None and math.isnan(last.rate[new]) and last.prev_ts[new] == NEVER


def test_select_of_one_port_is_every_series_of_that_port_and_no_other() -> None:
    # The one-port lookup reads the port's row of slots; it must give what a pass over every series' key gives.
    ing = Ingestor(CounterStore())
    ports = ["Ethernet1/1", "Ethernet2/1", "Ethernet10/1"]
    for dev in (DEV, "leaf-b"):
        for k in range(2):
            for port in ports:
                ing.ingest(notification(dev, T0 + k * S, IF.format(port=port), [(PFC3, k), (FCS, k)]), dev)
                rel = "/output/queues/queue[name={q}]/state/transmit-pkts"
                queues = [(rel.format(q=q), k) for q in (0, 3)]
                ing.ingest(notification(dev, T0 + k * S, QOS.format(port=port), queues), dev)
    snap = ing.snapshot()
    keys = [snap.key(i) for i in range(len(snap))]
    cases: list[tuple[str, str, str | None, str | int | None]] = [
        (DEV, "Ethernet2/1", None, None),
        (DEV, "Ethernet2/1", "queue.transmit-pkts", None),
        ("leaf-b", "Ethernet10/1", "queue.transmit-pkts", "3"),
        ("leaf-b", "Ethernet10/1", "queue.transmit-pkts", 0),
        (DEV, "Ethernet1/1", None, 3),
        (DEV, "Ethernet1/1", "pfc.in-frames", 4),  # no such index
        (DEV, "Ethernet9/1", None, None),  # no such port
        ("nobody", "Ethernet1/1", None, None),  # no such device
    ]
    for dev, port, leaf, index in cases:
        want = [
            i
            for i, (d, p, lf, ix) in enumerate(keys)
            if d == dev and p == port and leaf in (None, lf) and (index is None or ix == str(index))
        ]
        got = snap.select(dev, port, leaf, index).tolist()
        assert got == want, (dev, port, leaf, index)
    assert len(snap.select(DEV, "Ethernet2/1")) == 4
