"""Notification templates (one regex per port layout) must read exactly what the protobuf parser reads."""

from __future__ import annotations

import math
import random
from typing import Any

import pytest
from google.protobuf.message import DecodeError
from pygnmi.spec.v080 import gnmi_pb2

from fabricd.telemetry import CounterStore, Ingestor, Stat
from fabricd.telemetry.templates import MAX_LAYOUT_BYTES, MAX_TEMPLATES, CompileBudget

from . import IF, QOS, T0, S, notification

FCS = "/state/counters/in-fcs-errors"
OCTETS = "/state/counters/in-octets"
PFC3 = "/ethernet/pfc/priorities/priority[index=3]/state/in-frames"
STUCK = "/ethernet/pfc/watchdog/tx-queues/tx-queue[index=3][queue-type=UNICAST]/state/stuck-count"  # > 112 bytes
BER = "/ethernet/phys/phy[index=1]/ingress/fec/state/pre-fec-ber"
OPER = "/state/oper-status"
QUEUE = "/output/queues/queue[name=3]/state/transmit-pkts"
IF_LAYOUT = [FCS, OCTETS, PFC3, STUCK, BER]
DEVICES = ("leaf-g0-r0", "spine-r0-1")
PORTS = ("Ethernet1/1", "Ethernet2/1", "Ethernet3/1")


def series(ing: Ingestor) -> dict[tuple[str, str, Any], tuple[Any, ...]]:
    """Every series by (device, port, leaf): value, time, previous value and time, rate, gauge (NaN-safe text)."""
    s = ing.snapshot()
    out = {}
    for i in range(len(s)):
        row = int(s.series_port[i])
        key = (s.devices[int(s.port_dev[row])], s.port_names[row], s.codes[int(s.series_code[i])])
        out[key] = tuple(
            repr(float(a[i]) if a.dtype.kind == "f" else int(a[i]))
            for a in (s.value, s.ts, s.prev_value, s.prev_ts, s.rate, s.gauge)
        )
    return out


def reference(msgs: list[tuple[str, bytes]]) -> Ingestor:
    ref = Ingestor(CounterStore())
    for channel, m in msgs:
        ref._general(m, channel, None)  # the protobuf parser: what the wire means
    return ref


def assert_same(msgs: list[tuple[str, bytes]], budget: CompileBudget | None = None) -> Ingestor:
    fast = Ingestor(CounterStore(), compile_budget=budget)
    for channel, m in msgs:
        fast.ingest(m, channel)
    ref = reference(msgs)
    assert series(fast) == series(ref)
    a, b = fast.snapshot(), ref.snapshot()
    for dev in DEVICES:
        if dev in a.devices:
            assert [a.stat(dev, st) for st in Stat] == [b.stat(dev, st) for st in Stat], dev
    assert a.strings == b.strings
    return fast


def test_a_port_s_usual_layout_is_read_by_its_template_at_every_varint_width() -> None:
    widths = [0, 1, 2**7, 2**21, 2**35, 2**49, 2**56, 2**63, 2**64 - 1, 5]  # 1 to 10 varint bytes, then a reset
    msgs = []
    for k, v in enumerate(widths):
        updates: list[tuple[str, Any]] = [(rel, min(v + j, 2**64 - 1)) for j, rel in enumerate(IF_LAYOUT[:4])]
        updates.append((BER, 1.5e-7 * (k + 1)))
        msgs.append((DEVICES[0], notification(DEVICES[0], T0 + k * S, IF.format(port=PORTS[0]), updates)))
    fast = assert_same(msgs)
    assert len(fast._templates) == 1  # learnt from the first message, then used for all the others
    assert fast.templated == len(widths) - 1
    s = fast.snapshot()
    i = s.find(DEVICES[0], PORTS[0], "if.in-fcs-errors")
    g = s.find(DEVICES[0], PORTS[0], "fec.pre-fec-ber", 1)
    assert i is not None and g is not None
    assert int(s.value[i]) == 5  # after 2**64 - 1: a wrap of all 4 counters
    assert s.stat(DEVICES[0], Stat.WRAPS) == 4 and s.stat(DEVICES[0], Stat.RESETS) == 0
    assert s.gauge[g] == pytest.approx(1.5e-6)


def test_every_port_of_a_tree_shares_one_template() -> None:
    msgs = []
    for k in range(3):
        for dev in DEVICES:
            for port in PORTS:
                counters = [(r, 10 * k) for r in IF_LAYOUT[:4]]
                msgs.append((dev, notification(dev, T0 + k * S, IF.format(port=port), counters)))
                msgs.append((dev, notification(dev, T0 + k * S, QOS.format(port=port), [(QUEUE, 7 * k)])))
    fast = assert_same(msgs)
    assert len(fast._templates) == 2
    assert fast.templated == len(msgs) - 2 * len(DEVICES) * len(PORTS)  # the first of each port walks, finds it


