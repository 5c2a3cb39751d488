"""The tuning loop in the service (docs/tuning.md, issue 51). The leader samples every lossless queue from its
telemetry store every `tuning.sample_s`; every `tuning.window_s` it judges the window over the intent with the
ledger's values (what tuning set and kept), proposes, and admits each proposal against the ledger (hysteresis and
budget, across restarts: the ledger is in the state). Then, by `tuning.mode`:

- `observe`: the proposal is recorded (audit `tuning (observe)`, ledger `observed`); nothing changes;
- `approve`: it is recorded with a keyed action (op `tune`) awaiting `fabricd approve` (remediation's approval:
  requests.py hands an approved tune action to `Changes.spawn`);
- `auto`: it is recorded with its action running and applied at once.

An applied change is verified, confirmed or rolled back by changes.py. A standby samples and records nothing."""

from __future__ import annotations

import logging
from collections.abc import Callable

from apscheduler.schedulers.asyncio import AsyncIOScheduler

from fabricd.telemetry.snapshot import Snapshot
from fabricd.tuning.inputs import GroupWindow, PortWindow
from fabricd.tuning.observed import SampleLog, group_windows, lossless_ports, port_windows
from fabricd.tuning.propose import Proposal
from fabricd.tuning.round import Round, Skipped, judge_round, without_faults
from fabricd.tuning.verify import admit, no_effect_values
from policies.intent import Intent, derive_intent
from policies.policy import load_policy
from topology.fabric import Fabric
from topology.spec import load_spec
from topology.units import NS

from ..config import ServiceConfig
from ..state import ActionStatus, StateStore, fenced
from ..state.tuning import OPEN_TUNE, NewTune, TuneStatus
from .changes import Changes, Window, kpis
from .ledger import RAN, changes_doc, kpis_doc, ledger_of, proposal_key, values_of
from .push import Pusher, not_in_intent, overlay

log = logging.getLogger("fabricd.service")
WHAT = "tuning (observe)"
HOLD_S = 3600.0
# A proposal's first status, by the mode
_FIRST: dict[str, tuple[TuneStatus, str]] = {
    "observe": ("observed", "observe mode: not applied"),
    "approve": ("awaiting_approval", "waiting for `fabricd approve`"),
    "auto": ("applying", "auto mode: applying"),
}  # the ledger admit reads: the budget's hour (the hold-off is read from the policy)


