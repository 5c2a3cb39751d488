"""What the checker observed: one `Sample` a second of every switch port (read over eAPI) and of fabricd's holds
and open tickets (its REST API), and at the end fabricd's actions, findings and audit ids, the twin's fault log and
what the chaos run did itself (`Event`). Times are unix seconds. Plain data, written to history.jsonl."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

# The mark fabricd writes on a port it shuts (docs/operations.md, "The mark"): `[fabricd: down a12 t7 link_flap]`.
MARK = re.compile(r"\[fabricd: down a(\d+) t(\d+|-) ([a-z_]+)\]\s*$")


def has_mark(description: str) -> bool:
    return MARK.search(description) is not None


@dataclass(frozen=True)
class PortObs:
    admin_up: bool
    oper_up: bool
    description: str = ""
    neighbor: str | None = None  # LLDP: device:port, None when none is learnt
    bgp_up: bool | None = None  # None: no BGP session on the port

    @property
    def marked(self) -> bool:
        return has_mark(self.description)


@dataclass(frozen=True)
class Hold:
    action_id: int
    ticket_id: int | None
    since_s: float


@dataclass(frozen=True)
class Sample:
    t: float
    ports: dict[str, PortObs]  # device:port -> what its switch says (switches that did not answer are absent)
    unreachable: frozenset[str] = frozenset()  # switches that did not answer this second
    held: dict[str, Hold] | None = None  # GET /api/v1/ports/disabled; None: the API did not answer
    open_tickets: frozenset[int] | None = None


@dataclass(frozen=True)
class ActionRec:
    id: int
    op: str
    port: str
    status: str
    finding_id: int | None
    ticket_id: int | None
    created_s: float
    updated_s: float
    key: str | None = None


@dataclass(frozen=True)
class FindingRec:
    id: int
    kind: str
    device: str
    ports: tuple[str, ...]  # device:port
    devices: tuple[str, ...]
    detected_s: float
    last_seen_s: float


@dataclass(frozen=True)
class FaultRec:
    id: str  # the twin's id, prefixed by the twin's incarnation when it was restarted (r1.f3)
    kind: str
    ports: tuple[str, ...]
    devices: tuple[str, ...]
    start_s: float
    cleared_s: float | None
    params: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Event:
    """What the chaos run did besides the twin's faults: operator actions, process faults, repairs."""

    t: float
    what: str  # operator | process | repair
    kind: str
    where: str = ""
    detail: str = ""
    end_s: float | None = None  # a pause's or a hand-shut's end


@dataclass(frozen=True)
class Limits:
    min_uplink_fraction: float = 0.75
    max_down_per_switch: int = 2
    max_down_per_rail: int = 4
    max_down_fabric: int = 8
    max_actions_per_hour: int = 10


@dataclass
class Run:
    seed: int
    start_s: float
    schedule_end_s: float  # the schedule's last step
    settled_s: float = 0.0  # faults cleared and tickets resolved after the schedule: convergence counts from here
    samples: list[Sample] = field(default_factory=list)
    actions: list[ActionRec] = field(default_factory=list)
    findings: list[FindingRec] = field(default_factory=list)
    faults: list[FaultRec] = field(default_factory=list)
    events: list[Event] = field(default_factory=list)
    audit_ids: list[int] = field(default_factory=list)
    audited_actions: set[int] = field(default_factory=set)
