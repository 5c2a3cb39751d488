"""Detector accuracy benchmark (issue #6): faults injected into the twin, recorded, run through `fabricd detect`.

What runs (all real code paths, real sockets, real time):
1. `fabricd lab up` starts the twin of a small spec (default examples/small-pod.yaml: 18 switches, 4 rails); `fabricd
   apply` pushes the lossless config (PFC on priority 3, without it pause is not honoured and no queue is ever stuck)
   and `write memory` on every switch over eAPI keeps it across the reboots the noise includes.
2. A seeded generator plans episodes. An episode is one recording of `--duration` seconds; each rail of the fabric
   holds its own scenarios so faults at distinct places do not interact (a storm spreads within its rail, probes
   stay within their rail). Per rail: one primary scenario (a fault, or noise: reboot, gnmi_drop, few flaps,
   link_down, optics loss, microbursts), for PFC and silent-corruption primaries a second scenario on a server link
   the primary does not use (flap, corruption, few flaps, optics), and sometimes a counter wrap (`counter_wrap`, set
   up before the recording starts) on one of its switches. Some full-run episodes hold one fabric-wide deadlock
   formed by failed links (`pfc_deadlock --failed`) instead of the per-rail PFC scenarios.
3. The episode is recorded through the service's own gNMI client (`TelemetryClient` into an `Ingestor` with a
   `TraceWriter`, 1 s samples), which re-subscribes after the stream drops of a reboot or gnmi_drop as the service
   does; `fabricd lab record` does not (a rebooted switch would fall silent for the rest of the recording). Faults are
   injected and cleared through the twin's control API (what `fabricd lab inject/clear` call) at their planned
   times; the twin's host probes (every 1 s) inside the recording window become the probes file.
4. `fabricd detect --spec S --trace T --probes P --format json` (a subprocess: the real command) gives the findings.

Ground truth: the twin's fault record of every fault scenario (kind, place, `start_ts` in the twin's clock, which
also stamps the trace). A flap scenario is a fault only when it meets the EOS errdisable rule (>= 5 flaps within
10 s, reference/domain.md); fewer flaps are noise. Noise never counts as a fault: any finding it causes is false.

Matching rule (one episode's findings against that episode's faults): a finding matches a fault when the kinds are
equal, it was detected no earlier than the fault started and no later than `LATE_S` after the fault was cleared, and
it names the fault's place:
- link_flap: the finding's `ports` are exactly the flapped link's two ends;
- pfc_storm: the finding's origin (`device:port`) is the switch port facing the storming NIC, on the same priority;
- pfc_deadlock: the finding's `ports` are exactly the cycle's paused egress queues (the twin record's `ports`);
- link_corruption: the finding's `ports` are exactly the corrupting link's two ends;
- silent_corruption: the finding names the corrupting switch itself (a switch element, no ports); naming one of its
  links is a miss plus a false finding;
- bgp_session (the twin's `bgp_down` and `bgp_flap` on a leaf uplink, link up): the finding's `ports` are exactly
  the session's link's two ends;
- miscabled (`miscable`: two server cables of a rail, on two of its leaves, swapped): the finding names both ports.
Per kind: TP = faults matched by at least one finding, FN = faults not matched, FP = findings that match no fault
(wrong place, wrong kind, noise, or before onset); a further finding matching an already matched fault is a
duplicate (listed, not an FP). Precision = matching findings / findings; recall = TP / faults.

Detection delay = the first matching finding's `detected_ts` (the end of the detector tick that raised it) minus the
onset: the injection time, except for a flap, whose onset is the flap that completes 5 in 10 s (before it, the link
is not flapping by the rule), and a BGP session flap, whose onset is its third drop (the detector's 3 in 120 s).
Targets (issue #6): flap and storm within one sample interval + 1 s (2 s), deadlock
within two intervals (2 s), corruption at a 1e-6 loss rate within 60 s, a BGP session within 3 s + two intervals,
miscabling within the 1 s settle + two intervals. Silent corruption has no delay target; offline
its `detected_ts` is the last probe of the file, so the table gives the time to localize instead: the first probe
round after which `localize` over the probes so far names the switch.

Baseline, same traces and probes, same matching: naive per-port thresholds with no hysteresis and no topology:
a port that went down twice is flapping; a port receiving >= 1000 PFC frames/s in a sample is storming; a port whose
FCS error counter rose is corrupting; every switch on the paths of >= 2 corrupted probes is silently corrupting;
no deadlock rule (a threshold cannot see a cycle).

Not covered: ports fabricd itself disabled (no remediation runs offline). The twin makes no FCS errors of its own
(no link training errors after a flap), so noise cannot fool a corruption rule here.

Run: /work/venv/bin/python bench/bench_detector_accuracy.py [--quick] [--seed 6] [--episodes N] [--keep DIR]
(full: 50 episodes of 30 s, ~380 scenarios, about 27 min on 2 cores; --quick: 3 episodes, about 2 min).
`--rescore DIR` runs `fabricd detect` again over the recordings a `--keep DIR` run left, and scores them (for
detector work: same traces, new code).

Code: accuracy_plan.py (the seeded plan and the shared parameters), accuracy_score.py (ground truth, matching,
scores, time to localize, the naive baseline); this file runs the twin, records, calls `fabricd detect`, reports.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import heapq
import json
import logging
import random
import ssl
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from drivers.inventory import DeviceAccess, load_inventory
from fabricd.detectors.probes import read_probes
from fabricd.telemetry import CounterStore, Ingestor, TelemetryClient, TraceWriter
from topology.blueprint import generate_blueprint
from topology.fabric import Fabric
from topology.labels import complete_labels
from topology.spec import load_spec

sys.path.insert(0, str(Path(__file__).resolve().parent))  # its parts, also when loaded from a path (the tests)

import accuracy_dci
from accuracy_plan import (
    CORRUPTION_TARGET,
    INTERVAL_S,
    KINDS,
    REPO,
    TARGETS,
    Episode,
    Planner,
    Scenario,
    Step,
    flap_rule_onset,
)
from accuracy_score import Score, Truth, localize_delay, naive, score, truths

from topology.units import NS

# What the tests and other scripts use from here (the parts hold the code).
__all__ = [
    "KINDS", "NS", "Episode", "Planner", "Scenario", "Step", "Truth", "evaluate", "flap_rule_onset", "load", "run",
    "score",
]  # fmt: skip


# --- the twin ----------------------------------------------------------------------------------------------------
def fabricd(*args: str | Path) -> list[str]:
    return [sys.executable, "-m", "fabricd", *map(str, args)]


class Lab:
    """A twin started with `fabricd lab up`, driven through its control API (what `fabricd lab inject` calls)."""

    def __init__(self, spec: Path, state_dir: Path, base_address: str | None = None) -> None:
        self.spec, self.state = spec, state_dir
        rng = random.Random()
        # A random 127.x.y.1 block, so the bench never collides with another twin on this machine.
        self.base = base_address or f"127.{rng.randint(100, 250)}.{rng.randint(0, 250)}.1"
        self.url = ""
        self.token = ""

    @property
    def inventory(self) -> Path:
        return self.state / "inventory.yaml"

    def up(self, lossless: bool) -> None:
        args = fabricd("lab", "up", "--spec", self.spec, "--state-dir", self.state, "--base-address", self.base)
        subprocess.run([*args, "--probe-interval", "1"], check=True, capture_output=True, text=True)
        self.url = json.loads((self.state / "control.json").read_text())["url"]
        self.token = (self.state / "lab.secret").read_text().strip()
        if lossless:
            apply = fabricd("apply", "--spec", self.spec, "--inventory", self.inventory, "--yes")
            done = subprocess.run([*apply, "--revert-in", "60", "--batch", "6"], capture_output=True, text=True)
            if done.returncode not in (0, 1):  # 1: changes were pushed
                raise RuntimeError(f"fabricd apply failed: {done.stderr.strip() or done.stdout[-500:]}")
            self.write_memory()

    def write_memory(self) -> None:
        """Save the pushed config as the startup config, so a rebooted switch keeps PFC (apply does not save)."""
        inv = load_inventory(self.inventory)
        lab_tls = ssl.create_default_context()
        lab_tls.check_hostname, lab_tls.verify_mode = False, ssl.CERT_NONE  # the twin's self-signed eAPI certificate
        for name in inv.names:
            a = inv.access(name)
            body = {"jsonrpc": "2.0", "method": "runCmds", "id": 1}
            body["params"] = {"version": 1, "cmds": ["enable", "write memory"], "format": "text"}
            url = f"{a.eapi.transport}://{a.host}:{a.eapi.port}/command-api"
            req = urllib.request.Request(url, json.dumps(body).encode())
            auth = base64.b64encode(f"{a.username}:{a.password.get_secret_value()}".encode()).decode()
            req.add_header("Authorization", f"Basic {auth}")
            with urllib.request.urlopen(req, timeout=10, context=lab_tls) as resp:
                answer = json.loads(resp.read())
            if "error" in answer:
                raise RuntimeError(f"{name}: write memory failed: {answer['error']}")

    def call(self, method: str, path: str, body: dict[str, Any] | None = None) -> Any:
        data = json.dumps(body).encode() if body is not None else None
        req = urllib.request.Request(self.url + path, data=data, method=method)
        req.add_header("Authorization", f"Bearer {self.token}")
        req.add_header("Content-Type", "application/json")
        with urllib.request.urlopen(req, timeout=30) as resp:
            return json.loads(resp.read())

    def accesses(self) -> list[DeviceAccess]:
        inv = load_inventory(self.inventory)
        return [inv.access(n) for n in inv.names]

    def down(self) -> None:
        subprocess.run(fabricd("lab", "down", "--state-dir", self.state), check=False, capture_output=True)


# --- recording ---------------------------------------------------------------------------------------------------
@dataclass
class Recorded:
    episode: Episode
    dir: Path
    start_ns: int
    end_ns: int

    def _file(self, what: str) -> Path:
        return self.dir / f"e{self.episode.index:02d}.{what}"

    @property
    def trace(self) -> Path:
        return self._file("trace.jsonl")

    @property
    def probes(self) -> Path:
        return self._file("probes.jsonl")

    @property
    def findings(self) -> Path:
        return self._file("findings.json")


def save(recs: list[Recorded], out: Path) -> None:
    """run.json: the plan with the twin's fault records and each recording's window (what --rescore reads)."""
    doc = [{"episode": asdict(r.episode), "start_ns": r.start_ns, "end_ns": r.end_ns} for r in recs]
    (out / "run.json").write_text(json.dumps(doc, indent=1))


def load(out: Path) -> list[Recorded]:
    recs = []
    for item in json.loads((out / "run.json").read_text()):
        e = item["episode"]
        scenarios = [Scenario(**(sc | {"steps": [Step(**st) for st in sc["steps"]]})) for sc in e["scenarios"]]
        recs.append(Recorded(Episode(e["index"], e["duration_s"], scenarios), out, item["start_ns"], item["end_ns"]))
    return recs


async def record(lab: Lab, ep: Episode, out: Path) -> Recorded:
    """Record one episode: subscribe every switch, inject and clear its faults on time, stop, clear what is left."""
    trace = Recorded(ep, out, 0, 0).trace
    log = logging.getLogger("bench.telemetry")  # stream drops are the point of some noise; keep them quiet
    log.propagate = False
    log.addHandler(logging.NullHandler())
    plan = [(st.at_s, n, st, sc) for n, (sc, st) in enumerate((sc, st) for sc in ep.scenarios for st in sc.steps)]
    heapq.heapify(plan)
    pending: list[tuple[float, int, str]] = []  # (at, seq, fault id) to clear
    loop = asyncio.get_running_loop()

    async def inject(st: Step, sc: Scenario) -> None:
        rec = await asyncio.to_thread(lab.call, "POST", "/faults", {"kind": st.kind, "params": st.params})
        sc.records.append(rec)
        if st.clear_s is not None:
            heapq.heappush(pending, (st.at_s + st.clear_s, len(pending) + len(plan), rec["id"]))

    while plan and plan[0][0] < 0:  # set up before anyone subscribes (counter wraps)
        _, _, st, sc = heapq.heappop(plan)
        await inject(st, sc)
    with trace.open("w") as fh:
        ingestor = Ingestor(CounterStore(), recorder=TraceWriter(fh))
        client = TelemetryClient(
            lab.accesses(), ingestor, interval_s=INTERVAL_S, backoff_cap_s=2.0, rng=random.Random(ep.index), log=log
        )
        start_ns, t0 = time.time_ns(), loop.time()
        running = asyncio.create_task(client.run())
        while plan or (pending and pending[0][0] < ep.duration_s):
            if pending and (not plan or pending[0][0] <= plan[0][0]):
                at, _, fid = heapq.heappop(pending)
                await asyncio.sleep(max(0.0, t0 + at - loop.time()))
                await asyncio.to_thread(lab.call, "DELETE", f"/faults/{fid}")
            else:
                at, _, st, sc = heapq.heappop(plan)
                await asyncio.sleep(max(0.0, t0 + at - loop.time()))
                await inject(st, sc)
        await asyncio.sleep(max(0.0, t0 + ep.duration_s - loop.time()))
        await client.stop()
        await running
        end_ns = time.time_ns()
    await asyncio.to_thread(lab.call, "DELETE", "/faults")
    final = {r["id"]: r for r in await asyncio.to_thread(lab.call, "GET", "/faults")}
    for sc in ep.scenarios:
        sc.records = [final.get(r["id"], r) for r in sc.records]
    rec = Recorded(ep, out, start_ns, end_ns)
    with (lab.state / "probes.jsonl").open() as src, rec.probes.open("w") as dst:
        dst.writelines(line for line in src if start_ns <= json.loads(line)["ts"] <= end_ns)
    return rec


def detect(spec: Path, rec: Recorded) -> subprocess.Popen[bytes]:
    """`fabricd detect` over the episode, in the background (it runs while the next episode records)."""
    args = fabricd("detect", "--spec", spec, "--trace", rec.trace, "--probes", rec.probes, "--format", "json")
    with rec.findings.open("wb") as out:
        # niced: it overlaps the next recording, and the twin must keep its real-time sampling
        cmd = ["nice", "-n", "10", *args, "--tick", str(INTERVAL_S)]
        return subprocess.Popen(cmd, stdout=out, stderr=subprocess.PIPE)


def finish(proc: subprocess.Popen[bytes], rec: Recorded) -> list[dict[str, Any]]:
    _, err = proc.communicate()
    if proc.returncode not in (0, 1):
        raise RuntimeError(f"fabricd detect on {rec.trace} failed ({proc.returncode}): {err.decode().strip()}")
    findings: list[dict[str, Any]] = json.loads(rec.findings.read_text())["findings"]
    return findings


# --- report ------------------------------------------------------------------------------------------------------
def _pct(x: float) -> str:
    return f"{100 * x:.1f}%"


def _precision(s: Score) -> str:
    return _pct(s.precision) if s.findings else "-"


def _delays(d: list[float]) -> str:
    return f"{statistics.median(d):.2f} / {max(d):.2f}" if d else "-"


def _verdict(ok: bool) -> str:
    return "PASS" if ok else "FAIL"


def report(scores: dict[str, Score], base: dict[str, Score], localize_s: list[float]) -> list[str]:
    """The results table (markdown), with PASS/FAIL per target, then the baseline and the misses."""
    lines = [
        "| kind | faults | TP | FN | FP | precision (>= 99%) | recall (100%) | delay p50 / max, s | delay target |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for k in KINDS:
        s = scores[k]
        p_ok, r_ok = s.precision >= 0.99, s.recall >= 1.0
        if k in TARGETS:
            delay = _delays(s.delays)
            target = f"<= {TARGETS[k]:g} s: {_verdict(bool(s.delays) and max(s.delays) <= TARGETS[k])}"
        elif k == "link_corruption":
            rate, limit = CORRUPTION_TARGET
            delay = f"{_delays(s.delays)} (at {rate:.0e}: {_delays(s.delays_1e6)})"
            target = f"<= {limit:g} s at {rate:.0e}: {_verdict(bool(s.delays_1e6) and max(s.delays_1e6) <= limit)}"
        else:
            delay = f"localize {_delays(localize_s)}"
            target = "none"
        fp = len(s.fps)
        lines.append(
            f"| {k} | {s.faults} | {s.tp} | {s.faults - s.tp} | {fp} | {_pct(s.precision)} {_verdict(p_ok)} "
            f"| {_pct(s.recall)} {_verdict(r_ok)} | {delay} | {target} |"
        )
    lines += [
        "",
        "| kind | fabricd precision / recall / F1 | naive precision / recall / F1 | F1 ratio |",
        "|---|---|---|---|",
    ]
    for k in KINDS:
        s, b = scores[k], base[k]
        ratio = f"{s.f1 / b.f1:.1f}x" if b.f1 else "naive has none"
        lines.append(
            f"| {k} | {_precision(s)} / {_pct(s.recall)} / {s.f1:.2f} ({s.findings} findings) "
            f"| {_precision(b)} / {_pct(b.recall)} / {b.f1:.2f} ({b.findings} findings) | {ratio} |"
        )
    return lines


def _mix(episodes: list[Episode]) -> str:
    counts: dict[str, int] = {}
    for ep in episodes:
        for sc in ep.scenarios:
            counts[sc.kind] = counts.get(sc.kind, 0) + 1
    faults = sum(counts.get(k, 0) for k in KINDS)
    noise = sum(counts.values()) - faults
    order = sorted(counts, key=lambda k: (k not in KINDS, -counts[k], k))
    return f"{faults} faults + {noise} noise: " + ", ".join(f"{counts[k]} {k}" for k in order)


async def run(
    spec: Path, episodes: list[Episode], out: Path, lossless: bool = True
) -> list[tuple[Recorded, list[dict[str, Any]]]]:
    """Start the twin, record every episode (detecting the previous one meanwhile), stop the twin."""
    lab = Lab(spec, out / "lab")
    lab.up(lossless)
    done: list[tuple[Recorded, list[dict[str, Any]]]] = []
    try:
        running: tuple[subprocess.Popen[bytes], Recorded] | None = None
        for ep in episodes:
            t = time.perf_counter()
            rec = await record(lab, ep, out)
            if running is not None:
                done.append((running[1], await asyncio.to_thread(finish, *running)))
            running = (detect(spec, rec), rec)
            print(
                f"  episode {ep.index:2d}: {len(ep.scenarios)} scenarios, {time.perf_counter() - t:.1f} s", flush=True
            )
            if ep is not episodes[-1]:
                await asyncio.sleep(1.0)  # cleared faults settle (links back up) before the next recording
        if running is not None:
            done.append((running[1], await asyncio.to_thread(finish, *running)))
    finally:
        lab.down()
    save([r for r, _ in done], out)
    return done


def evaluate(
    results: list[tuple[Recorded, list[dict[str, Any]]]], fabric: Fabric
) -> tuple[dict[str, Score], dict[str, Score], list[float]]:
    """fabricd's scores, the naive baseline's, and the silent-corruption localization times."""
    rows, naive_rows, localize_s = [], [], []
    for rec, findings in results:
        ts = truths(rec.episode, fabric, rec.end_ns)
        probes = read_probes(rec.probes)
        rows.append((rec.episode, ts, findings))
        naive_rows.append((rec.episode, ts, naive(rec.trace, probes, fabric)))
        for t in ts:
            if t.kind == "silent_corruption":
                d = localize_delay(probes, fabric, t)
                if d is not None:
                    localize_s.append(d)
    return score(rows, fabric), score(naive_rows, fabric), localize_s


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=(__doc__ or "").split("\n", 1)[0])
    ap.add_argument("--spec", type=Path, default=REPO / "examples" / "small-pod.yaml")
    ap.add_argument("--seed", type=int, default=6)
    ap.add_argument("--quick", action="store_true", help="3 episodes (under 3 min)")
    ap.add_argument("--episodes", type=int, help="recordings (default 50, --quick 3)")
    ap.add_argument("--duration", type=float, default=30.0, help="seconds per recording")
    ap.add_argument("--keep", type=Path, help="keep traces, probes, findings and run.json here")
    ap.add_argument("--rescore", type=Path, help="no recording: run fabricd detect again over a --keep dir and score")
    ap.add_argument("--dci", action="store_true", help="the DR cases (accuracy_dci.py) on examples/small-dci.yaml")
    ap.add_argument("--rounds", type=int, default=2, help="--dci: every case this many times (--quick: 1)")
    ap.add_argument(
        "--smoke", action="store_true", help="seconds on a tiny fabric: proves the bench still runs (a test runs it)"
    )
    args = ap.parse_args(argv)
    if args.smoke:
        args.quick, args.episodes, args.duration = True, 1, 8.0
    if args.dci:
        return main_dci(args.rounds if not args.quick else 1, args.duration, args.keep)
    fabric = Fabric(complete_labels(generate_blueprint(load_spec(args.spec))))
    t0 = time.perf_counter()
    tmp = None
    if args.rescore:
        recs = load(args.rescore)
        results = [(r, finish(detect(args.spec, r), r)) for r in recs]
        episodes, what = [r.episode for r in recs], f"rescored {args.rescore}"
    else:
        n = args.episodes or (3 if args.quick else 50)
        episodes = Planner(fabric, args.seed, args.duration).plan(n, failed_every=0 if args.quick else 8)
        tmp = None if args.keep else tempfile.TemporaryDirectory(prefix="fabricd-accuracy-")
        out = args.keep or Path(tmp.name if tmp else ".")
        out.mkdir(parents=True, exist_ok=True)
        what = f"seed {args.seed}, {args.duration:g} s recordings"
        print(f"{_mix(episodes)} in {n} recordings; work dir {out}", flush=True)
        results = asyncio.run(run(args.spec, episodes, out))
    try:
        scores, base, localize_s = evaluate(results, fabric)
    finally:
        if tmp is not None:
            tmp.cleanup()
    print(f"\n{args.spec.name}, {what}: {_mix(episodes)} in {len(episodes)} recordings; "
          f"{time.perf_counter() - t0:.0f} s wall\n")  # fmt: skip
    print("\n".join(report(scores, base, localize_s)))
    for k in KINDS:
        for line in scores[k].fns:
            print(f"MISSED {k}: {line}")
        for line in scores[k].slow:
            print(f"SLOW {k}: {line}")
        for line in scores[k].fps:
            print(f"FALSE {line}")
    return 0


def main_dci(rounds: int, duration_s: float, keep: Path | None) -> int:
    """The DR cases: imbalance and drops on the twin's DCI, each case one recording (accuracy_dci.py)."""
    spec = REPO / "examples" / "small-dci.yaml"
    episodes = accuracy_dci.plan(rounds, duration_s)
    tmp = None if keep else tempfile.TemporaryDirectory(prefix="fabricd-accuracy-dci-")
    out = keep or Path(tmp.name if tmp else ".")
    out.mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()
    print(f"{len(episodes)} DR cases ({rounds} rounds), {duration_s:g} s recordings; work dir {out}", flush=True)
    try:
        results = asyncio.run(run(spec, episodes, out, lossless=False))
    finally:
        if tmp is not None:
            tmp.cleanup()
    rows = []
    for rec, findings in results:
        (sc,) = rec.episode.scenarios
        start = min((int(r["start_ts"]) for r in sc.records), default=rec.start_ns)
        rows.append((rec.episode, start, findings))
    print(f"\n{spec.name}, {len(episodes)} DR cases; {time.perf_counter() - t0:.0f} s wall\n")
    print("\n".join(accuracy_dci.report(accuracy_dci.score(rows))))
    return 0


if __name__ == "__main__":
    sys.exit(main())
