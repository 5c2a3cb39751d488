"""Benchmark: blueprint + validate at 16,384 and 131,072 GPUs, on one core, with peak memory,
and the ratio against a naive baseline (rule checks that scan every networkx edge per device)
measured in the same run on the same fabric.

    .venv/bin/python bench/bench_topology.py [--quick]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import subprocess
import sys
import time
from collections import Counter

import networkx as nx

from topology.blueprint import generate_blueprint
from topology.model import Role
from topology.spec import FabricSpec
from topology.validate import validate

SIZES = {
    # 16,384 GPUs: 512 leaves + 256 spines + 64 superspines (domain.md)
    "16k": dict(name="p16k", rails=8, aggregation_groups=64, servers_per_group=32, spines_per_rail=32, superspines=64),
    # 131,072 GPUs: 4,096 leaves + 256 spines + 128 superspines, ~393k links
    "131k": dict(
        name="p131k",
        rails=8,
        aggregation_groups=512,
        servers_per_group=32,
        spines_per_rail=32,
        superspines=128,
    ),
    # baseline comparison size (the naive checker is quadratic)
    "2k": dict(name="p2k", rails=8, aggregation_groups=8, servers_per_group=32, spines_per_rail=8, superspines=8),
}
TARGETS = {"16k": 3.0, "131k": 30.0}


def one_size(size: str) -> dict[str, object]:
    """Run in a child process pinned to one core, so peak RSS is this size's alone."""
    os.sched_setaffinity(0, {min(os.sched_getaffinity(0))})
    spec = FabricSpec.model_validate(SIZES[size])
    t0 = time.perf_counter()
    bp = generate_blueprint(spec)
    t1 = time.perf_counter()
    result = validate(spec, bp)
    t2 = time.perf_counter()
    assert result.ok, result.summary
    return {
        "size": size,
        "gpus": spec.gpus,
        "links": len(bp.links),
        "blueprint_s": round(t1 - t0, 3),
        "validate_s": round(t2 - t1, 3),
        "total_s": round(t2 - t0, 3),
        "peak_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
    }


def naive_validate(spec: FabricSpec, g: nx.MultiGraph) -> int:
    """The obvious way: for each device, scan every edge of the graph to find its links, then check
    server rails/groups and per-pair leaf-spine link counts. Same answers on a clean blueprint, O(V*E)."""
    problems = 0
    devices = dict(g.nodes(data="device"))
    for name, dev in devices.items():
        mine = [(u, v, d["link"]) for u, v, d in g.edges(data=True) if name in (u, v)]
        if dev.role is Role.SERVER:
            for u, v, link in mine:
                leaf = devices[v if u == name else u]
                port = link.a.port if link.a.device == name else link.b.port
                if leaf.rail != int(port[3:]) or leaf.group != dev.group:
                    problems += 1
        elif dev.role is Role.LEAF:
            per_spine = Counter(
                v if u == name else u for u, v, _ in mine if devices[v if u == name else u].role is Role.SPINE
            )
            spines = [s for s, d in devices.items() if d.role is Role.SPINE and d.rail == dev.rail]
            problems += sum(1 for s in spines if per_spine[s] < 1)
    return problems


def baseline(size: str) -> dict[str, object]:
    os.sched_setaffinity(0, {min(os.sched_getaffinity(0))})
    from topology.fabric import Fabric

    spec = FabricSpec.model_validate(SIZES[size])
    bp = generate_blueprint(spec)
    t0 = time.perf_counter()
    ours = validate(spec, bp)
    t1 = time.perf_counter()
    graph = Fabric(bp).graph
    t2 = time.perf_counter()
    naive = naive_validate(spec, graph)
    t3 = time.perf_counter()
    assert ours.ok and naive == 0
    return {
        "size": size,
        "gpus": spec.gpus,
        "links": len(bp.links),
        "ours_s": round(t1 - t0, 3),
        "naive_s": round(t3 - t2, 3),
        "speedup": round((t3 - t2) / (t1 - t0), 1),
    }


def child(kind: str, size: str) -> dict[str, object]:
    out = subprocess.run([sys.executable, __file__, "--child", kind, size], capture_output=True, text=True, check=True)
    result: dict[str, object] = json.loads(out.stdout)
    return result


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true", help="skip the 131k fabric")
    ap.add_argument("--child", nargs=2, help=argparse.SUPPRESS)
    ap.add_argument(
        "--smoke", action="store_true", help="seconds on a tiny fabric: proves the bench still runs (a test runs it)"
    )
    args = ap.parse_args()
    if args.child:
        kind, size = args.child
        print(json.dumps(one_size(size) if kind == "size" else baseline(size)))
        return
    print(
        f"machine: {platform.processor() or platform.machine()}, {os.cpu_count()} cores, "
        f"python {platform.python_version()}; each run pinned to one core"
    )
    for size in ["2k"] if args.smoke else ["16k"] if args.quick else ["16k", "131k"]:
        r = child("size", size)
        ok = "PASS" if float(str(r["total_s"])) < TARGETS.get(size, 3.0) and float(str(r["peak_mb"])) < 2048 else "FAIL"
        print(
            f"{r['gpus']:>7} GPUs {r['links']:>7} links: blueprint {r['blueprint_s']} s + validate "
            f"{r['validate_s']} s = {r['total_s']} s (target < {TARGETS.get(size, 3.0)} s), peak {r['peak_mb']} MB "
            f"(target < 2048) {ok}"
        )
    b = child("baseline", "2k")
    print(
        f"baseline on {b['gpus']} GPUs / {b['links']} links: ours {b['ours_s']} s, naive edge-scan "
        f"{b['naive_s']} s -> ours is {b['speedup']}x faster"
    )


if __name__ == "__main__":
    main()
