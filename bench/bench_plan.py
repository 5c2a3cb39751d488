"""Benchmark: offline `fabricd plan` for every switch of the 16,384-GPU pod (examples/pod-16k.yaml, 832 switches),
on one core, against rendering every device from scratch in the same run.

    .venv/bin/python bench/bench_plan.py [--sample 40] [--full-baseline] [--keep DIR]

Steps, each in its own process pinned to the same core (wall and CPU seconds):
  baseline  fabric + intent, then per switch: pyavd renders its config from scratch, hier-config parses both
            full configs and plans (the pre-cache pipeline). Extrapolated per role from --sample switches
            unless --full-baseline (the full run takes several minutes).
  cold      `fabricd plan --running-dir` for all switches, empty cache (end to end, imports included).
  one-intent   the same after one switch's intent changed (a policy override on one device), warm cache.
  one-running  the same after one switch's saved running config changed, warm cache.
  unchanged    the same with nothing changed, warm cache.
Running configs: every 10th switch has one ECN threshold changed, every 10th (offset 5) is bare
`hostname X`, the rest are the intended config plus out-of-scope lines (plans empty there).
The sampled switches' baseline plans are checked equal to the cold run's.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
SPEC = REPO / "examples" / "pod-16k.yaml"
TARGETS = {"cold": 60.0, "one-intent": 5.0, "one-running": 5.0}
CHANGED_DEVICE = "leaf-g0-r0"
OUT_OF_SCOPE = (
    "router bgp 65001\n   neighbor 10.0.0.1 remote-as 65000\n!\nmanagement api http-commands\n   no shutdown\n!\n"
)


def _pin() -> None:
    os.sched_setaffinity(0, {min(os.sched_getaffinity(0))})


def _fabric_and_intent(policy_path: Path | None = None) -> tuple[object, dict[str, float]]:
    from policies.intent import derive_intent
    from policies.policy import load_policy
    from topology.blueprint import generate_blueprint
    from topology.fabric import Fabric
    from topology.spec import load_spec

    t0 = time.perf_counter()
    spec = load_spec(SPEC)
    fabric = Fabric(generate_blueprint(spec))
    t1 = time.perf_counter()
    intent = derive_intent(fabric, spec, load_policy(policy_path))
    t2 = time.perf_counter()
    return intent, {"fabric_s": t1 - t0, "intent_s": t2 - t1}


def write_running(running_dir: Path) -> dict[str, object]:
    """Running configs for every switch; returns counts per kind."""
    from drivers.eos.render import render
    from policies.intent import Intent

    intent, _ = _fabric_and_intent()
    assert isinstance(intent, Intent)
    kinds: Counter[str] = Counter()
    for i, dev in enumerate(intent.devices):
        if i % 10 == 0:
            text = render(dev).replace("minimum-threshold ", "minimum-threshold 1", 1)  # one ECN line drifted
            kinds["one line changed"] += 1
        elif i % 10 == 5:
            text = f"hostname {dev.device}\n"
            kinds["bare hostname"] += 1
        else:
            text = OUT_OF_SCOPE + render(dev)
            kinds["in sync (+ out-of-scope lines)"] += 1
        (running_dir / f"{dev.device}.cfg").write_text(text)
    return {"switches": len(intent.devices), "ports": sum(len(d.ports) for d in intent.devices), **kinds}


def baseline(running_dir: Path, sample: int, full: bool, out: Path) -> dict[str, object]:
    """Render from scratch + full hier-config plan; per-role mean x role count unless `full`."""
    import difflib

    from hier_config import Platform, WorkflowRemediation, get_hconfig

    from drivers.eos.plan import owned_config_hier
    from drivers.eos.render import structured_config
    from policies.intent import DeviceIntent, Intent

    def from_scratch(dev: DeviceIntent) -> dict[str, object]:
        from pyavd import get_device_config

        intended = get_device_config(structured_config(dev))
        running = (running_dir / f"{dev.device}.cfg").read_text()
        ports = {p.port for p in dev.ports}
        have, want = owned_config_hier(running, ports), owned_config_hier(intended, ports)
        diff = "".join(
            difflib.unified_diff(
                have.splitlines(keepends=True),
                want.splitlines(keepends=True),
                f"{dev.device} running",
                f"{dev.device} intended",
            )
        )
        rem = WorkflowRemediation(get_hconfig(Platform.ARISTA_EOS, have), get_hconfig(Platform.ARISTA_EOS, want))
        commands = [" " * 3 * (c.depth() - 1) + c.text for c in rem.remediation_config.all_children_sorted()]
        return {"device": dev.device, "diff": diff, "commands": commands}

    c0 = time.process_time()
    t0 = time.perf_counter()
    intent, fixed = _fabric_and_intent()
    assert isinstance(intent, Intent)
    devices = intent.devices
    t1 = time.perf_counter()
    from_scratch(devices[-1])  # pyavd's import and schema load: a one-off cost, counted once
    fixed["pyavd_warmup_s"] = time.perf_counter() - t1
    fixed_s = time.perf_counter() - t0
    chosen = devices if full else [devices[round(i * (len(devices) - 1) / (sample - 1))] for i in range(sample)]
    per_role: dict[str, list[float]] = {}
    plans = []
    for dev in chosen:
        t = time.perf_counter()
        plans.append(from_scratch(dev))
        per_role.setdefault(dev.role.value, []).append(time.perf_counter() - t)
    counts = Counter(d.role.value for d in devices)
    per_device = {role: sum(ts) / len(ts) for role, ts in per_role.items()}
    devices_s = sum(per_device[role] * n for role, n in counts.items())
    out.write_text(json.dumps(plans))
    return {
        "wall_s": fixed_s + devices_s,
        "cpu_s": time.process_time() - c0 if full else None,
        "measured_devices": len(chosen),
        "extrapolated": not full,
        "per_device_s": per_device,
        "role_counts": dict(counts),
        **fixed,
    }


def run_cli(args: list[str], out: Path) -> dict[str, float]:
    """`fabricd plan` in a fresh interpreter on the pinned core: wall and CPU seconds, imports included."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t = time.perf_counter()
    with out.open("w") as f:
        proc = subprocess.run([sys.executable, "-m", "fabricd", "plan", *args], stdout=f, stderr=subprocess.PIPE)
    wall = time.perf_counter() - t
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if proc.returncode not in (0, 1):
        raise SystemExit(f"fabricd plan failed ({proc.returncode}): {proc.stderr.decode()[-2000:]}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return {"wall_s": wall, "cpu_s": cpu}


def _rows(cache_dir: Path) -> int:
    with sqlite3.connect(cache_dir / "plan-cache.sqlite3") as db:
        tables = ("plans", "renders", "owned")
        return sum(int(db.execute(f"SELECT count(*) FROM {t}").fetchone()[0]) for t in tables)


def _child(step: str, work: Path, sample: int, full: bool) -> None:
    _pin()
    sys.path.insert(0, str(REPO))
    if step == "write":
        result = write_running(work / "running")
    else:
        result = baseline(work / "running", sample, full, work / "baseline-plans.json")
    (work / f"{step}.json").write_text(json.dumps(result))


def _in_child(step: str, work: Path, sample: int, full: bool) -> dict[str, object]:
    cmd = [sys.executable, __file__, "--child", step, "--work", str(work), "--sample", str(sample)]
    cmd += ["--spec", str(SPEC)]
    subprocess.run([*cmd, *(["--full-baseline"] if full else [])], check=True)
    result: dict[str, object] = json.loads((work / f"{step}.json").read_text())
    return result


def main() -> None:
    global SPEC
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sample", type=int, default=40, help="baseline switches measured (spread over all roles)")
    ap.add_argument("--full-baseline", action="store_true", help="render and plan every switch for the baseline")
    ap.add_argument("--keep", type=Path, help="work folder to keep (default: a temporary one)")
    ap.add_argument("--child", help=argparse.SUPPRESS)
    ap.add_argument("--work", type=Path, help=argparse.SUPPRESS)
    ap.add_argument("--spec", type=Path, default=SPEC, help="the fabric (default examples/pod-16k.yaml)")
    ap.add_argument("--smoke", action="store_true", help="seconds, tiny fabric: proves it runs (CI)")
    a = ap.parse_args()
    SPEC = REPO / "examples" / "small-pod.yaml" if a.smoke else a.spec
    if a.smoke:
        a.sample = 4
    if a.child:
        _child(a.child, a.work, a.sample, a.full_baseline)
        return
    _pin()
    work = a.keep or Path(tempfile.mkdtemp(prefix="bench-plan-"))
    running, cache = work / "running", work / "cache"
    shutil.rmtree(cache, ignore_errors=True)
    running.mkdir(parents=True, exist_ok=True)
    try:
        made = _in_child("write", work, a.sample, a.full_baseline)
        print(f"{SPEC.stem}: {made}")
        base = _in_child("baseline", work, a.sample, a.full_baseline)
        common = ["--spec", str(SPEC), "--running-dir", str(running), "--format", "json", "--cache-dir", str(cache)]
        steps: dict[str, dict[str, float]] = {}
        steps["cold"] = run_cli(common, work / "cold.json")
        rows = _rows(cache)
        policy = work / "one-device.yaml"
        policy.write_text(f"overrides:\n  - match: {{device: {CHANGED_DEVICE}}}\n    set: {{ecn: {{min_us: 20}}}}\n")
        steps["one-intent"] = run_cli([*common, "--policy", str(policy)], work / "one-intent.json")
        new_rows_intent = _rows(cache) - rows
        cfg = running / "spine-r0-0.cfg"
        cfg.write_text(cfg.read_text().replace("priority-flow-control on", "no priority-flow-control", 1))
        rows = _rows(cache)
        steps["one-running"] = run_cli(common, work / "one-running.json")
        new_rows_running = _rows(cache) - rows
        steps["unchanged"] = run_cli(common, work / "unchanged.json")
        _check(work)
    finally:
        if a.keep is None:
            shutil.rmtree(work, ignore_errors=True)
    _report(base, steps, made, new_rows_intent, new_rows_running)


def _check(work: Path) -> None:
    """The sampled baseline plans equal the cold run's; the one-device runs change only that device."""
    cold = {d["device"]: d for d in json.loads((work / "cold.json").read_text())["devices"]}
    for b in json.loads((work / "baseline-plans.json").read_text()):
        c = cold[b["device"]]
        assert (c["diff"], c["commands"]) == (b["diff"], b["commands"]), f"{b['device']}: plans differ"
    for step, device in (("one-intent", CHANGED_DEVICE), ("one-running", "spine-r0-0")):
        other = {d["device"]: d for d in json.loads((work / f"{step}.json").read_text())["devices"]}
        changed = [
            n for n in cold if (cold[n]["diff"], cold[n]["commands"]) != (other[n]["diff"], other[n]["commands"])
        ]
        assert changed == [device], f"{step}: plans changed for {changed}"


def _plan(d: dict[str, object]) -> tuple[object, object]:
    return d["diff"], d["commands"]


def _report(
    base: dict[str, Any], steps: dict[str, dict[str, float]], made: dict[str, object], rows_i: int, rows_r: int
) -> None:
    base_s = float(base["wall_s"])
    how = f"extrapolated from {base['measured_devices']} switches" if base["extrapolated"] else "all switches"
    print(
        f"\nmachine: {os.cpu_count()} cores ({platform.machine()}), Python {platform.python_version()}, one core pinned"
    )
    print(
        f"baseline ({how}): fabric {base['fabric_s']:.2f} s, intent {base['intent_s']:.2f} s, "
        f"pyavd warm-up {base['pyavd_warmup_s']:.2f} s; per switch "
        + ", ".join(f"{r} {t:.3f} s" for r, t in base["per_device_s"].items())
    )
    print(f"new cache rows: one-intent {rows_i}, one-running {rows_r} (the changed switch only)")
    print(f"\n{'step':<12} {'wall s':>8} {'cpu s':>8} {'x faster':>9} {'target':>8}")
    print(f"{'baseline':<12} {base_s:>8.2f} {'':>8} {'1.0':>9} {'':>8}")
    for name, r in steps.items():
        target = TARGETS.get(name)
        mark = "" if target is None else f"< {target:g} s" + (" ok" if r["wall_s"] < target else " MISSED")
        print(f"{name:<12} {r['wall_s']:>8.2f} {r['cpu_s']:>8.2f} {base_s / r['wall_s']:>9.1f} {mark:>8}")


if __name__ == "__main__":
    main()