def test_a_changed_layout_falls_back_to_the_walker_and_is_learnt() -> None:
    port = IF.format(port=PORTS[0])
    dev = DEVICES[0]
    layouts: list[list[tuple[str, Any]]] = [
        [(FCS, 1), (OCTETS, 2)],
        [(FCS, 3), (OCTETS, 4)],  # the template
        [(OCTETS, 5), (FCS, 6)],  # order changed
        [(FCS, 7), (OCTETS, 8), (PFC3, 9)],  # a leaf more
        [(FCS, 10)],  # a leaf less
        [(FCS, 11), (OCTETS, "lots")],  # a string where a counter was: malformed, counted
        [(FCS, 13), (OCTETS, 14.0)],  # a double for a counter: malformed
        [(FCS, 15), (OCTETS, gnmi_pb2.TypedValue(int_val=16))],  # another encoding of a number
        [(FCS, 17), (OPER, "UP")],  # state
        [(FCS, 19), (OCTETS, 20)],
    ]
    msgs = [(dev, notification(dev, T0 + k * S, port, u)) for k, u in enumerate(layouts)]
    fast = assert_same(msgs)
    assert fast.snapshot().stat(dev, Stat.MALFORMED) == 2
    assert fast.templated == 1  # message 1; each of the others changed the layout (9 differs from 6's)


def test_a_string_or_empty_notification_does_not_cost_the_port_its_template() -> None:
    dev, port = DEVICES[0], IF.format(port=PORTS[0])
    usual: list[tuple[str, Any]] = [(FCS, 1), (OCTETS, 2)]
    layouts = [usual, usual, [(OPER, "DOWN")], usual, [], usual]
    msgs = [(dev, notification(dev, T0 + k * S, port, u)) for k, u in enumerate(layouts)]
    fast = assert_same(msgs)
    assert fast.templated == 3  # messages 1, 3 and 5


def _decodes(m: bytes) -> bool:
    try:
        gnmi_pb2.SubscribeResponse.FromString(m)
    except DecodeError:
        return False
    return True


def test_damaged_messages_are_read_as_the_protobuf_parser_reads_them() -> None:
    """One byte of a message the port's template reads, changed (+1, -1, top bit): a length byte that no longer
    fits its value, a longer or shorter varint, another field tag. What still decodes must be read as the parser
    reads it; what does not must be counted as malformed (the walker may keep the updates it can read: a path
    that is not UTF-8 costs that update only)."""
    rng = random.Random(5)
    dev, port = DEVICES[0], IF.format(port=PORTS[0])
    decodable = []
    broken = 0
    for k in range(40):
        good = notification(dev, T0 + k * S, port, [(r, rng.choice((3, 300, 2**40)) * (k + 1)) for r in IF_LAYOUT[:4]])
        decodable.append((dev, good))  # keeps the template learnt
        for pos in rng.sample(range(len(good)), 12):
            for delta in (1, -1, 0x80):
                b = bytearray(good)
                b[pos] = (b[pos] + delta) & 0xFF
                if _decodes(bytes(b)):
                    decodable.append((dev, bytes(b)))
                    continue
                ing = Ingestor(CounterStore())
                ing.ingest(good, dev)
                ing.ingest(bytes(b), dev)
                assert ing.snapshot().stat(dev, Stat.MALFORMED) >= 1, bytes(b)
                broken += 1
    assert broken > 100 and len(decodable) > 500  # both kinds were tried
    fast = assert_same(decodable)
    assert fast.templated >= 39


def _value(rng: random.Random, rel: str, k: int) -> Any:
    if rel == BER:
        return rng.choice((1e-8 * k, -0.0, math.inf, -math.inf, math.nan, 3.25, 2.0**-1074))
    if rel == OPER:
        return rng.choice(("UP", "DOWN", "LOWER_LAYER_DOWN"))
    if rng.random() < 0.03:
        return rng.choice(("x", 1.0, gnmi_pb2.TypedValue(int_val=-1), gnmi_pb2.TypedValue(json_ietf_val=b'"9"')))
    return rng.choice((k, 1000 * k, 2**40 + k, 2**64 - 1 - k, rng.randrange(2**64)))


