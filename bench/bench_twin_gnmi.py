"""Benchmark: the twin's gNMI server for a 512-switch fabric, streamed to a raw-stub client in another process.

The twin (this process, one asyncio loop) starts every switch's server, then a child process opens one
grpc.aio channel per switch and subscribes STREAM / SAMPLE every 10 s to all counters (interface, ethernet,
FEC, PFC, watchdog, queues). After every switch has sent its sync_response, the client counts updates over
a window; the twin measures its own CPU (time.process_time, all threads) over the same window.

Baseline, same run: encoding one switch's full sample the naive way (a protobuf Update built per leaf, paths
from scratch) against the twin's encoder (cached path bytes, vectorised value encoding).

    .venv/bin/python bench/bench_twin_gnmi.py [--quick] [--window S]
    .venv/bin/python bench/bench_twin_gnmi.py --size small-pod --interval 1 --window 30 [--workload incast]

`--workload incast`: the congestion model's cost (lab/congestion): a 3:1 incast on the first leaf's first server port,
always on; `incast-phases`: the same 200 ms on / 300 ms off, so every phase edge recomputes the twin (4 a second).
The recompute figure is a full recompute after a change (`touch`), the mean of three, with the workload running if one
is given.
"""

from __future__ import annotations

import argparse
import asyncio
import multiprocessing as mp
import os
import platform
import time
from pathlib import Path
from typing import Any

import grpc
import numpy as np
from pygnmi.spec.v080 import gnmi_pb2, gnmi_pb2_grpc

from lab import gnmi_paths as gp
from lab.endpoints import Credentials, DeviceEndpoints, allocate
from lab.gnmi_server import start_gnmi_servers
from lab.model import Twin
from topology.blueprint import generate_blueprint
from topology.fabric import Fabric
from topology.spec import FabricSpec

CREDS = Credentials("admin", "bench")
PATHS = ("/interfaces/interface/state/counters", "/interfaces/interface/ethernet", "/qos/interfaces")
SMALL_POD = Path(__file__).resolve().parent.parent / "examples" / "small-pod.yaml"
SIZES = {
    # 384 leaves (8 rails x 48 groups) + 128 spines = 512 switches, 36,864 ports
    "512": dict(name="b512", rails=8, aggregation_groups=48, servers_per_group=32, spines_per_rail=16),
    "quick": dict(name="bq", rails=4, aggregation_groups=4, servers_per_group=8, spines_per_rail=2),
}


# --- client process ------------------------------------------------------------------------------------
def _request(interval_ns: int) -> Any:
    subs = []
    for text in PATHS:
        p = gnmi_pb2.Path()
        for name, keys in gp.parse_path_string(text):
            p.elem.add(name=name, key=dict(keys))
        subs.append(gnmi_pb2.Subscription(path=p, mode=gnmi_pb2.SAMPLE, sample_interval=interval_ns))
    return gnmi_pb2.SubscribeRequest(subscribe=gnmi_pb2.SubscriptionList(subscription=subs, encoding=gnmi_pb2.PROTO))


async def _client(addresses: dict[str, tuple[str, int]], interval_ns: int, window_s: float, ctl: Any) -> None:
    md = (("username", CREDS.username), ("password", CREDS.password))
    synced = 0
    counting = False
    count = 0
    all_synced = asyncio.Event()

    async def one(host: str, port: int) -> None:
        nonlocal synced, count
        async with grpc.aio.insecure_channel(f"{host}:{port}") as ch:
            call = gnmi_pb2_grpc.gNMIStub(ch).Subscribe(iter([_request(interval_ns)]), metadata=md)
            async for resp in call:
                if resp.sync_response:
                    synced += 1
                    if synced == len(addresses):
                        all_synced.set()
                elif counting:
                    count += len(resp.update.update)

    t0 = time.perf_counter()
    tasks = [asyncio.create_task(one(h, p)) for h, p in addresses.values()]
    await all_synced.wait()
    sync_s = time.perf_counter() - t0
    # Streams sample on a grid from their sync; open the window just before the first periodic burst so a
    # window of whole intervals holds whole bursts (each burst then has most of an interval to finish).
    await asyncio.sleep(interval_ns / 1e9 - 0.5)
    ctl.send(("start", sync_s))
    counting = True
    c_cpu, t_start = time.process_time(), time.perf_counter()
    await asyncio.sleep(window_s)
    counting = False
    elapsed = time.perf_counter() - t_start
    ctl.send(("done", count, elapsed, time.process_time() - c_cpu))
    for t in tasks:
        t.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)


