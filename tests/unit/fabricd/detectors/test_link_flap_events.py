"""The event-driven side of link_flap: the store hands a pass the oper-status changes that landed since the last one
(no snapshot), `link_flap.on_events` judges the link on the event that takes it over the threshold, and the service's
pass loop runs that pass when the store says an event landed, not at its next poll."""

from __future__ import annotations

import asyncio
import time

import numpy as np
import pytest

from fabricd.detectors import link_flap
from fabricd.service import passes
from fabricd.telemetry import CounterStore, Ingestor, StateEvent
from topology.fabric import Fabric

NS = 1_000_000_000
T0 = 1_700_000_000 * NS
LEAF, PORT = "leaf-g0-r0", "Ethernet5/1"


class Ports:
    """Writes oper-status (and another ENUM leaf) into a store as the ingestor would."""

    def __init__(self, store: CounterStore) -> None:
        self.store = store

    def series(self, device: str, port: str, leaf: str) -> int:
        st = self.store
        row = st.port_row(st.device_id(device), port)
        return int(st.series_at(np.array([row]), np.array([st.code(leaf, None)]))[0])

    def write(self, device: str, port: str, value: str, ts: int, leaf: str = "oper-status") -> None:
        self.store.write_state(self.series(device, port, leaf), value, ts)


def test_events_after_returns_changes_once_in_arrival_order_and_skips_first_values() -> None:
    store = CounterStore()
    p = Ports(store)
    p.write(LEAF, PORT, "UP", T0)  # a first value: no change
    p.write(LEAF, "Ethernet6/1", "UP", T0)
    p.write(LEAF, PORT, "DOWN", T0 + 10)
    p.write(LEAF, PORT, "DOWN", T0 + 10)  # a duplicate: no event
    p.write(LEAF, "Ethernet6/1", "DOWN", T0 + 5)  # arrived later, happened earlier: arrival order
    p.write(LEAF, PORT, "UP", T0 + 20, leaf="admin-status")  # another leaf's first value
    p.write(LEAF, PORT, "DOWN", T0 + 30, leaf="admin-status")  # another leaf's change
    events, cursor = store.events_after(0, "oper-status")
    assert [(e.port, e.value, e.previous, e.ts) for e in events] == [
        (PORT, "DOWN", "UP", T0 + 10),
        ("Ethernet6/1", "DOWN", "UP", T0 + 5),
    ]
    assert cursor == store.ev_total
    assert store.events_after(cursor, "oper-status") == ([], cursor)
    p.write(LEAF, PORT, "UP", T0 + 40)
    events, cursor2 = store.events_after(cursor, "oper-status")
    assert [(e.port, e.value, e.ts) for e in events] == [(PORT, "UP", T0 + 40)]
    assert cursor2 == cursor + 1


def test_events_after_keeps_only_what_the_ring_still_holds() -> None:
    store = CounterStore(event_capacity=4)
    p = Ports(store)
    p.write(LEAF, PORT, "UP", T0)
    for k in range(1, 9):
        p.write(LEAF, PORT, "DOWN" if k % 2 else "UP", T0 + k)
    events, cursor = store.events_after(0, "oper-status")
    assert [e.ts for e in events] == [T0 + 5, T0 + 6, T0 + 7, T0 + 8]
    assert cursor == 9


def test_the_store_calls_its_listener_when_an_event_lands() -> None:
    store = CounterStore()
    p = Ports(store)
    calls: list[int] = []
    store.on_event.append(lambda: calls.append(store.ev_total))
    p.write(LEAF, PORT, "UP", T0)  # a first value is an event too (the ring keeps it)
    p.write(LEAF, PORT, "UP", T0 + 1)  # no change: no event, no call
    p.write(LEAF, PORT, "DOWN", T0 + 2)
    assert calls == [1, 2]


