"""Detector pass benchmark (issue #6): one full `Runner.tick` over an 832-switch snapshot, target < 50 ms.

Builds the pod-16k fabric (examples/pod-16k.yaml: 832 switches, 81,920 cabled switch ports) and a counter store
holding, for every switch port, the series the detectors read: oper-status, carrier-transitions, in-pkts,
in-fcs-errors, in-crc-errors, in-symbol-error, FEC corrected/uncorrected codewords (phy 1), PFC in-frames and
pfc-on-total-rx-time (priority 3), queue 3 transmit-pkts, the PFC watchdog's stuck-count (queue 3) and optics
input-power (channel 1). The store is written
directly (vectorised `write_counters` / `write_gauges`, `write_state` for oper-status), one sample round per
second, as the Ingestor would leave it; every tick gets a new round, so detectors judge fresh samples each time.

Background: traffic on every port, steadily growing FEC corrected codewords, short PFC pauses (XOFF/XON, < 1% of
the time) on 1% of the ports, a few FCS errors on 0.1% of the ports. Faults: one PFC storm (a server NIC pausing
its leaf port; that leaf pauses 4 spines), one flapping leaf-spine link (a flap a second at both ends, oper-status
events and carrier-transitions) and one corrupting leaf-spine link (5e-5 FCS loss).

Measured in one run: `Runner.tick(snapshot, now)` per tick (p50/p99/max over --ticks ticks after --warmup), in wall
time and in CPU time of this process (on a shared machine the wall time also holds the time other processes had the
cores), each detector alone (own state, so pfc_storm and pfc_deadlock each run their own stuck-queue tracker, on its
own fresh snapshot of the same round), and baselines: taking the snapshot, and a naive per-series Python loop
reading value and rate of every series.

Run: /work/venv/bin/python bench/bench_detectors.py [--ticks 50] [--warmup 5] [--profile 5] [--gc-freeze]
"""

from __future__ import annotations

import argparse
import cProfile
import gc
import io
import pstats
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from fabricd.detectors.runner import Detector, Runner, default_detectors
from fabricd.telemetry import CounterStore, Snapshot
from topology.fabric import Fabric
from topology.load import load_fabric

S = 10**9
T0 = 1_700_000_000 * S
PRIO = 3
COUNTERS = (
    ("if.carrier-transitions", None),
    ("if.in-pkts", None),
    ("if.in-fcs-errors", None),
    ("eth.in-crc-errors", None),
    ("eth.in-symbol-error", None),
    ("fec.corrected-codewords", "1"),
    ("fec.uncorrected-codewords", "1"),
    ("pfc.in-frames", str(PRIO)),
    ("pfc.pfc-on-total-rx-time", str(PRIO)),
    ("queue.transmit-pkts", str(PRIO)),
    ("wd.stuck-count", str(PRIO)),
)
GAUGES = (("optics.input-power", "1"),)


