"""The ticket backend contract. The state store is always the source of truth; a backend mirrors tickets out
(`publish`, idempotent: the same ticket version twice is one change) and reports which ones people closed
there (`resolved`). Backends are blocking; the service calls them from worker threads.

A leader hands tickets over under its fence: `publish` asks `guard` before every request that changes something
outside (it raises TicketError when this instance may no longer act), and each such request carries a key the
other side sees (the webhook's Idempotency-Key, the Jira issue's label and comment marker), so a request that was
already in flight when an old leader was paused is one change with the new leader's."""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

from topology.errors import FabricdError

from ..state import Ticket


class TicketError(FabricdError):
    """A ticket could not be delivered; the service keeps it and retries at the next sync."""


class TicketBackend(Protocol):
    name: str

    def publish(self, ticket: Ticket, guard: Callable[[], None] | None = None) -> str | None:
        """Create or update the ticket outside; returns its external reference (None for the built-in list).
        `guard` is asked before every request that changes something outside."""
        ...

    def resolved(self, tickets: list[Ticket]) -> list[int]:
        """Ids of open tickets that were resolved outside fabricd."""
        ...


class SqliteBackend:
    """The built-in list: tickets live in the state store; people list and resolve them through CLI and API."""

    name = "sqlite"

    def publish(self, ticket: Ticket, guard: Callable[[], None] | None = None) -> str | None:
        return None

    def resolved(self, tickets: list[Ticket]) -> list[int]:
        return []