class TuningJob:
    def __init__(
        self, cfg: ServiceConfig, clock: Callable[[], int], fabric: Fabric, state: StateStore,
        snapshot: Callable[[], Snapshot], acting: Callable[[], bool], pusher: Pusher,
    ) -> None:  # fmt: skip
        self.cfg, self.settings, self.clock, self.fabric, self.state = cfg, cfg.tuning, clock, fabric, state
        self.snapshot, self.acting = snapshot, acting
        self.policy = load_policy(cfg.policy)
        self.intent = derive_intent(fabric, load_spec(cfg.spec), self.policy, None)
        s = self.settings
        keep = int(max(s.window_s, s.verify_window_s) / s.sample_s) + 2
        ports = ((d.device, p.port) for d, p in lossless_ports(self.intent))
        self.samples = SampleLog(ports, self.policy.lossless_priorities[0], max(keep, 4))
        self.recorded: set[str] = set()
        self.last: Round | None = None
        self.skipped: list[Skipped] = []  # the last round's subjects left alone for a fault open on them
        self._windows: dict[str, Window] = {}
        self.changes = Changes(s, self.policy.tuning, state, clock, self.intent, fabric, pusher.fence, pusher,
                               self._windows.get, self.faulted)  # fmt: skip

    def schedule(self, scheduler: AsyncIOScheduler) -> None:
        scheduler.add_job(self.sample, "interval", seconds=self.settings.sample_s, id="tuning-sample")
        scheduler.add_job(self.round, "interval", seconds=self.settings.window_s, id="tuning-round")

    def running(self) -> Intent:
        """The intent with the ledger's values: what the switches run by fabricd's word."""
        return overlay(self.intent, self.fabric, values_of(self.state.tuning.with_status(*RAN)))

    def _judge_windows(self, intent: Intent) -> tuple[list[PortWindow], list[GroupWindow]]:
        xoff = self.settings.xoff_bytes
        ports = port_windows(intent, self.fabric, self.samples, self.policy, lambda _d, _p: xoff)
        groups = group_windows(intent, self.fabric, self.samples)
        self._windows.clear()
        self._windows.update({w.subject: w for w in ports})
        self._windows.update({g.subject: g for g in groups})
        return ports, groups

    async def sample(self) -> None:
        """Sample; then move every open change on (a verify window that has filled is judged now, not at the next
        round)."""
        if not self.acting():
            return
        self.samples.take(self.snapshot(), self.clock() / NS)
        busy = {r.device for r in self.state.tuning.with_status(*OPEN_TUNE)}
        if busy:  # the windows of the switches with a change under way only (this runs every sample)
            running = self.running()
            self._judge_windows(Intent(devices=[d for d in running.devices if d.device in busy]))
            self.changes.advance()

    async def round(self) -> list[Proposal]:
        """Judge the window; record each admitted proposal once (and, by the mode, wait or apply). Returns what it
        recorded."""
        if not self.acting():
            return []
        now = self.clock()
        ports, groups = self._judge_windows(self.running())
        ports, groups, self.skipped = without_faults(ports, groups, self.faulted())
        if self.skipped:
            log.info("tuning: %d subjects not judged for a fault open on them (%s: %s)", len(self.skipped),
                     self.skipped[0].subject, self.skipped[0].why)  # fmt: skip
        records = self.state.tuning.since(now - int(max(HOLD_S, self.policy.tuning.holdoff_minutes * 60) * NS))
        ledger = ledger_of(records)
        tuning = self.policy.tuning
        subjects = [w.subject for w in ports] + [g.subject for g in groups]
        tried = {s: no_effect_values(ledger, s, now / NS, tuning) for s in subjects}
        self.last = r = judge_round(ports, groups, self.policy, lambda s: tried.get(s, {}))
        window = int(now / NS // self.settings.window_s)
        out = []
        with fenced(self.changes.fence.token()):
            for p in r.proposals:
                key = proposal_key(p, window)
                if key in self.recorded:
                    continue
                adm = admit(p, ledger, now / NS, self.policy.tuning)
                if not adm.allowed:
                    log.info("tuning: %s not admitted: %s", p.subject, adm.why)
                    continue
                self._record(p, key, now)
                self.recorded.add(key)
                ledger = ledger_of(self.state.tuning.since(now - int(HOLD_S * NS)))  # this one counts now
                out.append(p)
        self.changes.advance()
        return out

    def faulted(self) -> dict[str, str]:
        """Every port an active finding names, and its link's other end: "device:port" -> the fault."""
        out: dict[str, str] = {}
        for f in self.state.findings.all("active", limit=100_000):
            why = f"{f.get('kind', 'fault')} finding {f.get('id')}"
            for ep in f.get("ports") or []:
                device, _, port = ep.partition(":")
                out.setdefault(ep, why)
                if port and (peer := self.fabric.peer(device, port)) is not None:
                    out.setdefault(f"{peer.device}:{peer.port}", why)
        return out

    def _record(self, p: Proposal, key: str, now: int) -> None:
        if self.state.tuning.with_key(key) is not None:
            return  # recorded by the instance that led before this one, in this window
        mode = self.settings.mode
        diff = "; ".join(line.strip() for line in p.diff())
        w = self._windows.get(p.subject)
        before = kpis_doc(kpis(w)) if w is not None else {}
        blocked = not_in_intent(p.changes)
        status, why = _FIRST[mode]
        if blocked and mode != "observe":
            status, why = "refused", f"not settable through the intent: {', '.join(str(c.knob) for c in blocked)}"
        device = p.subject.split(":", 1)[0]
        rule, target = str(p.rule) if p.rule else None, str(p.target) if p.target else None
        new = NewTune(key, p.subject, device, str(p.port_class), rule, target, changes_doc(p.changes), p.reason, mode,
                      status, why, before)  # fmt: skip
        with self.state.transaction():
            action_id = None
            if status in ("awaiting_approval", "applying"):
                a_status: ActionStatus = "awaiting_approval" if status == "awaiting_approval" else "running"
                a = self.state.actions.add("tune", device, f"tuning {p.subject}", mode, a_status, diff, now,
                                           key=f"tune:{key}")  # fmt: skip
                action_id = a.id
            rec = self.state.tuning.add(new, now, action_id=action_id)
            if mode == "observe":
                self.state.audit.record(now, WHAT, f"would change {diff} [key {key}]", mode="observe")
            else:
                note = f"; run `fabricd approve {action_id}` to apply it" if status == "awaiting_approval" else ""
                self.state.audit.record(now, f"tuning proposed ({mode})", f"{diff} [key {key}]: {why}{note}",
                                        mode=mode, action_id=action_id)  # fmt: skip
        if status == "applying":
            self.changes.fresh.add(rec.id)
        log.info("tuning: %s %s (change %d)", p.subject, status, rec.id)