class Fill:
    """The store, its series rows per leaf (one per port), and the per-round counter increments."""

    def __init__(self, fabric: Fabric, sync_age_s: float, seed: int = 6) -> None:
        self.fabric, self.sync_age = fabric, int(sync_age_s * S)
        self.store = st = CounterStore(capacity=1 << 20)
        rng = np.random.default_rng(seed)
        self.ports: list[tuple[str, str]] = []
        self.dev_of_port: list[int] = []
        rows = []
        for d in fabric.switches():
            dev = st.device_id(d.name)
            for p in fabric.ports(d.name):
                rows.append(st.port_row(dev, p))
                self.ports.append((d.name, p))
                self.dev_of_port.append(dev)
        self.index = {p: k for k, p in enumerate(self.ports)}
        self.rows = np.array(rows, dtype=np.int64)
        n = self.n = len(rows)
        self.sidx: dict[str, Any] = {}
        for leaf, index in (*COUNTERS, *GAUGES):
            code = st.code(leaf, index)
            self.sidx[leaf] = st.series_at(self.rows, np.full(n, code, dtype=np.int64))
        code = st.code("oper-status", None)
        self.oper = st.series_at(self.rows, np.full(n, code, dtype=np.int64)).tolist()
        # Per-port rates (per second) and the cumulative values.
        pkts = rng.uniform(1e5, 3e6, n)
        self.inc: dict[str, Any] = {leaf: np.zeros(n) for leaf, _ in COUNTERS}
        self.inc["if.in-pkts"] = pkts
        self.inc["queue.transmit-pkts"] = pkts * rng.uniform(0.05, 0.3, n)
        self.inc["fec.corrected-codewords"] = rng.uniform(1e2, 1e5, n)
        self.value = {leaf: rng.integers(1 << 20, 1 << 40, n).astype(np.uint64) for leaf, _ in COUNTERS}
        for leaf in ("if.in-fcs-errors", "eth.in-crc-errors", "eth.in-symbol-error", "fec.uncorrected-codewords"):
            self.value[leaf][:] = 0
        self.value["if.carrier-transitions"][:] = 2
        self.value["wd.stuck-count"] = rng.integers(0, 3, n).astype(np.uint64)  # old storms, long over
        self.pfc_bg = rng.choice(n, n // 100, replace=False)  # short XOFF/XON pauses
        self.fcs_bg = rng.choice(n, n // 1000, replace=False)  # a stray FCS error now and then
        self.rx_dbm = rng.uniform(-3.0, 1.0, n)
        self.rng = rng
        self._faults()

    def _faults(self) -> None:
        f = self.fabric
        leaves = sorted(d.name for d in f.switches() if d.role.value == "leaf")

        def pick(name: str, k: int) -> str:  # pod-16k's leaves, or (--smoke, a small fabric) others
            return name if name in leaves else leaves[k % len(leaves)]

        leaf, flap_leaf, bad_leaf = pick("leaf-g5-r2", 0), pick("leaf-g9-r0", 1), pick("leaf-g20-r4", 2)
        ports = f.ports(leaf)
        faces_switch = {p: (e := f.peer(leaf, p)) is not None and f.device(e.device).is_switch for p in ports}
        server_port = next(p for p in ports if not faces_switch[p])
        uplinks = [p for p in ports if faces_switch[p]]
        # Storm: the NIC pauses leaf:server_port; the leaf, unable to drain, pauses 4 spines toward it.
        storm = [(leaf, server_port)]
        for p in uplinks[:4]:
            e = f.peer(leaf, p)
            assert e is not None
            storm.append((e.device, e.port))
        self.storm = [self.index[p] for p in storm]
        # Flapping link and corrupting link: two other leaf uplinks, both ends.
        a = f.peer(flap_leaf, f.ports(flap_leaf)[-1])
        b = f.peer(bad_leaf, f.ports(bad_leaf)[-1])
        assert a is not None and b is not None
        self.flap = [self.index[(flap_leaf, f.ports(flap_leaf)[-1])], self.index[(a.device, a.port)]]
        self.corrupt = self.index[(b.device, b.port)]  # the spine end receives the bad frames
        self.fault_names = {
            "storm origin": f"{leaf}:{server_port} (+4 spine ports toward it)",
            "flapping link": " <-> ".join(f"{self.ports[k][0]}:{self.ports[k][1]}" for k in self.flap),
            "corrupting link (rx end)": f"{b.device}:{b.port}",
        }

    def round(self, r: int) -> None:
        """Write sample round r (sample time T0 + r s - 100 ms; tick r ends at T0 + r s)."""
        st, n, rng = self.store, self.n, self.rng
        ts = T0 + r * S - 100_000_000
        if r == 0:
            for i in self.oper:
                st.write_state(i, "UP", ts - S - self.sync_age)  # the subscription's initial values
        if 3 <= r <= 14:  # one flap a second at both ends: down, then up 200 ms later
            for k in self.flap:
                st.write_state(self.oper[k], "DOWN", ts - 400_000_000)
                st.write_state(self.oper[k], "UP", ts - 200_000_000)
                self.value["if.carrier-transitions"][k] += np.uint64(2)
        jitter = rng.uniform(0.9, 1.1, n)
        for leaf, _ in COUNTERS:
            if r > 0:
                self.value[leaf] += (self.inc[leaf] * jitter).astype(np.uint64)
        pfc_bg = self.pfc_bg[rng.random(len(self.pfc_bg)) < 0.5]
        self.value["pfc.in-frames"][pfc_bg] += np.uint64(40)
        self.value["pfc.pfc-on-total-rx-time"][pfc_bg] += np.uint64(2_000_000)  # 2 ms of pause
        fcs = self.fcs_bg[rng.random(len(self.fcs_bg)) < 0.05]
        for leaf in ("if.in-fcs-errors", "eth.in-crc-errors"):
            self.value[leaf][fcs] += np.uint64(1)
            self.value[leaf][self.corrupt] += np.uint64(60)  # ~5e-5 of the frames
        self.value["eth.in-symbol-error"][self.corrupt] += np.uint64(200)
        if r >= 2:  # storm: paused all the interval, nothing transmitted on queue 3
            for k in self.storm:
                self.value["pfc.in-frames"][k] += np.uint64(30_000)
                self.value["pfc.pfc-on-total-rx-time"][k] += np.uint64(S)
                self.value["wd.stuck-count"][k] += np.uint64(r == 2)  # the switch declares it once
                self.value["queue.transmit-pkts"][k] -= (self.inc["queue.transmit-pkts"][k] * jitter[k]).astype(
                    np.uint64
                )
        sidx = np.concatenate([self.sidx[leaf] for leaf, _ in COUNTERS])
        vals = np.concatenate([self.value[leaf] for leaf, _ in COUNTERS])
        st.write_counters(sidx, vals, np.full(len(sidx), ts, dtype=np.int64))
        g = self.sidx["optics.input-power"]
        st.write_gauges(g, self.rx_dbm + rng.normal(0, 0.05, n), np.full(n, ts, dtype=np.int64))
        for d in range(len(st.devices)):
            st.seen(d, ts)


def pct(xs: list[float], q: float) -> float:
    s = sorted(xs)
    return s[min(len(s) - 1, round(q * (len(s) - 1)))]


def row(name: str, xs: list[float]) -> str:
    ms = [x * 1e3 for x in xs]
    return f"| {name} | {statistics.median(ms):.1f} | {pct(ms, 0.99):.1f} | {max(ms):.1f} |"


def naive(snap: Snapshot) -> float:
    """The obvious implementation: a Python loop over every series reading its value and rate."""
    t = time.perf_counter()
    hot = 0
    for i in range(len(snap)):
        v, r = snap.value[i], snap.rate[i]
        if r > 0 and v > 0:
            hot += 1
    return time.perf_counter() - t


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--spec", default="examples/pod-16k.yaml")
    ap.add_argument("--ticks", type=int, default=50)
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--naive", type=int, default=3, help="naive-loop passes (each ~1 s; 0 skips it)")
    ap.add_argument(
        "--sync-age",
        type=float,
        default=400.0,
        help="seconds between the initial oper-status sync (81,920 first-value events) and the first tick; "
        "0 = ticks right after the sync, when link_corruption's 310 s event window still holds them",
    )
    ap.add_argument("--profile", type=int, default=5, help="ticks to profile with cProfile after the timed ones")
    ap.add_argument(
        "--gc-freeze",
        action="store_true",
        help="gc.freeze() once the fabric and store are built, so full collections skip their ~400k objects "
        "(what a service could do after loading; the service does not yet)",
    )
    ap.add_argument(
        "--smoke", action="store_true", help="seconds on a tiny fabric: proves the bench still runs (a test runs it)"
    )
    args = ap.parse_args()
    if args.smoke:
        args.spec, args.ticks, args.warmup, args.naive, args.profile = "examples/small-pod.yaml", 3, 1, 1, 0

    t = time.perf_counter()
    _, fabric = load_fabric(Path(args.spec), None)
    fill = Fill(fabric, args.sync_age)
    fill.round(0)
    print(
        f"fabric: {len(fabric.switches())} switches, {fill.n:,} switch ports; store: {fill.store.n:,} series; "
        f"built in {time.perf_counter() - t:.1f} s; oper-status sync {args.sync_age:.0f} s before tick 1"
    )
    for k, v in fill.fault_names.items():
        print(f"  {k}: {v}")
    if args.gc_freeze:
        gc.collect()
        gc.freeze()

    runner = Runner(fabric, default_detectors(1.0))
    solo: list[tuple[Detector, Any]] = [(d, d.new_state()) for d in default_detectors(1.0)]
    tick_t: list[float] = []
    cpu_t: list[float] = []
    snap_t: list[float] = []
    det_t: dict[str, list[float]] = {d.name: [] for d, _ in solo}
    found: dict[str, int] = {}
    rnd = 0
    for tick in range(args.warmup + args.ticks):
        rnd += 1
        fill.round(rnd)
        now = T0 + rnd * S
        t = time.perf_counter()
        snap = fill.store.snapshot()
        st = time.perf_counter() - t
        t, c = time.perf_counter(), time.process_time()
        out = runner.tick(snap, now)
        tt, ct = time.perf_counter() - t, time.process_time() - c
        per = {}
        for det, state in solo:
            s2 = fill.store.snapshot()  # fresh: each detector pays the snapshot's lazy indexes itself
            t = time.perf_counter()
            det.detect(s2, fabric, state, now)
            per[det.name] = time.perf_counter() - t
        if tick >= args.warmup:
            tick_t.append(tt)
            cpu_t.append(ct)
            snap_t.append(st)
            for name, x in per.items():
                det_t[name].append(x)
            for f in out:
                found[f.kind] = found.get(f.kind, 0) + 1
    snap = fill.store.snapshot()
    naive_t = [naive(snap) for _ in range(args.naive)]
    t = time.perf_counter()
    _ = snap._device_ids, snap._codes_of_leaf  # (the port index is the store's, shared: nothing to build)
    index_t = time.perf_counter() - t
    ev_t = time.perf_counter()
    snap.events_since(T0 + rnd * S - 10 * S)
    ev_t = time.perf_counter() - ev_t
    t = time.perf_counter()
    snap.select(leaf="pfc.in-frames")
    sel_t = time.perf_counter() - t

    print(
        f"\n{args.ticks} ticks after {args.warmup} warm-up, one new sample round per tick; "
        f"findings per tick (avg): " + ", ".join(f"{k} {v / args.ticks:.1f}" for k, v in sorted(found.items()))
    )
    print("| measured (ms) | p50 | p99 | max |\n|---|---|---|---|")
    print(row(f"**Runner.tick, all {len(default_detectors())} detectors**", tick_t))
    print(row("Runner.tick, CPU time of this process", cpu_t))
    for name, xs in det_t.items():
        print(row(f"{name} alone (fresh snapshot)", xs))
    print(row("baseline: store.snapshot()", snap_t))
    p50 = statistics.median(tick_t)
    if naive_t:  # --naive 0 skips the slow baseline
        print(row(f"baseline: naive Python loop over {len(snap):,} series (value, rate)", naive_t))
        print(
            f"tick p50 / naive loop p50: {p50 / statistics.median(naive_t):.3f} "
            f"({statistics.median(naive_t) / p50:.1f}x faster than the naive loop); "
            f"tick p50 / snapshot p50: {p50 / statistics.median(snap_t):,.0f}x"
        )
    print(
        f"pieces on one snapshot: lazy indexes (_device_ids/_codes_of_leaf) {index_t * 1e3:.1f} ms, "
        f"events_since(10 s) over the event ring {ev_t * 1e3:.1f} ms, select(leaf=...) {sel_t * 1e3:.1f} ms"
    )
    for name, wall, cpu in (
        ("p50", statistics.median(tick_t), statistics.median(cpu_t)),
        ("p99", pct(tick_t, 0.99), pct(cpu_t, 0.99)),
    ):
        verdict = "met" if wall < 0.05 else "NOT met"
        print(f"target {name} < 50 ms: {verdict} ({wall * 1e3:.1f} ms wall, {cpu * 1e3:.1f} ms CPU)")

    if args.profile:
        prof = cProfile.Profile()
        for _ in range(args.profile):
            rnd += 1
            fill.round(rnd)
            snap = fill.store.snapshot()
            prof.enable()
            runner.tick(snap, T0 + rnd * S)
            prof.disable()
        buf = io.StringIO()
        pstats.Stats(prof, stream=buf).sort_stats("tottime").print_stats(14)
        print(f"\ncProfile of {args.profile} ticks (by tottime):")
        print("\n".join(line for line in buf.getvalue().splitlines() if line.strip())[:4000])


if __name__ == "__main__":
    main()