def flap_events(fabric: Fabric, n: int, every_s: float = 1.0) -> list[list[StateEvent]]:
    """n down/up flaps of the leaf end, one list (what one event-driven pass reads) per change."""
    out = []
    for k in range(n):
        t = T0 + int(k * every_s * NS)
        out.append([StateEvent(LEAF, PORT, "oper-status", "DOWN", "UP", t)])
        out.append([StateEvent(LEAF, PORT, "oper-status", "UP", "DOWN", t + NS // 4)])
    return out


def test_on_events_finds_the_link_on_the_event_that_crosses_the_threshold(small_fabric: Fabric) -> None:
    state = link_flap.LinkFlapState()
    got = [link_flap.on_events(evs, small_fabric, state, evs[0].ts) for evs in flap_events(small_fabric, 5)]
    crossing = T0 + 4 * NS  # the fifth down: 1000 + 4 decayed penalties > 4100 (LinkFlapConfig)
    assert [i for i, fs in enumerate(got) if fs] == [8]  # the fifth down (an up is no flap: nothing to judge)
    f = got[8][0]
    assert (f.kind, f.evidence["flaps"], f.evidence["suppressed_ts"]) == ("link_flap", 5, crossing)
    assert f.detected_ts == crossing
    assert set(f.ports) == {f"{LEAF}:{PORT}", str(small_fabric.peer(LEAF, PORT))}


def test_four_flaps_are_no_finding_and_events_are_never_counted_twice(small_fabric: Fabric) -> None:
    state = link_flap.LinkFlapState()
    batches = flap_events(small_fabric, 4)
    for evs in batches:
        assert link_flap.on_events(evs, small_fabric, state, evs[0].ts) == []
    for evs in batches:  # the same events again (a full pass reading the ring): nothing new
        assert link_flap.on_events(evs, small_fabric, state, evs[0].ts) == []
    (link,) = state.links.values()
    assert len(link.flaps) == 4 and not link.suppressed


def test_the_pass_loop_runs_link_flap_when_an_event_lands_not_at_its_poll(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(passes, "EVENT_POLL_S", 30.0)  # no poll would come within the test
    store = CounterStore()
    p = Ports(store)
    p.write(LEAF, PORT, "UP", T0)

    async def main() -> float:
        stop = asyncio.Event()
        ran = asyncio.Event()
        wrote = 0.0

        async def flap(now: int) -> None:
            if store.ev_total > 1:
                ran.set()

        async def full(now: int) -> None:
            return None

        loop = asyncio.create_task(
            passes.run_passes(Ingestor(store), time.time_ns, stop, tick_s=60.0, pass_gap_s=0.0, full=full, flap=flap)
        )
        await asyncio.sleep(0.2)  # the loop is waiting now
        assert len(store.on_event) == 1
        wrote = time.monotonic()
        p.write(LEAF, PORT, "DOWN", T0 + NS)
        await asyncio.wait_for(ran.wait(), 5)
        took = time.monotonic() - wrote
        stop.set()
        assert len(store.on_event) == 1
        store.on_event[0]()  # wake it to see the stop
        await asyncio.wait_for(loop, 5)
        assert store.on_event == []  # the loop let go of the store
        return took

    assert asyncio.run(main()) < 5.0


def test_on_store_events_reads_each_change_once_from_the_store(small_fabric: Fabric) -> None:
    """The live loop's entry: the store's new oper-status changes, each read once (the cursor is in the state)."""
    store, state = CounterStore(), link_flap.LinkFlapState()
    p = Ports(store)
    p.write(LEAF, PORT, "UP", T0 - NS)
    for k in range(4):
        p.write(LEAF, PORT, "DOWN", T0 + k * NS)
        p.write(LEAF, PORT, "UP", T0 + k * NS + NS // 4)
    assert link_flap.on_store_events(store, small_fabric, state, T0 + 4 * NS) == []  # four flaps: none
    assert state.event_cursor == store.ev_total
    p.write(LEAF, PORT, "DOWN", T0 + 4 * NS)
    (f,) = link_flap.on_store_events(store, small_fabric, state, T0 + 4 * NS)  # the fifth crosses
    assert (f.evidence["flaps"], f.evidence["suppressed_ts"]) == (5, T0 + 4 * NS)
    assert link_flap.on_store_events(store, small_fabric, state, T0 + 4 * NS) == []  # nothing new
