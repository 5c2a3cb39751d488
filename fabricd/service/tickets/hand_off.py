"""A ticket handed to the backend (tickets/): one hand-off of a ticket at a time, fenced like every write of the
leader, recorded as synced only while the state still names this leader's token."""

from __future__ import annotations

import asyncio
import logging
from concurrent.futures import Executor
from functools import partial

from ..ha import HaRole
from ..state import StateStore, Ticket, fenced
from ..state.db import FencedError
from .base import TicketBackend, TicketError

log = logging.getLogger("fabricd.service")


class TicketHandOff:
    def __init__(self, state: StateStore, backend: TicketBackend, pool: Executor, ha: HaRole) -> None:
        self.state, self.backend, self.pool, self.ha = state, backend, pool, ha
        self._handing: dict[int, tuple[asyncio.Lock, list[int]]] = {}  # ticket id -> its hand-off lock, callers

    async def publish(self, ticket: Ticket) -> None:
        """Hand the ticket's current version to the backend; on failure the sync job retries it. As a leader, under
        its fence: asked before every request the backend sends (tickets/base.py), and the hand-off recorded only
        while the state still names this leader's token; a woken old leader sends and records nothing more.
        One hand-off of a ticket at a time: a second caller (a takeover's sync beside the scheduled one, both
        having read the ticket unsynced) waits and sends nothing if the first one delivered that version."""
        held = self._handing.setdefault(ticket.id, (asyncio.Lock(), [0]))
        held[1][0] += 1
        try:
            async with held[0]:
                done = self.state.tickets.get(ticket.id)
                if done is not None and done.synced_ts is not None and done.synced_ts >= ticket.updated_ts:
                    return
                await self._hand_off(ticket)
        finally:
            held[1][0] -= 1
            if held[1][0] == 0:
                del self._handing[ticket.id]

    async def _hand_off(self, ticket: Ticket) -> None:
        token = self.ha.token()
        try:
            if self.backend.name != "sqlite":
                guard = partial(self._ticket_guard, token)
                guard()
                ref = await asyncio.get_running_loop().run_in_executor(
                    self.pool, partial(self.backend.publish, ticket, guard)
                )
            else:
                ref = None
            with fenced(token):
                self.state.tickets.mark_synced(ticket.id, ticket.updated_ts, ref)
        except TicketError as e:
            log.warning("%s", e)
        except FencedError as e:
            self.ha.fenced_out(str(e))

    def _ticket_guard(self, token: int | None) -> None:
        """Before a ticket backend's request: TicketError if this instance may no longer act under `token`."""
        why = self.ha.fence()
        if why is None and self.ha.leadership is not None and self.ha.leadership.token != token:
            why = f"the lease changed hands since this hand-off began (token {token})"
        if why is not None:
            raise TicketError(f"ticket hand-off stopped: {why}")
