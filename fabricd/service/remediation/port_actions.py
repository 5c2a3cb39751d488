"""A port action carried out on its switch: the one transaction every disable and enable of remediation goes
through (faults, re-applies, approvals, resolves, drains). Drain hook for a server port, then commit the admin
state under a revert timer (switch.py, fenced before every request), watch telemetry for the port to follow,
confirm or roll back; an enable's cable is checked by LLDP first. Every end is written to the state (`finish`)
with the port's new state, noted on the ticket and handed to the backend."""

from __future__ import annotations

import asyncio
import contextlib
import logging

from drivers.base import DriverError, Session
from fabricd.detectors.miscabled import same_end
from topology.model import Endpoint
from topology.units import NS

from ..commits_first import CommitsFirst
from ..state import FENCE, Action, ActionStatus, fenced
from ..state.db import FencedError
from .context import Context, FencedOff
from .drain_hook import run_drain_hook
from .marks import Marks
from .paperwork import Paperwork
from .switch import Switch

log = logging.getLogger("fabricd.remediation")


class PortActions:
    def __init__(self, ctx: Context, switch: Switch, marks: Marks, paper: Paperwork) -> None:
        self.ctx, self.switch, self.marks, self.paper = ctx, switch, marks, paper
        self.state = ctx.state
        self._underway: dict[int, asyncio.Event] = {}  # action id -> set once its first step is handed off
        self.live: set[int] = set()  # actions carried out by this process now (the reconciler resumes no other)
        self._commits = CommitsFirst()  # confirms wait while ports are being taken down

    def spawn(self, action: Action, resumed: bool = False) -> asyncio.Event:
        """Carry out a running action in the background (`Tasks.idle()` waits for every one); the event is set once
        it is underway: its first step handed to the driver thread or the drain hook, queued behind another action
        on the same switch, or ended. `resumed`: a fabricd before this one began it (see `Switch._open_and_set`)."""
        underway = self._underway[action.id] = asyncio.Event()
        self.live.add(action.id)
        # The token it runs under is the one of the leader that starts it, even if that leader is paused and wakes
        # up after a new one took over: then every write and switch call of it is refused.
        self.ctx.tasks.start(self._carry_out(action, resumed, self.ctx.fence.token()))
        return underway

    def _mark_underway(self, action_id: int) -> None:
        event = self._underway.pop(action_id, None)
        if event is not None:
            event.set()

    async def _carry_out(self, action: Action, resumed: bool, token: int | None) -> None:
        try:
            with fenced(token):
                await self._carry_out_inner(action, resumed)
        finally:
            self.live.discard(action.id)
            self._mark_underway(action.id)

    async def _carry_out_inner(self, action: Action, resumed: bool) -> None:
        try:
            if (why := self.ctx.fence.why()) is not None:
                raise FencedOff(why)
            await (self._disable(action, resumed) if action.op == "disable" else self._enable(action, resumed))
        except (FencedOff, FencedError) as e:
            # Nothing written: the action stays `running` in the shared state and the leader's reconcile resumes it.
            log.warning("action %d (%s %s:%s) left to the leader: %s", action.id, action.op, action.device,
                        action.port, e)  # fmt: skip
            if isinstance(e, FencedError):
                self.ctx.fence.on_fenced(str(e))
        except Exception as e:
            if (why := self.ctx.fence.why()) is not None:
                # This instance no longer acts (a leader woken from a pause: its state session was ended by the new
                # leader's claim, or its lease ran out): the error is the fence's doing, and the action is the
                # leader's to finish. One line, no traceback, nothing written.
                log.warning("action %d (%s %s:%s) left to the leader: this instance was fenced off (%s; %s: %s)",
                            action.id, action.op, action.device, action.port, why, type(e).__name__, e)  # fmt: skip
                return
            log.exception("action %d (%s %s:%s) failed unexpectedly", action.id, action.op, action.device, action.port)
            current = self.state.actions.get(action.id) or action
            if current.status != "running":
                return  # it ended before the error (the error came from the paperwork after it)
            ep = f"{action.device}:{action.port}"
            text = (
                f"could not {'enable' if action.op == 'enable' else 'disable'} {ep}: internal error "
                f"({type(e).__name__}: {e}); the switch's revert timer undoes a half-committed change; see the log"
            )
            self.finish(current, "failed", text)
            await self.paper.send_if(
                self.paper.note_action(current.ticket_id, self.state.actions.get(action.id) or current, text)
            )

    async def _disable(self, action: Action, resumed: bool) -> None:
        ep = Endpoint(action.device, action.port)
        # draining a node twice is harmless
        drained = await run_drain_hook(self.ctx.settings, self.ctx.fabric, ep, action.reason,
                                       lambda: self._mark_underway(action.id))  # fmt: skip
        text = await self._set_admin(action, up=False, resumed=resumed)
        done = self.state.actions.get(action.id) or action
        if drained:
            text = f"{drained}; {text}"
        await self.paper.send_if(self.paper.note_action(done.ticket_id, done, text))

    async def _enable(self, action: Action, resumed: bool) -> None:
        text = await self._set_admin(action, up=True, resumed=resumed)
        done = self.state.actions.get(action.id)
        await self.paper.send_if(self.paper.note_action(action.ticket_id, done or action, text))

    async def _set_admin(self, action: Action, up: bool, resumed: bool) -> str:
        """Commit the change under a revert timer, watch telemetry, confirm or roll back; returns what happened."""
        ep, verb = Endpoint(action.device, action.port), ("enable" if up else "disable")
        lock = self.switch.device_lock(ep.device)
        if lock.locked():
            self._mark_underway(action.id)  # queued behind another action on this switch
        async with lock:
            return await self._transaction(action, ep, up, verb, resumed)

    async def _transaction(self, action: Action, ep: Endpoint, up: bool, verb: str, resumed: bool) -> str:
        ctx, switch = self.ctx, self.switch
        timeout = ctx.settings.verify_timeout_s
        session: Session | None = None
        await ctx.fence.wait()  # checked before every switch call
        fenced_out = failed = False
        try:
            # Connect and commit in one trip to the driver thread: each hop back to a busy loop costs latency.
            mark = None if up else self.marks.mark_for(action)
            token = FENCE.get()
            if token is not None and resumed and action.token != token:
                # An old leader began it. Its transaction is never taken over (its late confirm would still find it
                # and commit it, and ours would then fail): it is ended with every other of an older token on the
                # switch before the commit (switch.py, `_commit`), and the step is done again under this leader's
                # own token-named transaction.
                action = self.state.actions.retoken(action.id, token)
                resumed = False
            # The description the mark goes beside, as the switch streams it: not read on the action path. An enable
            # reads the switch's own (the driver does, described None): a disable moments ago may not have been
            # streamed yet, and a mark left behind would say fabricd holds a port that is up.
            described = None if up else ctx.view.description(ep.device, ep.port)
            opened = switch.begin_admin_change(ep, up, action.switch_key, resumed, mark, token, described)
            self._mark_underway(action.id)  # connect-and-commit is in the driver thread now
            with self._commits.commit() if not up else contextlib.nullcontext():
                session, found = await opened
            committed = ctx.clock()
            seen = await ctx.view.wait_oper(ep.device, ep.port, up, timeout)
            await ctx.fence.wait()  # a leader paused while it waited (SIGSTOP, a frozen VM) may not touch it
            # LLDP heard since the enable began counts (not only since this commit): a resumed enable's port may
            # have come up before a restart, and LLDP streams on change; what was heard before the port last went
            # down was deleted with it (802.1AB), and that was before this enable was recorded.
            heard_since = min(committed, action.created_ts)
            if up and seen and found != "confirmed" and (wrong := await self._wrong_cable(ep, heard_since)):
                # Back from repair on the wrong cable (or on one LLDP does not confirm): it goes down again (the
                # revert), and the ticket says where.
                how = await switch.settle(session, False)
                text = f"{wrong[0]}; {how}: {ep} stays down {wrong[1]} (then resolve the ticket again)"
                self.finish(action, "rolled_back", text)
                self.paper.reopen(action, text)
                return text
            if found == "confirmed":
                # The fabricd before this one confirmed it on the switch and died before recording that.
                text = f"{verb}d {ep} (confirmed on the switch before a restart)"
                self.finish(action, "done", text)
                return text
            if not seen and not up:
                how = await switch.settle(session, False)
                text = f"telemetry did not show {ep} down within {timeout:g} s; {how}"
                self.finish(action, "rolled_back", text)
                return text
            await self._commits.yield_to_commits()  # other ports still to go down go first (commits_first.py)
            await switch.settle(session, True)
            text = f"{verb}d {ep}" + ("" if seen else f" (it did not come up within {timeout:g} s)")
            self.finish(action, "done", text)
            return text
        except FencedOff:
            fenced_out = True
            raise
        except DriverError as e:
            failed = True
            if session is not None and ctx.fence.why() is None:
                await switch.settle(session, False, fenced=False)  # a failed rollback: the switch's timer reverts it
            text = f"could not {verb} {ep}: {e}"
            self.finish(action, "failed", text)
            return text
        finally:
            if session is not None:
                await switch.let_go(session, fenced_out or bool(ctx.fence.why()), failed)

    async def _wrong_cable(self, ep: Endpoint, since: int) -> tuple[str, str] | None:
        """What is wrong with the cable on `ep` by LLDP (a sample after `since`) and until when the port stays down,
        or None: the intended neighbour, or a port LLDP is not expected on (a host that sends no LLDP: it cannot be
        judged, the repair is trusted). Where LLDP is expected, silence is not a confirmation: the neighbour of
        before the repair was deleted when the port went down (802.1AB), so only a fresh sample names the cable."""
        fabric, view = self.ctx.fabric, self.ctx.view
        want = fabric.peer(ep.device, ep.port)
        if want is None:
            return None
        wait = min(self.ctx.settings.verify_timeout_s, 5.0)
        got = await view.lldp_neighbour(ep.device, ep.port, since, wait)
        if got is None:
            if not view.expects_lldp(ep.device, ep.port):
                return None
            problem = f"no LLDP neighbour heard on {ep} within {wait:g} s of it coming up (expected {want})"
            return problem, "until LLDP can confirm the cable (check the far end's LLDP and the cable)"
        if same_end(got, want):
            return None
        there = fabric.peer(got.device, got.port) if got.device in fabric else None
        where = f"; {got} belongs on {there}" if there is not None and there != ep else ""
        return f"{ep} came up facing {got}, not {want} as cabled in the blueprint{where}", "until the cable is moved"

    def finish(self, action: Action, status: ActionStatus, text: str) -> None:
        ctx = self.ctx
        now = ctx.clock()
        # The port's new state (held down, or back up on probation) is recorded with the status, atomically.
        action = self.state.actions.finish(action.id, status, now, text, now + int(ctx.settings.probation_s * NS))
        self.marks.finished(action, status)
        self.state.audit.record(now, f"{action.op} {action.device}:{action.port}: {status}", text, mode=action.mode,
                        finding_id=action.finding_id, action_id=action.id, ticket_id=action.ticket_id)  # fmt: skip
        (log.info if status == "done" else log.warning)("action %d: %s", action.id, text)
