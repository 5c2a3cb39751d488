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
  links is a miss plus a false finding.
Per kind: TP = faults matched by at least one finding, FN = faults not matched, FP = findings that match no fault
(wrong place, wrong kind, noise, or before onset); a further finding matching an already matched fault is a
duplicate (listed, not an FP). Precision = matching findings / findings; recall = TP / faults.

Detection delay = the first matching finding's `detected_ts` (the end of the detector tick that raised it) minus the
onset: the injection time, except for a flap, whose onset is the flap that completes 5 in 10 s (before it, the link
is not flapping by the rule). Targets (issue #6): flap and storm within one sample interval + 1 s (2 s), deadlock
within two intervals (2 s), corruption at a 1e-6 loss rate within 60 s. Silent corruption has no delay target; offline
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
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import heapq
import json
import logging
import random
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from drivers.inventory import DeviceAccess, load_inventory
from fabricd.detectors.probes import Probe, read_probes
from fabricd.detectors.silent_corruption import localize
from fabricd.telemetry import CounterStore, Ingestor, TelemetryClient, TraceWriter
from topology.blueprint import generate_blueprint
from topology.deadlock import deadlock_risk, resolve_failed
from topology.errors import InputError
from topology.fabric import Fabric
from topology.labels import complete_labels
from topology.model import Link, Role
from topology.spec import load_spec

REPO = Path(__file__).resolve().parent.parent
NS = 1_000_000_000
KINDS = ("link_flap", "pfc_storm", "pfc_deadlock", "link_corruption", "silent_corruption")
PRIO = 3
INTERVAL_S = 1.0  # gNMI sample interval, and `fabricd detect --tick`
LATE_S = 20.0  # a finding this long after its fault was cleared is no longer about it
FLAP_RULE = (5, 10.0)  # EOS errdisable default: 5 flaps in 10 s (reference/domain.md)
# Delay targets (issue #6), seconds after onset; silent corruption has none
TARGETS = {"link_flap": INTERVAL_S + 1, "pfc_storm": INTERVAL_S + 1, "pfc_deadlock": 2 * INTERVAL_S}
CORRUPTION_TARGET = (1e-6, 60.0)
# Primary scenario per rail, cycled: any prefix of 12 holds every fault kind and the main noise kinds
ORDER = (
    "pfc_storm", "pfc_deadlock", "silent_corruption", "link_flap", "link_corruption", "reboot",
    "gnmi_drop", "pfc_storm", "pfc_deadlock", "silent_corruption", "few_flaps", "microburst",
    "pfc_storm", "silent_corruption", "pfc_deadlock", "link_flap", "link_corruption", "reboot",
    "gnmi_drop", "link_down", "pfc_storm", "silent_corruption", "pfc_deadlock", "optics",
)  # fmt: skip
SECONDARY = (("link_flap", 0.35), ("link_corruption", 0.35), ("few_flaps", 0.1), ("optics", 0.1), ("none", 0.1))


# --- plan --------------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Step:
    """One fault injected `at_s` seconds into the recording (negative: before subscribing), cleared `clear_s` later."""

    at_s: float
    kind: str  # twin fault kind (lab/faults.py)
    params: dict[str, Any]
    clear_s: float | None = None


@dataclass
class Scenario:
    name: str  # e03.r1.pfc_storm
    kind: str  # a detector kind (fault) or a noise kind
    truth: bool  # a fault the detectors must find; noise must produce nothing
    rail: int | None
    where: str
    steps: list[Step]
    records: list[dict[str, Any]] = field(default_factory=list)  # the twin's fault records, after the run


@dataclass
class Episode:
    index: int
    duration_s: float
    scenarios: list[Scenario]


class Places:
    """Where faults can go, rail by rail."""

    def __init__(self, fabric: Fabric) -> None:
        self.fabric = fabric
        self.rails = sorted({d.rail for d in fabric.switches() if d.rail is not None})

    def leaves(self, rail: int) -> list[str]:
        return sorted(d.name for d in self.fabric.devices(Role.LEAF, rail=rail))

    def spines(self, rail: int) -> list[str]:
        return sorted(d.name for d in self.fabric.devices(Role.SPINE, rail=rail))

    def server_links(self, rail: int) -> list[Link]:
        return [ln for leaf in self.leaves(rail) for ln in self.fabric.links_of(leaf) if self.is_server(ln)]

    def fabric_links(self, rail: int) -> list[Link]:
        """Leaf-spine and spine-superspine cables of the rail."""
        return [ln for sp in self.spines(rail) for ln in self.fabric.links_of(sp)]

    def _server(self, device: str) -> bool:
        d = self.fabric.get(device)
        return d is not None and d.role is Role.SERVER

    def is_server(self, ln: Link) -> bool:
        return self._server(ln.a.device) or self._server(ln.b.device)

    def switch_end(self, ln: Link) -> str:
        return str(ln.b if self._server(ln.a.device) else ln.a)

    def nic(self, ln: Link) -> str:
        return str(ln.a if self._server(ln.a.device) else ln.b)


def _r(x: float, nd: int = 2) -> float:
    return round(x, nd)


class Planner:
    """Builds scenarios with a seeded RNG; every choice of place, time and size comes from it."""

    def __init__(self, fabric: Fabric, seed: int, duration_s: float) -> None:
        self.p = Places(fabric)
        self.rng = random.Random(seed)
        self.duration = duration_s

    def start(self) -> float:
        return _r(self.rng.uniform(5.0, 11.0), 1)

    # --- link-level scenarios ------------------------------------------------------------------------------------
    def flap(self, name: str, rail: int, ln: Link, few: bool = False) -> Scenario:
        rng = self.rng
        count = rng.randint(2, 4) if few else rng.randint(5, 7)
        period = _r(rng.uniform(0.5, 2.0) if few else rng.uniform(0.8, 1.8))
        end = str(rng.choice((ln.a, ln.b)))
        params = {"port": end, "count": count, "period_s": period, "down_s": _r(period * rng.uniform(0.3, 0.6))}
        truth = flap_rule_onset([i * period for i in range(count)]) is not None
        kind = "link_flap" if truth else "few_flaps"
        return Scenario(name, kind, truth, rail, f"{ln.a} <-> {ln.b}", [Step(self.start(), "link_flap", params)])

    def corruption(self, name: str, rail: int, ln: Link) -> Scenario:
        rng = self.rng
        rate = rng.choice((1e-6, 1e-6, 1e-5, 1e-4))
        params: dict[str, Any]
        if self.p.is_server(ln):  # the corrupted side must be a switch port to show in counters
            params = {"port": self.p.switch_end(ln), "direction": "rx"}
        else:
            params = {"port": str(rng.choice((ln.a, ln.b))), "direction": rng.choice(("rx", "tx", "both"))}
        params["rate"] = rate
        step = Step(self.start(), "link_corruption", params, clear_s=15.0)
        return Scenario(name, "link_corruption", True, rail, f"{ln.a} <-> {ln.b} at {rate:.0e}", [step])

    def optics(self, name: str, rail: int, ln: Link) -> Scenario:
        loss = _r(self.rng.uniform(2.0, 5.0), 1)  # FEC corrects; frames fail only past ~6 dB
        step = Step(self.start(), "optics", {"port": self.p.switch_end(ln), "loss_db": loss}, clear_s=15.0)
        return Scenario(name, "optics", False, rail, f"{self.p.switch_end(ln)} -{loss} dB", [step])

    def link_down(self, name: str, rail: int, ln: Link) -> Scenario:
        step = Step(self.start(), "link_down", {"port": str(ln.a)}, clear_s=_r(self.rng.uniform(6.0, 10.0), 1))
        return Scenario(name, "link_down", False, rail, f"{ln.a} <-> {ln.b} down, back up", [step])

    # --- PFC -----------------------------------------------------------------------------------------------------
    def storm(self, name: str, rail: int, nic: str) -> Scenario:
        step = Step(self.start(), "pfc_storm", {"nic": nic, "priority": PRIO}, _r(self.rng.uniform(8.0, 12.0), 1))
        return Scenario(name, "pfc_storm", True, rail, f"from {nic}", [step])

    def deadlock(self, name: str, rail: int) -> Scenario:
        (l0, l1), spines = self.p.leaves(rail), self.p.spines(rail)
        s0, s1 = self.rng.sample(spines, 2)
        cycle = [l0, s0, l1, s1]
        k = self.rng.randrange(4)
        cycle = cycle[k:] + cycle[:k]
        params = {"cycle": ",".join(cycle), "priority": PRIO}
        step = Step(self.start(), "pfc_deadlock", params, _r(self.rng.uniform(8.0, 12.0), 1))
        return Scenario(name, "pfc_deadlock", True, rail, " -> ".join(cycle), [step])

    def microbursts(self, name: str, rail: int, nic: str) -> Scenario:
        steps = [
            Step(_r(self.rng.uniform(3.0, self.duration - 6.0), 1), "microburst", {"nic": nic, "duration_ms": ms})
            for ms in (self.rng.randint(20, 200) for _ in range(3))
        ]
        return Scenario(name, "microburst", False, rail, f"3 bursts from {nic}", sorted(steps, key=lambda s: s.at_s))

    def failed_deadlock(self, name: str) -> Scenario:
        """Two rails each cut off from a different superspine: their traffic bounces through the other rails'
        spines, closing a cycle there (docs/lab.md); which rails and which superspine are random."""
        fabric = self.p.fabric
        ssps = sorted(d.name for d in fabric.devices(Role.SUPERSPINE))
        for _ in range(50):
            a, b = self.rng.sample(self.p.rails, 2)
            x, y = self.rng.sample(ssps, 2)
            failed = [f"{sp}--{x}" for sp in self.p.spines(a)] + [f"{sp}--{y}" for sp in self.p.spines(b)]
            if deadlock_risk(fabric, resolve_failed(fabric, failed)):
                step = Step(self.start(), "pfc_deadlock", {"failed": ",".join(failed), "priority": PRIO}, 10.0)
                return Scenario(name, "pfc_deadlock", True, None, f"failed {', '.join(failed)}", [step])
        raise InputError("plan", "no failure set of two rails closes a deadlock cycle in this fabric")

    # --- switch-level noise and silent corruption -----------------------------------------------------------------
    def silent(self, name: str, rail: int, switch: str) -> Scenario:
        rate = float(f"{10 ** self.rng.uniform(-3.0, -2.0):.1e}")
        step = Step(self.start(), "silent_corruption", {"device": switch, "rate": rate}, clear_s=15.0)
        return Scenario(name, "silent_corruption", True, rail, f"{switch} at {rate:.1e}", [step])

    def reboot(self, name: str, rail: int, switch: str) -> Scenario:
        down = self.rng.choice((0.0, 2.0, 3.0, 5.0))  # 0: counters cleared and streams dropped, ports stay up
        step = Step(self.start(), "reboot", {"device": switch, "down_s": down})
        return Scenario(name, "reboot", False, rail, f"{switch}, down {down:g} s", [step])

    def gnmi_drop(self, name: str, rail: int, switch: str) -> Scenario:
        secs = _r(self.rng.uniform(3.0, 6.0), 1)
        step = Step(self.start(), "gnmi_drop", {"device": switch, "seconds": secs})
        return Scenario(name, "gnmi_drop", False, rail, f"{switch}, {secs:g} s", [step])

    def wrap(self, name: str, rail: int | None, switch: str) -> Scenario:
        secs = _r(self.rng.uniform(4.0, self.duration - 8.0), 1)
        step = Step(-1.0, "counter_wrap", {"device": switch, "seconds": secs})
        return Scenario(name, "counter_wrap", False, rail, f"{switch} wraps {secs:g} s after it was set", [step])

    # --- episodes ------------------------------------------------------------------------------------------------
    def rail(self, ep: int, rail: int, primary: str) -> list[Scenario]:
        """The scenarios of one rail: a primary, a second one on a server link it does not touch, maybe a wrap."""
        rng, p = self.rng, self.p
        tag = f"e{ep:02d}.r{rail}"
        switches = p.leaves(rail) + p.spines(rail)
        servers = p.server_links(rail)
        rng.shuffle(servers)
        out: list[Scenario] = []
        free_servers = list(servers)
        if primary in ("pfc_storm", "microburst"):
            nic = p.nic(free_servers.pop())
            if primary == "pfc_storm":
                out.append(self.storm(f"{tag}.pfc_storm", rail, nic))
            else:
                out.append(self.microbursts(f"{tag}.microburst", rail, nic))
        elif primary == "pfc_deadlock":
            out.append(self.deadlock(f"{tag}.pfc_deadlock", rail))
        elif primary == "silent_corruption":
            out.append(self.silent(f"{tag}.silent_corruption", rail, rng.choice(switches)))
        elif primary in ("link_flap", "few_flaps", "link_corruption", "link_down"):
            ln = rng.choice(servers + p.fabric_links(rail))
            if ln in free_servers:
                free_servers.remove(ln)
            if primary == "link_corruption":
                out.append(self.corruption(f"{tag}.link_corruption", rail, ln))
            elif primary == "link_down":
                out.append(self.link_down(f"{tag}.link_down", rail, ln))
            else:
                out.append(self.flap(f"{tag}.{primary}", rail, ln, few=primary == "few_flaps"))
        elif primary == "optics":
            out.append(self.optics(f"{tag}.optics", rail, rng.choice(servers + p.fabric_links(rail))))
        elif primary == "reboot":
            out.append(self.reboot(f"{tag}.reboot", rail, rng.choice(switches)))
        elif primary == "gnmi_drop":
            out.append(self.gnmi_drop(f"{tag}.gnmi_drop", rail, rng.choice(switches)))
        elif primary != "none":
            raise ValueError(f"unknown primary {primary!r}")
        if primary in ("pfc_storm", "pfc_deadlock", "silent_corruption", "microburst", "none") and free_servers:
            second = rng.choices([k for k, _ in SECONDARY], [w for _, w in SECONDARY])[0]
            ln = free_servers.pop()
            if second in ("link_flap", "few_flaps"):
                out.append(self.flap(f"{tag}.s.{second}", rail, ln, few=second == "few_flaps"))
            elif second == "link_corruption":
                out.append(self.corruption(f"{tag}.s.link_corruption", rail, ln))
            elif second == "optics":
                out.append(self.optics(f"{tag}.s.optics", rail, ln))
        quiet_pfc = primary in ("silent_corruption", "link_flap", "link_corruption", "link_down", "optics")
        if quiet_pfc and free_servers and rng.random() < 0.4:
            out.append(self.microbursts(f"{tag}.microburst", rail, p.nic(free_servers.pop())))
        if primary not in ("reboot", "gnmi_drop") and rng.random() < 0.3:
            out.append(self.wrap(f"{tag}.wrap", rail, rng.choice(switches)))
        return out

    def plan(self, episodes: int, failed_every: int = 0) -> list[Episode]:
        """`episodes` recordings; with `failed_every` = k, every k-th one holds a deadlock from failed links."""
        specials = {i for i in range(episodes) if failed_every and i % failed_every == failed_every - 1}
        n_regular = (episodes - len(specials)) * len(self.p.rails)
        primaries = [ORDER[i % len(ORDER)] for i in range(n_regular)]
        self.rng.shuffle(primaries)
        out = []
        for e in range(episodes):
            scenarios: list[Scenario] = []
            if e in specials:
                scenarios.append(self.failed_deadlock(f"e{e:02d}.fabric.pfc_deadlock_failed"))
                for rail in self.p.rails:  # server links only: the failed links and the cycle are fabric links
                    scenarios += [s for s in self.rail(e, rail, "none") if s.kind != "counter_wrap"]
            else:
                for rail in self.p.rails:
                    scenarios += self.rail(e, rail, primaries.pop())
            ssps = [d.name for d in self.p.fabric.devices(Role.SUPERSPINE)]
            if ssps and self.rng.random() < 0.5:
                scenarios.append(self.wrap(f"e{e:02d}.ssp.wrap", None, self.rng.choice(ssps)))
            out.append(Episode(e, self.duration, scenarios))
        return out


def flap_rule_onset(downs: list[float]) -> float | None:
    """When a series of link-down times first holds 5 within 10 s (the EOS errdisable rule); None if never."""
    n, window = FLAP_RULE
    for i in range(n - 1, len(downs)):
        if downs[i] - downs[i - n + 1] <= window:
            return downs[i]
    return None


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
        for name in inv.names:
            a = inv.access(name)
            body = {"jsonrpc": "2.0", "method": "runCmds", "id": 1}
            body["params"] = {"version": 1, "cmds": ["enable", "write memory"], "format": "text"}
            req = urllib.request.Request(f"http://{a.host}:{a.eapi.port}/command-api", json.dumps(body).encode())
            auth = base64.b64encode(f"{a.username}:{a.password.get_secret_value()}".encode()).decode()
            req.add_header("Authorization", f"Basic {auth}")
            with urllib.request.urlopen(req, timeout=10) as resp:
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
        elif sc.kind == "link_corruption":
            ports = link_ends(fabric, params["port"])
        else:  # deadlock: the paused queues; silent: no ports, the switch
            ports = frozenset(rec["ports"])
        devices = frozenset(rec["devices"]) | {p.split(":", 1)[0] for p in ports}
        out.append(Truth(sc.name, sc.kind, start, onset, end, ports, devices, params.get("rate")))
    return out


def matches(f: dict[str, Any], t: Truth) -> bool:
    if f["kind"] != t.kind or not t.start_ts <= f["detected_ts"] <= t.end_ts + LATE_S * NS:
        return False
    if t.kind in ("link_flap", "link_corruption", "pfc_deadlock"):
        return frozenset(f["ports"]) == t.ports
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
    args = ap.parse_args(argv)
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


if __name__ == "__main__":
    sys.exit(main())
