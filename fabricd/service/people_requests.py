"""What people ask of remediation: approve or reject a proposed action, change the mode, resolve a ticket (the
repair is done: its ports come back, on probation). A part of `Remediator` (remediation.py), which it is mixed into:
it uses the remediator's state, guard, tickets and action spawning; every request is refused on a standby."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Literal

from topology.errors import FabricdError
from topology.fabric import Fabric
from topology.model import Endpoint

from .cabling_check import miscabled_on
from .config import RemediationSettings
from .decide import enable_key
from .guard import Verdict
from .reconcile import Hold
from .state import Action, DisabledPort, StateStore, Ticket, fenced


class ActionError(FabricdError):
    """An approve/resolve request that cannot be carried out now (the action is in the wrong state)."""


class UnknownIdError(ActionError):
    """No action or ticket has that id."""


class StandbyError(FabricdError):
    """This instance is a standby (or was fenced off): the leader acts; send the request there."""


class PeopleRequests:
    if TYPE_CHECKING:  # what the remediator provides
        fabric: Fabric
        state: StateStore
        settings: RemediationSettings
        clock: Callable[[], int]
        _lock: asyncio.Lock
        _token: Callable[[], int | None]

        def _spawn(self, action: Action, resumed: bool = False) -> asyncio.Event: ...
        def _guard(self, target: Endpoint) -> Verdict: ...
        def _note(self, ticket_id: int | None, action: Action, text: str) -> Ticket | None: ...
        def _send(self, ticket: Ticket) -> Awaitable[None]: ...
        def _fenced(self) -> str | None: ...
        def stale_holds(self, disabled: list[DisabledPort] | None = None) -> set[Endpoint]: ...
        async def _release(self, h: Hold, why: str, now: int, actor: str = "fabricd") -> None: ...

    def _leader_only(self) -> None:
        if (why := self._fenced()) is not None:
            raise StandbyError(f"this fabricd does not act now: {why}; send the request to the leader")

    async def approve(self, action_id: int, actor: str) -> Action:
        self._leader_only()
        with fenced(self._token()):
            return await self._approve(action_id, actor)

    def _proposed(self, action_id: int) -> Action:
        """The action a person approves or rejects: it exists and still awaits approval."""
        a = self.state.action(action_id)
        if a is None:
            raise UnknownIdError(f"no action {action_id}; list them with `fabricd actions`")
        if a.status != "awaiting_approval":
            raise ActionError(f"action {action_id} is {a.status}, not awaiting approval")
        return a

    async def _approve(self, action_id: int, actor: str) -> Action:
        async with self._lock:
            a = self._proposed(action_id)
            v = self._guard(Endpoint(a.device, a.port))  # the fabric may have changed since it was proposed
            now = self.clock()
            if not v.allowed:
                a = self.state.set_action(a.id, "refused", now, detail=f"guard ({v.rule}) at approval: {v.reason}")
                self.state.audit(now, f"approval of action {a.id} refused", v.reason, mode=a.mode, actor=actor,
                                 action_id=a.id)  # fmt: skip
                t = self._note(a.ticket_id, a, f"approved by {actor} but the guard refused: {v.reason}")
                if t is not None:
                    await self._send(t)
                return a
            a = self.state.set_action(a.id, "running", now, detail=f"approved by {actor}")
            self.state.audit(now, f"approved action {a.id}", a.reason, mode=a.mode, actor=actor, action_id=a.id)
            self._spawn(a)
            return a

    @property
    def mode(self) -> str:
        return self.settings.mode

    async def set_mode(self, mode: Literal["observe", "approve", "auto"], actor: str, why: str) -> str:
        """Change the remediation mode now (e.g. observe during an incident or maintenance); it is written to the
        state so a restart keeps it, and audited. Actions already running finish; proposals wait as they are."""
        self._leader_only()
        with fenced(self._token()):
            return await self._set_mode(mode, actor, why)

    async def _set_mode(self, mode: Literal["observe", "approve", "auto"], actor: str, why: str) -> str:
        async with self._lock:
            self.settings = self.settings.model_copy(update={"mode": mode})
            self.state.set_mode(mode, actor, why.strip() or "no reason given", self.clock())
            return mode

    async def reject(self, action_id: int, actor: str, reason: str) -> Action:
        """A person says no to a proposed action: it is cancelled (never run), with who and why on the ticket."""
        self._leader_only()
        with fenced(self._token()):
            return await self._reject(action_id, actor, reason)

    async def _reject(self, action_id: int, actor: str, reason: str) -> Action:
        async with self._lock:
            a = self._proposed(action_id)
            now = self.clock()
            why = reason.strip() or "no reason given"
            a = self.state.set_action(a.id, "cancelled", now, detail=f"rejected by {actor}: {why}")
            self.state.audit(now, f"rejected action {a.id}", why, mode=a.mode, actor=actor, action_id=a.id)
            t = self._note(a.ticket_id, a, f"rejected by {actor}: {why}")
            if t is not None:
                await self._send(t)
            return a

    async def resolve(self, ticket_id: int, actor: str) -> Ticket:
        """The repair is done: close the ticket, bring back the ports it held down, start their probation."""
        self._leader_only()
        with fenced(self._token()):
            return await self._resolve(ticket_id, actor)

    async def _resolve(self, ticket_id: int, actor: str) -> Ticket:
        async with self._lock:
            t = self.state.ticket(ticket_id)
            if t is None:
                raise UnknownIdError(f"no ticket {ticket_id}; list them with `fabricd tickets`")
            now = self.clock()
            self._refuse_if_miscabled(t, now, actor)
            if t.status == "open":
                t = self.state.resolve_ticket(ticket_id, now, actor) or t
                self.state.audit(now, f"resolved ticket {t.id}", f"by {actor}", actor=actor, ticket_id=t.id)
            for port_ticket in self._covered(t, now, actor):
                self._bring_back(port_ticket.id, now, f"{actor} (escalation {t.id})")
                await self._send(port_ticket)
            self._bring_back(ticket_id, now, actor)
            return t

    async def release_hold(self, port: Endpoint, actor: str, reason: str) -> str:
        """A person gives up fabricd's hold on a port that is up again (one the guard would not let fabricd take down
        again, or any other): fabricd stops re-applying it; audited, noted on its ticket. A port still down is
        brought back by resolving its ticket, not by this."""
        self._leader_only()
        with fenced(self._token()):
            async with self._lock:
                held = {Endpoint(p["device"], p["port"]): p for p in self.state.disabled_ports()}
                p = held.get(port)
                if p is None:
                    raise UnknownIdError(f"fabricd holds no hold on {port}; list them with `fabricd status`")
                if port not in self.stale_holds():
                    ticket = p["ticket_id"] or "-"
                    raise ActionError(
                        f"{port} is down and held by fabricd (ticket {ticket}): resolve the ticket to bring it back"
                    )
                why = f"released by {actor}: {reason.strip() or 'no reason given'}"
                await self._release(Hold.of(p), why, self.clock(), actor)
                return why

    def _refuse_if_miscabled(self, t: Ticket, now: int, actor: str) -> None:
        """A port the resolve would bring back whose cable the miscabled detector sees elsewhere (an open finding):
        the repair is not done; nothing changes, and the person is told which cable goes where. (A cable the
        detector has not seen yet is caught by the enable's own LLDP check.)"""
        named = {*t.body.get("faulty_ports", []), *t.body.get("held_down_by_fabricd", [])} if t.escalation else set()
        back = [
            Endpoint(p["device"], p["port"])
            for p in self.state.disabled_ports()
            if p["ticket_id"] == t.id or (p["device"] == t.device and p["port"] in named)
        ]
        if not back:
            return
        findings = [f for f in self.state.findings("active", limit=100_000) if f.get("kind") == "miscabled"]
        for ep in back:
            f = miscabled_on(self.fabric, ep, findings)
            if f is None:
                continue
            fix = str(f.get("evidence", {}).get("fix", "")) or "move the cable to where the blueprint has it"
            why = (
                f"ticket {t.id} stays open: {ep} is miscabled (finding {f.get('id')}: {f.get('summary')}); {fix}, "
                "then resolve again (the finding clears seconds after LLDP hears the right cable)"
            )
            self.state.audit(now, f"refused resolving ticket {t.id}", why, actor=actor, ticket_id=t.id)
            raise ActionError(why)

    def _covered(self, esc: Ticket, now: int, actor: str) -> list[Ticket]:
        """An escalation's repair (the line card, the switch) is the repair of the ports it names: resolve the open
        tickets of those ports fabricd holds down, so they come back too."""
        if not esc.escalation:
            return []
        named = {*esc.body.get("faulty_ports", []), *esc.body.get("held_down_by_fabricd", [])}
        out = []
        for p in self.state.disabled_ports():
            if p["device"] != esc.device or p["port"] not in named or not p["ticket_id"]:
                continue
            pt = self.state.ticket(p["ticket_id"])
            if pt is None or pt.status != "open" or pt.id == esc.id:
                continue
            by = f"{actor} (escalation {esc.id})"
            pt = self.state.resolve_ticket(pt.id, now, by) or pt
            self.state.audit(now, f"resolved ticket {pt.id}", f"with escalation {esc.id}, by {actor}", actor=actor,
                             ticket_id=pt.id)  # fmt: skip
            out.append(pt)
        return out

    def _bring_back(self, ticket_id: int, now: int, actor: str) -> None:
        """Cancel what still waits for approval under the ticket and re-enable the ports it holds down."""
        for a in self.state.actions_in("awaiting_approval"):
            if a.ticket_id == ticket_id:
                self.state.set_action(a.id, "cancelled", now, detail=f"ticket resolved by {actor}")
        for p in self.state.disabled_ports():
            if p["ticket_id"] != ticket_id:
                continue
            with self.state.tx():
                if self.state.open_action(p["device"], p["port"]) is not None:
                    continue  # its enable is already under way (a second resolve, a retry)
                tries = self.state.count_actions(p["device"], p["port"], "enable", after_id=p["action_id"])
                why = f"ticket {ticket_id} resolved by {actor}"
                a = self.state.add_action("enable", p["device"], p["port"], self.settings.mode, "running", why, now,
                                          ticket_id=ticket_id, key=enable_key(p["device"], p["port"], p["action_id"],
                                                                              tries + 1))  # fmt: skip
            self._spawn(a)
