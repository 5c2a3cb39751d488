"""SONiC telemetry ingest benchmark: sonic-gnmi DB rows (JSON_IETF objects of SAI counters) -> counter store.

SONiC switches send a port's counters as one JSON row per notification (fabricd/telemetry/sonic.py), so they go
through the ingestor's protobuf-and-JSON path, not the raw walker EOS notifications take. Measured in one run:
  1. fabricd's Ingestor on SONiC rows, in leaf updates/s (a row of 40 SAI counters gives ~40 updates);
  2. a baseline: the same rows through protobuf parsing, json.loads and a dict store computing the same rates;
  3. for scale, fabricd's Ingestor on the EOS OpenConfig stream of bench_telemetry.py (same machine, same run).

Run: .venv/bin/python bench/bench_sonic_ingest.py [--switches 128] [--ports 32] [--rounds 4]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_telemetry import Stream, n_updates, run_fabricd
from pygnmi.spec.v080 import gnmi_pb2

from fabricd.telemetry import CounterStore, Ingestor
from fabricd.telemetry.sonic import decode

S = 10**9
T0 = 1_700_000_000 * S
FIELDS = [
    *("SAI_PORT_STAT_IF_IN_OCTETS", "SAI_PORT_STAT_IF_OUT_OCTETS", "SAI_PORT_STAT_IF_IN_UCAST_PKTS"),
    *("SAI_PORT_STAT_IF_IN_NON_UCAST_PKTS", "SAI_PORT_STAT_IF_OUT_UCAST_PKTS", "SAI_PORT_STAT_IF_OUT_NON_UCAST_PKTS"),
    *("SAI_PORT_STAT_IF_IN_ERRORS", "SAI_PORT_STAT_IF_IN_DISCARDS", "SAI_PORT_STAT_IF_OUT_DISCARDS"),
    *("SAI_PORT_STAT_ETHER_STATS_CRC_ALIGN_ERRORS", "SAI_PORT_STAT_IF_IN_FEC_CORRECTABLE_FRAMES"),
    *("SAI_PORT_STAT_IF_IN_FEC_NOT_CORRECTABLE_FRAMES", "SAI_PORT_STAT_IF_IN_FEC_SYMBOL_ERRORS"),
    *(f"SAI_PORT_STAT_PFC_{p}_{c}" for p in range(8) for c in ("RX_PKTS", "TX_PKTS", "RX_PAUSE_DURATION_US")),
]


def rows(switches: int, ports: int, rnd: int) -> list[tuple[str, bytes]]:
    out = []
    for sw in range(switches):
        dev = f"leaf-g{sw // 8}-r{sw % 8}"
        for port in range(ports):
            row = {f: str(10**9 + rnd * 10**6 * (k + 1) + sw + port) for k, f in enumerate(FIELDS)}
            n = gnmi_pb2.Notification(timestamp=T0 + rnd * 10 * S)
            n.prefix.target = "COUNTERS_DB"
            u = n.update.add()
            u.path.elem.add(name="COUNTERS")
            u.path.elem.add(name=f"Ethernet{port * 8}")
            u.val.json_ietf_val = json.dumps(row).encode()
            out.append((dev, gnmi_pb2.SubscribeResponse(update=n).SerializeToString()))
    return out


def run_fabricd_sonic(rounds: list[list[tuple[str, bytes]]]) -> tuple[float, int]:
    ing = Ingestor(CounterStore())
    for dev, m in rounds[0]:  # the first round interns the series; the steady state is what runs every interval
        ing.ingest(m, dev)
    ing.flush()
    t = time.perf_counter()
    for msgs in rounds[1:]:
        for dev, m in msgs:
            ing.ingest(m, dev)
    ing.flush()
    return time.perf_counter() - t, len(ing.snapshot())


def run_baseline(rounds: list[list[tuple[str, bytes]]]) -> float:
    """Protobuf parse, json.loads, the same SAI -> leaf mapping, a dict store with rates."""
    store: dict[tuple[str, str, str, str | None], tuple[Any, int, float]] = {}
    parse = gnmi_pb2.SubscribeResponse.FromString
    for dev, m in rounds[0]:
        _baseline_one(store, dev, parse(m))
    t = time.perf_counter()
    for msgs in rounds[1:]:
        for dev, m in msgs:
            _baseline_one(store, dev, parse(m))
    return time.perf_counter() - t


def _baseline_one(store: dict[tuple[str, str, str, str | None], tuple[Any, int, float]], dev: str, r: Any) -> None:
    n = r.update
    ts = n.timestamp
    for u in n.update:
        row = json.loads(u.val.json_ietf_val)
        path = [e.name for e in u.path.elem]
        for port, leaf, index, v in decode(str(n.prefix.target), path, row):
            key = (dev, port, leaf, index)
            old = store.get(key)
            rate = float("nan")
            if old is not None and ts > old[1] and isinstance(v, int) and v >= old[0]:
                rate = (v - old[0]) * 1e9 / (ts - old[1])
            store[key] = (v, ts, rate)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--switches", type=int, default=128)
    ap.add_argument("--ports", type=int, default=32)
    ap.add_argument("--rounds", type=int, default=4)
    ap.add_argument(
        "--smoke", action="store_true", help="seconds on a tiny fabric: proves the bench still runs (a test runs it)"
    )
    args = ap.parse_args()
    if args.smoke:
        args.switches, args.ports, args.rounds = 4, 4, 2
    rounds = [rows(args.switches, args.ports, r) for r in range(args.rounds)]
    per_row = sum(1 for _ in decode("COUNTERS_DB", ["COUNTERS", "Ethernet0"], json.loads(
        gnmi_pb2.SubscribeResponse.FromString(rounds[0][0][1]).update.update[0].val.json_ietf_val)))  # fmt: skip
    updates = per_row * len(rounds[0]) * (args.rounds - 1)
    ours, series = run_fabricd_sonic(rounds)
    base = run_baseline(rounds)
    eos = Stream(args.switches, args.ports)
    eos_rounds = [eos.round(r) for r in range(args.rounds)]
    _, eos_t, _ = run_fabricd(eos_rounds)
    eos_updates = sum(n_updates(m) for m in eos_rounds[1:])
    print(f"{args.switches} SONiC switches x {args.ports} ports, {per_row} leaves per COUNTERS row, "
          f"{args.rounds - 1} steady rounds, {series} series")  # fmt: skip
    print(f"fabricd, SONiC rows:     {updates / ours:>10,.0f} updates/s")
    print(f"baseline (json + dict):  {updates / base:>10,.0f} updates/s   ratio {base / ours:.2f}x")
    share = (updates / ours) / (eos_updates / eos_t)
    print(f"fabricd, EOS OpenConfig: {eos_updates / eos_t:>10,.0f} updates/s   (SONiC rows at {share:.2f}x of it)")


if __name__ == "__main__":
    main()
