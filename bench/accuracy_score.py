"""Detector accuracy bench, part 2: ground truth from the twin's fault records, the matching rule, scores, the time
to localize silent corruption from probes, and the naive per-port threshold baseline. See bench_detector_accuracy.py
for the rules."""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from accuracy_plan import CORRUPTION_TARGET, KINDS, LATE_S, PRIO, TARGETS, Episode, flap_rule_onset

from fabricd.detectors.probes import Probe
from fabricd.detectors.silent_corruption import localize
from topology.fabric import Fabric
from topology.units import NS


# --- ground truth and matching -----------------------------------------------------------------------------------
@dataclass(frozen=True)
class Truth:
    scenario: str
    kind: str
    start_ts: int
    onset_ts: int  # when the fault meets its kind's rule: the injection, or the flap that completes 5 in 10 s
    end_ts: int  # cleared (or the end of the recording)
    ports: frozenset[str]  # the place a finding must name (see the module docstring)
    devices: frozenset[str]
    rate: float | None = None


def link_ends(fabric: Fabric, end: str) -> frozenset[str]:
    device, port = end.split(":", 1)
    ln = fabric.link_of(device, port)
    return frozenset({end} if ln is None else {str(ln.a), str(ln.b)})


def truths(ep: Episode, fabric: Fabric, end_ns: int) -> list[Truth]:
    out = []
    for sc in ep.scenarios:
        if not sc.truth:
            continue
        (rec,) = sc.records
        start, end = int(rec["start_ts"]), int(rec["cleared_ts"] or end_ns)
        params, onset = rec["params"], start
        if sc.kind == "link_flap":
            period = float(params["period_s"])
            first = flap_rule_onset([i * period for i in range(int(params["count"]))])
            assert first is not None  # the planner only calls a flap a fault when it passes the rule
            onset = start + int(first * NS)
            ports = link_ends(fabric, params["port"])
        elif sc.kind == "pfc_storm":
            nic = params["nic"].split(":", 1)
            origin = fabric.peer(nic[0], nic[1])
            ports = frozenset({str(origin)})
        elif sc.kind in ("link_corruption", "bgp_session"):
            ports = link_ends(fabric, params["port"])
            if rec["kind"] == "bgp_flap":  # flapping by the detector's rule from the third drop (3 in 120 s)
                onset = start + int(2 * float(params["period_s"]) * NS)
        elif sc.kind == "miscabled":
            ports = frozenset({params["port"], params["other"]})
        else:  # deadlock: the paused queues; silent: no ports, the switch
            ports = frozenset(rec["ports"])
        devices = frozenset(rec["devices"]) | {p.split(":", 1)[0] for p in ports}
        out.append(Truth(sc.name, sc.kind, start, onset, end, ports, devices, params.get("rate")))
    return out


def matches(f: dict[str, Any], t: Truth) -> bool:
    if f["kind"] != t.kind or not t.start_ts <= f["detected_ts"] <= t.end_ts + LATE_S * NS:
        return False
    if t.kind in ("link_flap", "link_corruption", "pfc_deadlock", "bgp_session"):
        return frozenset(f["ports"]) == t.ports
    if t.kind == "miscabled":  # the finding names both swapped ports (and may name the servers' ends too)
        return t.ports <= frozenset(f["ports"])
    if t.kind == "pfc_storm":
        return f"{f['device']}:{f['port']}" in t.ports and f.get("priority") in (None, PRIO)
    return f["device"] in t.devices and not f["ports"]  # silent: the switch itself


@dataclass
class Score:
    faults: int = 0
    tp: int = 0
    findings: int = 0
    matching: int = 0  # findings that match some fault (duplicates included)
    fps: list[str] = field(default_factory=list)
    fns: list[str] = field(default_factory=list)
    slow: list[str] = field(default_factory=list)  # found later than the delay target
    delays: list[float] = field(default_factory=list)
    delays_1e6: list[float] = field(default_factory=list)

    @property
    def precision(self) -> float:
        return self.matching / self.findings if self.findings else 1.0

    @property
    def recall(self) -> float:
        return self.tp / self.faults if self.faults else 1.0

    @property
    def f1(self) -> float:
        p, r = self.precision, self.recall
        return 2 * p * r / (p + r) if p + r else 0.0


def score(
    episodes: Iterable[tuple[Episode, list[Truth], list[dict[str, Any]]]], fabric: Fabric | None = None
) -> dict[str, Score]:
    """Per kind: match findings to faults episode by episode (the module docstring's rule); `fabric` only helps
    say which scenarios were near a false finding."""
    out = {k: Score() for k in KINDS}
    for ep, ts, findings in episodes:
        first: dict[str, int] = {}
        for t in ts:
            out[t.kind].faults += 1
        for f in findings:
            s = out[f["kind"]]
            s.findings += 1
            hit = [t for t in ts if matches(f, t)]
            if hit:
                s.matching += 1
                for t in hit:
                    first[t.scenario] = min(first.get(t.scenario, f["detected_ts"]), f["detected_ts"])
            else:
                s.fps.append(f"e{ep.index:02d} {describe(f)}; near: {near(ep, f, fabric)}")
        for t in ts:
            s = out[t.kind]
            if t.scenario in first:
                s.tp += 1
                delay = (first[t.scenario] - t.onset_ts) / NS
                s.delays.append(delay)
                if t.kind in TARGETS and delay > TARGETS[t.kind]:
                    s.slow.append(f"e{ep.index:02d} {t.scenario} {delay:.2f} s")
                if t.rate == CORRUPTION_TARGET[0] and t.kind == "link_corruption":
                    s.delays_1e6.append(delay)
            else:
                where = next((sc.where for sc in ep.scenarios if sc.name == t.scenario), "")
                s.fns.append(f"{t.scenario} ({where})")
    return out


