"""Benchmark: live gNMI telemetry from the twin through TelemetryClient, against a pygnmi baseline, same run.

A child process runs the twin's gNMI servers for a 64-switch fabric; the sample interval is chosen so the twin
offers ~100k updates/s (every leaf of the EOS profile, PFC for priority 3 only). This process then streams every
switch for a window, twice:
  1. fabricd: TelemetryClient (grpc.aio, raw bytes) -> Ingestor -> CounterStore, one asyncio loop;
  2. baseline: pygnmi `subscribe2` (a thread per switch) + `telemetryParser` + a dict store computing rates.
First, a warm-up that also measures grpc.aio + the client loop alone (messages dropped unread). For each of 1 and 2:
updates/s received, client CPU (all threads of this process) per 100k updates, and the lag
(receive time - notification timestamp) of every message: p50 / p99 / max. For fabricd also the p99 its own
sampled histogram (fabricd_telemetry_lag_seconds) reports over the window, as a bucket bound. The twin starts each
stream's sample clock when the stream starts, so the switches' bursts are as far apart as their subscriptions
(fabricd staggers its first connects over 4 ms per switch; pygnmi's threads connect at once), and the twin encodes
each burst on one of this machine's 2 cores: compare the lag without ingestion. For a server that costs nothing and
sets the sample phase (aligned or spread), and for worker processes, see bench_telemetry_workers.py.

    /work/venv/bin/python bench/bench_telemetry_live.py [--target 100000] [--window 10] [--quick]
"""

from __future__ import annotations

import argparse
import asyncio
import multiprocessing as mp
import os
import platform
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import numpy as np
from prometheus_client import CollectorRegistry
from pydantic import SecretStr
from pygnmi.client import gNMIclient

from drivers.inventory import DeviceAccess, EapiAccess, GnmiAccess, SshAccess
from fabricd.telemetry import CounterStore, Ingestor, Stat, TelemetryClient, TelemetryMetrics
from fabricd.telemetry.channel import notification_ts
from fabricd.telemetry.paths import eos_profile, pygnmi_subscribe
from lab import gnmi_paths as gp
from lab.endpoints import Credentials, DeviceEndpoints, allocate
from lab.gnmi_server import start_gnmi_servers
from lab.model import Twin
from topology.blueprint import generate_blueprint
from topology.fabric import Fabric
from topology.spec import FabricSpec

CREDS = Credentials("admin", "bench-secret")
SIZES = {
    # 32 leaves (8 rails x 4 groups, 16 servers each) + 32 spines = 64 switches
    "64": dict(name="b64", rails=8, aggregation_groups=4, servers_per_group=16, spines_per_rail=4, superspines=0),
    "quick": dict(name="bq", rails=4, aggregation_groups=2, servers_per_group=8, spines_per_rail=2, superspines=0),
}


# --- twin process ----------------------------------------------------------------------------------------
def _sampled_leaves(twin: Twin) -> int:
    """Leaves the EOS profile SAMPLEs on every switch: the updates one interval carries."""
    total = 0
    for sw in twin.switches.values():
        for sub in eos_profile():
            if sub.mode == "sample":
                rows, _ = gp.select(sw, gp.match(gp.parse_path_string(sub.path)))
                total += len(rows)
    return total


async def _twin(size: str, ctl: Any) -> None:
    twin = Twin(Fabric(generate_blueprint(FabricSpec.model_validate(SIZES[size]))))
    eps = {n: DeviceEndpoints(n, ep.host, gnmi_port=0) for n, ep in allocate(list(twin.switches), "127.44.0.1").items()}
    servers = await start_gnmi_servers(twin, eps, CREDS)
    ports = sum(len(s.ports) for s in twin.switches.values())
    ctl.send((servers.addresses, _sampled_leaves(twin), ports))
    loop = asyncio.get_running_loop()
    while True:
        cmd = await loop.run_in_executor(None, ctl.recv)
        if cmd == "cpu":
            ctl.send(time.process_time())
        else:
            break
    await servers.close()


def twin_main(size: str, ctl: Any) -> None:
    asyncio.run(_twin(size, ctl))


