"""A tuning change from its approval to its end (docs/tuning.md "Modes, verify and roll back"): applied through the
push (push.py), judged over the verify window (`verify` of fabricd/tuning: the target KPI better by the margin, no
guard worse), confirmed or rolled back to the values before it. Every step is written to the ledger (state.tuning)
and the change's keyed action (op `tune`) before the next one, under the leader's fencing token, so a new leader
(or a restart) finds a change half done and finishes it from its step: a push left `applying` is pushed again,
which changes nothing if it had landed (the plan re-reads the running config); a verify window left open is judged
by the new leader from its own samples after the change; a roll back left half done is pushed again."""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Callable, Mapping

from fabricd.tuning.inputs import GroupWindow, PortWindow
from fabricd.tuning.kpis import Kpi, group_kpis, port_kpis
from fabricd.tuning.round import fault_on
from fabricd.tuning.verify import Decision, verify
from policies.intent import Intent
from policies.policy import TuningPolicy
from topology.fabric import Fabric
from topology.units import NS

from ..config.tuning import TuningSettings
from ..remediation.context import Fence, FencedOff, Tasks
from ..state import Action, ActionStatus, FencedError, StateStore, fenced
from ..state.tuning import TuneRecord, TuneStatus
from .ledger import RAN, Step, kpis_doc, kpis_of, next_step, values_of, with_values
from .push import Pusher, overlay

log = logging.getLogger("fabricd.service")
Window = PortWindow | GroupWindow
MIN_SAMPLES = 4  # the rules and the KPIs need at least 3 intervals (fabricd/tuning/series.py)


def kpis(w: Window) -> dict[Kpi, float]:
    return port_kpis(w) if isinstance(w, PortWindow) else group_kpis(w)


def since(w: Window, t_s: float) -> Window:
    """The window's samples taken at or after `t_s` (the verify window: after the change)."""
    if isinstance(w, PortWindow):
        return dataclasses.replace(w, samples=tuple(s for s in w.samples if s.t_s >= t_s))
    return dataclasses.replace(w, samples=tuple(s for s in w.samples if s.t_s >= t_s))


