"""The shapes of the API's answers: OpenAPI documents them (/openapi.json, /docs), and FastAPI serializes every
answer through its shape, so a field the docs do not name never leaks out. Actions, tickets and tokens are the state
store's own dataclasses; stored findings are a finding's `to_dict()` plus what the store adds."""

from __future__ import annotations

from dataclasses import dataclass

from pydantic import BaseModel

from ..state import Action, ApiToken, AuditEntry, DisabledPort, DrainRecord, StoredFinding, Ticket


class Findings(BaseModel):
    findings: list[StoredFinding]


class Actions(BaseModel):
    actions: list[Action]


class Tickets(BaseModel):
    tickets: list[Ticket]


class DisabledPorts(BaseModel):
    ports: list[DisabledPort]


class Audit(BaseModel):
    audit: list[AuditEntry]


class ModeSet(BaseModel):
    mode: str
    by: str


class HoldReleased(BaseModel):
    port: str
    note: str


class Tokens(BaseModel):
    tokens: list[ApiToken]


@dataclass(frozen=True)
class CreatedToken(ApiToken):
    """The new token's row and the token itself: the only place it is ever shown."""

    token: str


class Revoked(BaseModel):
    revoked: int


class Maintenance(BaseModel):
    maintenance: list[DrainRecord]
    overran: list[int]  # ids of active drains past their --until ("maintenance overran"; never ended by fabricd)


class DrainPlanned(BaseModel):
    steps: list[str]
    dry_run: bool
    drain: DrainRecord | None
    jobs: list[str]  # the training jobs whose traffic the drained ports carry (the job map)
