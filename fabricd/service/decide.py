"""What remediation does about a new incident: a pure function of what is known when it is decided.

`decide()` takes the finding, what the state says of the port fabricd would act on (`PortFacts`), the guard's input
and the settings, and returns a `Decision`: no action, refuse (with the guard's rule), observe, wait for approval or
disable now, and whether the switch has so many faulty ports that people get one escalation instead. The ticket
bodies are pure too (`new_ticket`, `recurrence`, `escalation`). `Incidents` gathers the facts, calls these
and writes the result in one state transaction (`remediation/incidents.py`); nothing here touches a socket, a file or
a clock.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass
from typing import Literal

from fabricd.detectors.finding import Finding
from topology.fabric import Fabric
from topology.jsontypes import JsonDict, JsonValue
from topology.model import Endpoint

from .config import RemediationSettings, SafetyLimits
from .faults import LINK_KINDS, common_cause
from .guard import GuardInput, Verdict, check_disable
from .state import Action, ActionStatus, Ticket

BUDGET_RULES = ("switch_budget", "rail_budget", "fabric_budget", "rate")
MAX_OCCURRENCES = 20  # kept in a ticket body; older ones are counted, not listed
UNWATCHED_NOTE = "flapped while fabricd was not watching; it is stable now: not taken down; watch it"


@dataclass(frozen=True)
class PortFacts:
    """What the state says of the port fabricd would act on, when the incident is decided."""

    target: Endpoint | None  # the port fabricd would shut (None: not a link fault, or neither end is managed)
    held: bool = False  # fabricd holds it down already
    up_again: bool = False  # held, but up again (a reboot, a hand-typed `no shutdown`): its hold is to re-apply
    pending: Action | None = None  # an action on it still awaiting approval or running
    # Ports of the target's switch fabricd wanted down in the last hour (acted, proposed, refused) or holds down.
    faulty_on_switch: tuple[str, ...] = ()


@dataclass(frozen=True)
class NewAction:
    """A disable action to record (its id comes from the state)."""

    status: ActionStatus  # refused | observed | awaiting_approval | running
    mode: str  # the mode it was decided in (approve when a protected job forced a person's decision in auto)
    reason: str
    audit_what: str
    audit_why: str
    key: str  # idempotency key: one disable per port and finding


Outcome = Literal["ignore", "ticket", "pending", "refuse", "observe", "approve", "disable"]


@dataclass(frozen=True)
class Decision:
    outcome: Outcome
    note: str  # the ticket's status note: what fabricd did and why
    verdict: Verdict | None = None
    action: NewAction | None = None  # a new action to record
    escalate: tuple[str, ...] = ()  # the switch's faulty ports, when a budget refused and too many are faulty


def ignored(
    f: Finding, fabric: Fabric, stale: Collection[str], held: Collection[Endpoint], up_again: Collection[Endpoint]
) -> bool:
    """A finding not even recorded: on stale data, or a link fault at a port fabricd holds down (the echo of its own
    shutdown). A held port that is up again (a reboot, a hand-typed `no shutdown`; its hold is to re-apply) is not
    down: its flaps are real (chaos seed 3136: such a port flapped, and no finding came until the hold went)."""
    if f.device in stale:
        return True
    if f.kind in LINK_KINDS and f.port is not None:
        ends = {Endpoint(f.device, f.port)}
        peer = fabric.peer(f.device, f.port)
        if peer is not None:
            ends.add(peer)
        return any(e in held and e not in up_again for e in ends)
    return False


def disable_key(target: Endpoint, finding_id: int) -> str:
    return f"disable:{target}:finding{finding_id}"


def enable_key(device: str, port: str, disable_action_id: int, attempt: int) -> str:
    """The n-th try to bring back a port taken down by action `disable_action_id` (a failed enable is retried)."""
    return f"enable:{device}:{port}:after{disable_action_id}:try{attempt}"


def decide(
    f: Finding,
    finding_id: int,
    facts: PortFacts,
    *,
    fabric: Fabric,
    limits: SafetyLimits,
    settings: RemediationSettings,
    known: GuardInput,
) -> Decision:
    target = facts.target
    if target is not None and facts.held and facts.up_again:
        # Its flaps are real (the port is up), not the echo of our shutdown: noted on the hold's open ticket. The
        # hold itself is re-applied by reconcile as soon as the guard allows: no second disable from here.
        return Decision("ticket", f"{target} is held under its open ticket but up again: this fault is noted; fabricd "
                                  "takes it down again as soon as the guard allows")  # fmt: skip
    if target is not None and facts.held:
        return Decision("ignore", "the port is down because of fabricd: leftover noise, not a new fault")
    if "unwatched" in f.evidence:
        # Counted over a time fabricd was not watching (link_flap_unwatched.py): the flap is over and the link is
        # stable now; taking it down would cut a working link for a past fault. People are told; a flap that goes
        # on is found by link_flap as it streams, and decided as usual.
        return Decision("ticket", UNWATCHED_NOTE)
    if f.kind not in LINK_KINDS or f.kind not in settings.kinds:
        return Decision("ticket", "no automatic action for this kind of fault; see the evidence")
    if target is None:
        return Decision(
            "ticket", "no action: neither end of the link is a switch fabricd manages (not in the inventory)"
        )
    if facts.pending is not None:
        return Decision("pending", f"action {facts.pending.id} on {target} is already {facts.pending.status}")
    v = check_disable(fabric, limits, target, known)
    key = disable_key(target, finding_id)
    mode = settings.mode
    if not v.allowed:
        note = f"no action: the safety guard refused to disable {target}: {v.reason}; escalated to people"
        refused = NewAction("refused", mode, v.reason, f"refused to disable {target}", f"guard ({v.rule}): {v.reason}",
                            key)  # fmt: skip
        faulty = sorted({*facts.faulty_on_switch, target.port})
        escalate = tuple(faulty) if v.rule in BUDGET_RULES and len(faulty) > limits.max_down_per_switch else ()
        return Decision("refuse", note, v, refused, escalate)
    why = f"{f.kind} on {target}: {f.summary}"
    if f.jobs:
        why += f" (jobs: {', '.join(j.name for j in f.jobs)})"
    protected = [j for j in f.jobs if j.priority is not None and j.priority in settings.approve_for_priority]
    if mode == "auto" and protected:
        mode = "approve"  # a person decides for a port under a protected job
        names = ", ".join(f"{j.name} (priority {j.priority})" for j in protected)
        why = f"{why}; carries {names}: approval required (remediation.approve_for_priority)"
    if mode == "observe":
        note = f"observe mode: fabricd would disable {target} (guard allows: {v.reason}); nothing was changed"
        return Decision("observe", note, v, NewAction("observed", mode, why, f"would disable {target}", why, key))
    if mode == "approve":
        held = f" (it carries {', '.join(j.name for j in protected)})" if protected else ""
        # The action's id is known once recorded: the note names it through {action_id}.
        note = f"waiting for approval: run `fabricd approve {{action_id}}` to disable {target}{held}"
        what = f"disable {target}: awaiting_approval"
        return Decision("approve", note, v, NewAction("awaiting_approval", mode, why, what, why, key))
    what = f"disable {target}: running"
    return Decision("disable", f"disabling {target} (action {{action_id}})", v,
                    NewAction("running", mode, why, what, why, key))  # fmt: skip


# --- ticket bodies ----------------------------------------------------------------------------------------------
def action_note(action: Action, text: str) -> JsonDict:
    return {"action_id": action.id, "op": action.op, "port": f"{action.device}:{action.port}",
            "status": action.status, "mode": action.mode, "note": text}  # fmt: skip


def _occurrence(f: Finding, finding_id: int) -> JsonDict:
    return {"finding_id": finding_id, "detected_ts": f.detected_ts, "summary": f.summary}


def new_ticket(
    f: Finding, finding_id: int, fault: str, note: str, action: Action | None, evidence: JsonDict
) -> tuple[str, JsonDict]:
    """(title, body) of the first ticket of a fault."""
    body: JsonDict = {
        "fault": fault,
        "device": f.device,
        "port": f.port,
        "finding": f.to_dict(),
        "evidence": evidence,
        "likely_repair": f.evidence.get("repair") or f.evidence.get("likely_repair"),
        "jobs": [j.to_dict() for j in f.jobs],
        "occurrences": [_occurrence(f, finding_id)],
        "occurrence_count": 1,
        "actions": [action_note(action, note)] if action is not None else [],
        "status_note": note,
    }
    title = f"{f.kind.replace('_', ' ')} on {f.device}:{f.port}" if f.port else f"{f.kind} on {f.device}"
    if f.jobs:
        title += f" (jobs: {', '.join(j.name for j in f.jobs[:3])}{', ...' if len(f.jobs) > 3 else ''})"
    return title, body


def recurrence(
    t: Ticket, f: Finding, finding_id: int, note: str, action: Action | None, evidence: JsonDict, reopened: bool
) -> JsonDict:
    """The body of a fault's ticket after one more occurrence (reopened: it came back during probation)."""
    body: JsonDict = dict(t.body)
    body["finding"] = f.to_dict()
    body["evidence"] = evidence
    body["jobs"] = [j.to_dict() for j in f.jobs]
    body["occurrences"] = [*_list(body, "occurrences"), _occurrence(f, finding_id)][-MAX_OCCURRENCES:]
    count = body.get("occurrence_count")
    body["occurrence_count"] = (count if isinstance(count, int) else 1) + 1
    body["status_note"] = ("recurred during probation after repair; " if reopened else "") + note
    if action is not None:
        body["actions"] = [*_list(body, "actions"), action_note(action, note)]
    return body


def _list(body: JsonDict, key: str) -> list[JsonValue]:
    """A list field of a stored ticket body (empty when missing or not a list: a body edited by hand)."""
    value = body.get(key)
    return value if isinstance(value, list) else []


def escalation(device: str, ports: Sequence[str], held: Sequence[str], f: Finding, note: str) -> tuple[str, JsonDict]:
    """(title, body) of the one ticket for a switch with more faulty ports than fabricd may take down."""
    cause = common_cause(device, list(ports))
    body: JsonDict = {
        "fault": f"escalation:{device}",
        "device": device,
        "faulty_ports": list[JsonValue](ports),
        "held_down_by_fabricd": list[JsonValue](sorted(held)),
        "likely_common_cause": cause,
        "why_no_more_actions": note,
        "latest_finding": f.to_dict(),
    }
    return f"{len(ports)} faulty ports on {device}: likely {cause.split(':')[0]}", body
