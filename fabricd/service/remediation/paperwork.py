"""What remediation writes on its tickets as it goes (each action's step, a reason, a reopening) and hands to the
ticket backend (`publish`, the daemon's: tickets/)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from ..decide import action_note
from ..state import Action, Ticket
from .context import Context


class Paperwork:
    def __init__(self, ctx: Context, publish: Callable[[Ticket], Awaitable[None]] | None = None) -> None:
        self.ctx = ctx
        self.state = ctx.state
        self.publish = publish

    async def send(self, ticket: Ticket) -> None:
        if self.publish is not None:
            await self.publish(ticket)

    async def send_if(self, ticket: Ticket | None) -> None:
        if ticket is not None:
            await self.send(ticket)

    def note_action(self, ticket_id: int | None, action: Action, text: str) -> Ticket | None:
        """The action's step on its ticket (its list of actions, and the status note)."""
        if not ticket_id:
            return None
        t = self.state.tickets.get(ticket_id)
        if t is None:
            return None
        body = dict(t.body)
        body["actions"] = [*body.get("actions", []), action_note(action, text)]
        body["status_note"] = text
        return self.state.tickets.update(t.id, self.ctx.clock(), body=body)

    def note(self, ticket_id: int | None, why: str, now: int) -> None:
        """A reason on the ticket (a hold released, a re-apply refused), not handed to the backend here."""
        if ticket_id:
            t = self.state.tickets.get(ticket_id)
            if t is not None:
                body = {**t.body, "status_note": why, "notes": [*t.body.get("notes", []), why]}
                self.state.tickets.update(t.id, now, body=body)

    def reopen(self, action: Action, text: str) -> None:
        """The repair left the port on the wrong cable: its ticket is open again (no retry re-enables it)."""
        if not action.ticket_id:
            return
        now = self.ctx.clock
        t = self.state.tickets.get(action.ticket_id)
        if t is not None and t.status != "open":
            self.state.tickets.update(t.id, now(), reopen=True)
            self.state.audit.record(now(), f"reopened ticket {t.id}", text, mode=action.mode, action_id=action.id,
                        ticket_id=t.id)  # fmt: skip
