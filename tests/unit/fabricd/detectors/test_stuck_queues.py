"""The shared stuck-queue tracker: one state for pfc_storm and pfc_deadlock, judged once a tick, and its vectorised
rule equal field for field to the per-queue reference (stuck_reference.py) on random telemetry."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from dataclasses import astuple
from typing import Any

import numpy as np
import pytest

from fabricd.detectors import Runner, default_detectors, pfc_deadlock, pfc_storm, stuck_queues
from fabricd.detectors.stuck_queues import StuckConfig, StuckQueues, track
from fabricd.telemetry import CounterStore, Snapshot
from topology.fabric import Fabric

from . import stuck_reference as ref

NS = 1_000_000_000
T0 = 1_700_000_000 * NS
PAUSE, FRAMES, TX, WD = "pfc.pfc-on-total-rx-time", "pfc.in-frames", "queue.transmit-pkts", "wd.stuck-count"
SWITCHES = ("leaf-g0-r0", "leaf-g1-r0", "spine-r0-0", "spine-r0-1", "leaf-g0-r1", "spine-r1-0")
MODES = ("idle", "stuck", "exact", "edge", "partial", "xon", "draining", "declared", "lingering")


class RandomFabricTelemetry:
    """Random PFC telemetry for the switch ports of a few devices: queues switching between idle, stuck, paused
    exactly the threshold, barely (not) stuck, partly paused, XON-only, draining, declared stuck by the switch's
    watchdog mid-interval and left "stormed" by it after the pause; missing leaves, skipped samples,
    counter resets, flaps, ports left down, devices going silent or unheard (stale; one silent for 75 s, so its quiet
    queues are forgotten), a second priority and index spellings the rule must skip or fold."""

    def __init__(self, fabric: Fabric, seed: int, event_capacity: int = 65536) -> None:
        self.rng = rng = np.random.default_rng(seed)
        self.store = st = CounterStore(event_capacity=event_capacity)
        self.ports = [(d, p) for d in SWITCHES for p in fabric.ports(d)]
        self.oper: dict[tuple[str, str], int] = {}
        self.series: list[tuple[int, tuple[str, str], str, int]] = []  # (series row, port, leaf, mode's priority)
        self.mode: dict[tuple[tuple[str, str], int], str] = {}
        for k, (d, p) in enumerate(self.ports):
            row = st.port_row(st.device_id(d), p)
            if rng.random() < 0.9:
                self.oper[(d, p)] = self._series(row, "oper-status", None)
            for prio in (3, 4) if k % 3 else (3,):
                self.mode[((d, p), prio)] = "idle"
                for leaf, share in ((PAUSE, 0.8), (FRAMES, 0.8), (TX, 0.85), (WD, 0.7)):
                    if rng.random() < share:
                        self.series.append((self._series(row, leaf, str(prio)), (d, p), leaf, prio))
            if k % 11 == 0:  # spelled differently: "03" folds into priority 3, "all" is no priority
                self.mode[((d, p), -1)] = "idle"  # their own pauses, so they can move when "3" does not
                self.series.append((self._series(row, FRAMES, "03"), (d, p), FRAMES, -1))
                self.series.append((self._series(row, FRAMES, "all"), (d, p), FRAMES, -1))
        self.value = rng.integers(0, 1 << 30, len(self.series)).astype(np.uint64)
        self.last = np.zeros(len(self.series), dtype=np.int64)  # last sample time written
        self.silent: dict[str, int] = {}  # device -> first round it sends data again
        self.unheard: dict[str, int] = {}  # device -> first round its updates count as seen again

    def _series(self, row: int, leaf: str, index: str | None) -> int:
        return int(self.store.series_at(np.array([row]), np.array([self.store.code(leaf, index)]))[0])

    def _increment(self, mode: str, leaf: str, dt: int) -> int:
        rng = self.rng
        pause = {
            "stuck": dt,
            "exact": 99 * (dt // 100),  # exactly the 0.99 threshold (dt is a multiple of 100 ns)
            "edge": int(dt * rng.uniform(0.985, 0.995)),
            "partial": dt // 3,
            "draining": dt,
            "declared": int(dt * rng.uniform(0.2, 0.98)),  # the storm began mid-interval
        }
        frames = {"stuck": 20_000, "exact": 19_800, "edge": 19_800, "partial": 7_000, "xon": 40, "draining": 20_000}
        frames["declared"] = 12_000
        tx = 0 if mode in ("stuck", "exact", "edge", "xon") else int(rng.integers(1, 50_000))
        # The watchdog declares a mid-interval storm (and now and then a whole-interval one, or an XON) once.
        declares = mode == "declared" or (mode in ("stuck", "xon", "partial") and rng.random() < 0.2)
        return {PAUSE: pause.get(mode, 0), FRAMES: frames.get(mode, 0), TX: tx, WD: int(declares)}[leaf]

    def _spells(self, r: int) -> None:
        rng = self.rng
        if r == 10:
            self.silent[SWITCHES[-1]] = 85
        for spell in (self.silent, self.unheard):
            for d in SWITCHES:
                if d not in spell and rng.random() < 0.03:
                    spell[d] = r + int(rng.integers(2, 7))  # long enough to go stale, or not
                elif spell.get(d, 0) <= r:
                    spell.pop(d, None)
        for q in self.mode:
            if rng.random() < 0.15:
                self.mode[q] = str(rng.choice(MODES))

    def round(self, r: int) -> None:
        rng, st = self.rng, self.store
        base = T0 + r * NS - 100_000_000
        if r == 0:
            for i in self.oper.values():
                st.write_state(i, "UP", base - NS)
        self._spells(r)
        idx, vals, times = [], [], []
        for k, (i, port, leaf, prio) in enumerate(self.series):
            if port[0] in self.silent or rng.random() < 0.05:
                continue  # silent device, or a sample missed
            ts = base + 100 * int(rng.integers(0, 10_000))
            if rng.random() < 0.005:
                self.value[k] = np.uint64(rng.integers(0, 100))  # reset (reboot, clear counters)
            else:
                dt = ts - int(self.last[k]) if self.last[k] else NS
                self.value[k] += np.uint64(self._increment(self.mode[(port, prio)], leaf, dt))
            self.last[k] = ts
            idx.append(i)
            vals.append(self.value[k])
            times.append(ts)
        st.write_counters(np.array(idx, dtype=np.int64), np.array(vals, dtype=np.uint64), np.array(times))
        for port, i in self.oper.items():
            if port[0] in self.silent:
                continue
            up = st.strings[int(st.arrays["value"][i])] == "UP"
            if up and rng.random() < 0.02:  # a flap, or a port going down for a while
                st.write_state(i, "DOWN", base - 500_000_000)
                if rng.random() < 0.5:
                    st.write_state(i, "UP", base - 300_000_000)
            elif not up and rng.random() < 0.3:
                st.write_state(i, "UP", base - 400_000_000)
        for d in SWITCHES:
            if d not in self.silent and d not in self.unheard:
                st.seen(st.device_ids[d], base + NS // 100)

    def ticks(self, rounds: int) -> Iterator[tuple[Snapshot, int]]:
        for r in range(rounds):
            self.round(r)
            yield self.store.snapshot(), T0 + r * NS


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_vectorised_tracker_equals_per_queue_reference(small_fabric: Fabric, seed: int) -> None:
    cfg = StuckConfig()
    sq, queues = StuckQueues(cfg), dict[tuple[str, str, int], ref.RefQueue]()
    seen = {"stuck": 0, "held": 0, "forgotten": 0, "declared": 0}
    for k, (snapshot, now) in enumerate(RandomFabricTelemetry(small_fabric, seed).ticks(100)):
        before = set(queues)
        ref.track(snapshot, queues, cfg, now)
        # Now and then a snapshot without the store's shared port index: the tracker looks its ports up again.
        track(snapshot if k % 7 else dataclasses.replace(snapshot, live_ports=None), sq, now)
        assert {q: astuple(sq.get(q)) for q in sq.keys} == {q: astuple(qs) for q, qs in queues.items()}
        assert sq.index == {q: i for i, q in enumerate(sq.keys)}
        seen["stuck"] += sum(qs.count > 0 for qs in queues.values())
        seen["held"] += sum(qs.count >= cfg.hold_samples for qs in queues.values())
        seen["forgotten"] += len(before - set(queues))
        seen["declared"] += sum(qs.watchdog for qs in queues.values())
    assert all(n > 0 for n in seen.values()), seen  # the random trace went through every state


def _runner_ticks(runner: Runner, telemetry: RandomFabricTelemetry, rounds: int) -> list[Any]:
    return [f for snapshot, now in telemetry.ticks(rounds) for f in runner.tick(snapshot, now)]


def test_storm_and_deadlock_judge_from_one_tracker_once_a_tick(
    small_fabric: Fabric, monkeypatch: pytest.MonkeyPatch
) -> None:
    runner = Runner(small_fabric)
    by_name = dict(zip((d.name for d in runner.detectors), runner.states, strict=True))
    storm, deadlock = by_name["pfc_storm"], by_name["pfc_deadlock"]
    assert isinstance(storm, pfc_storm.PfcStormState) and isinstance(deadlock, pfc_deadlock.PfcDeadlockState)
    assert storm.tracker is deadlock.tracker
    judged: list[int] = []
    real = stuck_queues._judge

    def counting(*args: Any) -> None:
        judged.append(1)
        real(*args)

    monkeypatch.setattr(stuck_queues, "_judge", counting)
    _runner_ticks(runner, RandomFabricTelemetry(small_fabric, 4), 12)
    assert len(judged) == runner.ticks == 12


def test_sharing_the_tracker_changes_no_finding(small_fabric: Fabric) -> None:
    """Each detector on its own tracker (as before sharing) finds exactly what the pair finds on one."""
    shared = Runner(small_fabric)
    alone = Runner(small_fabric)
    alone.states = [d.new_state() for d in alone.detectors]  # fresh states, not shared
    trackers = [s.tracker for s in alone.states if isinstance(s, stuck_queues.TracksStuckQueues)]
    assert len(trackers) == 2 and trackers[0] is not trackers[1]
    a = _runner_ticks(shared, RandomFabricTelemetry(small_fabric, 5), 40)
    b = _runner_ticks(alone, RandomFabricTelemetry(small_fabric, 5), 40)
    assert [f.to_dict() for f in a] == [f.to_dict() for f in b]
    assert {f.kind for f in a} & {"pfc_storm", "pfc_deadlock"}  # the random trace did stick some queues


def test_a_service_runner_keeps_no_finding_between_ticks(small_fabric: Fabric) -> None:
    """The service reads each tick's findings and runs for months: its runner must not keep every incident."""
    replay, service = Runner(small_fabric), Runner(small_fabric, keep=False)
    a = _runner_ticks(replay, RandomFabricTelemetry(small_fabric, 5), 40)
    b = _runner_ticks(service, RandomFabricTelemetry(small_fabric, 5), 40)
    assert a and [f.to_dict() for f in a] == [f.to_dict() for f in b]  # the same findings, tick by tick
    assert replay.findings() and service.findings() == [] and service.found == {}