# --- fabricd client ----------------------------------------------------------------------------------------
class LagIngestor(Ingestor):
    """Receive time - notification time of every message, taken once it is ingested (visible to a snapshot from then
    on); the client passes its clock as `now`. bench_telemetry_workers and bench_scaleout use it too."""

    def __init__(self, store: CounterStore) -> None:
        super().__init__(store)
        self.lags: list[int] = []
        self.recording = False

    def ingest(self, data: Any, channel: str, now: int | None = None) -> None:
        super().ingest(data, channel, now)
        if self.recording and self.last_ts:  # the notification's timestamp, as the client reads it for its lag
            self.lags.append((now or time.time_ns()) - self.last_ts)


class NullIngestor(Ingestor):
    """Counts messages and drops them: what grpc.aio and the client loop cost without ingestion."""

    def __init__(self, store: CounterStore) -> None:
        super().__init__(store)
        self.messages = 0
        self.lags: list[int] = []

    def ingest(self, data: Any, channel: str, now: int | None = None) -> None:
        self.messages += 1
        ts = notification_ts(data)
        if ts is not None and now is not None:
            self.lags.append(now - ts)


def _buckets(registry: CollectorRegistry) -> list[tuple[float, float]]:
    return sorted(
        (float(s.labels["le"]), s.value)
        for m in registry.collect()
        if m.name == "fabricd_telemetry_lag_seconds"
        for s in m.samples
        if s.name.endswith("_bucket")
    )


def _hist_p99(before: list[tuple[float, float]], after: list[tuple[float, float]]) -> float:
    """The p99 bucket bound of fabricd_telemetry_lag_seconds over the window (what histogram_quantile brackets)."""
    window = [(le, n - n0) for (le, n), (_, n0) in zip(after, before, strict=True)]
    total = window[-1][1]
    return next(le for le, n in window if n >= 0.99 * total)


async def _transport(accesses: list[DeviceAccess], interval_s: float, window_s: float) -> dict[str, float]:
    """The client with ingestion replaced by a message count (and the lag of every message)."""
    ing = NullIngestor(CounterStore())
    client = TelemetryClient(accesses, ing, interval_s=interval_s)
    task = asyncio.create_task(client.run())
    assert await client.wait_synced(120), "not every switch synced"
    await asyncio.sleep(2 * interval_s)
    m0, cpu0, w0, k0 = ing.messages, time.process_time(), time.perf_counter(), len(ing.lags)
    await asyncio.sleep(window_s)
    m1, cpu1, w1, k1 = ing.messages, time.process_time(), time.perf_counter(), len(ing.lags)
    await client.stop()
    await task
    lags = np.array(ing.lags[k0:k1], dtype=np.float64) / 1e9
    return {"messages": m1 - m0, "wall_s": w1 - w0, "cpu_s": cpu1 - cpu0, "p99": float(np.percentile(lags, 99))}


async def _fabricd(accesses: list[DeviceAccess], interval_s: float, window_s: float) -> dict[str, Any]:
    registry = CollectorRegistry()
    ing = LagIngestor(CounterStore())
    client = TelemetryClient(accesses, ing, interval_s=interval_s, metrics=TelemetryMetrics(registry))
    t0 = time.perf_counter()
    task = asyncio.create_task(client.run())
    assert await client.wait_synced(120), "not every switch synced"
    sync_s = time.perf_counter() - t0
    await asyncio.sleep(2 * interval_s)  # past the initial dumps
    ing.flush()
    stats = ing.store.stats
    u0, n0 = int(stats[:, Stat.UPDATES].sum()), int(stats[:, Stat.NOTIFICATIONS].sum())
    cpu0, w0, b0 = time.process_time(), time.perf_counter(), _buckets(registry)
    ing.recording = True
    await asyncio.sleep(window_s)
    ing.recording = False
    ing.flush()
    stats = ing.store.stats
    u1, n1 = int(stats[:, Stat.UPDATES].sum()), int(stats[:, Stat.NOTIFICATIONS].sum())
    cpu1, w1 = time.process_time(), time.perf_counter()
    hist_p99, stale = _hist_p99(b0, _buckets(registry)), len(client.stale_devices())
    await client.stop()
    await task
    return {
        "sync_s": sync_s,
        "updates": u1 - u0,
        "messages": n1 - n0,
        "wall_s": w1 - w0,
        "cpu_s": cpu1 - cpu0,
        "lags": np.array(ing.lags, dtype=np.float64) / 1e9,
        "hist_p99": hist_p99,
        "stale": stale,
    }


