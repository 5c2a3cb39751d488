"""What people ask of planned maintenance: drain a switch, link or port, undrain it, list the drains; and the drain's
steps, carried out by the leader. Every request is refused on a standby, runs under the decision lock with the
leader's fencing token (a superseded leader writes nothing), and is audited with its user. The decisions are
plan.py's and the guard's; the ports are shut and brought back by remediation's own port actions
(remediation/port_actions.py), the traffic shifted through remediation/switch.py.

A drain is written (state `draining`, its guard step done) before anything else happens, so a restart or a new
leader sees it and the guard counts its ports from that moment on."""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from functools import partial

from fabricd.detectors.finding import Finding
from topology.units import NS

from ..guard import check_drain
from ..remediation.context import Context, FencedOff
from ..remediation.errors import ActionError
from ..remediation.holds import Holds
from ..state import DrainRecord, fenced
from ..state.db import FencedError
from . import plan as m
from .undrain import Undrains
from .watch import DrainWatch
from .work import DrainWork

log = logging.getLogger("fabricd.maintenance")


class DrainRefusedError(ActionError):
    """The guard refuses the drain (its capacity counted with everything else that is gone)."""


@dataclass(frozen=True)
class DrainPlan:
    """A drain as planned: its steps and, unless a dry run, its record."""

    steps: list[str]
    dry_run: bool
    drain: DrainRecord | None
    ports: list[str]  # device:port, what it takes out of service


def parse_until(text: str | None) -> int | None:
    """`--until` as unix ns: ISO 8601, UTC unless it names its zone (2026-11-28T08:00Z, 2026-11-28 08:00)."""
    if text is None or not text.strip():
        return None
    try:
        when = datetime.fromisoformat(text.strip().replace("Z", "+00:00"))
    except ValueError:
        raise m.MaintenanceInputError(
            f"--until {text!r}: not a time; give it as ISO 8601 UTC, e.g. 2026-11-28T08:00Z"
        ) from None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    ns = int(when.timestamp()) * NS
    if ns >= 2**63:  # unix ns in 64 bits end in 2262: the state stores them as such
        raise m.MaintenanceInputError(f"--until {text!r}: too far ahead; give a time before 2262")
    return ns


def _step_text(s: m.Step) -> str:
    return f"{s.name}: {s.text}"