class Changes:
    def __init__(
        self, settings: TuningSettings, policy: TuningPolicy, state: StateStore, clock: Callable[[], int],
        intent: Intent, fabric: Fabric, fence: Fence, pusher: Pusher, window_of: Callable[[str], Window | None],
        faulted: Callable[[], Mapping[str, str]] = dict,
    ) -> None:  # fmt: skip
        """`faulted`: "device:port" -> the fault open on it now (TuningJob.faulted), read once a pass while a change
        is being verified."""
        self.settings, self.policy, self.state, self.clock = settings, policy, state, clock
        self.intent, self.fabric, self.fence, self.pusher, self.window_of = intent, fabric, fence, pusher, window_of
        self.faulted = faulted
        self.tasks = Tasks()
        self._busy: set[int] = set()  # changes whose step runs now in this instance
        self.fresh: set[int] = set()  # changes this instance recorded (auto): their first push is no resumed one

    @property
    def need(self) -> int:
        return max(MIN_SAMPLES, int(self.settings.verify_window_s / self.settings.sample_s))

    def advance(self) -> None:
        """Start the next step of every open change that has one (each change one step at a time)."""
        faulted: Mapping[str, str] | None = None
        for rec in self.state.tuning.with_status("awaiting_approval", "applying", "verifying", "rolling_back"):
            if rec.id in self._busy:
                continue
            action = self.state.actions.get(rec.action_id) if rec.action_id is not None else None
            w, start = self.window_of(rec.subject), self._start(rec)
            after = 0 if w is None or start is None else len(since(w, start).samples)
            fault = None
            if rec.status == "verifying" and w is not None:
                faulted = self.faulted() if faulted is None else faulted
                fault = fault_on(w, faulted)
            wait_s = self.settings.verify_window_s + self.settings.settle_window_s
            step = next_step(rec.status, action.status if action else None, rec.applied_ts, self.clock(), wait_s,
                             after, self.need, fault)  # fmt: skip
            if step is not Step.WAIT:
                self._busy.add(rec.id)
                self.tasks.start(self._run(step, rec, action, fault))

    def _start(self, rec: TuneRecord) -> float | None:
        """When the change's verify window starts (s): its push, and the settle time after it."""
        return None if rec.applied_ts is None else rec.applied_ts / NS + self.settings.settle_window_s

    def spawn(self, action: Action) -> None:
        """`fabricd approve` approved a tune action (remediation/requests.py): apply it now."""
        rec = self.state.tuning.of_action(action.id)
        if rec is not None and rec.id not in self._busy:
            self._busy.add(rec.id)
            self.tasks.start(self._run(Step.APPLY, rec, action))

    async def _run(self, step: Step, rec: TuneRecord, action: Action | None, fault: str | None = None) -> None:
        try:
            with fenced(self.fence.token()):
                if step is Step.ABANDON:
                    why = (f"{fault} opened on {rec.subject} while the change was verified: not judged across a "
                           "fault; rolled back to the values before")  # fmt: skip
                    rec = self.state.tuning.update(rec.id, "rolling_back", why)
                    await self._roll_back(rec, action, why)
                elif step is Step.REFUSE:
                    self._end(rec, action, "refused", f"not applied: action {rec.action_id} {action and action.status}")
                elif step is Step.APPLY:
                    await self._apply(rec, action)
                elif step is Step.VERIFY:
                    await self._verify(rec, action)
                elif step is Step.ROLL_BACK:
                    await self._roll_back(rec, action, rec.why)
        except (FencedOff, FencedError) as e:
            log.warning("tuning change %d left to the leader: %s", rec.id, e)
        finally:
            self._busy.discard(rec.id)

    def _values(self, rec: TuneRecord, after: bool) -> Intent:
        ran = self.state.tuning.with_status(*RAN)
        others = [r for r in ran if r.id != rec.id]
        return overlay(self.intent, self.fabric, with_values(values_of(others), rec, after))

    async def _apply(self, rec: TuneRecord, action: Action | None) -> None:
        # the last window before the push is the baseline (an approval may come long after the proposal)
        w = self.window_of(rec.subject)
        before = kpis(w) if w is not None and len(w.samples) >= MIN_SAMPLES else kpis_of(rec.kpis_before)
        # a push begun before (by a leader before this one, or before a restart) may have left a commit pending
        resumed = rec.status == "applying" and rec.id not in self.fresh
        self.fresh.discard(rec.id)
        if resumed and self.fence.token() is None and self._pending_may_remain(rec, action):
            return  # asked again at the next sample
        if not resumed:
            rec = self.state.tuning.update(rec.id, "applying", "pushing", kpis_before=kpis_doc(before))
        target = self._values(rec, after=True)
        if not self.pusher.renders(self._values(rec, after=False), target, self.fabric, rec.subject):
            why = "the switch's config has no line for this knob (its driver renders it the same either way)"
            self._end(rec, action, "refused", why, action_status="refused")
            return
        result = await self.pusher.push(target, self.fabric, rec.subject)
        now = self.clock()
        if result.status not in ("applied", "unchanged"):
            if resumed and now - rec.created_ts < (self.settings.revert_in_s + self.settings.window_s) * NS:
                # the switch may still be busy with what the old leader left: tried again at the next sample
                log.warning("tuning change %d: resumed push %s (%s); trying again", rec.id, result.status, result.error)
                return
            why = f"push {result.status}: {result.error or '; '.join(result.steps)}; nothing stays on the switch"
            self._end(rec, action, "refused", why, action_status="failed")
            return
        if result.status == "applied":
            what = f"{len(result.plan.commands) if result.plan else 0} commands"
        else:  # the plan found the values running: pushed before a restart or a takeover (or by hand)
            what = "already running" + (" (pushed before a restart or a takeover)" if resumed else "")
        verifying = f"applied ({what}); verifying {self.settings.verify_window_s:g} s"
        self.state.tuning.update(rec.id, "verifying", verifying, applied_ts=now)
        self.state.audit.record(now, "tuning applied", f"{_diff(rec)}: {what} [key {rec.key}]", mode=rec.mode,
                                action_id=rec.action_id)  # fmt: skip

    def _pending_may_remain(self, rec: TuneRecord, action: Action | None) -> bool:
        """A push begun by a leader before this one may have left its commit pending under the switch's revert
        timer: the running config shows it, but the timer takes it back unless that leader confirms (it cannot: it
        is fenced off). Pushing now would find it "already running" and verify a change about to revert; so a
        resumed push waits until the timer has run out (from when the push could begin: the change recorded, or
        its action approved), and the plan then finds the change confirmed or gone. Only without HA: a leader names
        its pushes with its token and ends every older leader's transaction on the switch before its own push
        (push.py, remediation/older_leaders.py), so a new leader pushes at once."""
        began = max(rec.created_ts, action.updated_ts if action is not None else 0)
        return self.clock() < began + int((self.settings.revert_in_s + 2 * self.settings.sample_s) * NS)

    async def _verify(self, rec: TuneRecord, action: Action | None) -> None:
        w, start = self.window_of(rec.subject), self._start(rec)
        after = {} if w is None or start is None else kpis(since(w, start))
        target = Kpi(rec.target) if rec.target else None
        check = verify(kpis_of(rec.kpis_before), after, target, self.policy)
        if check.decision is Decision.CONFIRM:
            self._end(rec, action, "confirmed", check.why, kpis_after=kpis_doc(after), action_status="done")
            return
        rec = self.state.tuning.update(rec.id, "rolling_back", check.why, kpis_after=kpis_doc(after),
                                       no_effect=check.no_effect)  # fmt: skip
        await self._roll_back(rec, action, check.why)

    async def _roll_back(self, rec: TuneRecord, action: Action | None, why: str) -> None:
        result = await self.pusher.push(self._values(rec, after=False), self.fabric, rec.subject)
        if result.status not in ("applied", "unchanged"):
            # left `rolling_back`: the next pass pushes the values before it again
            log.warning("tuning change %d: roll back %s: %s", rec.id, result.status, result.error)
            return
        self._end(rec, action, "rolled_back", why, action_status="rolled_back")

    def _end(
        self, rec: TuneRecord, action: Action | None, status: TuneStatus, why: str, *,
        kpis_after: dict[str, float] | None = None, action_status: ActionStatus | None = None,
    ) -> None:  # fmt: skip
        now = self.clock()
        with self.state.transaction():
            self.state.tuning.update(rec.id, status, why, ended_ts=now, kpis_after=kpis_after)
            if action is not None and action_status is not None:
                self.state.actions.set_status(action.id, action_status, now, detail=why)
            self.state.audit.record(now, f"tuning {status.replace('_', ' ')}", f"{_diff(rec)}: {why} [key {rec.key}]",
                                    mode=rec.mode, action_id=rec.action_id)  # fmt: skip


def _diff(rec: TuneRecord) -> str:
    return f"{rec.subject} " + ", ".join(f"{c['knob']} {c['before']} -> {c['after']}" for c in rec.changes)
