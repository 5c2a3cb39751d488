"""Failure prediction accuracy (issue 19): lead time before a gradual optics fault breaks its link, and false alarms
over a long healthy run, on the twin with its clock accelerated.

The twin of examples/small-pod.yaml (every switch port, with the optics' temperature wander) runs `--hours` of
simulated time in 60 s steps (lab/simclock.py), sampled into a trace of oper-status and every signal the detector
reads (receive power, pre-FEC BER, module temperature with its daily cycle, FEC corrected codewords);
`optics_degrade` faults at several rates start at staggered hours on ports of distinct switches. The detectors then
replay the trace exactly as `fabricd detect` does (run_trace, 60 s ticks).

Ground truth per fault: its onset; when the receiver crosses -7 dBm (nominal power minus the accumulated loss); when
the link fails (the twin starts losing frames past 6 dB of loss). A predicted_failure on the fault's port after its
onset is a hit; any predicted_failure elsewhere, or before the onset, is a false alarm. Lead time = failure time -
first predicted_failure. Baseline, same trace: the usual static alarm, receive power under -7 dBm in a sample.

Run: .venv/bin/python bench/bench_prediction.py [--hours 48]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from fabricd.detectors import run_trace
from fabricd.telemetry import read_trace
from lab.faults import FaultInjector
from lab.model import Twin
from lab.simclock import simulate, write_trace
from topology.load import load_fabric
from topology.units import NS

REPO = Path(__file__).resolve().parent.parent
T0 = 1_700_000_000 * NS
H = 3600
THRESHOLD_DBM = -7.0
FAIL_DB = 6.0  # the twin's link loses frames past this loss (lab/model.py, _apply_physical)
# (port, dB per hour, onset hour): one per switch, slow to fast
FAULTS = [
    ("leaf-g0-r0:Ethernet1/1", 0.05, 1.0),
    ("leaf-g0-r1:Ethernet2/1", 0.1, 2.0),
    ("leaf-g0-r2:Ethernet3/1", 0.15, 3.0),
    ("leaf-g0-r3:Ethernet4/1", 0.25, 4.0),
    ("leaf-g1-r0:Ethernet5/1", 0.5, 6.0),
    ("leaf-g1-r1:Ethernet6/1", 1.0, 8.0),
    ("spine-r0-0:Ethernet1/1", 2.0, 10.0),
    ("spine-r1-1:Ethernet3/1", 0.2, 12.0),
]


@dataclass
class Row:
    port: str
    rate: float
    onset_h: float
    cross_h: float  # receiver under -7 dBm
    fail_h: float
    predicted_h: float | None
    static_h: float | None  # the static -7 dBm alarm

    @property
    def lead_h(self) -> float | None:
        return None if self.predicted_h is None else self.fail_h - self.predicted_h


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=(__doc__ or "").split("\n", 1)[0])
    ap.add_argument("--hours", type=float, default=48.0)
    ap.add_argument(
        "--smoke", action="store_true", help="seconds on a tiny fabric: proves the bench still runs (a test runs it)"
    )
    args = ap.parse_args(argv)
    if args.smoke:
        args.hours = 1.0
    _, fabric = load_fabric(REPO / "examples" / "small-pod.yaml", None)
    clock = [T0]
    twin = Twin(fabric, clock=lambda: clock[0])
    inj = FaultInjector(twin)
    events = [
        (onset * H, (lambda at, p=port, r=rate: inj.inject("optics_degrade", {"port": p, "db_per_hour": r}, at)))
        for port, rate, onset in FAULTS
    ]
    nominal = {}
    for port, _, _ in FAULTS:
        d, p = port.split(":")
        sw = twin.switch(d)
        nominal[port] = float(sw.rx_power_nominal[sw.index[p]])
    t = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp:
        trace = Path(tmp) / "t.jsonl"
        lines = write_trace(
            simulate(
                twin,
                T0,
                args.hours * H,
                60,
                events=events,
                counters=("fec.corrected-codewords",),
                gauges=("rx-power", "pre-fec-ber", "temperature"),
            ),
            trace,
        )
        sim_s = time.perf_counter() - t
        ports = {f"{d}:{p}" for d in twin.switches for p in twin.switch(d).ports}
        t = time.perf_counter()
        found = run_trace(trace, fabric, tick_s=60, pass_gap_s=0)
        detect_s = time.perf_counter() - t
        static: dict[str, float] = {}
        for rec in read_trace(trace):
            if rec.path.endswith("input-power/instant") and isinstance(rec.value, float) and rec.value < THRESHOLD_DBM:
                port = rec.path.split("name=", 1)[1].split(" transceiver", 1)[0]
                static.setdefault(f"{rec.device}:{port}", (rec.ts - T0) / NS / H)
    preds = [f for f in found if f.kind == "predicted_failure"]
    rows = []
    for port, rate, onset in FAULTS:
        mine = [
            (f.detected_ts - T0) / NS / H for f in preds if f.ports == (port,) and f.detected_ts >= T0 + onset * H * NS
        ]
        cross = onset + (nominal[port] - THRESHOLD_DBM) / rate
        rows.append(
            Row(port, rate, onset, cross, onset + FAIL_DB / rate, min(mine) if mine else None, static.get(port))
        )
    faulty = {port for port, _, _ in FAULTS}
    false = [f for f in preds if f.ports[0] not in faulty]
    early = [f for f in preds if f.ports[0] in faulty and not any(
        r.port == f.ports[0] and f.detected_ts >= T0 + r.onset_h * H * NS for r in rows
    )]  # fmt: skip
    healthy = len(ports) - len(faulty)
    print(f"small-pod twin, {args.hours:g} simulated hours in 60 s steps: {len(ports)} switch ports, "
          f"{lines} trace lines; simulated in {sim_s:.1f} s, detected in {detect_s:.1f} s\n")  # fmt: skip
    print("| port | dB/h | onset h | fails h | predicted h | lead time h | static -7 dBm alarm: lead h |")
    print("|---|---|---|---|---|---|---|")
    for r in rows:
        pred = "-" if r.predicted_h is None else f"{r.predicted_h:.1f}"
        lead = "-" if r.lead_h is None else f"{r.lead_h:.1f}"
        stat = "-" if r.static_h is None else f"{r.fail_h - r.static_h:.1f}"
        fails = f"{r.fail_h:.1f}" + (" (after the run)" if r.fail_h > args.hours else "")
        print(f"| {r.port} | {r.rate:g} | {r.onset_h:g} | {fails} | {pred} | {lead} | {stat} |")
    hits = [r for r in rows if r.predicted_h is not None]
    leads = sorted(r.lead_h for r in hits if r.lead_h is not None)
    print(f"\nfound {len(hits)} of {len(rows)} degrading optics; lead time before failure min {leads[0]:.1f} h, "
          f"median {leads[len(leads) // 2]:.1f} h" if leads else "\nnone found")  # fmt: skip
    print(f"false alarms: {len(false)} on {healthy} healthy ports over {args.hours:g} h, {len(early)} before an onset")
    return 0


if __name__ == "__main__":
    sys.exit(main())
