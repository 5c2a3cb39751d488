"""Carry out a chaos schedule against a running twin and fabricd, observing every second; then let the fabric
settle and hand the observed `Run` to the invariants. Everything the run does is logged as an `Event` (the
operator's and the technician's hands, process faults) beside the twin's own fault log."""

from __future__ import annotations

import contextlib
import json
import os
import shlex
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TextIO

import httpx
import yaml

from lab import control_client

from .facts import FabricFacts
from .history import Event, FaultRec, Run, Sample, sample_doc
from .invariants import unsettled
from .observe import Api, ChaosError, Switches, sample
from .schedule import Repair, Schedule, Step

NS = 1e9
SETTLE_WINDOW_S = 60.0
RESYNC_S = 10.0  # after a restart, fabricd's streams reconnect and sync (within 10 s on the small pods)


@dataclass
class Target:
    """What the run acts on: the twin (its state dir, and how to start it again), fabricd's API, its processes: one
    instance, or several (HA: a leader and standbys), each started by the run (`service_cmds`, so a kill -9 can be
    followed by a restart) or only paused (`service_pids`, processes the run did not start). Instance i answers at
    the API's i-th URL."""

    state_dir: Path
    spec: Path
    api: Api
    switches: Switches
    service_cmds: list[str] = field(default_factory=list)
    service_pids: list[int] = field(default_factory=list)
    log: Path | None = None
    restarts: dict[str, str] = field(default_factory=dict)  # name -> a shell command that restarts it (the bus...)
    # `fabricd collector` commands: processes the run starts and kills, pauses and restarts as it does the services
    collector_cmds: list[str] = field(default_factory=list)
    # twin workloads (lab/workloads.py kinds) running through the whole run, started again after a twin restart: the
    # congestion fabricd's tuning loop (tuning.mode auto in its fabricd.yaml) acts on while the faults go on
    workloads: list[str] = field(default_factory=list)