def client_main(addresses: dict[str, tuple[str, int]], interval_ns: int, window_s: float, ctl: Any) -> None:
    asyncio.run(_client(addresses, interval_ns, window_s, ctl))


# --- baseline: naive encoding --------------------------------------------------------------------------
def naive_sample(twin: Twin, plan: gp.Plan, now: int) -> list[bytes]:
    """What a straightforward servicer does: one protobuf Update per leaf, paths built from scratch."""
    sw = plan.sw
    values = sw.values(now)
    out = []
    for row in sorted(set(plan.rows.tolist())):
        port = sw.ports[row]
        for tree in gp.TREES:
            n = gnmi_pb2.Notification(timestamp=now)
            for code in plan.codes[plan.rows == row].tolist():
                leaf = gp.CATALOG[code]
                if leaf.tree != tree:
                    continue
                p = gnmi_pb2.Path(
                    elem=[gnmi_pb2.PathElem(name=nm, key=dict(k)) for nm, k in gp.root_elems(tree, port) + leaf.rel]
                )
                if leaf.kind == gp.COUNTER:
                    val = gnmi_pb2.TypedValue(uint_val=int(values[row, leaf.column]))
                else:
                    v = gp.state_value(twin, sw, row, leaf.kind)
                    val = (
                        gnmi_pb2.TypedValue(double_val=v) if isinstance(v, float) else gnmi_pb2.TypedValue(string_val=v)
                    )
                n.update.append(gnmi_pb2.Update(path=p, val=val))
            if n.update:
                out.append(gnmi_pb2.SubscribeResponse(update=n).SerializeToString())
    return out


def encode_rates(twin: Twin) -> tuple[float, float, int]:
    sw = max(twin.switches.values(), key=lambda s: len(s.ports))
    matches = [m for text in PATHS for m in gp.match(gp.parse_path_string(text))]
    rows, codes = gp.select(sw, matches)
    plan = gp.Plan(twin, sw, rows, codes, gp.Prefixes(sw), "")
    now = twin.clock()

    def rate(fn: Any, reps: int) -> float:
        t = time.perf_counter()
        for _ in range(reps):
            fn()
        return plan.size * reps / (time.perf_counter() - t)

    return rate(lambda: plan.sample(now), 20), rate(lambda: naive_sample(twin, plan, now), 2), plan.size


def subscribe_costs(twin: Twin, switches: int = 32) -> tuple[float, float]:
    """CPU ms per switch the twin spends setting up what a collector asks when it takes a switch over (fabricd's EOS
    profile: the ON_CHANGE call with its first full update, and a ONCE of the sampled paths), in this process: with
    the twin's remembered path matching, and (baseline, same run) walking the catalog afresh for every path, as every
    request did before."""
    from fabricd.telemetry.channel import split_calls
    from fabricd.telemetry.paths import eos_profile, subscribe_request
    from lab.gnmi_server import DeviceService, Hub

    hub = Hub(twin, CREDS, asyncio.new_event_loop())
    groups = split_calls(eos_profile(1.0))
    requests = [subscribe_request(g, target=g[0].target, once=g[0].mode != "on_change").subscribe for g in groups]
    names = sorted(twin.switches)[:switches]

    def setup(fresh: bool) -> float:
        t = time.process_time()
        for name in names:
            svc = DeviceService(hub, name)
            for sl in requests:
                if fresh:
                    gp._catalog_match.cache_clear()
                req = svc._request(sl)
                svc._full(req, {} if req.mode == 0 else None)
        return 1000 * (time.process_time() - t) / len(names)

    setup(False)  # warm (the memo, numpy's first calls)
    costs = setup(False), setup(True)
    hub.loop.close()
    return costs


