"""The tickets section: where tickets go (fabricd's own state, a webhook, Jira)."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, field_validator

from .base import SecretRef, _service_url, _Strict


class WebhookSettings(_Strict):
    url: str
    token: SecretRef | None = None
    retries: int = Field(5, ge=0, le=20)
    timeout_s: float = Field(5.0, gt=0)

    _url = field_validator("url")(_service_url)


class JiraSettings(_Strict):
    url: str
    project: str
    username: str
    token: SecretRef
    issue_type: str = "Task"
    done_statuses: list[str] = ["Done", "Resolved", "Closed"]  # noqa: RUF012 (a pydantic field)

    _url = field_validator("url")(_service_url)


class TicketSettings(_Strict):
    backend: Literal["sqlite", "webhook", "jira"] = "sqlite"
    webhook: WebhookSettings | None = None
    jira: JiraSettings | None = None
    sync_interval_s: float = Field(60.0, gt=0)
