"""The ticket backend the configuration asks for (its module is imported only when it is the one configured)."""

from __future__ import annotations

from pathlib import Path

from ..config import TicketSettings, read_secret
from .base import SqliteBackend, TicketBackend


def make_backend(settings: TicketSettings, source: Path | None) -> TicketBackend:
    if settings.backend == "webhook":
        from .webhook import WebhookBackend

        assert settings.webhook is not None  # load_config refuses a webhook backend without its section
        hook = settings.webhook
        token = None if hook.token is None else read_secret(hook.token, "tickets.webhook.token", source)
        return WebhookBackend(hook.url, token, retries=hook.retries, timeout_s=hook.timeout_s)
    if settings.backend == "jira":
        from .jira_backend import JiraBackend

        assert settings.jira is not None
        j = settings.jira
        return JiraBackend(j, read_secret(j.token, "tickets.jira.token", source))
    return SqliteBackend()