class Runner:
    def __init__(self, schedule: Schedule, facts: FabricFacts, target: Target, say: Callable[[str], None]):
        self.schedule, self.facts, self.t = schedule, facts, target
        self.say = say
        self.run = Run(schedule.seed, time.time(), 0.0)
        self.procs: dict[int, subprocess.Popen[bytes]] = {}
        n = self.services = max(len(target.service_cmds), len(target.service_pids))
        # the services' processes first (instance i answers at the API's i-th URL), then the collectors'
        self.pids: list[int | None] = [*target.service_pids, *([None] * n)][:n] + [None] * len(target.collector_cmds)
        self.timers: list[tuple[float, Callable[[], None]]] = []
        self.fault_ids: dict[int, str] = {}  # schedule ref -> the twin's fault id
        self.incarnation = 0
        self.faults_seen: dict[str, FaultRec] = {}
        self.repairs = iter(schedule.repairs)
        self.repairing: dict[int, tuple[float, Repair, str]] = {}  # action id of the hold -> (due, repair, port)
        self.repaired: set[int] = set()
        self.wrong: dict[str, str] = {}  # port -> the twin's id of the miscable the repair put there
        self.hand_shut: set[str] = set()
        self.ever_shut: set[str] = set()  # every port an operator shut by hand during the run
        self.paused: set[int] = set()
        self.history: TextIO | None = None

    # --- the service processes ------------------------------------------------------------------------------
    def _cmd(self, i: int) -> str | None:
        """The command that starts process i (None: a service the run did not start)."""
        if i >= self.services:
            return self.t.collector_cmds[i - self.services]
        return self.t.service_cmds[i] if i < len(self.t.service_cmds) else None

    def _name(self, i: int) -> str:
        if i >= self.services:
            return f"collector#{i - self.services}"
        return f"fabricd#{i}" if self.services > 1 else "fabricd"

    def start_services(self) -> None:
        for i in range(len(self.pids)):
            if self._cmd(i) is not None:
                self.start_service(i)

    def start_service(self, i: int) -> None:
        cmd = self._cmd(i)
        assert cmd is not None
        log = (self.t.log or Path(os.devnull)).open("ab")
        proc = subprocess.Popen(
            shlex.split(cmd), stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True
        )
        self.procs[i], self.pids[i] = proc, proc.pid
        if i >= self.services:  # a collector serves no API: running a moment after its start is all it shows
            time.sleep(0.5)
            if proc.poll() is not None:
                raise ChaosError(f"the collector command exited {proc.returncode}: {cmd} (log {self.t.log})")
            return
        deadline = time.monotonic() + 60
        while not self.t.api.reachable(i):
            if proc.poll() is not None:
                raise ChaosError(f"the service command exited {proc.returncode}: {cmd} (log {self.t.log})")
            if time.monotonic() > deadline:
                raise ChaosError(f"the service did not answer at {self.t.api.urls[i]} within 60 s (log {self.t.log})")
            time.sleep(0.2)

    def stop_service(self) -> None:
        for proc in self.procs.values():
            if proc.poll() is None:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(proc.pid, signal.SIGCONT)
                proc.terminate()
                try:
                    proc.wait(20)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait()

    # --- the run --------------------------------------------------------------------------------------------
    def execute(self, history: Path | None = None) -> Run:
        self.history = history.open("w") if history else None
        try:
            self.start_services()
            self._start_workloads()
            self.run.start_s = t0 = time.time()
            for i, pid in enumerate(self.pids):  # just started: blind until synced, as after a restart
                if self._cmd(i) is not None and pid is not None:
                    self._event("process", "started", self._name(i), f"pid {pid}", t0 + RESYNC_S, t0)
            self.run.schedule_end_s = t0 + self.schedule.duration_s
            steps = list(self.schedule.steps)
            next_sample = next_holds = t0
            while True:
                now = time.time()
                while steps and t0 + steps[0].at_s <= now:
                    self._step(steps.pop(0))
                self._timers(now)
                if now >= next_holds:
                    next_holds = now + 0.2
                    self._repairs(now)
                if now >= next_sample:
                    next_sample += 1.0
                    self._sample()
                if not steps and now >= self.run.schedule_end_s:
                    break
                time.sleep(0.02)
            self._settle()
            self._collect()
            return self.run
        finally:
            if self.history:
                self.history.close()

    def _sample(self) -> None:
        s = sample(time.time(), self.t.switches, self.t.api)
        self.run.samples.append(s)
        self._poll_faults()
        if self.history is not None:
            self.history.write(json.dumps(sample_doc(s)) + "\n")

    def _event(
        self, what: str, kind: str, where: str = "", detail: str = "", end_s: float | None = None, t: float = 0.0
    ) -> None:
        e = Event(t or time.time(), what, kind, where, detail, end_s)
        self.run.events.append(e)
        self.say(f"+{e.t - self.run.start_s:6.1f}s {what} {kind} {where} {detail}".rstrip())

    def _timers(self, now: float) -> None:
        due = [f for at, f in self.timers if at <= now]
        self.timers = [(at, f) for at, f in self.timers if at > now]
        for f in due:
            f()

    def _step(self, step: Step) -> None:
        try:
            {"fault": self._fault, "clear": self._clear, "process": self._process, "operator": self._operator}[
                step.what
            ](step)
        except (ChaosError, control_client.LabControlError, httpx.HTTPError) as e:
            self._event("skipped", step.kind, "", f"#{step.ref} {e}")

    def _fault(self, step: Step) -> None:
        try:
            rec = control_client.inject(self.t.state_dir, step.kind, step.params)
        except control_client.LabControlError as e:
            self._event("skipped", step.kind, ", ".join(str(v) for v in step.params.values()), str(e))
            return
        self.fault_ids[step.ref] = rec["id"]
        self.say(
            f"+{time.time() - self.run.start_s:6.1f}s fault {step.kind} {rec['id']} "
            f"{', '.join(rec['ports'] or rec['devices'])}"
        )

    def _clear(self, step: Step) -> None:
        fid = self.fault_ids.pop(step.ref, None)
        if fid is not None:
            with contextlib.suppress(control_client.LabControlError):  # already cleared (a twin restart)
                control_client.call(self.t.state_dir, "DELETE", f"/faults/{fid}")

    # --- process faults -------------------------------------------------------------------------------------
    def _process(self, step: Step) -> None:
        p = step.params
        if step.kind == "twin_restart":
            self._twin_restart(float(p["down_s"]))
            return
        if step.kind == "restart":
            self._restart_other(int(p["target"]))
            return
        alive = [i for i, pid in enumerate(self.pids) if pid is not None and i not in self.paused]
        if not alive:
            return
        i = alive[int(p.get("instance", 0)) % len(alive)]
        pid = self.pids[i]
        assert pid is not None
        who = self._name(i)
        if step.kind == "kill":
            proc = self.procs.get(i)
            if proc is None:
                return  # a service the run did not start is not the run's to restart
            os.kill(pid, signal.SIGKILL)
            proc.wait()
            after = float(p["restart_after_s"])
            self._event("process", "kill", who, f"kill -9 pid {pid}, restart after {after:g} s", time.time() + after)
            self.pids[i] = None
            self.timers.append((time.time() + after, lambda: self._restart(i)))
        else:
            seconds = float(p["seconds"])
            os.kill(pid, signal.SIGSTOP)
            self.paused.add(i)
            self._event("process", step.kind, who, f"SIGSTOP pid {pid} for {seconds:g} s", time.time() + seconds)

            def resume() -> None:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGCONT)
                self.paused.discard(i)

            if seconds < 0.5:  # a GC-length pause: held here, to the millisecond
                time.sleep(seconds)
                resume()
            else:
                self.timers.append((time.time() + seconds, resume))

    def _restart(self, i: int) -> None:
        self.start_service(i)
        # a restarted fabricd (or collector) is blind until its telemetry has synced again: detection is not judged
        self._event("process", "restarted", self._name(i), f"pid {self.pids[i]}", time.time() + RESYNC_S)

    def _restart_other(self, rank: int) -> None:
        """Run one of the --restart commands (the bus, PostgreSQL, a collector: whatever the operator named)."""
        if not self.t.restarts:
            return
        name = sorted(self.t.restarts)[rank % len(self.t.restarts)]
        began = time.time()
        # Its output to the run's log, not to a pipe: a command that starts a daemon (`pg_ctl restart`, `bus up`)
        # leaves it holding the pipe's write end, and reading the pipe to its end would wait for the daemon to exit
        # (seed 3131: `pg_ctl restart` "timed out" after 120 s, twice, with PostgreSQL long up again).
        with (self.t.log or Path(os.devnull)).open("ab") as out:
            try:
                done = subprocess.run(self.t.restarts[name], shell=True, stdin=subprocess.DEVNULL, stdout=out,
                                      stderr=out, timeout=120, check=False)  # fmt: skip
                how = f"exit {done.returncode}"
            except subprocess.TimeoutExpired:
                how = "timed out after 120 s"
        self._event("process", "restart", name, f"{how} in {time.time() - began:.1f} s", time.time() + RESYNC_S, began)

    def _twin_restart(self, down_s: float) -> None:
        self._poll_faults()
        info = control_client.call(self.t.state_dir, "GET", "/status")
        pid = int(info["pid"])
        stopped = time.time()
        os.kill(pid, signal.SIGTERM)
        deadline = time.monotonic() + 20
        while (self.t.state_dir / "twin.pid").exists() and time.monotonic() < deadline:
            time.sleep(0.1)
        t = time.time()
        for rec in self.faults_seen.values():  # what the twin had active ended with it
            if rec.cleared_s is None:
                self.faults_seen[rec.id] = FaultRec(
                    rec.id, rec.kind, rec.ports, rec.devices, rec.start_s, t, rec.params
                )
        self.fault_ids.clear()
        self.incarnation += 1
        time.sleep(down_s)
        self._start_twin()
        self._start_workloads()  # the twin's workloads ended with it
        self._event(
            "process", "twin_restart", "twin", f"pid {pid} stopped, down {down_s:g} s", time.time() + RESYNC_S, stopped
        )

    def _start_workloads(self) -> None:
        for kind in self.t.workloads:
            try:
                rec = control_client.call(self.t.state_dir, "POST", "/workloads",
                                          {"kind": kind, "params": workload_params(kind, self.facts)})  # fmt: skip
            except control_client.LabControlError as e:
                raise ChaosError(f"--workload {kind}: the twin refused it: {e}") from None
            self.run.workloads.append(f"{rec['id']} {kind}")
            self._event("workload", "start", kind, f"{rec['id']}, {len(rec['senders'])} sender(s)")

    def _start_twin(self) -> None:
        inv = self.t.state_dir / "inventory.yaml"
        # the inventory the twin wrote says how it was started: its first address, port offset and releases
        doc = yaml.safe_load(inv.read_text())
        first = doc["devices"][sorted(doc["devices"])[0]]
        offset = int(doc["defaults"]["gnmi"]["port"]) - 6030
        args = [
            sys.executable,
            "-m",
            "lab",
            "--spec",
            str(self.t.spec),
            "--state-dir",
            str(self.t.state_dir),
            "--base-address",
            first["host"],
            "--port-offset",
            str(offset),
        ]
        eos = {d.get("os_version") for d in doc["devices"].values() if d.get("platform") == "eos"} - {None}
        sonic = {d.get("os_version") for d in doc["devices"].values() if d.get("platform") == "sonic"} - {None}
        if len(eos) == 1:
            args += ["--eos-version", str(eos.pop())]
        if len(sonic) == 1:
            args += ["--sonic-version", str(sonic.pop())]
        (self.t.state_dir / "ready").unlink(missing_ok=True)
        log = (self.t.state_dir / "twin.log").open("ab")
        subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True)
        deadline = time.monotonic() + 60
        while not (self.t.state_dir / "ready").exists():
            if time.monotonic() > deadline:
                raise ChaosError(f"the twin did not come back within 60 s ({self.t.state_dir}/twin.log)")
            time.sleep(0.1)

    # --- operators and technicians -------------------------------------------------------------------------
    def _operator(self, step: Step) -> None:
        p = step.params
        if step.kind == "shut_by_hand":
            port = p["port"]
            if port in (self.t.api.holds() or {}):
                return  # an operator does not shut what is already shut
            self.t.switches.set_admin(port, False)
            self.hand_shut.add(port)
            self.ever_shut.add(port)
            self._event("operator", "shut_by_hand", port)
        elif step.kind == "no_shut_by_hand":
            port = p["port"]
            if port in self.hand_shut:
                self.hand_shut.discard(port)
                self.t.switches.set_admin(port, True)
                self._event("operator", "no_shut_by_hand", port)
        elif step.kind == "enable_held":
            held = sorted(self.t.api.holds() or {})
            if held:
                port = held[int(p["rank"]) % len(held)]
                self.t.switches.set_admin(port, True)
                self._event("operator", "enable_held", port, "no shutdown by hand on a port fabricd holds")
        elif step.kind == "mode":
            try:
                r = self.t.api.post("/api/v1/mode", {"mode": p["mode"], "reason": f"chaos seed {self.schedule.seed}"})
            except httpx.HTTPError:
                # fabricd is down (killed, restarting): the operator tries again 2 s later, as many times as it takes,
                # or the run would stay in observe or approve until its end (seed 9999 did, 3 minutes)
                tries = int(p.get("tries", 0)) + 1
                again = Step(step.at_s, step.what, step.kind, {**p, "tries": tries})
                if tries <= 30:
                    self.timers.append((time.time() + 2, lambda: self._step(again)))
                return
            self._event("operator", "mode", p["mode"], f"HTTP {r.status_code}")
        elif step.kind == "approve":
            for a in self.t.api.get("/api/v1/actions", status="awaiting_approval")["actions"]:
                r = self.t.api.post(f"/api/v1/actions/{a['id']}/approve")
                self._event(
                    "operator", "approve", f"{a['device']}:{a['port']}", f"action {a['id']} HTTP {r.status_code}"
                )

    def _repairs(self, now: float) -> None:
        """Each new hold gets the next repair of the schedule: resolve its ticket after the repair's delay (from
        the disable), one in five after putting the wrong cable back on the port."""
        holds = self.t.api.holds()
        if holds is None:
            return
        for port, h in holds.items():
            if h.action_id in self.repairing or h.action_id in self.repaired or h.ticket_id is None:
                continue
            repair = next(self.repairs, Repair(5.0, False, 0))
            self.repairing[h.action_id] = (h.since_s + repair.delay_s, repair, port)
        for action_id, (due, repair, port) in list(self.repairing.items()):
            if now < due:
                continue
            del self.repairing[action_id]
            self.repaired.add(action_id)
            hold = holds.get(port)
            if hold is None or hold.action_id != action_id or hold.ticket_id is None:
                continue
            self._resolve(port, hold.ticket_id, repair)

    def _resolve(self, port: str, ticket: int, repair: Repair) -> None:
        old = self.wrong.pop(port, None)
        if old is not None:  # the technician comes back and puts the right cable in
            with contextlib.suppress(control_client.LabControlError):
                control_client.call(self.t.state_dir, "DELETE", f"/faults/{old}")
        detail = f"after {repair.delay_s:g} s"
        if repair.wrong_cable:
            others = self._wrong_candidates(port)
            if others:
                other = others[repair.rank % len(others)]
                try:
                    rec = control_client.inject(self.t.state_dir, "miscable", {"port": port, "other": other})
                    self.wrong[port] = rec["id"]
                    detail += f", wrong cable: swapped with {other} ({rec['id']})"
                except control_client.LabControlError as e:
                    detail += f", wrong cable refused: {e}"
        try:
            r = self.t.api.post(f"/api/v1/tickets/{ticket}/resolve")
            detail += f", HTTP {r.status_code}"
        except httpx.HTTPError as e:
            detail += f", {type(e).__name__}"
        self._event("repair", "resolve", port, f"ticket {ticket} {detail}")

    def _wrong_candidates(self, port: str) -> list[str]:
        same = self.facts.server_ports if port in self.facts.server_ports else self.facts.uplinks
        here = port.split(":", 1)[0]
        rail = self.facts.rail.get(here)
        busy = set(self.wrong) | {p for r in self.faults_seen.values() if r.cleared_s is None for p in r.ports}
        return [
            p
            for p in same
            if (d := p.split(":", 1)[0]) != here
            and self.facts.rail.get(d) != rail
            and p not in busy
            and self.facts.peer.get(p) not in busy
        ]

    # --- after the schedule ----------------------------------------------------------------------------------
    def _settle(self) -> None:
        """Clear every fault, undo the operators' hands, go back to auto, make sure fabricd runs, resolve every
        open ticket; then watch up to 60 s (docs/lab.md, "Chaos": convergence)."""
        for _, f in sorted(self.timers, key=lambda x: x[0]):
            f()
        self.timers = []
        with contextlib.suppress(control_client.LabControlError):
            control_client.call(self.t.state_dir, "DELETE", "/faults")
            if self.t.workloads:
                control_client.call(self.t.state_dir, "DELETE", "/workloads")
        self.wrong.clear()
        # and the ports shut by hand and opened again: an operator's `no shutdown` is not saved, so a twin restart
        # after fabricd saved the switch's config (with the shutdown in it) boots them shut (seed 4932: shut at
        # +83.9 s, opened at +91.8 s, the twin restarted at +98.7 s; unsettled to the end). Not those fabricd holds.
        held = self.t.api.holds()
        for port in sorted(self.hand_shut | (self.ever_shut - set(held) if held is not None else set())):
            with contextlib.suppress(ChaosError, httpx.HTTPError):
                self.t.switches.set_admin(port, True)
        self.hand_shut.clear()
        for i, pid in enumerate(self.pids):
            if pid is None and self._cmd(i) is not None:
                self.start_service(i)
        with contextlib.suppress(httpx.HTTPError):
            self.t.api.post("/api/v1/mode", {"mode": "auto", "reason": "chaos: settle"})
        self._event("settle", "faults cleared", "", "operators' shutdowns undone, mode auto")
        time.sleep(2)
        self._resolve_all()
        self.run.settled_s = time.time()
        good = 0
        while time.time() < self.run.settled_s + SETTLE_WINDOW_S:
            self._sample()
            s = self.run.samples[-1]
            good = good + 1 if _settled(s, self.facts.peer) else 0
            if good >= 3:
                break
            time.sleep(max(0.0, 1.0 - (time.time() - s.t)))

    def _resolve_all(self) -> None:
        try:
            tickets = self.t.api.get("/api/v1/tickets", status="open", limit=500)["tickets"]
        except (httpx.HTTPError, ValueError):
            return
        for tk in tickets:
            with contextlib.suppress(httpx.HTTPError):
                r = self.t.api.post(f"/api/v1/tickets/{tk['id']}/resolve")
                self._event(
                    "repair",
                    "resolve",
                    f"{tk['device']}:{tk.get('port')}",
                    f"ticket {tk['id']} settle, HTTP {r.status_code}",
                )

    def _poll_faults(self) -> None:
        try:
            log = control_client.call(self.t.state_dir, "GET", "/faults", timeout_s=2)
        except control_client.LabControlError:
            return
        for r in log:
            fid = f"r{self.incarnation}.{r['id']}" if self.incarnation else r["id"]
            cleared = r["cleared_ts"] / NS if r["cleared_ts"] else None
            ports = tuple(p for p in r["ports"])
            self.faults_seen[fid] = FaultRec(
                fid, r["kind"], ports, tuple(r["devices"]), r["start_ts"] / NS, cleared, r["params"]
            )

    def _collect(self) -> None:
        self._poll_faults()
        # the twin's log holds what was injected before the run too: only the run's own faults are judged
        mine = [f for f in self.faults_seen.values() if f.start_s >= self.run.start_s - 1]
        self.run.faults = sorted(mine, key=lambda f: f.start_s)
        try:
            self.run.actions = self.t.api.actions()
            self.run.findings = self.t.api.findings()
            self.run.audit_ids, self.run.audited_actions = self.t.api.audit()
        except (httpx.HTTPError, ValueError, KeyError) as e:
            self._event("collect", "failed", "api", str(e))
        try:
            self.run.tuning = self.t.api.tuning()
        except (httpx.HTTPError, ValueError, KeyError) as e:  # an older fabricd without the tuning API
            self._event("collect", "failed", "tuning", str(e))
        for subject in sorted({t.subject for t in self.run.tuning}):
            if subject in self.facts.peer and (got := self.t.switches.ecn(subject)) is not None:
                self.run.running[subject] = got


WORKLOADS = ("incast", "alltoall", "allreduce", "dci-bulk")


def workload_params(kind: str, facts: FabricFacts) -> dict[str, object]:
    """What `--workload KIND` starts: as `fabricd lab workload KIND` with its defaults (rail 0, group 0, the first
    DCI); an incast into the first server-facing port from 7 NICs (enough to fill it past XOFF on the small pod)."""
    if kind == "incast":
        return {"port": facts.server_ports[0], "fan_in": 7}
    return {}


def _settled(s: Sample, peer: dict[str, str]) -> bool:
    if s.held is None or s.open_tickets is None or unsettled(s, peer):
        return False
    return not any(p in s.ports and s.ports[p].admin_up for p in s.held)