def describe(f: dict[str, Any]) -> str:
    where = f"{f['device']}:{f['port']}" if f.get("port") else f["device"]
    return f"{f['kind']} at {where} [{', '.join(f['ports'])}]: {f.get('summary', '')[:90]}"


def near(ep: Episode, f: dict[str, Any], fabric: Fabric | None) -> str:
    """Scenarios of the episode in the finding's rails or on its devices (what probably caused a false finding)."""
    devs = set(f["devices"]) | {f["device"]} | {p.split(":", 1)[0] for p in f["ports"]}
    rails = (
        set() if fabric is None else {d.rail for n in devs if (d := fabric.get(n)) is not None and d.rail is not None}
    )
    hits = []
    for sc in ep.scenarios:
        touched = {d for r in sc.records for d in r["devices"]} | {
            p.split(":", 1)[0] for r in sc.records for p in r["ports"]
        }
        if touched & devs or sc.rail in rails:
            hits.append(f"{sc.name} ({sc.where})")
    return "; ".join(hits) or "nothing injected there"


# --- time to localize silent corruption from probes --------------------------------------------------------------
def localize_delay(probes: list[Probe], fabric: Fabric, t: Truth) -> float | None:
    """Seconds from onset to the first probe round after which `localize` over the probes so far names the switch."""
    rounds = sorted({p.ts for p in probes if p.ts >= t.start_ts})
    for ts in rounds:
        found = localize([p for p in probes if p.ts <= ts], fabric)
        if any(f.kind == "silent_corruption" and f.device in t.devices and not f.ports for f in found):
            return (ts - t.start_ts) / NS
    return None


# --- the naive baseline ------------------------------------------------------------------------------------------
NAIVE_STORM_FPS = 1000.0  # PFC frames/s received: a full pause at 400G is ~24k/s
LEAVES = {
    "/state/oper-status": "oper",
    "/pfc/priorities/priority[index=3]/state/in-frames": "pfc",
    "/state/counters/in-fcs-errors": "fcs",
}


def _port_of(path: str) -> str:
    key = "[name=" if "[name=" in path else "[interface-id="
    return path.split(key, 1)[1].split("]", 1)[0]


def naive(trace: Path, probes: list[Probe], fabric: Fabric) -> list[dict[str, Any]]:
    """Per-port threshold alerts over the same trace and probes (module docstring), one per port and kind."""
    last: dict[tuple[str, str, str], tuple[int, Any]] = {}
    downs: dict[tuple[str, str], list[int]] = {}
    out: dict[tuple[str, str, str], dict[str, Any]] = {}

    def alert(kind: str, device: str, port: str | None, ts: int, ports: Iterable[str]) -> None:
        f = {"kind": kind, "device": device, "port": port, "priority": PRIO, "devices": [device]}
        out.setdefault((kind, device, port or ""), f | {"ports": sorted(ports), "detected_ts": ts})

    with trace.open() as fh:
        for line in fh:
            leaf = next((v for k, v in LEAVES.items() if k in line), None)
            if leaf is None:
                continue
            r = json.loads(line)
            device, port, ts, value = r["device"], _port_of(r["path"]), r["ts"], r["value"]
            prev = last.get((leaf, device, port))
            last[(leaf, device, port)] = (ts, value)
            if leaf == "oper" and value == "DOWN" and (prev is None or prev[1] != "DOWN"):
                d = downs.setdefault((device, port), [])
                d.append(ts)
                if len(d) >= 2 and d[-1] - d[-2] <= 60 * NS:
                    alert("link_flap", device, port, ts, link_ends(fabric, f"{device}:{port}"))
            elif leaf == "pfc" and prev is not None and ts > prev[0] and value >= prev[1]:
                if (value - prev[1]) * NS / (ts - prev[0]) >= NAIVE_STORM_FPS:
                    alert("pfc_storm", device, port, ts, [f"{device}:{port}"])
            elif leaf == "fcs" and prev is not None and value > prev[1]:
                alert("link_corruption", device, port, ts, link_ends(fabric, f"{device}:{port}"))
    crossed: dict[str, list[int]] = {}
    for p in probes:
        if p.corrupted:
            for hop in p.hops:
                crossed.setdefault(hop, []).append(p.ts)
    for sw, ts_list in crossed.items():
        if len(ts_list) >= 2:
            alert("silent_corruption", sw, None, sorted(ts_list)[1], [])
    return list(out.values())