class Maintenance:
    def __init__(self, ctx: Context, holds: Holds, work: DrainWork, watch: DrainWatch, undrains: Undrains) -> None:
        self.ctx, self.holds, self.work, self.watch, self.undrains = ctx, holds, work, watch, undrains
        self.switch = work.switch
        self.state = ctx.state

    def begin_undrain(self, name: str, actor: str) -> tuple[DrainRecord, bool]:
        return self.undrains.begin_undrain(name, actor)

    async def undrain(self, name: str, actor: str) -> DrainRecord:
        return await self.undrains.undrain(name, actor)

    def report_overruns(self, now: int) -> list[Finding]:
        """Every active drain past its --until as a finding ("maintenance overran"), refreshed each tick while it
        lasts (cleared like any finding once the drain ends); audited when it first overruns. Never a return."""
        out = []
        try:
            with fenced(self.ctx.fence.token()):
                for d in self.state.drains.all(m.ACTIVE):
                    if not m.overran(d.until_ts, d.state, now):
                        continue
                    f = m.overran_finding(d, now)
                    with self.state.transaction():
                        fid, new = self.state.findings.record(f, f"{m.OVERRAN}:{d.id}", now)
                        if new:
                            self.state.audit.record(now, f"drain {d.id} of {d.kind} {d.target} overran", f.summary,
                                                    finding_id=fid)  # fmt: skip
                    out.append(f)
        except FencedError as e:
            self.ctx.fence.fenced_out(str(e))
        return out

    def maintenance(self, limit: int = 500) -> list[DrainRecord]:
        return self.state.drains.all(None, limit)

    async def drain(
        self, kind: m.TargetKind, name: str, actor: str, reason: str, *, until: str | None = None,
        shut: bool = False, dry_run: bool = False, force: bool = False,
    ) -> DrainPlan:  # fmt: skip
        """Plan a drain; unless `dry_run`, check it with the guard and record it (its guard step done).
        MaintenanceInputError for bad input, DrainRefusedError when the guard refuses: nothing written but the
        refusal's audit entry."""
        ctx = self.ctx
        t = m.target(ctx.fabric, kind, name)
        until_ts = parse_until(until)
        why = reason.strip()
        if not why:
            raise m.MaintenanceInputError("--reason is empty: say why (it goes in the audit log)")
        steps = [_step_text(s) for s in self._plan(t, shut)]
        if dry_run:
            m.check_new(t, self.holds.drained_ports(), until_ts, ctx.clock())
            return DrainPlan(steps, True, None, [str(p) for p in t.ports])
        ctx.fence.leader_only()
        with fenced(ctx.fence.token()):
            async with ctx.lock:
                now = ctx.clock()
                m.check_new(t, self.holds.drained_ports(), until_ts, now)
                known = self.holds.known()
                v = check_drain(ctx.fabric, ctx.limits, t.ports, known, t.spared)
                if not v.allowed and not force:
                    self.state.audit.record(now, f"drain of {kind} {name} refused", f"guard ({v.rule}): {v.reason}",
                                            actor=actor)  # fmt: skip
                    raise DrainRefusedError(f"drain of {kind} {name} refused by the guard ({v.rule}): {v.reason}")
                if not v.allowed:  # an admin's override (the API lets only admins force): said in the audit log
                    over = f"guard ({v.rule}): {v.reason}; forced by {actor}: {why}"
                    self.state.audit.record(now, f"drain of {kind} {name} forced past the guard", over, actor=actor)
                with self.state.transaction():
                    d = self.state.drains.add(kind, name, [str(p) for p in t.ports], why, actor, shut, until_ts,
                                              steps, 1, now)  # fmt: skip
                    until_note = f", until {_iso(until_ts)}" if until_ts is not None else ""
                    self.state.audit.record(
                        now, f"drain {d.id} of {kind} {name} begun", f"{why}{until_note}", actor=actor
                    )
            self.resume_drain(d.id)
            return DrainPlan(steps, False, d, d.ports)

    def resume_drain(self, drain_id: int) -> None:
        """Carry out a recorded drain's remaining steps in the background (a new drain, or one a restart or a new
        leader finds half done: `resume_drains`); `Tasks.idle()` waits for it. Never twice at once."""
        if not self.work.busy(drain_id):
            self.work.start(drain_id, self._carry_out_drain(drain_id, self.ctx.fence.token()))

    def resume_drains(self) -> list[int]:
        """Every drain a fabricd before this one left between its steps, carried on (the leader's start); an undrain
        it left under way (its ports may be up) is taken again: it ends the drain or puts the ports back down."""
        ids = []
        for d in self.state.drains.all(("draining", "undraining")):
            if d.state == "undraining" and not self.work.busy(d.id):
                self.undrains.resume(d.id)
                ids.append(d.id)
            elif d.state == "draining" and d.done < len(d.steps):
                self.resume_drain(d.id)
                ids.append(d.id)
        return ids

    async def _carry_out_drain(self, drain_id: int, token: int | None) -> None:
        try:
            with fenced(token):
                await self._drain_steps(drain_id)
        except Exception:
            log.exception("drain %d failed unexpectedly", drain_id)
            with contextlib.suppress(Exception), fenced(token):
                self.state.drains.update(drain_id, self.ctx.clock(), state="stopped",
                                         detail="stopped: internal error carrying it out; see the log")  # fmt: skip

    async def _drain_steps(self, drain_id: int) -> None:
        """Each remaining step taken, then recorded (`done`) before the next: a restart resumes at the first one not
        recorded (a shift taken twice is harmless: maintenance mode and TSA are states, not toggles)."""
        d = self.state.drains.get(drain_id)
        if d is None or d.state != "draining":
            return
        t = m.target(self.ctx.fabric, d.kind, d.target)
        steps = self._plan(t, d.shut)
        for i in range(d.done, len(steps)):
            if self.ctx.fence.why() is not None:
                return  # the leader carries it on
            now_d = self.state.drains.get(drain_id)
            if now_d is None or now_d.state != "draining":
                return  # an undrain took it over between two steps
            step = steps[i]
            if step.name in ("shift", "shift_session"):  # the n-th shift step shifts the n-th switch or session
                nth, key = [s.name for s in steps[: i + 1]].count(step.name) - 1, f"fabricd_m{d.id}_{i}"
                shift: Callable[[], None]
                if step.name == "shift":
                    shift = partial(self.switch.shift, t.shifted[nth], True, key)
                else:
                    shift = self.work.shift_session(t.sessions[nth], True, key)
                try:
                    await self.switch.blocking(shift)
                except FencedOff:
                    return  # not ours to carry on: the leader does
                except Exception as e:  # noqa: BLE001 (a switch that refused or was not reached: the step failed)
                    self._stop(d, f"step {i + 1} ({step.text}) failed: {e}", steps[: i + 1])
                    return
            elif step.name == "verify":
                loud = await self.watch.wait_quiet(t.ports)
                if loud:
                    timeout = self.ctx.settings.maintenance.shift_timeout_s
                    self._stop(d, f"traffic did not move away within {timeout:g} s: {'; '.join(loud)}", steps[:i])
                    return
            elif step.name == "shut":
                failed = await self.work.shut(d, t.ports)
                if failed:
                    self._stop(d, f"step {i + 1} ({step.text}) failed: {'; '.join(failed)}", steps[: i + 1])
                    return
            elif step.name == "hold":
                loose = [
                    str(p) for p in self.work.switch_ports(t.ports) if not self.state.holds.is_held(p.device, p.port)
                ]
                if loose:
                    self._stop(d, f"step {i + 1}: not held after the shut: {', '.join(loose)}", steps[:i])
                    return
            done = i + 1
            state = "drained" if step.name == "drained" else None
            d = self.state.drains.update(d.id, self.ctx.clock(), done=done, state=state, detail=f"{step.name}: done")

    def _plan(self, t: m.DrainTarget, shut: bool) -> list[m.Step]:
        ms = self.ctx.settings.maintenance
        return m.plan(self.ctx.fabric, t, shut=shut, threshold_bps=ms.quiet_bps, timeout_s=ms.shift_timeout_s)

    def _stop(self, d: DrainRecord, why: str, taken: list[m.Step]) -> None:
        """A step failed: the drain is `stopped`, still active (its ports counted), and says why and what its steps
        left on the switches (`taken`: the steps begun, the failed one too: a shift may be half taken); a person
        decides (undrain brings it all back)."""
        now = self.ctx.clock()
        left = m.left_behind(taken)
        why = f"{why}; {left}" if left else why
        self.state.drains.update(d.id, now, state="stopped", detail=f"stopped: {why}")
        self.state.audit.record(now, f"drain {d.id} of {d.kind} {d.target} stopped", why)


def _iso(ns: int) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(ns / NS))