def test_share_keeps_different_rules_apart() -> None:
    strict = pfc_storm.PfcStormState(StuckConfig(hold_samples=3))
    states = [d.new_state() for d in default_detectors()] + [strict]
    stuck_queues.share(states)
    trackers = {id(s.tracker) for s in states if isinstance(s, stuck_queues.TracksStuckQueues)}
    assert len(trackers) == 2  # the default pair shares one; a different rule keeps its own


def _stuck_store(ports: list[tuple[str, str]], rounds: int) -> CounterStore:
    """Every port's priority-3 queue paused all the time with nothing sent, ports registered in the given order."""
    st = CounterStore()
    rows = np.array([st.port_row(st.device_id(d), p) for d, p in ports], dtype=np.int64)
    pause, tx = (st.series_at(rows, np.full(len(rows), st.code(leaf, "3"))) for leaf in (PAUSE, TX))
    for r in range(rounds):
        ts = np.full(len(rows), T0 + r * NS, dtype=np.int64)
        st.write_counters(
            np.concatenate([pause, tx]),
            np.array([r * NS] * len(rows) + [0] * len(rows), np.uint64),
            np.concatenate([ts, ts]),
        )
        for d in {d for d, _ in ports}:
            st.seen(st.device_ids[d], T0 + r * NS)
    return st


def test_tracker_follows_a_store_that_numbers_ports_differently() -> None:
    ports = [("leaf-g0-r0", f"Ethernet{k}/1") for k in range(1, 6)] + [("spine-r0-0", "Ethernet1/1")]
    a, b = _stuck_store(ports, 3), _stuck_store(ports[::-1], 4)
    sq = StuckQueues()
    track(a.snapshot(), sq, T0 + 2 * NS)
    assert sorted(sq.keys) == sorted((d, p, 3) for d, p in ports) and set(sq.count.tolist()) == {1}
    snapshot = b.snapshot()
    track(snapshot, sq, T0 + 3 * NS)
    assert [snapshot.port_row(q[0], q[1]) for q in sq.keys] == sq.port.tolist()
    assert set(sq.count.tolist()) == {2}  # the same queues, one more stuck sample
