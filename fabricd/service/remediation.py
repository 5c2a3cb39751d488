"""From findings to tickets and (guarded) port actions; from a resolved ticket back to a working port.

For every new incident: one ticket per fault (a recurrence updates it), and for flapping or corrupting links
the safety guard decides whether fabricd may take the port down. What happens next depends on the mode:
`observe` records what it would do and never touches a switch, `approve` waits for `fabricd approve ID`,
`auto` acts. Acting = drain hook for server ports, commit `shutdown` under a revert timer, see the port go down
in telemetry, then confirm; anything else rolls back. Every step is written to the state store first.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import re
import shlex
import time
from collections.abc import Awaitable, Callable, Collection, Container, Sequence
from concurrent.futures import Executor
from dataclasses import dataclass
from functools import partial
from typing import TypeVar, TypeVarTuple

from drivers.base import DriverError, PortMark, Resumed, Session
from drivers.marks import Mark
from drivers.transaction import settle
from fabricd.detectors.finding import Finding
from fabricd.detectors.miscabled import same_end
from topology.fabric import Fabric
from topology.jsontypes import JsonDict
from topology.model import Endpoint, Role
from topology.units import NS

from .commits_first import CommitsFirst
from .config import RemediationSettings, SafetyLimits
from .decide import Decision, PortFacts, action_note, decide, escalation, new_ticket, recurrence
from .faults import LINK_KINDS, fault_key, target_port
from .guard import Budget, GuardInput, Verdict, budgets, check_disable
from .maintenance_requests import MAINTENANCE_KEY, MaintenanceRequests
from .people_requests import ActionError as ActionError
from .people_requests import PeopleRequests
from .people_requests import StandbyError as StandbyError
from .people_requests import UnknownIdError as UnknownIdError
from .reconcile import Hold, stale_holds
from .reconcile_steps import FRESH_WAIT_S, ReconcileSteps
from .remediation_io import Actuator as Actuator
from .remediation_io import PortView as PortView
from .state import FENCE, Action, ActionStatus, DisabledPort, StateStore, Ticket, fenced
from .state_db import FencedError

log = logging.getLogger("fabricd.remediation")
R = TypeVar("R")
Ts = TypeVarTuple("Ts")


FENCE_WAIT_S = 1.0  # a leader whose lease is only close to its next renewal waits this long for it before a call


class _Fenced(Exception):
    """Raised inside an action when this instance may no longer act: the action is left to the leader."""


@dataclass
class Outcome:
    ticket: Ticket | None
    action: Action | None
    verdict: Verdict | None


class Remediator(ReconcileSteps, PeopleRequests, MaintenanceRequests):
    def __init__(
        self,
        fabric: Fabric,
        state: StateStore,
        settings: RemediationSettings,
        limits: SafetyLimits,
        *,
        managed: Container[str],
        actuator: Actuator,
        view: PortView,
        clock: Callable[[], int],
        executor: Executor | None = None,
        publish: Callable[[Ticket], Awaitable[None]] | None = None,
        fence: Callable[[], str | None] | None = None,
        token: Callable[[], int | None] | None = None,
        on_fenced: Callable[[str], None] | None = None,
    ) -> None:
        """`fence()` says why this instance may not act now (a standby, or a leader whose token was superseded), or
        None; it is asked before each action starts, before every switch commit, and by every request of people."""
        self.fabric, self.state, self.settings, self.limits = fabric, state, settings, limits
        self.managed, self.actuator, self.view, self.clock = managed, actuator, view, clock
        self.executor = executor
        self._publish = publish
        self._fence = fence
        # HA: the leader's fencing token now (None: acting alone), and what to do when the state says it is not ours
        self._token = token or (lambda: None)
        self._on_fenced = on_fenced or (lambda why: None)
        self._cleaned: set[tuple[int, str]] = set()  # (token, switch): an old leader's transactions ended there
        self._tasks: set[asyncio.Task[None]] = set()
        self._underway: dict[int, asyncio.Event] = {}  # action id -> set once its first step is handed off
        self._lock = asyncio.Lock()  # one decision at a time: budgets must count the action just taken
        # One transaction per switch at a time: EOS refuses a commit while another commit timer is pending.
        self._device_locks: dict[str, asyncio.Lock] = {}
        self._locks_loop: asyncio.AbstractEventLoop | None = None
        self._commits = CommitsFirst()  # confirms wait while ports are being taken down
        # fabricd's marks as the switches showed them at the last scan (None: not scanned yet); see reconcile.py
        self.marks: dict[Endpoint, PortMark] | None = None
        self.unscanned: set[str] = set()  # switches the last scans skipped (stale) or could not read: read again soon
        self.scanned_ts = 0  # when marks were last read (those too)
        self._waiting: dict[Endpoint, int] = {}  # holds whose re-apply waits for fresh telemetry, since when
        self._fresh: dict[Endpoint, int] = {}  # ports whose new incident waits for fresh telemetry, since when

    # --- findings in -----------------------------------------------------------------------------------------
    async def on_findings(self, findings: list[Finding], unsure: Collection[str] = ()) -> list[Outcome]:
        """Every finding decided and its switch work started first, then the tickets to the backend: when links
        cross together, the last one's commit does not wait for the earlier ones' paperwork. `unsure`: the switches
        with no fresh word now (stale, or resyncing after a restart); a new incident whose guard verdict rests on
        one of them waits for it (bounded), like a re-apply does."""
        out = []
        try:
            with fenced(self._token()):  # every write conditional on this leader's token (state.FENCE)
                async with self._lock:
                    now = self.clock()
                    for f in findings:
                        if self._waits_for_fresh(f, now, unsure):
                            continue
                        outcome = await self._incident(f, now)
                        if outcome is not None:
                            out.append(outcome)
        except FencedError as e:
            self._fenced_out(str(e))
        for o in out:
            if o.ticket is not None:
                await self._send(o.ticket)
        return out

    def _waits_for_fresh(self, f: Finding, now: int, unsure: Collection[str]) -> bool:
        """A new incident that could disable a port is not judged on what its switch or its neighbours streamed
        before they went quiet: it is left unrecorded (the detector reports it again next tick) until they have
        said something fresh, or FRESH_WAIT_S has passed (then judged, and the log says on what)."""
        target = target_port(f, self.fabric, self.managed) if f.kind in LINK_KINDS else None
        if target is None:
            return False
        unknown = self._unknown_for(target, unsure)
        if not unknown:
            self._fresh.pop(target, None)
            return False
        if self.state.has_finding(f, fault_key(f, self.fabric)):
            return False  # a known incident is only refreshed: nothing is judged
        first = self._fresh.setdefault(target, now)
        if now - first < FRESH_WAIT_S * NS:
            if first == now:
                log.info("%s on %s waits for fresh telemetry from %s", f.kind, target, ", ".join(unknown))
            return True
        log.warning("%s on %s judged without fresh telemetry from %s after %g s", f.kind, target,
                    ", ".join(unknown), FRESH_WAIT_S)  # fmt: skip
        return False

    def _fenced_out(self, why: str) -> None:
        log.warning("%s", why)
        self._on_fenced(why)

    async def _incident(self, f: Finding, now: int) -> Outcome | None:
        """Record the finding; if it is a new incident, decide (decide.py) and write the decision, its action and
        its ticket in one transaction, then start the switch work (on_findings hands the ticket to the backend
        once the batch is decided). A crash
        before the commit leaves nothing (the detector reports the finding again); after it, the action is
        `running` in the state and `reconcile()` completes it, and the ticket backend takes what it has not."""
        fault = fault_key(f, self.fabric)
        target = target_port(f, self.fabric, self.managed) if f.kind in LINK_KINDS else None
        with self.state.tx():
            fid, new = self.state.upsert_finding(f, fault, now)
            if not new:
                return None
            if self._under_maintenance(f):  # planned work, not a fault: recorded, no ticket, no action
                self.state.audit(now, f"finding {fid} during maintenance", f.summary, finding_id=fid)
                return Outcome(None, None, None)
            disabled = self.state.disabled_ports()  # read once for the port's facts and the guard
            facts = self._facts(target, now, disabled)
            d = decide(f, fid, facts, fabric=self.fabric, limits=self.limits, settings=self.settings,
                       known=self._known(disabled))  # fmt: skip
            if d.outcome == "ignore":
                return Outcome(None, None, None)
            action = facts.pending if d.outcome == "pending" else self._record(d, fid, target, now)
            if d.escalate and target is not None:
                ticket = self._escalate(target.device, d.escalate, f, fid, d.note, now)
            else:
                evidence = self._evidence(f)  # as the fault left the ports, before our action changes them
                ticket = self._ticket_for(f, fid, fault, target, d, action, evidence, now)
            if action is not None and d.action is not None:
                self.state.link_action_ticket(action.id, ticket.id)
                action = self.state.action(action.id) or action
        if action is not None and d.action is not None and action.status == "running":
            # The switch first, the paperwork outside after: wait until the action has handed its first step to a
            # thread or process (the drain hook, or connect-and-commit in the driver thread), or is queued behind
            # another action on the switch. (A pending action is already running or waiting: not started twice.)
            await self._spawn(action).wait()
        return Outcome(ticket, action, d.verdict)  # on_findings hands the ticket to the backend

    def _facts(self, target: Endpoint | None, now: int, disabled: list[DisabledPort]) -> PortFacts:
        if target is None:
            return PortFacts(None)
        held = any(p["device"] == target.device and p["port"] == target.port for p in disabled)
        return PortFacts(
            target,
            held=held,
            up_again=held and target in self.up_again(disabled),
            pending=self.state.open_action(target.device, target.port),
            faulty_on_switch=tuple(self._faulty_ports(target.device, now, disabled)),
        )

    def _record(self, d: Decision, fid: int, target: Endpoint | None, now: int) -> Action | None:
        """The decision's new action, audited (None when it decided none)."""
        if d.action is None or target is None:
            return None
        n = d.action
        a = self.state.add_action("disable", target.device, target.port, n.mode, n.status, n.reason, now,
                                  finding_id=fid, key=n.key)  # fmt: skip
        self.state.audit(now, n.audit_what, n.audit_why, mode=n.mode, finding_id=fid, action_id=a.id)
        return a

    def _known(self, disabled: list[DisabledPort] | None = None) -> GuardInput:
        hour_ago = self.clock() - 3600 * NS
        drained = self.drained_ports()  # counted as drained, not against fabricd's own budgets
        held = frozenset(self._held(disabled)) - drained
        return GuardInput(held, self.view.oper_down(), self.state.actions_since(hour_ago), self.view.routed_down(),
                          drained)  # fmt: skip

    def _guard(self, target: Endpoint) -> Verdict:
        return check_disable(self.fabric, self.limits, target, self._known())

    def budgets(self) -> list[Budget]:
        """What is used of each rate and budget limit now (the /metrics remediation gauges)."""
        return budgets(self.fabric, self.limits, self._known())

    def _held(self, disabled: list[DisabledPort] | None = None) -> set[Endpoint]:
        """Ports fabricd holds down, or is taking down now (a disable in flight already counts against budgets)."""
        rows = self.state.disabled_ports() if disabled is None else disabled
        held = {Endpoint(p["device"], p["port"]) for p in rows} - self.stale_holds(rows)  # up again: nothing down
        held |= {Endpoint(a.device, a.port) for a in self.state.actions_in("running", op="disable")}
        return held

    def stale_holds(self, disabled: list[DisabledPort] | None = None) -> set[Endpoint]:
        """Holds whose port telemetry shows up again (the next pass re-applies or releases them), once telemetry
        had the time to show their shutdown."""
        rows = self.state.disabled_ports() if disabled is None else disabled
        grace = int(self.settings.verify_timeout_s * NS)
        return stale_holds((Hold.of(p) for p in rows), self.view.admin_up(), now=self.clock(), grace_ns=grace)

    def up_again(self, disabled: list[DisabledPort] | None = None) -> set[Endpoint]:
        """Holds whose port is up again without fabricd (a reboot, a hand-typed `no shutdown`): stale holds, less
        those fabricd is enabling itself (a repair's enable verifying the port: its flaps decide that enable, and
        the port's next incident, once the hold is gone)."""
        enabling = {Endpoint(a.device, a.port) for a in self.state.actions_in("running", op="enable")}
        return self.stale_holds(disabled) - enabling

    def _faulty_ports(self, device: str, now: int, disabled: list[DisabledPort]) -> list[str]:
        """Ports of `device` fabricd wanted down in the last hour (acted, proposed or refused), plus those it holds
        down. Re-enables after a repair are not faults."""
        ports = {p["port"] for p in disabled if p["device"] == device}
        since = now - 3600 * NS
        ports |= {a.port for a in self.state.actions_on(device, since, op="disable")}
        return sorted(ports)

    # --- tickets ---------------------------------------------------------------------------------------------
    def _ticket_for(
        self,
        f: Finding,
        fid: int,
        fault: str,
        target: Endpoint | None,
        d: Decision,
        action: Action | None,
        evidence: JsonDict,
        now: int,
    ) -> Ticket:
        note = d.note.replace("{action_id}", str(action.id) if action is not None else "?")
        t = self.state.open_ticket(fault)
        reopened = False
        if t is None and target is not None:
            tid = self.state.probation(target.device, target.port, now)
            if tid:
                t = self.state.ticket(tid)
                reopened = t is not None
        if t is None:
            title, body = new_ticket(f, fid, fault, note, action, evidence)
            t = self.state.create_ticket(fault, f.kind, f.device, f.port, title, body, now)
            self.state.audit(now, f"opened ticket {t.id}", f.summary, mode=self.settings.mode, finding_id=fid,
                             ticket_id=t.id)  # fmt: skip
            return t
        body = recurrence(t, f, fid, note, action, evidence, reopened)
        t = self.state.update_ticket(t.id, now, body=body, recurrence=True, reopen=reopened)
        what = "reopened" if reopened else "updated"
        self.state.audit(now, f"{what} ticket {t.id}", f.summary, mode=self.settings.mode, finding_id=fid,
                         ticket_id=t.id)  # fmt: skip
        return t

    def _escalate(self, device: str, ports: Sequence[str], f: Finding, fid: int, note: str, now: int) -> Ticket:
        held = [ep.port for ep in self._held() if ep.device == device]
        title, body = escalation(device, ports, held, f, note)
        fault = f"escalation:{device}"
        t = self.state.open_ticket(fault)
        if t is None:
            t = self.state.create_ticket(fault, "escalation", device, None, title, body, now, escalation=True)
            self.state.audit(now, f"escalated {device}", str(body["likely_common_cause"]), mode=self.settings.mode,
                             finding_id=fid, ticket_id=t.id)  # fmt: skip
        else:
            t = self.state.update_ticket(t.id, now, body=body, title=title, recurrence=True)
        return t

    def _evidence(self, f: Finding) -> JsonDict:
        out: JsonDict = {"detector": f.evidence}
        if f.port is not None:
            out["this_end"] = {"port": f"{f.device}:{f.port}", **self.view.evidence(f.device, f.port)}
            peer = self.fabric.peer(f.device, f.port)
            if peer is not None:
                out["other_end"] = {"port": str(peer), **self.view.evidence(peer.device, peer.port)}
        return out

    async def _send(self, ticket: Ticket) -> None:
        if self._publish is not None:
            await self._publish(ticket)

    def _note(self, ticket_id: int | None, action: Action, text: str) -> Ticket | None:
        if not ticket_id:
            return None
        t = self.state.ticket(ticket_id)
        if t is None:
            return None
        body = dict(t.body)
        body["actions"] = [*body.get("actions", []), action_note(action, text)]
        body["status_note"] = text
        return self.state.update_ticket(t.id, self.clock(), body=body)

    # --- acting on switches ----------------------------------------------------------------------------------
    def _spawn(self, action: Action, resumed: bool = False) -> asyncio.Event:
        """Carry out a running action in the background (`idle()` waits for every one); the event is set once it is
        underway: its first step handed to the driver thread or the drain hook, queued behind another action on
        the same switch, or ended. `resumed`: a fabricd before this one began it (see `_open_and_set`)."""
        underway = self._underway[action.id] = asyncio.Event()
        # The token it runs under is the one of the leader that starts it, even if that leader is paused and wakes
        # up after a new one took over: then every write and switch call of it is refused.
        task: asyncio.Task[None] = asyncio.ensure_future(self._carry_out(action, resumed, self._token()))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
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
            self._mark_underway(action.id)

    def _fenced(self) -> str | None:
        return None if self._fence is None else self._fence()

    async def _carry_out_inner(self, action: Action, resumed: bool) -> None:
        try:
            if (why := self._fenced()) is not None:
                raise _Fenced(why)
            await (self._disable(action, resumed) if action.op == "disable" else self._enable(action, resumed))
        except (_Fenced, FencedError) as e:
            # Nothing written: the action stays `running` in the shared state and the leader's reconcile resumes it.
            log.warning("action %d (%s %s:%s) left to the leader: %s", action.id, action.op, action.device,
                        action.port, e)  # fmt: skip
            if isinstance(e, FencedError):
                self._on_fenced(str(e))
        except Exception as e:
            log.exception("action %d (%s %s:%s) failed unexpectedly", action.id, action.op, action.device, action.port)
            current = self.state.action(action.id) or action
            if current.status != "running":
                return  # it ended before the error (the error came from the paperwork after it)
            ep = f"{action.device}:{action.port}"
            text = (
                f"could not {'enable' if action.op == 'enable' else 'disable'} {ep}: internal error "
                f"({type(e).__name__}: {e}); the switch's revert timer undoes a half-committed change; see the log"
            )
            self._finish(current, "failed", text)
            t = self._note(current.ticket_id, self.state.action(action.id) or current, text)
            if t is not None:
                await self._send(t)

    async def idle(self) -> None:
        """Wait until every action in flight has finished (tests, shutdown)."""
        while self._tasks:
            await asyncio.gather(*list(self._tasks), return_exceptions=True)

    async def _blocking(self, fn: Callable[[*Ts], R], *args: *Ts) -> R:
        """A blocking driver call in the executor (the event loop never waits on a switch)."""
        return await asyncio.get_running_loop().run_in_executor(self.executor, fn, *args)

    async def _disable(self, action: Action, resumed: bool) -> None:
        ep = Endpoint(action.device, action.port)
        drained = await self._drain(ep, action.reason, action.id)  # draining a node twice is harmless
        text = await self._set_admin(action, up=False, resumed=resumed)
        done = self.state.action(action.id) or action
        if drained:
            text = f"{drained}; {text}"
        t = self._note(done.ticket_id, done, text)
        if t is not None:
            await self._send(t)

    def _device_lock(self, device: str) -> asyncio.Lock:
        """The switch's lock: one transaction per switch at a time."""
        loop = asyncio.get_running_loop()
        if loop is not self._locks_loop:  # an asyncio.Lock belongs to the loop it first waited in
            self._device_locks, self._locks_loop = {}, loop
        return self._device_locks.setdefault(device, asyncio.Lock())

    async def _set_admin(self, action: Action, up: bool, resumed: bool) -> str:
        """Commit the change under a revert timer, watch telemetry, confirm or roll back; returns what happened."""
        ep, verb = Endpoint(action.device, action.port), ("enable" if up else "disable")
        lock = self._device_lock(ep.device)
        if lock.locked():
            self._mark_underway(action.id)  # queued behind another action on this switch
        async with lock:
            return await self._transaction(action, ep, up, verb, resumed)

    async def _transaction(self, action: Action, ep: Endpoint, up: bool, verb: str, resumed: bool) -> str:
        session: Session | None = None
        await self._await_fence()  # checked before every switch call
        fenced_out = failed = False
        try:
            # Connect and commit in one trip to the driver thread: each hop back to a busy loop costs latency.
            mark = None if up else self._mark(action)
            token = FENCE.get()
            clean: int | None = None  # end an older leader's transactions on the switch first (abort_stale)
            if token is not None:
                if resumed and action.token != token:
                    # An old leader began it. Its transaction is never taken over (its late confirm would still find
                    # it and commit it, and ours would then fail): it is ended with every other of an older token on
                    # the switch, and the step is done again under this leader's own token-named transaction.
                    action = self.state.retoken(action.id, token)
                    resumed, clean = False, token
                elif (token, ep.device) not in self._cleaned:  # once per switch per leadership term
                    clean = token
            # The description the mark goes beside, as the switch streams it: not read on the action path. An enable
            # reads the switch's own (the driver does, described None): a disable moments ago may not have been
            # streamed yet, and a mark left behind would say fabricd holds a port that is up.
            described = None if up else self.view.description(ep.device, ep.port)
            opened = asyncio.get_running_loop().run_in_executor(
                self.executor,
                partial(self._open_and_set, ep, up, action.switch_key, resumed, mark, clean, token, described),
            )
            self._mark_underway(action.id)  # connect-and-commit is in the driver thread now
            with self._commits.commit() if not up else contextlib.nullcontext():
                session, found = await opened
            if clean is not None:
                self._cleaned.add((clean, ep.device))
            committed = self.clock()
            seen = await self.view.wait_oper(ep.device, ep.port, up, self.settings.verify_timeout_s)
            await self._await_fence()  # a leader paused while it waited (SIGSTOP, a frozen VM) may not touch it
            if up and seen and found != "confirmed" and (wrong := await self._wrong_cable(ep, committed)):
                # Back from repair on the wrong cable (or on one LLDP does not confirm): it goes down again (the
                # revert), and the ticket says where.
                await self._await_fence()
                how = await self._blocking(settle, session, False)
                text = f"{wrong[0]}; {how}: {ep} stays down {wrong[1]} (then resolve the ticket again)"
                self._finish(action, "rolled_back", text)
                self._reopen(action, text)
                return text
            if found == "confirmed":
                # The fabricd before this one confirmed it on the switch and died before recording that.
                text = f"{verb}d {ep} (confirmed on the switch before a restart)"
                self._finish(action, "done", text)
                return text
            if not seen and not up:
                await self._await_fence()
                how = await self._blocking(settle, session, False)
                text = f"telemetry did not show {ep} down within {self.settings.verify_timeout_s:g} s; {how}"
                self._finish(action, "rolled_back", text)
                return text
            await self._commits.yield_to_commits()  # other ports still to go down go first (commits_first.py)
            await self._await_fence()
            await self._blocking(settle, session, True)
            text = f"{verb}d {ep}" + (
                "" if seen else f" (it did not come up within {self.settings.verify_timeout_s:g} s)"
            )
            self._finish(action, "done", text)
            return text
        except _Fenced:
            fenced_out = True
            raise
        except DriverError as e:
            failed = True
            if session is not None and self._fenced() is None:
                await self._blocking(settle, session, False)  # a failed rollback: the switch's timer reverts it
            text = f"could not {verb} {ep}: {e}"
            self._finish(action, "failed", text)
            return text
        finally:
            if session is not None:
                # A fenced leader lets go without a word to the switch; the new leader decides what it left. After a
                # failure the session is closed, not kept warm: the next action opens a new one.
                if fenced_out or self._fenced():
                    await self._blocking(session.abandon)
                else:
                    await self._blocking(session.close if failed else partial(self.actuator.release, session))

    async def _wrong_cable(self, ep: Endpoint, since: int) -> tuple[str, str] | None:
        """What is wrong with the cable on `ep` by LLDP (a sample after `since`) and until when the port stays down,
        or None: the intended neighbour, or a port LLDP is not expected on (a host that sends no LLDP: it cannot be
        judged, the repair is trusted). Where LLDP is expected, silence is not a confirmation: the neighbour of
        before the repair was deleted when the port went down (802.1AB), so only a fresh sample names the cable."""
        want = self.fabric.peer(ep.device, ep.port)
        if want is None:
            return None
        wait = min(self.settings.verify_timeout_s, 5.0)
        got = await self.view.lldp_neighbour(ep.device, ep.port, since, wait)
        if got is None:
            if not self.view.expects_lldp(ep.device, ep.port):
                return None
            problem = f"no LLDP neighbour heard on {ep} within {wait:g} s of it coming up (expected {want})"
            return problem, "until LLDP can confirm the cable (check the far end's LLDP and the cable)"
        if same_end(got, want):
            return None
        there = self.fabric.peer(got.device, got.port) if got.device in self.fabric else None
        where = f"; {got} belongs on {there}" if there is not None and there != ep else ""
        return f"{ep} came up facing {got}, not {want} as cabled in the blueprint{where}", "until the cable is moved"

    def _reopen(self, action: Action, text: str) -> None:
        """The repair left the port on the wrong cable: its ticket is open again (no retry re-enables it)."""
        if not action.ticket_id:
            return
        t = self.state.ticket(action.ticket_id)
        if t is not None and t.status != "open":
            self.state.update_ticket(t.id, self.clock(), reopen=True)
            self.state.audit(self.clock(), f"reopened ticket {t.id}", text, mode=action.mode, action_id=action.id,
                             ticket_id=t.id)  # fmt: skip

    def _may_call(self, token: int | None, deadline: float) -> bool:
        """Before a switch call: True if this instance may act now; False if it should ask again (a leader whose
        lease is merely close to its renewal waits for it until `deadline`); _Fenced if it lost the lease or a newer
        leader fenced it off."""
        why = self._fenced()
        if why is None:
            return True
        if token is None or self._token() != token or time.monotonic() >= deadline:
            raise _Fenced(why)
        return False

    def _check_fence(self, token: int | None = None) -> None:
        """`_may_call`, blocking: for the driver thread (FENCE is the event loop's, so the token is passed)."""
        token, deadline = FENCE.get() if token is None else token, time.monotonic() + FENCE_WAIT_S
        while not self._may_call(token, deadline):
            time.sleep(0.02)

    async def _await_fence(self) -> None:
        """`_may_call` for the event loop."""
        token, deadline = FENCE.get(), time.monotonic() + FENCE_WAIT_S
        while not self._may_call(token, deadline):
            await asyncio.sleep(0.02)

    def _mark(self, action: Action) -> Mark:
        """What the switch carries on a port fabricd shuts: this action, its ticket and the fault's kind."""
        t = self.state.ticket(action.ticket_id) if action.ticket_id else None
        planned = (action.key or "").startswith(MAINTENANCE_KEY)  # a drain's shut (maintenance_requests.py)
        return Mark(action.id, action.ticket_id, t.kind if t is not None else "maintenance" if planned else "fault")

    def _open_and_set(
        self, ep: Endpoint, up: bool, key: str, resumed: bool, mark: Mark | None = None, clean: int | None = None,
        token: int | None = None, described: str | None = None,
    ) -> tuple[Session, Resumed]:  # fmt: skip
        """Blocking: a session with the admin-state change committed under the revert timer (closed on failure),
        and what a fabricd before this one left of it on the switch. The switch's transaction is named by the
        action (`key`): a resumed action (a restart, not a new leader) first looks for it, and takes over a commit
        still pending under its timer (confirmed or rolled back like a new one) or one already confirmed, instead
        of committing again (EOS refuses a second commit timer; a SONiC timer left behind would revert the new
        commit). `clean`: end the transactions of leader tokens older than this one first. The fence is asked
        before every request to the switch (`Session.guard`), inside a confirm or a rollback too."""
        self._check_fence(token)  # before every switch call, in this thread too (FENCE is the loop's, not ours)
        session = self.actuator.connect(ep.device)
        session.guard = partial(self._check_fence, token)
        try:
            self._check_fence(token)  # the connect may have taken long (or the process was paused in it)
            if clean is not None:
                # A new leader ends what an old one left open on this switch (by the token in its names) before it
                # acts: a late command of the old leader then finds nothing to act on.
                ended = session.abort_stale(clean, ())
                if ended:
                    log.warning("%s: ended an old leader's transactions %s", ep.device, ", ".join(ended))
                    # Ending them reverted what they had committed, the old leader's mark too; telemetry may still
                    # stream that mark, and the driver, told the port already carries the mark it is to set, would
                    # leave the description out: the port shut unmarked. The switch's own description is read instead.
                    described = None
            found = session.resume(key) if resumed else "none"
            if found == "none":
                session.set_port_admin(
                    ep.port, up, self.settings.revert_in_s, key=key, mark=mark, description=described
                )
        except _Fenced:
            session.abandon()
            raise
        except BaseException:
            settle(session, keep=False)  # anything half-committed goes now (or with the switch's timer)
            session.close()
            raise
        return session, found

    async def remark(self, action: Action, old: Mark) -> str:
        """An adopted port's mark names the records it had before they were lost; the records are new: the switch
        is told the new numbers (the port's `shutdown` committed again with the new mark, under the revert timer and
        confirmed; nothing changes in its state), so the mark and the records agree again. Returns what happened."""
        ep = Endpoint(action.device, action.port)
        new = self._mark(action)
        if new == old:
            return ""
        text = await self._rewrite_mark(ep, action.switch_key, False, new)
        done = text is None
        text = text or f"re-marked {ep}: {old.text()} -> {new.text()}"
        if self.marks is not None and done:
            self.marks[ep] = PortMark(new, False)
        self.state.audit(self.clock(), f"re-mark {ep}", text, mode=action.mode, action_id=action.id,
                         ticket_id=action.ticket_id)  # fmt: skip
        return text

    async def unmark(self, ep: Endpoint, action_id: int, ticket_id: int | None) -> str:
        """A released hold's port is up (a person enabled it, or the switch came back without fabricd's change): its
        mark would say fabricd holds it down, and a later hand shutdown would be adopted as fabricd's. The mark is
        removed (`no shutdown` committed again with the description without it, under the revert timer and
        confirmed; the port's state does not change). Not in observe mode: fabricd touches no switch then."""
        if self.marks is not None and ep not in self.marks:
            return ""  # the switch showed no mark there (fabricd's own disables are added as they are done)
        if self.settings.mode == "observe":
            text = f"its mark stays on {ep} (mode observe: fabricd touches no switch)"
        else:
            a = self.state.action(action_id)
            key = f"{a.switch_key}_u" if a is not None else f"fabricd_u{self.clock() & 0xFFFFFFFF:08x}"
            failed = await self._rewrite_mark(ep, key, True, None)
            if failed is None and self.marks is not None:
                self.marks.pop(ep, None)
            text = failed or f"removed fabricd's mark from {ep}"
        self.state.audit(self.clock(), f"unmark {ep}", text, mode=self.settings.mode, action_id=action_id,
                         ticket_id=ticket_id)  # fmt: skip
        return text

    async def _rewrite_mark(self, ep: Endpoint, key: str, up: bool, mark: Mark | None) -> str | None:
        """Commit the port's present admin state again with its description's mark set (`mark`) or removed (None),
        under the revert timer, and confirm it. None when done, else why not."""
        token = FENCE.get()

        def blocking() -> None:
            session, _ = self._open_and_set(ep, up, key, False, mark, None, token, None)
            try:
                settle(session, True)
            except BaseException:
                settle(session, False)
                session.close()
                raise
            self.actuator.release(session)

        async with self._device_lock(ep.device):
            try:
                await self._await_fence()
                await self._blocking(blocking)
            except (DriverError, _Fenced) as e:
                return f"could not rewrite fabricd's mark on {ep} ({e}); the switch keeps the one it has"
        return None

    def _finish(self, action: Action, status: ActionStatus, text: str) -> None:
        now = self.clock()
        # The port's new state (held down, or back up on probation) is recorded with the status, atomically.
        action = self.state.finish_action(action.id, status, now, text, now + int(self.settings.probation_s * NS))
        if status == "done" and action.op == "enable" and self.marks is not None:
            self.marks.pop(Endpoint(action.device, action.port), None)  # the enable removed the mark
        elif status == "done" and action.op == "disable" and self.marks is not None:
            self.marks[Endpoint(action.device, action.port)] = PortMark(self._mark(action), False)  # it wrote one
        self.state.audit(now, f"{action.op} {action.device}:{action.port}: {status}", text, mode=action.mode,
                         finding_id=action.finding_id, action_id=action.id, ticket_id=action.ticket_id)  # fmt: skip
        (log.info if status == "done" else log.warning)("action %d: %s", action.id, text)

    async def _drain(self, ep: Endpoint, reason: str, action_id: int) -> str:
        """Run the node-drain hook for a server-facing port; returns a note for the ticket ('' if none)."""
        hook = self.settings.drain_hook
        peer = self.fabric.peer(ep.device, ep.port)
        node = self.fabric.get(peer.device) if peer is not None else None
        if not hook or node is None or node.role is not Role.SERVER:
            return ""
        values = {k: _inert(v) for k, v in (("node", node.name), ("reason", reason), ("device", ep.device),
                                               ("port", ep.port))}  # fmt: skip
        argv = [a.format(**values) for a in shlex.split(hook)]
        try:
            proc = await asyncio.create_subprocess_exec(
                *argv, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT
            )
            self._mark_underway(action_id)  # the drain hook runs; the switch comes after it
        except OSError as e:
            return f"drain hook for {node.name} failed ({type(e).__name__}: {e})"
        try:
            out, _ = await asyncio.wait_for(proc.communicate(), self.settings.drain_timeout_s)
        except TimeoutError:
            proc.kill()  # not left running behind us
            await proc.wait()
            return f"drain hook for {node.name} did not finish within {self.settings.drain_timeout_s:g} s; killed it"
        tail = out.decode(errors="replace").strip()[-200:]
        if proc.returncode:
            return f"drain hook for {node.name} exited {proc.returncode}: {tail}"
        return f"drained {node.name}"

    async def _enable(self, action: Action, resumed: bool) -> None:
        text = await self._set_admin(action, up=True, resumed=resumed)
        done = self.state.action(action.id)
        t = self._note(action.ticket_id, done or action, text)
        if t is not None:
            await self._send(t)


def _inert(text: str) -> str:
    """A value safe inside any quoting a hook template may use (`sh -c '... reason="{reason}"'` included): the
    finding's summary has `<->`, `>` and parentheses, which a shell would read as redirections and subshells."""
    return re.sub(r"[^\w .,:/=+@%-]", "_", text.replace("<->", "--").replace(">", "gt"))
