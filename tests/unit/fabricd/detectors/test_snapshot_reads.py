"""The vectorised snapshot reads the detectors lean on (`select` by leaf, `events_since`) give what the per-series
scans they replaced gave, on random telemetry (a small event ring, so it wraps)."""

from __future__ import annotations

import numpy as np
import pytest

from fabricd.telemetry import CounterStore, Snapshot, StateEvent
from topology.fabric import Fabric

from .test_stuck_queues import FRAMES, NS, PAUSE, T0, TX, RandomFabricTelemetry


def _events_reference(s: Snapshot, ts: int) -> list[StateEvent]:
    """`events_since` as written before: one `key()` per event, sorted by ring age, then stably by time."""
    ser, val, prev, ets, total = s.events
    cap = len(ets)
    hits = np.flatnonzero(np.asarray(ets[: min(total, cap)]) >= ts)
    oldest = total % cap if total > cap else 0
    out = []
    for k in sorted(hits.tolist(), key=lambda k: (k - oldest) % cap):
        dev, port, leaf, _ = s.key(int(ser[k]))
        p = int(prev[k])
        out.append(StateEvent(dev, port, leaf, s.strings[int(val[k])], s.strings[p] if p else None, int(ets[k])))
    out.sort(key=lambda e: e.ts)
    return out


@pytest.mark.parametrize("event_capacity", [64, 65536])
def test_events_since_equals_the_per_event_reference(small_fabric: Fabric, event_capacity: int) -> None:
    telemetry = RandomFabricTelemetry(small_fabric, 8, event_capacity)
    seen = 0
    for snapshot, now in telemetry.ticks(30):
        for back_s in (0.5, 3, 10, 400):
            got = snapshot.events_since(now - int(back_s * NS))
            assert got == _events_reference(snapshot, now - int(back_s * NS))
            seen += len(got)
    assert seen > 0
    assert event_capacity > 64 or snapshot.events[4] > event_capacity  # the small ring wrapped


@pytest.mark.parametrize("event_capacity", [64, 65536])
def test_filtered_events_since_equals_filtering_every_event(small_fabric: Fabric, event_capacity: int) -> None:
    """`leaf`/`changes_only` drop events before objects are made (link_corruption after a sync): same events."""
    telemetry = RandomFabricTelemetry(small_fabric, 9, event_capacity)
    firsts = changes = 0
    for snapshot, now in telemetry.ticks(20):
        for back_s in (3, 400):
            every = snapshot.events_since(now - int(back_s * NS))
            for leaf in (None, "oper-status", "admin-status"):
                for only in (False, True):
                    want = [e for e in every if leaf in (None, e.leaf) and not (only and e.previous is None)]
                    assert snapshot.events_since(now - int(back_s * NS), leaf=leaf, changes_only=only) == want
            firsts += sum(e.previous is None for e in every)
            changes += sum(e.previous is not None for e in every)
    assert firsts and changes  # both kinds were there to filter


def test_events_of_the_same_time_keep_their_arrival_order() -> None:
    st = CounterStore(event_capacity=4)
    rows = [st.port_row(st.device_id("leaf-g0-r0"), f"Ethernet{k}/1") for k in range(1, 4)]
    sidx = st.series_at(np.array(rows), np.full(3, st.code("oper-status", None))).tolist()
    for i, state, ts in [(0, "UP", T0), (1, "UP", T0 + 1), (2, "UP", T0 + 2)] + [
        (i, "DOWN", T0 + NS) for i in (2, 1, 0)
    ]:
        st.write_state(sidx[i], state, ts)
    got = st.snapshot().events_since(T0)  # the ring (4) kept the newest 4; the 3 DOWNs share one time
    assert [(e.port, e.value) for e in got] == [
        ("Ethernet3/1", "UP"),
        ("Ethernet3/1", "DOWN"),
        ("Ethernet2/1", "DOWN"),
        ("Ethernet1/1", "DOWN"),
    ]


def test_select_by_leaf_reads_the_rows_a_scan_of_every_series_finds(small_fabric: Fabric) -> None:
    """`select(leaf=..., index=...)` reads `slots` columns (as the stuck-queue tracker does): the scan's rows."""
    telemetry = RandomFabricTelemetry(small_fabric, 6)
    snapshot, _ = next(telemetry.ticks(1))
    telemetry.store.series_at(np.array([0]), np.array([telemetry.store.code("if.in-pkts", None)]))  # after it
    for leaf, index in [(PAUSE, None), (FRAMES, "3"), (FRAMES, "03"), (None, "4"), (TX, 7), ("oper-status", None)]:
        want = None if index is None else str(index)
        ok = [c for c, (lf, ix) in enumerate(snapshot.codes) if leaf in (None, lf) and (index is None or ix == want)]
        scan = np.flatnonzero(np.isin(snapshot.series_code, ok))
        assert snapshot.select(leaf=leaf, index=index).tolist() == scan.tolist()
    assert len(snapshot.select(leaf=FRAMES)) > 0
