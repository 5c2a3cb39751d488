"""Tickets as JSON POSTs to a webhook (PagerDuty/Opsgenie bridges, chat ops, a ticketing gateway).

Each delivery carries an `Idempotency-Key` of ticket id + version, so a retry after a lost response is one
change on the receiving side. 5xx, 429 and network errors are retried with exponential backoff; 4xx is not
(the receiver refused the content, retrying cannot help).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

import httpx
from pydantic import SecretStr

from fabricd.backoff import Backoff

from ..state import Ticket
from .base import TicketError

log = logging.getLogger("fabricd.tickets.webhook")


class WebhookBackend:
    name = "webhook"

    def __init__(
        self,
        url: str,
        token: SecretStr | None,
        *,
        retries: int = 5,
        timeout_s: float = 5.0,
        backoff_s: float = 0.5,
        sleep: Callable[[float], None] = time.sleep,
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        self.url = url
        self._token = token
        self.retries = retries
        self.backoff_s = backoff_s
        self._sleep = sleep
        self._client = httpx.Client(timeout=timeout_s, transport=transport)

    def publish(self, ticket: Ticket, guard: Callable[[], None] | None = None) -> str | None:
        headers = {"Idempotency-Key": f"fabricd-ticket-{ticket.id}-{ticket.updated_ts}"}
        if self._token is not None:
            headers["Authorization"] = f"Bearer {self._token.get_secret_value()}"
        payload = {"source": "fabricd", "ticket": ticket.to_dict()}
        problem = ""
        backoff = Backoff(self.backoff_s, max(self.backoff_s, 30.0), jitter=False)
        for attempt in range(self.retries + 1):
            if attempt:
                self._sleep(backoff.next())
            if guard is not None:
                guard()  # before every attempt: a leader fenced off during a backoff sends nothing more
            try:
                r = self._client.post(self.url, json=payload, headers=headers)
            except httpx.HTTPError as e:
                problem = f"{type(e).__name__}"  # the exception text may carry the URL's credentials
                continue
            if r.status_code < 300:
                return f"webhook:{ticket.id}"
            problem = f"HTTP {r.status_code}"
            if r.status_code < 500 and r.status_code != 429:
                break
        raise TicketError(f"webhook {_safe(self.url)}: ticket {ticket.id} not delivered ({problem}); will retry")

    def resolved(self, tickets: list[Ticket]) -> list[int]:
        return []  # a webhook is one-way; people resolve through fabricd's CLI or API


def _safe(url: str) -> str:
    """The URL without user:password@ or a query string (tokens hide in both)."""
    u = httpx.URL(url)
    return str(u.copy_with(username=None, password=None, query=None))
