"""What people ask of planned maintenance: drain a switch, link or port, undrain it, list the drains; and the drain's
steps, carried out by the leader. Every request is refused on a standby, runs under the decision lock with the
leader's fencing token (a superseded leader writes nothing), and is audited with its user. The decisions are
plan.py's and the guard's; the ports are shut and brought back by remediation's own port actions
(remediation/port_actions.py), the traffic shifted through remediation/switch.py.

A drain is written (state `draining`, its guard step done) before anything else happens, so a restart or a new
leader sees it and the guard counts its ports from that moment on."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable, Coroutine
from dataclasses import dataclass
from datetime import UTC, datetime
from functools import partial
from typing import Any

from fabricd.detectors.finding import Finding
from topology.errors import FabricdError
from topology.model import Endpoint
from topology.units import NS

from ..guard import check_drain
from ..remediation.context import Context, FencedOff
from ..remediation.errors import ActionError
from ..remediation.holds import Holds
from ..remediation.marks import MAINTENANCE_KEY
from ..remediation.port_actions import PortActions
from ..remediation.switch import Switch
from ..state import Action, DrainRecord, fenced
from ..state.db import FencedError
from . import plan as m
from .watch import DrainWatch

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
    def __init__(self, ctx: Context, holds: Holds, actions: PortActions, switch: Switch, watch: DrainWatch) -> None:
        self.ctx, self.holds, self.actions, self.switch, self.watch = ctx, holds, actions, switch, watch
        self.state = ctx.state
        # One piece of work per drain at a time (its steps, or its undrain): a second request joins it
        self._work: dict[int, asyncio.Task[None]] = {}

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

    def busy(self, drain_id: int) -> bool:
        """A step or an undrain of this drain is under way in this fabricd."""
        task = self._work.get(drain_id)
        if task is None or task.done():
            return False
        try:
            return task.get_loop() is asyncio.get_running_loop()  # a task of a loop gone (tests) does nothing more
        except RuntimeError:
            return True

    def _start(self, drain_id: int, work: Coroutine[Any, Any, None]) -> asyncio.Task[None]:
        task = self.ctx.tasks.start(work)
        self._work[drain_id] = task
        task.add_done_callback(lambda t: self._work.pop(drain_id, None) if self._work.get(drain_id) is t else None)
        return task

    def resume_drain(self, drain_id: int) -> None:
        """Carry out a recorded drain's remaining steps in the background (a new drain, or one a restart or a new
        leader finds half done: `resume_drains`); `Tasks.idle()` waits for it. Never twice at once."""
        if not self.busy(drain_id):
            self._start(drain_id, self._carry_out_drain(drain_id, self.ctx.fence.token()))

    def resume_drains(self) -> list[int]:
        """Every drain a fabricd before this one left between its steps, carried on (the leader's start); an undrain
        it left under way (its ports may be up) is taken again: it ends the drain or puts the ports back down."""
        ids = []
        for d in self.state.drains.all(("draining", "undraining")):
            if d.state == "undraining" and not self.busy(d.id):
                self._start(d.id, self._carry_out_undrain(d.id, "fabricd (an undrain resumed)", self.ctx.fence.token()))
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
                    shift = self._shift_session(t.sessions[nth], True, key)
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
                failed = await self._shut(d, t.ports)
                if failed:
                    self._stop(d, f"step {i + 1} ({step.text}) failed: {'; '.join(failed)}", steps[: i + 1])
                    return
            elif step.name == "hold":
                loose = [str(p) for p in self._switch_ports(t.ports) if not self.state.holds.is_held(p.device, p.port)]
                if loose:
                    self._stop(d, f"step {i + 1}: not held after the shut: {', '.join(loose)}", steps[:i])
                    return
            done = i + 1
            state = "drained" if step.name == "drained" else None
            d = self.state.drains.update(d.id, self.ctx.clock(), done=done, state=state, detail=f"{step.name}: done")

    def _shift_session(self, se: m.SessionEnd, away: bool, key: str) -> Callable[[], None]:
        """One end of a drained link's BGP session de-preferred (or back), for a worker thread."""
        return partial(self.switch.shift_session, se.local.device, se.peer_address, se.asn, away, key)

    def _plan(self, t: m.DrainTarget, shut: bool) -> list[m.Step]:
        ms = self.ctx.settings.maintenance
        return m.plan(self.ctx.fabric, t, shut=shut, threshold_bps=ms.quiet_bps, timeout_s=ms.shift_timeout_s)

    def _switch_ports(self, ports: tuple[Endpoint, ...]) -> list[Endpoint]:
        return [p for p in ports if (dev := self.ctx.fabric.get(p.device)) is not None and dev.is_switch]

    async def _shut(self, d: DrainRecord, ports: tuple[Endpoint, ...], again: bool = False) -> list[str]:
        """The drained ports shut as fabricd shuts a faulty one (the revert timer, telemetry, confirmed; the mark
        says `maintenance`, no ticket), and held: remediation's own disable, keyed by the drain so a resumed step
        finds its actions instead of adding new ones (`again`: shut anew after an undrain that failed its checks,
        keyed by how many times the port was shut). What failed, per port."""
        actions = []
        begun = {
            a.id for a in self.state.actions.with_status("running", op="disable")
        }  # a resumed step's: already going
        for p in self._switch_ports(ports):
            n = self.state.actions.count(p.device, p.port, "disable", after_id=0) if again else ""
            a = self.state.actions.add("disable", p.device, p.port, "maintenance", "running",
                                       f"maintenance: drain {d.id} ({d.reason})", self.ctx.clock(),
                                       key=f"{MAINTENANCE_KEY}{d.id}:down{n}:{p}")  # fmt: skip
            if a.status == "running" and a.id not in begun:
                self.actions.spawn(a)
            actions.append(a)
        return await self._wait_actions(actions)

    async def _wait_actions(self, actions: list[Action]) -> list[str]:
        """Wait for the actions to end; what did not end `done`, with why."""
        out = []
        for a in actions:
            while (now := self.state.actions.get(a.id)) is not None and now.status == "running":
                await asyncio.sleep(0.05)
            if now is None or now.status != "done":
                out.append(f"{a.device}:{a.port}: {now.detail if now is not None else 'lost'}")
        return out

    def _stop(self, d: DrainRecord, why: str, taken: list[m.Step]) -> None:
        """A step failed: the drain is `stopped`, still active (its ports counted), and says why and what its steps
        left on the switches (`taken`: the steps begun, the failed one too: a shift may be half taken); a person
        decides (undrain brings it all back)."""
        now = self.ctx.clock()
        left = m.left_behind(taken)
        why = f"{why}; {left}" if left else why
        self.state.drains.update(d.id, now, state="stopped", detail=f"stopped: {why}")
        self.state.audit.record(now, f"drain {d.id} of {d.kind} {d.target} stopped", why)

    def begin_undrain(self, name: str, actor: str) -> tuple[DrainRecord, bool]:
        """Record that the undrain of `name` is under way (`undraining`, before any port comes up: a restart finds
        it and finishes or reverses it), and carry it out in the background; the drain as it is now, and whether
        this request began it (False: an undrain of it was already under way, which this request joins)."""
        ctx = self.ctx
        ctx.fence.leader_only()
        with fenced(ctx.fence.token()):
            d = self._active_drain(name)
            if d.state == "undraining":
                return d, False
            now = ctx.clock()
            with self.state.transaction():
                d = self.state.drains.update(d.id, now, state="undraining", detail=f"undrain by {actor} under way")
                self.state.audit.record(now, f"undrain of drain {d.id} ({d.kind} {d.target}) begun", "", actor=actor)
            before = self._work.get(d.id) if self.busy(d.id) else None
            self._start(d.id, self._carry_out_undrain(d.id, actor, ctx.fence.token(), before))
            return d, True

    async def undrain(self, name: str, actor: str) -> DrainRecord:
        """Begin the undrain of `name` (or join the one under way) and wait for it: the drain ended, or ActionError
        saying why it stays."""
        d, _ = self.begin_undrain(name, actor)
        while self.busy(d.id) and (task := self._work.get(d.id)) is not None:
            await asyncio.shield(task)
        now = self.state.drains.get(d.id)
        assert now is not None
        if now.state != "undrained":
            why = now.detail.removeprefix("undrain refused: ")
            raise ActionError(f"{now.kind} {now.target} stays {now.state}: {why}")
        return now

    async def _carry_out_undrain(self, drain_id: int, actor: str, token: int | None,
                                 before: asyncio.Task[None] | None = None) -> None:  # fmt: skip
        if before is not None:  # the drain's step under way ends first (it then sees the undrain and stops)
            with contextlib.suppress(Exception):
                await asyncio.shield(before)
        try:
            with fenced(token):
                await self._undrain(drain_id, actor)
        except Exception as e:
            if not isinstance(e, FabricdError):
                log.exception("undrain of drain %d failed unexpectedly", drain_id)
            with contextlib.suppress(Exception), fenced(token):
                d = self.state.drains.get(drain_id)
                if d is not None and d.state == "undraining":
                    self.state.drains.update(drain_id, self.ctx.clock(), state=_after_refusal(d),
                                             detail=f"undrain refused: {e}")  # fmt: skip

    async def _undrain(self, drain_id: int, actor: str) -> None:
        """End the drain once its ports came back as the blueprint has them and stayed clean while watched;
        otherwise the drain stays (drained, or stopped if its steps never finished), says what is wrong (audited),
        and its ports go back down. The ports' return and the watch run outside the decision lock (a fault elsewhere
        is judged meanwhile); the verdict and the traffic's return under it."""
        ctx = self.ctx
        d = self.state.drains.get(drain_id)
        if d is None or d.state != "undraining":
            return
        _, back = await self._bring_ports_back(d)
        readings = {} if back else await self.watch.readings(d)
        async with ctx.lock:
            now = ctx.clock()
            problems = back or m.undrain_problems(ctx.fabric, readings, ctx.settings.maintenance.undrain_watch_s)
            if not problems:
                await self._return_traffic(d, actor, now)
                return
            refused = "; ".join(problems)
            self.state.audit.record(now, f"undrain of drain {d.id} ({d.kind} {d.target}) refused", refused,
                                    actor=actor)  # fmt: skip
        # the drain stays: the ports it had shut that are up (this undrain's, or one a restart interrupted) go out of
        # service again, as the drain had them (a switch drained without --shut shut none)
        mine = f"{MAINTENANCE_KEY}{d.id}:down"
        devices = {p.device for p in _endpoints(d)}
        shut = {(a.device, a.port) for dev in devices for a in self.state.actions.on(dev, d.created_ts, "disable")
                if (a.key or "").startswith(mine)}  # fmt: skip
        up = [p for p in self._switch_ports(_endpoints(d))
              if (p.device, p.port) in shut and not self.state.holds.is_held(p.device, p.port)]  # fmt: skip
        failed = await self._shut(d, tuple(up), again=True) if up else []
        if failed:
            refused += f"; and shutting them again failed: {'; '.join(failed)}"
        self.state.drains.update(d.id, ctx.clock(), state=_after_refusal(d), detail=f"undrain refused: {refused}")

    async def _return_traffic(self, d: DrainRecord, actor: str, now: int) -> DrainRecord:
        """The checks passed: traffic back (maintenance mode off, TSB), then the drain ends. Under the lock."""
        t = m.target(self.ctx.fabric, d.kind, d.target)
        back: list[tuple[str, Callable[[], None]]] = [
            (device, partial(self.switch.shift, device, False, f"fabricd_m{d.id}_back")) for device in t.shifted
        ]
        back += [(f"{se.local}'s BGP session", self._shift_session(se, False, f"fabricd_m{d.id}_back{n}"))
                 for n, se in enumerate(t.sessions)]  # fmt: skip
        for what, undo in back:  # one never shifted (a drain stopped before): bringing it back is harmless
            try:
                await self.switch.blocking(undo)
            except FabricdError as e:
                why = f"could not bring the traffic back to {what}: {e}"
                self.state.drains.update(d.id, now, state=_after_refusal(d), detail=f"undrain refused: {why}")
                self.state.audit.record(now, f"undrain of drain {d.id} failed", why, actor=actor)
                return d
        with self.state.transaction():
            d = self.state.drains.update(d.id, now, state="undrained", detail=f"undrained by {actor}")
            self.state.audit.record(now, f"drain {d.id} of {d.kind} {d.target} ended", "checks passed", actor=actor)
        return d

    def _active_drain(self, name: str) -> DrainRecord:
        d = next((x for x in self.state.drains.all(m.ACTIVE) if x.target == name), None)
        if d is None:
            raise m.UnknownTargetError(f"{name} is not drained; see `fabricd maintenance`")
        return d

    async def _bring_ports_back(self, d: DrainRecord) -> tuple[list[Endpoint], list[str]]:
        """The ports the drain shut and holds, enabled as fabricd re-enables a repaired port (its LLDP checked: on the
        wrong cable it stays down, and says where); the ports brought back, and what did not come back. An enable of
        this drain a fabricd before this one left running is waited for (the reconciler resumes it), not repeated."""
        held = {(p["device"], p["port"]) for p in self.state.holds.all()}
        mine = f"{MAINTENANCE_KEY}{d.id}:up"
        running = {(a.device, a.port): a for a in self.state.actions.with_status("running", op="enable")
                   if (a.key or "").startswith(mine)}  # fmt: skip
        actions = []
        for p in self._switch_ports(_endpoints(d)):
            if (p.device, p.port) in running:
                actions.append(running[(p.device, p.port)])
                continue
            if (p.device, p.port) not in held:
                continue
            tries = self.state.actions.count(p.device, p.port, "enable", after_id=0)
            a = self.state.actions.add("enable", p.device, p.port, "maintenance", "running",
                                       f"maintenance: undrain of drain {d.id}", self.ctx.clock(),
                                       key=f"{MAINTENANCE_KEY}{d.id}:up{tries}:{p}")  # fmt: skip
            self.actions.spawn(a)
            actions.append(a)
        failed = await self._wait_actions(actions)
        up = [Endpoint(a.device, a.port) for a in actions if not self.state.holds.is_held(a.device, a.port)]
        # the enable's own words are a ticket's ("resolve the ticket again"); here it is the undrain that is repeated
        return up, [w.replace("resolve the ticket again", "undrain again") for w in failed]


def _endpoints(d: DrainRecord) -> tuple[Endpoint, ...]:
    return tuple(Endpoint(*x.split(":", 1)) for x in d.ports)


def _after_refusal(d: DrainRecord) -> str:
    """What a drain is again once its undrain is refused: drained if all its steps were taken, else stopped."""
    return "drained" if d.done >= len(d.steps) else "stopped"


def _iso(ns: int) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(ns / NS))
