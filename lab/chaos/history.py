"""What the checker observed: one `Sample` a second of every switch port (EOS read over eAPI, SONiC over SSH) and of
fabricd's holds and open tickets (its REST API), and at the end fabricd's actions, findings and audit ids, the twin's
fault log and what the chaos run did itself (`Event`). Times are unix seconds. Plain data, written to history.jsonl."""

from __future__ import annotations

import json
import re
from dataclasses import asdict, dataclass, field
from pathlib import Path
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

    @property
    def mark_kind(self) -> str | None:
        """The fault's kind fabricd's mark names (`maintenance` for a drain's shut), None without a mark."""
        m = MARK.search(self.description)
        return m.group(3) if m else None


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
    # holds fabricd says it will take down again once its guard allows (GET /api/v1/health `to_reapply`): up, marked
    # and held by design (issue 42), not a disagreement of marks and records
    to_reapply: frozenset[str] = frozenset()


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
class TuneRec:
    """One change of fabricd's tuning ledger (GET /api/v1/tuning/history?changes=true), as the run ended."""

    id: int
    subject: str  # device:port or device:group
    status: str  # awaiting_approval, applying, verifying, rolling_back, confirmed, rolled_back, refused
    action_id: int | None
    created_s: float
    applied_s: float | None
    ended_s: float | None
    changes: tuple[tuple[str, int, int], ...] = ()  # (knob, before, after), knobs named as the intent's fields


@dataclass(frozen=True)
class Limits:
    min_uplink_fraction: float = 0.75
    max_down_per_switch: int = 2
    max_down_per_rail: int = 4
    max_down_fabric: int = 8
    max_actions_per_hour: int = 10
    # fabricd's tuning.revert_in_s: a push resumed after a kill or failover waits this long for the old leader's
    # revert timer before it runs again (docs/tuning.md), so a change may stay `applying` as long after its start
    tuning_revert_s: float = 300.0


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
    tuning: list[TuneRec] = field(default_factory=list)  # with tuning on in fabricd (a run with --workload)
    workloads: list[str] = field(default_factory=list)  # the twin's workloads the run started
    # after the settle, the ECN values each tuned port's switch runs (EOS running config; knob -> value)
    running: dict[str, dict[str, int]] = field(default_factory=dict)


# --- on disk: history.jsonl (a sample a line, written as the run goes) and run.json (the rest, at the end) ---------
def sample_doc(s: Sample) -> dict[str, Any]:
    return {
        "t": s.t,
        "unreachable": sorted(s.unreachable),
        "ports": {p: [o.admin_up, o.oper_up, o.description, o.neighbor, o.bgp_up] for p, o in s.ports.items()},
        "held": None if s.held is None else {p: [h.action_id, h.ticket_id, h.since_s] for p, h in s.held.items()},
        "open_tickets": None if s.open_tickets is None else sorted(s.open_tickets),
        "to_reapply": sorted(s.to_reapply),
    }


def sample_of(doc: dict[str, Any]) -> Sample:
    held = doc["held"]
    return Sample(
        doc["t"],
        {p: PortObs(*o) for p, o in doc["ports"].items()},
        frozenset(doc["unreachable"]),
        None if held is None else {p: Hold(*h) for p, h in held.items()},
        None if doc["open_tickets"] is None else frozenset(doc["open_tickets"]),
        frozenset(doc.get("to_reapply", ())),
    )


def run_doc(run: Run, limits: Limits) -> dict[str, Any]:
    return {
        "seed": run.seed, "start_s": run.start_s, "schedule_end_s": run.schedule_end_s, "settled_s": run.settled_s,
        "actions": [asdict(a) for a in run.actions], "findings": [asdict(f) for f in run.findings],
        "faults": [asdict(f) for f in run.faults], "events": [asdict(e) for e in run.events],
        "audit_ids": run.audit_ids, "audited_actions": sorted(run.audited_actions), "limits": asdict(limits),
        "tuning": [asdict(t) for t in run.tuning], "workloads": run.workloads, "running": run.running,
    }  # fmt: skip


def load_run(folder: Path) -> tuple[Run, Limits]:
    """A finished run from its report folder, to check again (`fabricd lab chaos --recheck DIR`)."""
    doc = json.loads((folder / "run.json").read_text())
    run = Run(doc["seed"], doc["start_s"], doc["schedule_end_s"], doc["settled_s"])
    run.samples = [sample_of(json.loads(line)) for line in (folder / "history.jsonl").read_text().splitlines()]
    run.actions = [ActionRec(**a) for a in doc["actions"]]
    run.findings = [FindingRec(**{**f, "ports": tuple(f["ports"]), "devices": tuple(f["devices"])})
                    for f in doc["findings"]]  # fmt: skip
    run.faults = [FaultRec(**{**f, "ports": tuple(f["ports"]), "devices": tuple(f["devices"])}) for f in doc["faults"]]
    run.events = [Event(**e) for e in doc["events"]]
    run.audit_ids = doc["audit_ids"]
    run.audited_actions = set(doc["audited_actions"])
    run.tuning = [TuneRec(**{**t, "changes": tuple(tuple(c) for c in t.get("changes", ()))})
                  for t in doc.get("tuning", [])]  # fmt: skip  # runs saved before tuning was collected have none
    run.workloads = doc.get("workloads", [])
    run.running = doc.get("running", {})
    return run, Limits(**doc["limits"])