def test_random_streams_agree_with_the_protobuf_parser() -> None:
    """Usual layouts most of the time, with changed layouts, odd values, shared and out-of-order timestamps."""
    rng = random.Random(11)
    usual = {(d, p): rng.sample(IF_LAYOUT, rng.randint(2, 5)) for d in DEVICES for p in PORTS}
    msgs = []
    for k in range(300):
        dev, port = rng.choice(DEVICES), rng.choice(PORTS)
        rels = list(usual[dev, port])
        if rng.random() < 0.2:
            rels = rng.sample([*IF_LAYOUT, OPER], rng.randint(1, 6))
        ts = T0 + (k // 3) * S  # three notifications share a timestamp
        if rng.random() < 0.05:
            ts = rng.choice((T0 + rng.randrange(300) * S, rng.randrange(1, 2**40)))  # out of order, short varint
        msgs.append((dev, notification(dev, ts, IF.format(port=port), [(r, _value(rng, r, k)) for r in rels])))
    fast = assert_same(msgs)
    assert 1 <= len(fast._templates) <= MAX_TEMPLATES and fast.templated > 100


def _many_layouts(n_layouts: int) -> list[tuple[str, bytes]]:
    dev, msgs = DEVICES[0], []
    for k in range(2):
        for n in range(n_layouts):  # as many distinct layouts (a leaf per queue name)
            rel = f"/output/queues/queue[name={n}]/state/transmit-pkts"
            msgs.append((dev, notification(dev, T0 + k * S, QOS.format(port=PORTS[0]), [(rel, k * n)])))
    return msgs


def test_templates_are_capped_and_values_stay_right_beyond_the_cap() -> None:
    clock = iter(range(10**6))  # a second between compiles: the pace never binds
    fast = assert_same(_many_layouts(MAX_TEMPLATES + 20), CompileBudget(clock=lambda: float(next(clock))))
    assert len(fast._templates) == MAX_TEMPLATES


def test_compiles_are_paced_so_a_device_changing_layouts_cannot_stall_the_loop() -> None:
    now = [0.0]
    budget = CompileBudget(every_s=1.0, burst=4, clock=lambda: now[0])
    msgs = _many_layouts(10)
    fast = Ingestor(CounterStore(), compile_budget=budget)
    for channel, m in msgs[:10]:  # 10 new layouts at one instant: the burst of 4 compiles, the rest are walked
        fast.ingest(m, channel)
    assert len(fast._templates) == 4
    now[0] = 2.5  # two more tokens
    for channel, m in msgs[10:]:
        fast.ingest(m, channel)
    assert len(fast._templates) == 6
    assert series(fast) == series(reference(msgs))


def test_double_values_are_decoded_bit_for_bit() -> None:
    values = [1.5e-7, -40.0, -0.0, math.inf, -math.inf, math.nan, 2.0**-1074, 1.7976931348623157e308, 0.1]
    dev, port = DEVICES[0], PORTS[0]
    ing = Ingestor(CounterStore())
    got = []
    for k, v in enumerate(values):
        ing.ingest(notification(dev, T0 + k * S, IF.format(port=port), [(FCS, k), (BER, v)]), dev)
        s = ing.snapshot()
        g = s.find(dev, port, "fec.pre-fec-ber", 1)
        assert g is not None
        got.append(float(s.gauge[g]))
    assert [repr(x) for x in got] == [repr(x) for x in values]
    assert ing.templated == len(values) - 1


def test_layouts_of_unknown_leaves_or_too_many_path_bytes_get_no_template() -> None:
    """Compiles stall the loop in proportion to the paths: a device's unknown (or random) paths never get one, nor
    does a layout longer than MAX_LAYOUT_BYTES."""
    dev, port = DEVICES[0], QOS.format(port=PORTS[0])
    unknown: list[tuple[str, Any]] = [(f"/output/queues/queue[name=3]/state/bogus-{k}", k) for k in range(8)]
    name = "q" * 200  # a known leaf with a long index: 64 of them hold ~16 KB of paths
    long = [(f"/output/queues/queue[name={name}{k}]/state/transmit-pkts", k) for k in range(64)]
    msgs = [(dev, notification(dev, T0 + k * S, port, layout)) for k in range(3) for layout in (unknown, long)]
    assert len(msgs[1][1]) > MAX_LAYOUT_BYTES + 4096  # the long layout's message: paths well over the limit
    fast = assert_same(msgs)
    assert fast.templated == 0 and not fast._templates
    assert fast.snapshot().stat(dev, Stat.UNKNOWN) == 3 * len(unknown)


def test_the_compile_budget_charges_by_size() -> None:
    now = [0.0]
    budget = CompileBudget(every_s=1.0, burst=4, clock=lambda: now[0])
    assert budget.take(3.0) and not budget.take(3.0) and budget.take(1.0)  # 4 tokens: 3, then 1
    now[0] = 2.0
    assert not budget.take(3.0) and budget.take(2.0)  # 2 tokens back after 2 s
