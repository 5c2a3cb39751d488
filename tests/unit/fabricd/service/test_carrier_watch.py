"""CarrierWatch on a real state file and a real counter store: what the leader remembers of each port's
carrier-transitions, what it writes (only changes, each round's time), and what a restart finds with it."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from fabricd.detectors.link_flap import LinkFlapConfig
from fabricd.service.carrier_watch import LEAF, CarrierWatch
from fabricd.service.state import StateStore
from fabricd.telemetry import CounterStore
from topology.fabric import Fabric
from topology.units import NS

T0 = 1_700_000_000 * NS
SERVER = ("leaf-g0-r0", "Ethernet1/1")
UPLINK = ("leaf-g0-r1", "Ethernet5/1")


def put(store: CounterStore, end: tuple[str, str], value: int, at_s: float) -> None:
    """One carrier-transitions sample, as the ingestor writes it."""
    row = store.port_row(store.device_id(end[0]), end[1])
    sidx = store.series_at(np.array([row]), np.array([store.code(LEAF, None)]))
    store.write_counters(sidx, np.array([value], dtype=np.uint64), np.array([T0 + int(at_s * NS)], dtype=np.int64))


def never_tracked(ends: tuple[str, ...]) -> bool:
    return False


@pytest.fixture
def state(tmp_path: Path) -> Iterator[StateStore]:
    s = StateStore(tmp_path / "state.db")
    yield s
    s.close()


def run_round(w: CarrierWatch, store: CounterStore, at_s: float, state: StateStore, unsure: tuple[str, ...] = ()) -> \
        tuple[list[str], list[tuple[str, str, int, int]] | None]:  # fmt: skip
    """One leader tick: check, then write what is due. Returns the summaries reported and the rows written."""
    snap, now = store.snapshot(), T0 + int(at_s * NS)
    found = w.check(snap, now, set(unsure), never_tracked)
    due = w.to_save(snap, now, set(unsure))
    if due is not None:
        state.carrier.save(due[0], now, due[1])
        w.saved(snap, due[0], now)
    return [f.summary for f in found], None if due is None else due[0]


def test_a_restart_finds_the_train_the_counter_shows_and_writes_only_changes(
    state: StateStore, small_fabric: Fabric
) -> None:
    first, store = CarrierWatch(state, small_fabric, LinkFlapConfig()), CounterStore()
    put(store, SERVER, 40, 0)
    put(store, UPLINK, 3, 0)
    assert run_round(first, store, 0.5, state) == ([], [(*SERVER, 40, T0), (*UPLINK, 3, T0)])
    put(store, SERVER, 40, 1)
    assert run_round(first, store, 5, state) == ([], None)  # not due: a round every 10 s at most
    # Unchanged ports are not written again; the round's time says they still held then.
    for t in range(10, 3610, 10):
        put(store, SERVER, 40, t)
        assert run_round(first, store, t + 0.5, state)[1] == []
    rows, saved = state.carrier.seen()
    assert rows == {SERVER: (40, T0), UPLINK: (3, T0)} and saved == (T0 + 3600 * NS + NS // 2, frozenset())

    # kill -9 an hour after the last change; 8 flaps on the server link while down; back 60 s later.
    again, store = CarrierWatch(state, small_fabric, LinkFlapConfig()), CounterStore()
    put(store, SERVER, 56, 3660)
    put(store, UPLINK, 3, 3660)
    found, written = run_round(again, store, 3660.5, state)
    assert found == [
        "link gpu-g0-000:nic0--leaf-g0-r0:Ethernet1/1 went down 8 times while fabricd was not watching (between "
        "2023-11-14 23:13:20 UTC and 2023-11-14 23:14:20 UTC)"
    ]  # from the last round, not from when the value was first written (an hour before)
    assert written == [(*SERVER, 56, T0 + 3660 * NS)]
    # Reported on the next ticks too (a new incident may wait for fresh telemetry before it is judged), then no more.
    put(store, SERVER, 56, 3661)
    assert len(run_round(again, store, 3661, state)[0]) == 1
    assert run_round(again, store, 3660.5 + 61, state)[0] == []
    # Compared once: later samples are the live detector's.
    put(store, SERVER, 90, 3700)
    assert run_round(again, store, 3700, state)[0] == []


def test_a_switch_not_heard_fresh_waits_and_keeps_its_own_time(state: StateStore, small_fabric: Fabric) -> None:
    w, store = CarrierWatch(state, small_fabric, LinkFlapConfig()), CounterStore()
    put(store, SERVER, 40, 0)
    run_round(w, store, 0, state)
    later = CarrierWatch(state, small_fabric, LinkFlapConfig())  # a restart; the leaf is stale at first
    store = CounterStore()
    put(store, SERVER, 56, 20)
    assert run_round(later, store, 20, state, unsure=("leaf-g0-r0",)) == ([], [])
    assert state.carrier.seen()[1] == (T0 + 20 * NS, frozenset({"leaf-g0-r0"}))  # the round does not vouch for it
    put(store, SERVER, 56, 21)
    assert len(run_round(later, store, 21, state)[0]) == 1  # heard fresh: compared
    # A third start: the second one's round said nothing of the leaf, so its row's own time holds.
    third = CarrierWatch(state, small_fabric, LinkFlapConfig())
    third.check(CounterStore().snapshot(), T0 + 22 * NS, set(), never_tracked)
    assert third.remembered is not None and third.remembered["leaf-g0-r0:Ethernet1/1"].ts == T0


def test_a_link_the_live_detector_tracks_is_left_to_it(state: StateStore, small_fabric: Fabric) -> None:
    w, store = CarrierWatch(state, small_fabric, LinkFlapConfig()), CounterStore()
    put(store, SERVER, 40, 0)
    run_round(w, store, 0, state)
    store = CounterStore()
    put(store, SERVER, 56, 30)
    w = CarrierWatch(state, small_fabric, LinkFlapConfig())
    tracked = w.check(store.snapshot(), T0 + 30 * NS, set(), lambda ends: "leaf-g0-r0:Ethernet1/1" in ends)
    assert tracked == []


def test_a_standby_that_leads_again_reads_what_the_leader_wrote(state: StateStore, small_fabric: Fabric) -> None:
    w, store = CarrierWatch(state, small_fabric, LinkFlapConfig()), CounterStore()
    put(store, SERVER, 40, 0)
    run_round(w, store, 0, state)
    w.disarm()  # a standby now; the other leader writes
    state.carrier.save([(*SERVER, 60, T0 + 100 * NS)], T0 + 100 * NS, [])
    put(store, SERVER, 61, 120)
    assert run_round(w, store, 120, state)[0] == []  # 60 -> 61: no train (40 -> 61 would have been)
    assert state.carrier.seen()[0][SERVER] == (61, T0 + 120 * NS)


def test_a_port_not_heard_within_the_window_is_history(state: StateStore, small_fabric: Fabric) -> None:
    w, store = CarrierWatch(state, small_fabric, LinkFlapConfig(unwatched_max_s=60.0)), CounterStore()
    put(store, SERVER, 40, 0)
    put(store, UPLINK, 3, 0)
    run_round(w, store, 0, state)
    w, store = CarrierWatch(state, small_fabric, LinkFlapConfig(unwatched_max_s=60.0)), CounterStore()
    put(store, SERVER, 40, 10)  # the uplink's leaf streams no counters yet
    run_round(w, store, 10, state)
    assert state.carrier.seen()[1] == (T0 + 10 * NS, frozenset({"leaf-g0-r1"}))  # still waited for
    put(store, UPLINK, 30, 80)  # heard after the window: not compared (what it shows is history), written as it is
    assert run_round(w, store, 80, state) == ([], [(*UPLINK, 30, T0 + 80 * NS)])
    assert state.carrier.seen()[1] == (T0 + 80 * NS, frozenset())
