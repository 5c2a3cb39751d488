"""Telemetry ingest benchmark: serialized gNMI SubscribeResponse bytes -> counter store.

Synthesizes an 832-switch-like stream (EOS paths, interface prefix + relative updates, 20-30 updates per
notification), then measures in one run:
  1. fabricd's Ingestor (raw walker + numpy batches) in updates/s, end to end from bytes into the store;
  2. a baseline: pygnmi's telemetryParser + a dict store computing the same rates;
  3. memory per series with 1.6M series (832 switches x 64 ports x ~30 leaves), in a fresh process (RSS delta
     and the store's own accounting).

Run: /work/venv/bin/python bench/bench_telemetry.py [--switches 832] [--ports 16] [--rounds 4]
"""

from __future__ import annotations

import argparse
import gc
import json
import resource
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from pygnmi.client import telemetryParser
from pygnmi.spec.v080 import gnmi_pb2

from fabricd.telemetry import CounterStore, Ingestor
from fabricd.telemetry.paths import parse_path

S = 10**9
T0 = 1_700_000_000 * S
IF_RELS = [f"/state/counters/{c}" for c in ("in-pkts", "out-pkts", "in-octets", "out-octets", "in-unicast-pkts")]
IF_RELS += [f"/state/counters/{c}" for c in ("in-errors", "in-fcs-errors", "in-discards", "out-discards")]
IF_RELS += ["/state/counters/carrier-transitions"]
IF_RELS += [f"/ethernet/state/counters/{c}" for c in ("in-crc-errors", "in-mac-pause-frames", "out-mac-pause-frames")]
IF_RELS += [f"/ethernet/pfc/priorities/priority[index=3]/state/{c}" for c in ("in-frames", "out-frames")]
IF_RELS += ["/ethernet/pfc/priorities/priority[index=3]/state/pfc-on-total-rx-time"]
IF_RELS += [
    f"/ethernet/phys/phy[index=1]/ingress/fec/state/{c}" for c in ("corrected-codewords", "uncorrected-codewords")
]
IF_RELS += [
    f"/ethernet/pfc/watchdog/tx-queues/tx-queue[index=3][queue-type=UNICAST]/state/{c}" for c in ("stuck-count",)
]
IF_RELS += ["/ethernet/pfc/watchdog/tx-queues/tx-queue[index=3][queue-type=UNICAST]/state/recovery-count"]
QOS_RELS = [
    f"/output/queues/queue[name={q}]/state/{c}"
    for q in range(6)
    for c in ("transmit-pkts", "transmit-octets", "dropped-pkts", "ecn-marked-pkts")
]  # 24 updates
ROOTS = {"if": "/interfaces/interface[name={}]", "qos": "/qos/interfaces/interface[interface-id={}]"}
RELS = {"if": IF_RELS, "qos": QOS_RELS}  # 22 and 24 updates per notification


def varint(n: int) -> bytes:
    out = bytearray()
    while n > 0x7F:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def field(tag: int, body: bytes) -> bytes:
    return bytes((tag,)) + varint(len(body)) + body


def path_bytes(text: str, target: str = "") -> bytes:
    p = gnmi_pb2.Path(target=target)
    for name, keys in parse_path(text):
        pe = p.elem.add(name=name)
        for k, v in keys:
            pe.key[k] = v
    out: bytes = p.SerializeToString()
    return out


class Stream:
    """Pre-serialized notifications: prefix bytes per (switch, port, tree), update blocks per (tree, round, variant)."""

    def __init__(self, switches: int, ports: int, variants: int = 8) -> None:
        self.switches, self.ports, self.variants = switches, ports, variants
        self.rel = {t: [field(0x0A, path_bytes(r)) for r in rels] for t, rels in RELS.items()}

    def updates(self, tree: str, rnd: int, variant: int) -> bytes:
        base = 10**9 * (1 + variant) + rnd * 10**7 * (1 + variant)
        return b"".join(
            field(0x22, p + field(0x1A, b"\x18" + varint(base + 1000 * k * rnd))) for k, p in enumerate(self.rel[tree])
        )

    def device(self, sw: int) -> str:
        return f"leaf-g{sw // 8}-r{sw % 8}" if sw < 512 else f"spine-r{sw % 8}-{sw // 8}"

    def messages(self, rnd: int, blocks: dict[tuple[str, int], bytes]) -> Iterator[tuple[str, bytes]]:
        ts = b"\x08" + varint(T0 + rnd * 10 * S)
        for sw in range(self.switches):
            dev = self.device(sw)
            for port in range(self.ports):
                for tree, root in ROOTS.items():
                    pfx = field(0x12, path_bytes(root.format(f"Ethernet{port + 1}/1"), dev))
                    body = ts + pfx + blocks[tree, (sw + port) % self.variants]
                    yield dev, field(0x0A, body)

    def round(self, rnd: int) -> list[tuple[str, bytes]]:
        blocks = {(t, v): self.updates(t, rnd, v) for t in RELS for v in range(self.variants)}
        return list(self.messages(rnd, blocks))


def n_updates(msgs: list[tuple[str, bytes]]) -> int:
    return sum(len(RELS["if"]) if b"interface-id" not in m else len(RELS["qos"]) for _, m in msgs)