# --- baseline: pygnmi subscribe2 + telemetryParser ----------------------------------------------------------
def _pygnmi(addresses: dict[str, tuple[str, int]], interval_s: float, window_s: float) -> dict[str, Any]:
    store: dict[tuple[str, str], tuple[Any, int, float]] = {}
    lock = threading.Lock()
    state = {"recording": False, "updates": 0, "synced": 0}
    lags: list[int] = []
    stop = threading.Event()

    def consume(device: str, host: str, port: int) -> None:
        with gNMIclient(target=(host, port), username=CREDS.username, password=CREDS.password, insecure=True) as gc:
            sub = gc.subscribe2(subscribe=pygnmi_subscribe(eos_profile(interval_s)))
            try:
                first = True
                while not stop.is_set():
                    try:
                        msg = sub.get_update(timeout=0.2)  # telemetryParser runs here
                    except TimeoutError:
                        continue
                    now = time.time_ns()
                    if first:  # pygnmi coalesces everything up to the sync_response into the first result
                        first = False
                        with lock:
                            state["synced"] += 1
                    n = msg.get("update")
                    if not n:
                        continue
                    ts, prefix = n["timestamp"], n.get("prefix", "")
                    with lock:
                        if state["recording"]:
                            lags.append(now - ts)
                            state["updates"] += len(n.get("update", ()))
                        for u in n.get("update", ()):
                            key = (device, prefix + "/" + u["path"])
                            v = u.get("val")  # telemetryParser leaves out values it cannot decode
                            old = store.get(key)
                            rate = float("nan")
                            if old is not None and ts > old[1] and isinstance(v, int) and v >= old[0]:
                                rate = (v - old[0]) * 1e9 / (ts - old[1])
                            store[key] = (v, ts, rate)
            finally:
                gc.close()  # closing the channel first ends pygnmi's reader thread at once
                sub.close()

    t0 = time.perf_counter()
    threads = [threading.Thread(target=consume, args=(d, h, p), daemon=True) for d, (h, p) in addresses.items()]
    for t in threads:
        t.start()
    while state["synced"] < len(addresses):
        time.sleep(0.05)
        if time.perf_counter() - t0 > 120:
            raise TimeoutError("pygnmi: not every switch synced")
    sync_s = time.perf_counter() - t0
    time.sleep(2 * interval_s)
    cpu0, w0 = time.process_time(), time.perf_counter()
    with lock:
        state["recording"] = True
    time.sleep(window_s)
    with lock:
        state["recording"] = False
    cpu1, w1 = time.process_time(), time.perf_counter()
    stop.set()
    for t in threads:
        t.join(5)
    return {
        "sync_s": sync_s,
        "updates": state["updates"],
        "wall_s": w1 - w0,
        "cpu_s": cpu1 - cpu0,
        "lags": np.array(lags, dtype=np.float64) / 1e9,
    }


