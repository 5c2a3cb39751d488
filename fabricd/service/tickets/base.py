"""The ticket backend contract. The state store is always the source of truth; a backend mirrors tickets out
(`publish`, idempotent: the same ticket version twice is one change) and reports which ones people closed
there (`resolved`). Backends are blocking; the service calls them from worker threads."""

from __future__ import annotations

from typing import Protocol

from topology.errors import FabricdError

from ..state import Ticket


class TicketError(FabricdError):
    """A ticket could not be delivered; the service keeps it and retries at the next sync."""


class TicketBackend(Protocol):
    name: str

    def publish(self, ticket: Ticket) -> str | None:
        """Create or update the ticket outside; returns its external reference (None for the built-in list)."""
        ...

    def resolved(self, tickets: list[Ticket]) -> list[int]:
        """Ids of open tickets that were resolved outside fabricd."""
        ...


class SqliteBackend:
    """The built-in list: tickets live in the state store; people list and resolve them through CLI and API."""

    name = "sqlite"

    def publish(self, ticket: Ticket) -> str | None:
        return None

    def resolved(self, tickets: list[Ticket]) -> list[int]:
        return []