# --- the two contenders ----------------------------------------------------------------------------------
def run_fabricd(rounds: list[list[tuple[str, bytes]]]) -> tuple[float, float, Ingestor]:
    ing = Ingestor(CounterStore())
    t = time.perf_counter()
    for dev, m in rounds[0]:
        ing.ingest(m, dev)
    ing.flush()
    first = time.perf_counter() - t
    t = time.perf_counter()
    for msgs in rounds[1:]:
        for dev, m in msgs:
            ing.ingest(m, dev)
    ing.flush()
    return first, time.perf_counter() - t, ing


def run_baseline(rounds: list[list[tuple[str, bytes]]]) -> float:
    """pygnmi telemetryParser + dict store: {(device, path): (value, ts, rate)}; resets give no rate."""
    store: dict[tuple[str, str], tuple[Any, int, float]] = {}
    parse = gnmi_pb2.SubscribeResponse.FromString
    t = time.perf_counter()
    for msgs in rounds:
        for dev, m in msgs:
            n = telemetryParser(parse(m))["update"]
            ts, prefix = n["timestamp"], n.get("prefix", "")
            for u in n.get("update", ()):
                key = (dev, prefix + "/" + u["path"])
                v = u["val"]
                old = store.get(key)
                rate = float("nan")
                if old is not None and ts > old[1] and isinstance(v, int) and v >= old[0]:
                    rate = (v - old[0]) * 1e9 / (ts - old[1])
                store[key] = (v, ts, rate)
    return time.perf_counter() - t


# --- memory ------------------------------------------------------------------------------------------------
def rss_mb() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def memory(switches: int, ports: int) -> dict[str, float]:
    """Series from `switches` x `ports` x (22 + 24 ...) leaves, fed through ingestion; RSS delta per series."""
    stream = Stream(switches, ports)
    blocks = {(t, v): stream.updates(t, 0, v) for t in RELS for v in range(stream.variants)}
    gc.collect()
    before = rss_mb()
    ing = Ingestor(CounterStore())
    t = time.perf_counter()
    updates = 0
    for dev, m in stream.messages(0, blocks):
        ing.ingest(m, dev)
        updates += 1
    snap = ing.snapshot()
    took = time.perf_counter() - t
    del snap
    gc.collect()
    after = rss_mb()
    st = ing.store
    arrays = sum(a.nbytes for a in st.arrays.values()) + st.slots.nbytes + st.port_dev.nbytes
    n = st.n
    return {
        "series": n,
        "rss_delta_mb": after - before,
        "bytes_per_series_rss": (after - before) * 2**20 / n,
        "bytes_per_series_arrays": arrays / n,
        "fill_s": took,
        "notifications": updates,
    }


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--switches", type=int, default=832)
    ap.add_argument("--ports", type=int, default=8, help="ports per switch in the throughput stream")
    ap.add_argument("--rounds", type=int, default=4)
    ap.add_argument("--baseline-switches", type=int, default=104)
    ap.add_argument("--memory-ports", type=int, default=44, help="ports per switch for the 1.6M-series run")
    ap.add_argument("--part", choices=("all", "throughput", "memory"), default="all")
    ap.add_argument(
        "--smoke", action="store_true", help="seconds on a tiny fabric: proves the bench still runs (a test runs it)"
    )
    args = ap.parse_args()
    if args.smoke:
        args.switches, args.ports, args.rounds, args.baseline_switches, args.memory_ports = 16, 2, 2, 8, 2
    if args.part == "memory":
        print(json.dumps(memory(args.switches, args.memory_ports)))
        return
    stream = Stream(args.switches, args.ports)
    rounds = [stream.round(r) for r in range(args.rounds)]
    ups = [n_updates(r) for r in rounds]
    first, steady, ing = run_fabricd(rounds)
    fab_first, fab_steady = ups[0] / first, sum(ups[1:]) / steady
    fab_all = sum(ups) / (first + steady)
    sub = [r[: len(r) * args.baseline_switches // args.switches] for r in rounds]  # the baseline is slow
    base_t = run_baseline(sub)
    base = sum(n_updates(r) for r in sub) / base_t
    snap = ing.snapshot()
    print(
        f"stream: {args.switches} switches x {args.ports} ports x 2 trees, {args.rounds} rounds, "
        f"{sum(ups):,} updates, 22-24 updates/notification, {len(snap):,} series"
    )
    print(f"{'contender':<46}{'updates/s':>14}")
    print(f"{'fabricd Ingestor, first round (cache misses)':<46}{fab_first:>14,.0f}")
    print(f"{'fabricd Ingestor, steady state':<46}{fab_steady:>14,.0f}")
    print(f"{'fabricd Ingestor, all rounds':<46}{fab_all:>14,.0f}")
    print(f"{'baseline telemetryParser + dict':<46}{base:>14,.0f}")
    print(f"speed-up (steady / baseline): {fab_steady / base:.1f}x; (all rounds / baseline): {fab_all / base:.1f}x")
    if args.part == "all":
        cmd = [sys.executable, __file__, "--part", "memory", "--switches", str(args.switches)]
        cmd += ["--smoke"] if args.smoke else []
        cmd += ["--memory-ports", str(args.memory_ports)]
        mem = json.loads(subprocess.run(cmd, check=True, capture_output=True, text=True).stdout)
        print(
            f"memory: {mem['series']:,} series: RSS delta {mem['rss_delta_mb']:.0f} MB = "
            f"{mem['bytes_per_series_rss']:.0f} B/series all-in "
            f"(arrays {mem['bytes_per_series_arrays']:.0f} B/series); "
            f"filled through ingestion in {mem['fill_s']:.1f} s"
        )


if __name__ == "__main__":
    main()
