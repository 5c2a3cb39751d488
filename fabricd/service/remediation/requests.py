"""What people ask of remediation: approve or reject a proposed action, change the mode, resolve a ticket (the
repair is done: its ports come back, on probation, through port_actions.py), release a hold. Every request is
refused on a standby (`Fence.leader_only`), runs under the decision lock with the leader's fencing token, and is
audited with its user."""

from __future__ import annotations

from collections.abc import Callable
from typing import Literal

from topology.model import Endpoint

from ..cabling_check import miscabled_on
from ..decide import enable_key
from ..maintenance.plan import ACTIVE
from ..reconcile import Hold
from ..state import PORT_OPS, Action, Ticket, fenced
from .context import Context
from .errors import ActionError, UnknownIdError
from .holds import Holds
from .paperwork import Paperwork
from .port_actions import PortActions
from .reconciler import Reconciler

Mode = Literal["observe", "approve", "auto"]


class Requests:
    def __init__(
        self, ctx: Context, holds: Holds, actions: PortActions, reconciler: Reconciler, paper: Paperwork
    ) -> None:
        self.ctx, self.holds, self.actions, self.reconciler, self.paper = ctx, holds, actions, reconciler, paper
        self.state = ctx.state
        # who runs an approved action of another op than a port's (`tune`: the tuning loop, service/tuning/)
        self.spawners: dict[str, Callable[[Action], None]] = {}

    async def approve(self, action_id: int, actor: str) -> Action:
        self.ctx.fence.leader_only()
        with fenced(self.ctx.fence.token()):
            return await self._approve(action_id, actor)

    def _proposed(self, action_id: int) -> Action:
        """The action a person approves or rejects: it exists and still awaits approval."""
        a = self.state.actions.get(action_id)
        if a is None:
            raise UnknownIdError(f"no action {action_id}; list them with `fabricd actions`")
        if a.status != "awaiting_approval":
            raise ActionError(f"action {action_id} is {a.status}, not awaiting approval")
        return a

    async def _approve(self, action_id: int, actor: str) -> Action:
        async with self.ctx.lock:
            a = self._proposed(action_id)
            if a.op not in PORT_OPS:  # no port goes down: the guard has nothing to say; its own loop runs it
                spawn = self.spawners.get(a.op)
                if spawn is None:
                    raise ActionError(f"action {action_id} ({a.op}) cannot run here: its loop is off (tuning.enabled)")
                now = self.ctx.clock()
                a = self.state.actions.set_status(a.id, "running", now, detail=f"approved by {actor}")
                self.state.audit.record(now, f"approved action {a.id}", a.reason, mode=a.mode, actor=actor,
                                        action_id=a.id)  # fmt: skip
                spawn(a)
                return a
            v = self.holds.guard(Endpoint(a.device, a.port))  # the fabric may have changed since it was proposed
            now = self.ctx.clock()
            if not v.allowed:
                a = self.state.actions.set_status(
                    a.id, "refused", now, detail=f"guard ({v.rule}) at approval: {v.reason}"
                )
                self.state.audit.record(now, f"approval of action {a.id} refused", v.reason, mode=a.mode, actor=actor,
                                        action_id=a.id)  # fmt: skip
                t = self.paper.note_action(a.ticket_id, a, f"approved by {actor} but the guard refused: {v.reason}")
                await self.paper.send_if(t)
                return a
            a = self.state.actions.set_status(a.id, "running", now, detail=f"approved by {actor}")
            self.state.audit.record(now, f"approved action {a.id}", a.reason, mode=a.mode, actor=actor, action_id=a.id)
            self.actions.spawn(a)
            return a

    @property
    def mode(self) -> str:
        return self.ctx.settings.mode

    async def set_mode(self, mode: Mode, actor: str, why: str) -> str:
        """Change the remediation mode now (e.g. observe during an incident or maintenance); it is written to the
        state so a restart keeps it, and audited. Actions already running finish; proposals wait as they are."""
        self.ctx.fence.leader_only()
        with fenced(self.ctx.fence.token()):
            async with self.ctx.lock:
                self.ctx.settings = self.ctx.settings.model_copy(update={"mode": mode})
                self.state.mode.set(mode, actor, why.strip() or "no reason given", self.ctx.clock())
                return mode

    async def reject(self, action_id: int, actor: str, reason: str) -> Action:
        """A person says no to a proposed action: it is cancelled (never run), with who and why on the ticket."""
        self.ctx.fence.leader_only()
        with fenced(self.ctx.fence.token()):
            async with self.ctx.lock:
                a = self._proposed(action_id)
                now = self.ctx.clock()
                why = reason.strip() or "no reason given"
                a = self.state.actions.set_status(a.id, "cancelled", now, detail=f"rejected by {actor}: {why}")
                self.state.audit.record(now, f"rejected action {a.id}", why, mode=a.mode, actor=actor, action_id=a.id)
                await self.paper.send_if(self.paper.note_action(a.ticket_id, a, f"rejected by {actor}: {why}"))
                return a

    async def resolve(self, ticket_id: int, actor: str) -> Ticket:
        """The repair is done: close the ticket, bring back the ports it held down, start their probation."""
        self.ctx.fence.leader_only()
        with fenced(self.ctx.fence.token()):
            return await self._resolve(ticket_id, actor)

    async def _resolve(self, ticket_id: int, actor: str) -> Ticket:
        async with self.ctx.lock:
            t = self.state.tickets.get(ticket_id)
            if t is None:
                raise UnknownIdError(f"no ticket {ticket_id}; list them with `fabricd tickets`")
            now = self.ctx.clock()
            self._refuse_if_miscabled(t, now, actor)
            if t.status == "open":
                t = self.state.tickets.resolve(ticket_id, now, actor) or t
                self.state.audit.record(now, f"resolved ticket {t.id}", f"by {actor}", actor=actor, ticket_id=t.id)
            for port_ticket in self._covered(t, now, actor):
                self._bring_back(port_ticket.id, now, f"{actor} (escalation {t.id})")
                await self.paper.send(port_ticket)
            self._bring_back(ticket_id, now, actor)
            return t

    async def release_hold(self, port: Endpoint, actor: str, reason: str) -> str:
        """A person gives up fabricd's hold on a port that is up again (one the guard would not let fabricd take down
        again, or any other): fabricd stops re-applying it; audited, noted on its ticket. A port still down is
        brought back by resolving its ticket, not by this."""
        self.ctx.fence.leader_only()
        with fenced(self.ctx.fence.token()):
            async with self.ctx.lock:
                held = {Endpoint(p["device"], p["port"]): p for p in self.state.holds.all()}
                p = held.get(port)
                if p is None:
                    raise UnknownIdError(f"fabricd holds no hold on {port}; list them with `fabricd status`")
                if port not in self.holds.stale_holds():
                    drain = next((d for d in self.state.drains.all(ACTIVE) if str(port) in d.ports), None)
                    if drain is not None:  # a maintenance hold: its way back is the undrain
                        raise ActionError(f"{port} is down and held by drain {drain.id} ({drain.kind} {drain.target}):"
                                          f" `fabricd undrain {drain.target}` brings it back")  # fmt: skip
                    ticket = p["ticket_id"] or "-"
                    raise ActionError(
                        f"{port} is down and held by fabricd (ticket {ticket}): resolve the ticket to bring it back"
                    )
                why = f"released by {actor}: {reason.strip() or 'no reason given'}"
                await self.reconciler.release(Hold.of(p), why, self.ctx.clock(), actor)
                return why

    def _refuse_if_miscabled(self, t: Ticket, now: int, actor: str) -> None:
        """A port the resolve would bring back whose cable the miscabled detector sees elsewhere (an open finding):
        the repair is not done; nothing changes, and the person is told which cable goes where. (A cable the
        detector has not seen yet is caught by the enable's own LLDP check.)"""
        named = {*t.body.get("faulty_ports", []), *t.body.get("held_down_by_fabricd", [])} if t.escalation else set()
        back = [
            Endpoint(p["device"], p["port"])
            for p in self.state.holds.all()
            if p["ticket_id"] == t.id or (p["device"] == t.device and p["port"] in named)
        ]
        if not back:
            return
        findings = [f for f in self.state.findings.all("active", limit=100_000) if f.get("kind") == "miscabled"]
        for ep in back:
            f = miscabled_on(self.ctx.fabric, ep, findings)
            if f is None:
                continue
            fix = str(f.get("evidence", {}).get("fix", "")) or "move the cable to where the blueprint has it"
            why = (
                f"ticket {t.id} stays open: {ep} is miscabled (finding {f.get('id')}: {f.get('summary')}); {fix}, "
                "then resolve again (the finding clears seconds after LLDP hears the right cable)"
            )
            self.state.audit.record(now, f"refused resolving ticket {t.id}", why, actor=actor, ticket_id=t.id)
            raise ActionError(why)

    def _covered(self, esc: Ticket, now: int, actor: str) -> list[Ticket]:
        """An escalation's repair (the line card, the switch) is the repair of the ports it names: resolve the open
        tickets of those ports fabricd holds down, so they come back too."""
        if not esc.escalation:
            return []
        named = {*esc.body.get("faulty_ports", []), *esc.body.get("held_down_by_fabricd", [])}
        out = []
        for p in self.state.holds.all():
            if p["device"] != esc.device or p["port"] not in named or not p["ticket_id"]:
                continue
            pt = self.state.tickets.get(p["ticket_id"])
            if pt is None or pt.status != "open" or pt.id == esc.id:
                continue
            by = f"{actor} (escalation {esc.id})"
            pt = self.state.tickets.resolve(pt.id, now, by) or pt
            self.state.audit.record(
                now, f"resolved ticket {pt.id}", f"with escalation {esc.id}, by {actor}", actor=actor, ticket_id=pt.id
            )
            out.append(pt)
        return out

    def _bring_back(self, ticket_id: int, now: int, actor: str) -> None:
        """Cancel what still waits for approval under the ticket and re-enable the ports it holds down."""
        for a in self.state.actions.with_status("awaiting_approval"):
            if a.ticket_id == ticket_id:
                self.state.actions.set_status(a.id, "cancelled", now, detail=f"ticket resolved by {actor}")
        for p in self.state.holds.all():
            if p["ticket_id"] != ticket_id:
                continue
            mode = self.ctx.settings.mode
            with self.state.transaction():
                if self.state.actions.open_on(p["device"], p["port"]) is not None:
                    continue  # its enable is already under way (a second resolve, a retry)
                held_for = self.state.actions.get(p["action_id"])
                if held_for is not None and held_for.finding_id is not None:
                    # The port comes back on probation: a flap from now on is a new incident, judged (decide
                    # re-disables it and reopens the ticket), not a refresh of the one it was held for.
                    self.state.findings.close(held_for.finding_id, now)
                tries = self.state.actions.count(p["device"], p["port"], "enable", after_id=p["action_id"])
                why = f"ticket {ticket_id} resolved by {actor}"
                a = self.state.actions.add("enable", p["device"], p["port"], mode, "running", why, now,
                                           ticket_id=ticket_id, key=enable_key(p["device"], p["port"], p["action_id"],
                                                                              tries + 1))  # fmt: skip
            self.actions.spawn(a)
