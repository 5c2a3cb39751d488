"""Where repair tickets go: the built-in SQLite list, a webhook, or Jira. See `base.TicketBackend`."""

from .backends import make_backend
from .base import TicketBackend, TicketError

__all__ = ["TicketBackend", "TicketError", "make_backend"]