# --- main ------------------------------------------------------------------------------------------------------
def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--target", type=float, default=100_000, help="offered updates/s (sets the sample interval)")
    ap.add_argument("--window", type=float, default=10.0, help="seconds measured per client")
    ap.add_argument("--quick", action="store_true", help="a 16-switch fabric and a 3 s window (smoke test)")
    ap.add_argument(
        "--smoke", action="store_true", help="seconds on a tiny fabric: proves the bench still runs (a test runs it)"
    )
    args = ap.parse_args()
    size, window = ("quick", 3.0) if args.quick else ("64", args.window)
    if args.smoke:
        size, window = "quick", 1.0
    ctx = mp.get_context("spawn")
    parent, child = ctx.Pipe()
    proc = ctx.Process(target=twin_main, args=(size, child), daemon=True)
    proc.start()
    addresses, leaves, ports = parent.recv()
    interval = max(0.1, round(leaves / args.target, 2))  # the twin refuses intervals below 0.1 s
    accesses = [
        DeviceAccess(n, h, "eos", CREDS.username, SecretStr(CREDS.password), GnmiAccess(port=p, tls=False),
                     EapiAccess(), SshAccess())
        for n, (h, p) in addresses.items()
    ]  # fmt: skip
    transport = asyncio.run(_transport(accesses, interval, window))  # first: it also warms the twin's caches
    results: dict[str, dict[str, Any]] = {}
    runs: list[tuple[str, Callable[[], dict[str, Any]]]] = [
        ("fabricd TelemetryClient", lambda: asyncio.run(_fabricd(accesses, interval, window))),
        ("pygnmi subscribe2 + telemetryParser", lambda: _pygnmi(addresses, interval, window)),
    ]
    for name, run in runs:
        parent.send("cpu")
        twin0 = parent.recv()
        results[name] = run()
        parent.send("cpu")
        results[name]["twin_cpu_s"] = parent.recv() - twin0
    parent.send("stop")
    proc.join(30)

    print(f"machine: {platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}")
    print(
        f"twin (own process): {len(addresses)} switches, {ports} ports, {leaves:,} sampled leaves; "
        f"SAMPLE every {interval:g} s = {leaves / interval:,.0f} updates/s offered; {window:g} s window per client"
    )
    rows: list[tuple[str, ...]] = [("", *results)]
    r = list(results.values())

    def add(label: str, fmt: str, key: str) -> None:
        rows.append((label, *(fmt.format(x[key]) for x in r)))

    for x in r:
        x["rate"] = x["updates"] / x["wall_s"]
        x["cpu_per_100k"] = 100_000 * x["cpu_s"] / max(x["updates"], 1)
        x["capacity"] = x["updates"] / max(x["cpu_s"], 1e-9)
        x["cpu_pct"] = 100 * x["cpu_s"] / x["wall_s"]
        for q in (50, 99):
            x[f"p{q}"] = 1000 * float(np.percentile(x["lags"], q)) if len(x["lags"]) else float("nan")
        x["max"] = 1000 * float(x["lags"].max()) if len(x["lags"]) else float("nan")
    add("subscribe -> all synced", "{:.2f} s", "sync_s")
    add("updates/s received", "{:,.0f}", "rate")
    add("client CPU (all threads), % of a core", "{:.0f} %", "cpu_pct")
    add("client CPU per 100k updates", "{:.3f} s", "cpu_per_100k")
    add("updates per client CPU-second", "{:,.0f}", "capacity")
    add("lag p50 (every message)", "{:.1f} ms", "p50")
    add("lag p99 (every message)", "{:.1f} ms", "p99")
    add("lag max (every message)", "{:.1f} ms", "max")
    add("twin CPU in window", "{:.1f} s", "twin_cpu_s")
    fab = r[0]
    rows.append(("lag p99, fabricd's sampled histogram", f"<= {1000 * fab['hist_p99']:g} ms", ""))
    rows.append(("stale devices at the end", str(fab["stale"]), ""))
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    for row in rows:
        print(
            "| "
            + " | ".join(
                f"{c:<{w}}" if i == 0 else f"{c:>{w}}" for i, (c, w) in enumerate(zip(row, widths, strict=True))
            )
            + " |"
        )
    per_msg = fab["updates"] / max(fab["messages"], 1)
    t_cpu = 100_000 * transport["cpu_s"] / max(transport["messages"] * per_msg, 1)
    print(
        f"of fabricd's {fab['cpu_per_100k']:.3f} s CPU per 100k updates, grpc.aio + the client loop alone (messages "
        f"dropped unread; {per_msg:.0f} updates/message) take {t_cpu:.3f} s; lag p99 without ingestion "
        f"{1000 * transport['p99']:.1f} ms"
    )
    print(
        f"updates per client CPU-second: fabricd {fab['capacity'] / max(r[1]['capacity'], 1):.1f}x the pygnmi baseline"
    )


def _quiet_cancelled(args: threading.ExceptHookArgs) -> None:
    """pygnmi's reader thread re-raises CANCELLED when we close its channel: that is the end of the run, not news."""
    if "CANCELLED" not in str(args.exc_value):
        threading.__excepthook__(args)


if __name__ == "__main__":
    threading.excepthook = _quiet_cancelled
    main()