# --- twin process --------------------------------------------------------------------------------------
def _spec(size: str) -> FabricSpec:
    if size == "small-pod":
        from topology.spec import load_spec

        return load_spec(SMALL_POD)
    return FabricSpec.model_validate(SIZES[size])


def _workload(twin: Twin, kind: str) -> None:
    from lab.workloads import WorkloadRunner  # only where the code under test has workloads

    leaf = next(n for n, sw in twin.switches.items() if sw.role.value == "leaf")
    port = twin.switches[leaf].ports[0]
    phases = {"on_ms": 200, "off_ms": 300} if kind == "incast-phases" else {}
    WorkloadRunner(twin).start("incast", {"port": f"{leaf}:{port}", "fan_in": 3, **phases})


def _recompute_s(twin: Twin) -> tuple[float, float]:
    """A full recompute after a change, the mean of three: (wall, CPU of this thread) seconds."""
    times, cpu = [], []
    for _ in range(3):
        t, c = time.perf_counter(), time.thread_time()
        twin.touch()
        twin.advance()
        times.append(time.perf_counter() - t)
        cpu.append(time.thread_time() - c)
    return sum(times) / len(times), sum(cpu) / len(cpu)


def _time_recomputes(twin: Twin) -> list[float]:
    """The CPU (this thread's) the twin spends recomputing (its phase edges, with a workload): the figure that moves
    with the model, apart from the serving's, which moves with the machine's load."""
    spent = [0.0]
    inner = twin._recompute

    def timed(*args: Any, **kwargs: Any) -> None:
        t = time.thread_time()
        try:
            inner(*args, **kwargs)
        finally:
            spent[0] += time.thread_time() - t

    twin._recompute = timed  # type: ignore[method-assign]
    return spent


