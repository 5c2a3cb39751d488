"""What the state store holds and how it guards its writes: the record types (findings, tickets, actions, tokens,
held ports, audit entries) as the store returns them and the API documents them, the fencing token a leader's
writes are conditional on (`fenced`), and whether the store can be written (`WriteHealth`). The store is state.py."""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import JsonValue
from typing_extensions import TypedDict  # pydantic reads these for the API (api_models): before 3.12, this one

log = logging.getLogger("fabricd.state")


# The fencing token the current task writes under (HA): every transaction first checks that the state still names
# this token as the leader's, so an old leader that wakes from a pause writes nothing (FencedError). Set by
# remediation for the work it does as leader (`fenced`); None (the default) writes unchecked: a single instance,
# a standby's page login, `fabricd token`.
FENCE: ContextVar[int | None] = ContextVar("fabricd_fence", default=None)


@contextmanager
def fenced(token: int | None) -> Iterator[None]:
    """Every state write inside is conditional on `token` still being the leader's (None: unconditional)."""
    reset = FENCE.set(token)
    try:
        yield
    finally:
        FENCE.reset(reset)


# An action's life: proposed (observe) | awaiting_approval -> running -> done | failed | rolled_back; refused.
# What an action goes through: proposed (awaiting_approval in approve mode, observed in observe mode, refused by the
# guard), running (on the switch now; approval moves it here), then done, failed, rolled_back or cancelled.
DrainKind = Literal["switch", "link", "port"]  # what a drain takes out of service (maintenance.py)
ActionStatus = Literal[
    "awaiting_approval", "running", "done", "failed", "rolled_back", "refused", "observed", "cancelled"
]
OPEN_ACTION: tuple[ActionStatus, ...] = ("awaiting_approval", "running")


class JobRefDoc(TypedDict):
    id: str
    name: str
    priority: str | None
    gpus: int


class StoredFinding(TypedDict, total=False):
    """A finding as the store keeps it (docs/formats.md), with its row id, incident key, status and last sighting.
    Not total: rows written by older releases lack fields added since (`jobs`, `priority`)."""

    id: int
    fault: str
    status: str  # active | cleared
    last_seen_ts: int
    kind: str
    device: str
    port: str | None
    priority: int | None
    devices: list[str]
    ports: list[str]
    start_ts: int
    detected_ts: int
    severity: str
    confidence: float
    evidence: dict[str, JsonValue]
    summary: str
    jobs: list[JobRefDoc]


class DisabledPort(TypedDict):
    device: str
    port: str
    action_id: int
    ticket_id: int | None
    since_ts: int


class RefusedReapply(TypedDict):
    """A hold whose port is up again, whose re-apply the guard refused (reconcile_steps.py): shared, so every
    instance's health lists it and a new leader does not audit and note the same refusal again."""

    device: str
    port: str
    action_id: int  # the hold's action: a hold replaced since leaves this refusal behind
    rule: str
    reason: str
    since_ts: int


class AuditEntry(TypedDict):
    id: int
    ts: int
    what: str
    why: str
    mode: str | None
    actor: str
    finding_id: int | None
    action_id: int | None
    ticket_id: int | None


@dataclass(frozen=True)
class Ticket:
    id: int
    fault: str
    kind: str
    device: str
    port: str | None
    status: str
    title: str
    body: dict[str, Any]
    escalation: bool
    recurrences: int
    external_ref: str | None
    created_ts: int
    updated_ts: int
    resolved_ts: int | None
    resolved_by: str | None
    synced_ts: int | None = None  # when the ticket backend last took this version

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


@dataclass(frozen=True)
class ApiToken:
    """A user's API token as stored: never the token, only its hash (which to_dict leaves out too)."""

    id: int
    user: str
    role: str
    created_ts: int
    created_by: str
    revoked_ts: int | None

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


@dataclass(frozen=True)
class Action:
    id: int
    op: str  # disable | enable
    device: str
    port: str
    mode: str
    status: ActionStatus
    reason: str
    finding_id: int | None
    ticket_id: int | None
    created_ts: int
    updated_ts: int
    detail: str
    # What makes the action unique (`disable:<device>:<port>:finding<id>`, `enable:<device>:<port>:after<id>`):
    # deciding the same thing twice (a retry, a restart, a second leader) finds the first one instead of adding one.
    key: str | None = None
    token: int | None = None  # HA: the fencing token of the leader that began it (named in its switch transaction)

    @property
    def switch_key(self) -> str:
        """The name of its transaction on the switch (an EOS config session, a SONiC checkpoint): a fabricd that
        dies between commit and confirm finds its own pending commit again by this name."""
        # The id alone repeats across state databases (a new deployment, a lab rebuilt, one test after another on
        # one twin), and EOS keeps a completed session's name: the creation time's low bits tell them apart.
        # With a leader, its token comes first: a new leader sees an old leader's transaction by its name and ends it
        # before acting (Session.abort_stale), so a late command of an old leader finds nothing to act on.
        lead = "" if self.token is None else f"t{self.token}_"
        return f"fabricd_{lead}a{self.id}_{self.created_ts & 0xFFFFFFFF:08x}"

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


@dataclass(frozen=True)
class DrainRecord:
    """A planned maintenance (maintenance.py): its steps as planned, how many are done (each recorded before the
    next is taken: a restart or a new leader resumes at `done`), and who asked, why and until when."""

    id: int
    kind: DrainKind
    target: str
    ports: list[str]  # device:port, the ports out of service
    reason: str
    actor: str
    shut: bool
    until_ts: int | None
    state: str  # maintenance.DrainState
    steps: list[str]  # "<name>: <text>", as planned
    done: int
    detail: str
    created_ts: int
    updated_ts: int

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


class WriteHealth:
    """Whether the state can be written: a write that fails makes the service `failing` (health, the
    fabricd_state_writable metric and its alert) and observe-only, since fabricd acts only with its state written;
    the failure is logged once a minute, not once per write."""

    LOG_EVERY_S = 60.0

    def __init__(self) -> None:
        self.failures = 0
        self.failing_since: float | None = None
        self.last_error = ""
        self._logged = -1e18

    @property
    def failing(self) -> bool:
        return self.failing_since is not None

    def failed(self, e: BaseException) -> None:
        self.failures += 1
        self.last_error = str(e)
        mono = time.monotonic()
        if self.failing_since is None:
            self.failing_since = mono
        if mono - self._logged >= self.LOG_EVERY_S:
            self._logged = mono
            log.error("state cannot be written (%d failed writes so far): %s; fabricd takes no action until it can",
                      self.failures, e)  # fmt: skip

    def ok(self) -> None:
        if self.failing_since is not None:
            log.warning("state can be written again after %d failed writes", self.failures)
        self.failing_since = None
