"""Where repair tickets go: the built-in SQLite list, a webhook, or Jira. See `base.TicketBackend`."""

from .base import TicketBackend, TicketError, make_backend

__all__ = ["TicketBackend", "TicketError", "make_backend"]