async def run(size: str, interval_ns: int, window_s: float, workload: str | None = None) -> dict[str, Any]:
    t0, c0 = time.perf_counter(), time.process_time()
    twin = Twin(Fabric(generate_blueprint(_spec(size))))
    t1 = time.perf_counter()
    c1 = time.process_time()
    if workload:
        _workload(twin, workload)
    workload_s, workload_cpu_s = time.perf_counter() - t1, time.process_time() - c1
    recompute, recompute_cpu_each = _recompute_s(twin)
    spent = _time_recomputes(twin)
    t1b = time.perf_counter()
    eps = {n: DeviceEndpoints(n, ep.host, gnmi_port=0) for n, ep in allocate(list(twin.switches), "127.43.0.1").items()}
    servers = await start_gnmi_servers(twin, eps, CREDS)
    t2 = time.perf_counter()
    fast, naive, per_switch = encode_rates(twin)
    sub_ms, sub_fresh_ms = subscribe_costs(twin)
    ctx = mp.get_context("spawn")
    parent, child = ctx.Pipe()
    proc = ctx.Process(target=client_main, args=(servers.addresses, interval_ns, window_s, child), daemon=True)
    proc.start()
    loop = asyncio.get_running_loop()
    _, sync_s = await loop.run_in_executor(None, parent.recv)
    cpu0, rec0 = time.process_time(), spent[0]
    _, count, elapsed, client_cpu = await loop.run_in_executor(None, parent.recv)
    twin_cpu, recompute_cpu = time.process_time() - cpu0, spent[0] - rec0
    proc.join(30)
    await servers.close()
    leaves = (
        sum(len(s.ports) for s in twin.switches.values())
        * per_switch
        // max(len(s.ports) for s in twin.switches.values())
    )
    return {
        "switches": len(twin.switches),
        "ports": sum(len(s.ports) for s in twin.switches.values()),
        "twin_build_s": t1 - t0,
        "twin_build_cpu_s": c1 - c0,
        "recompute_s": recompute,
        "recompute_cpu_each_s": recompute_cpu_each,
        "servers_start_s": t2 - t1b,
        "workload_start_s": workload_s,
        "workload_start_cpu_s": workload_cpu_s,
        "subscribe_to_sync_s": sync_s,
        "offered_per_s": leaves / (interval_ns / 1e9),
        "updates": count,
        "window_s": elapsed,
        "updates_per_s": count / elapsed,
        "twin_cpu_s": twin_cpu,
        "recompute_cpu_s": recompute_cpu,
        "twin_cpu_ms_per_1k": 1000 * twin_cpu / max(count, 1) * 1000,
        "client_cpu_s": client_cpu,
        "encode_fast_per_s": fast,
        "encode_naive_per_s": naive,
        "subscribe_ms": sub_ms,
        "subscribe_fresh_ms": sub_fresh_ms,
    }


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true", help="a small fabric and a 2 s interval (smoke test)")
    ap.add_argument("--window", type=float, default=30.0, help="seconds of streaming to count")
    ap.add_argument(
        "--smoke", action="store_true", help="seconds on a tiny fabric: proves the bench still runs (a test runs it)"
    )
    ap.add_argument("--size", choices=("512", "small-pod"), default="512", help="the fabric (default 512 switches)")
    ap.add_argument("--interval", type=float, default=None, help="SAMPLE interval in seconds (default 10)")
    ap.add_argument(
        "--workload", choices=("incast", "incast-phases"), default=None, help="run a workload (the congestion model)"
    )
    args = ap.parse_args()
    quick = args.quick or args.smoke
    size, interval = ("quick", 2_000_000_000) if quick else (args.size, 10_000_000_000)
    if args.interval is not None:
        interval = int(args.interval * 1e9)
    r = asyncio.run(run(size, interval, (1.5 if args.smoke else 4.0) if quick else args.window, args.workload))
    print(f"machine: {platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}")
    print(f"fabric: {r['switches']} switches, {r['ports']} ports; SAMPLE every {interval / 1e9:.0f} s on all counters")
    rows = [
        ("startup: twin model", f"{r['twin_build_s']:.2f} s, {r['twin_build_cpu_s']:.2f} s CPU"),
        ("startup: gNMI servers", f"{r['servers_start_s']:.2f} s"),
        ("startup: workload (first solve)", f"{r['workload_start_s']:.2f} s, {r['workload_start_cpu_s']:.2f} s CPU"),
        ("startup: total", f"{r['twin_build_s'] + r['servers_start_s'] + r['workload_start_s']:.2f} s"),
        ("recompute after a change (mean of 3)", f"{r['recompute_s']:.3f} s, {r['recompute_cpu_each_s']:.3f} s CPU"),
        ("subscribe -> all sync_response", f"{r['subscribe_to_sync_s']:.2f} s"),
        ("offered load (leaves / interval)", f"{r['offered_per_s']:,.0f} updates/s"),
        (f"streamed to raw stub ({r['window_s']:.0f} s window)", f"{r['updates_per_s']:,.0f} updates/s"),
        ("twin CPU per 1k updates", f"{r['twin_cpu_ms_per_1k']:.3f} ms"),
        ("twin CPU / client CPU in window", f"{r['twin_cpu_s']:.2f} s / {r['client_cpu_s']:.2f} s"),
        ("twin CPU in recomputes in window", f"{r['recompute_cpu_s']:.3f} s"),
        ("encode, twin encoder (1 switch)", f"{r['encode_fast_per_s']:,.0f} updates/s"),
        ("encode, naive protobuf (baseline)", f"{r['encode_naive_per_s']:,.0f} updates/s"),
        ("encoder speed-up", f"{r['encode_fast_per_s'] / r['encode_naive_per_s']:.1f}x"),
        ("a collector's take-over subscribe, CPU/switch", f"{r['subscribe_ms']:.2f} ms"),
        ("the same, paths walked afresh (baseline)", f"{r['subscribe_fresh_ms']:.2f} ms"),
        ("subscribe speed-up", f"{r['subscribe_fresh_ms'] / r['subscribe_ms']:.1f}x"),
    ]
    w = max(len(a) for a, _ in rows)
    for a, b in rows:
        print(f"| {a:<{w}} | {b:>22} |")


if __name__ == "__main__":
    np.seterr(all="ignore")
    main()
