"""Undrain: a drain's ports brought back as a repaired port is (LLDP checked), watched clean, then its traffic back
and the drain ended; recorded `undraining` before any port comes up, so a restart or a new leader finishes or
reverses it (`resume`). One undrain at a time per drain: a second request joins the first."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable
from functools import partial

from topology.errors import FabricdError
from topology.model import Endpoint

from ..remediation.context import Context
from ..remediation.errors import ActionError
from ..remediation.marks import MAINTENANCE_KEY
from ..state import DrainRecord, fenced
from . import plan as m
from .watch import DrainWatch
from .work import DrainWork, after_refusal, endpoints

log = logging.getLogger("fabricd.maintenance")


class Undrains:
    def __init__(self, ctx: Context, work: DrainWork, watch: DrainWatch) -> None:
        self.ctx, self.work, self.watch = ctx, work, watch
        self.state = ctx.state

    def resume(self, drain_id: int, actor: str = "fabricd (an undrain resumed)") -> None:
        """An undrain a fabricd before this one left under way (its ports may be up), taken again."""
        if not self.work.busy(drain_id):
            self.work.start(drain_id, self._carry_out_undrain(drain_id, actor, self.ctx.fence.token()))

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
            before = self.work.work.get(d.id) if self.work.busy(d.id) else None
            self.work.start(d.id, self._carry_out_undrain(d.id, actor, ctx.fence.token(), before))
            return d, True

    async def undrain(self, name: str, actor: str) -> DrainRecord:
        """Begin the undrain of `name` (or join the one under way) and wait for it: the drain ended, or ActionError
        saying why it stays."""
        d, _ = self.begin_undrain(name, actor)
        while self.work.busy(d.id) and (task := self.work.work.get(d.id)) is not None:
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
                    self.state.drains.update(drain_id, self.ctx.clock(), state=after_refusal(d),
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
        devices = {p.device for p in endpoints(d)}
        shut = {(a.device, a.port) for dev in devices for a in self.state.actions.on(dev, d.created_ts, "disable")
                if (a.key or "").startswith(mine)}  # fmt: skip
        up = [p for p in self.work.switch_ports(endpoints(d))
              if (p.device, p.port) in shut and not self.state.holds.is_held(p.device, p.port)]  # fmt: skip
        failed = await self.work.shut(d, tuple(up), again=True) if up else []
        if failed:
            refused += f"; and shutting them again failed: {'; '.join(failed)}"
        self.state.drains.update(d.id, ctx.clock(), state=after_refusal(d), detail=f"undrain refused: {refused}")

    async def _return_traffic(self, d: DrainRecord, actor: str, now: int) -> DrainRecord:
        """The checks passed: traffic back (maintenance mode off, TSB), then the drain ends. Under the lock."""
        t = m.target(self.ctx.fabric, d.kind, d.target)
        back: list[tuple[str, Callable[[], None]]] = [
            (device, partial(self.work.switch.shift, device, False, f"fabricd_m{d.id}_back")) for device in t.shifted
        ]
        back += [(f"{se.local}'s BGP session", self.work.shift_session(se, False, f"fabricd_m{d.id}_back{n}"))
                 for n, se in enumerate(t.sessions)]  # fmt: skip
        for what, undo in back:  # one never shifted (a drain stopped before): bringing it back is harmless
            try:
                await self.work.switch.blocking(undo)
            except FabricdError as e:
                why = f"could not bring the traffic back to {what}: {e}"
                self.state.drains.update(d.id, now, state=after_refusal(d), detail=f"undrain refused: {why}")
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
        for p in self.work.switch_ports(endpoints(d)):
            if (p.device, p.port) in running:
                actions.append(running[(p.device, p.port)])
                continue
            if (p.device, p.port) not in held:
                continue
            tries = self.state.actions.count(p.device, p.port, "enable", after_id=0)
            a = self.state.actions.add("enable", p.device, p.port, "maintenance", "running",
                                       f"maintenance: undrain of drain {d.id}", self.ctx.clock(),
                                       key=f"{MAINTENANCE_KEY}{d.id}:up{tries}:{p}")  # fmt: skip
            self.work.actions.spawn(a)
            actions.append(a)
        failed = await self.work.wait_actions(actions)
        up = [Endpoint(a.device, a.port) for a in actions if not self.state.holds.is_held(a.device, a.port)]
        # the enable's own words are a ticket's ("resolve the ticket again"); here it is the undrain that is repeated
        return up, [w.replace("resolve the ticket again", "undrain again") for w in failed]
