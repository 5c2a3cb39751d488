"""What the state holds: the record types (findings, tickets, actions, tokens, held ports, audit entries, drains) as
the repositories return them and the API documents them."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from pydantic import JsonValue
from typing_extensions import TypedDict  # pydantic reads these for the API (api_models): before 3.12, this one

# An action's life: proposed (observe) | awaiting_approval -> running -> done | failed | rolled_back; refused.
# What an action goes through: proposed (awaiting_approval in approve mode, observed in observe mode, refused by the
# guard), running (on the switch now; approval moves it here), then done, failed, rolled_back or cancelled.
DrainKind = Literal["switch", "link", "port"]  # what a drain takes out of service (maintenance.py)
ActionStatus = Literal[
    "awaiting_approval", "running", "done", "failed", "rolled_back", "refused", "observed", "cancelled"
]
OPEN_ACTION: tuple[ActionStatus, ...] = ("awaiting_approval", "running")
# Who carries an action out, by its op: a port's admin state is remediation's (its port actions, resumed by its
# reconciler after a restart or a takeover, judged by the guard at approval); a tuning change is the tuning loop's
# (service/tuning/: it finishes its own from the tuning ledger, over its verify window).
PORT_OPS = frozenset({"disable", "enable"})
TUNING_OPS = frozenset({"tune"})
OPS = PORT_OPS | TUNING_OPS


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
    """A hold whose port is up again, whose re-apply the guard refused (remediation/reconciler.py): shared, so every
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
    op: str  # disable | enable (a port's admin state) | tune (a tuning change, state/tuning.py)
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
