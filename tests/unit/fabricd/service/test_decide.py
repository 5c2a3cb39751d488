"""decide(): the remediation rules as a table of cases. Pure: no state file, no event loop, no switch."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

import pytest

from fabricd.detectors.finding import JobRef
from fabricd.service.config import RemediationSettings, SafetyLimits
from fabricd.service.decide import (
    UNWATCHED_NOTE,
    Decision,
    PortFacts,
    decide,
    disable_key,
    enable_key,
    escalation,
    ignored,
    recurrence,
)
from fabricd.service.guard import GuardInput
from fabricd.service.state import Action, Ticket
from topology.fabric import Fabric
from topology.model import Endpoint

from .harness import SERVER_PORT, T0, flap

PEER = Endpoint("gpu-g0-000", "nic0")
PENDING = Action(3, "disable", "leaf-g0-r0", "Ethernet1/1", "approve", "awaiting_approval", "flap", 1, 1, T0, T0, "")
NOTHING = GuardInput(frozenset(), frozenset(), 0)
PLAIN = PortFacts(SERVER_PORT)


@dataclass(frozen=True)
class Case:
    name: str
    outcome: str
    status: str | None = None  # of the new action
    mode: str = "auto"
    facts: PortFacts = PLAIN
    known: GuardInput = NOTHING
    kind: str = "link_flap"
    jobs: tuple[JobRef, ...] = ()
    settings: dict[str, Any] = field(default_factory=dict)
    rule: str | None = None  # the guard rule that refused
    escalate: tuple[str, ...] = ()
    note: str = ""  # a piece of the ticket's status note
    action_mode: str | None = None
    evidence: dict[str, Any] | None = None  # the finding's (None: a flap link_flap saw as it streamed)


HELD_ELSEWHERE = GuardInput(frozenset({Endpoint("leaf-g0-r0", "Ethernet2/1"), Endpoint("leaf-g0-r0", "Ethernet3/1")}),
                            frozenset(), 2)  # fmt: skip
TRAINING = JobRef("j1", "llama-train", "production", 512)
UNWATCHED = {"unwatched": {"from_ts": T0, "to_ts": T0 + 60 * 10**9, "transitions": 16}, "flaps": 8}

CASES = [
    Case("held down by fabricd: leftover noise", "ignore", facts=PortFacts(SERVER_PORT, held=True),
         note="down because of fabricd"),
    Case("held, but up again (to re-apply): a real fault, noted", "ticket",
         facts=PortFacts(SERVER_PORT, held=True, up_again=True), note="held under its open ticket but up again"),
    Case("a kind without port action", "ticket", kind="pfc_storm", note="no automatic action for this kind"),
    Case("a link kind switched off in the settings", "ticket", settings={"kinds": ["link_corruption"]},
         note="no automatic action"),
    Case("neither end managed", "ticket", facts=PortFacts(None), note="neither end of the link is a switch"),
    Case("an action already pending on the port", "pending", facts=PortFacts(SERVER_PORT, pending=PENDING),
         note="action 3 on leaf-g0-r0:Ethernet1/1 is already awaiting_approval"),
    Case("guard: the other end is held down", "refuse", "refused",
         known=GuardInput(frozenset({PEER}), frozenset(), 1), rule="redundancy", note="safety guard refused"),
    Case("guard: switch budget, 2 faulty ports: no escalation", "refuse", "refused", known=HELD_ELSEWHERE,
         rule="switch_budget", facts=PortFacts(SERVER_PORT, faulty_on_switch=("Ethernet2/1",))),
    Case("guard: switch budget, 3 faulty ports: escalate", "refuse", "refused", known=HELD_ELSEWHERE,
         rule="switch_budget", facts=PortFacts(SERVER_PORT, faulty_on_switch=("Ethernet2/1", "Ethernet3/1")),
         escalate=("Ethernet1/1", "Ethernet2/1", "Ethernet3/1")),
    Case("guard: rate limit", "refuse", "refused", known=GuardInput(frozenset(), frozenset(), 10), rule="rate"),
    Case("observe mode", "observe", "observed", mode="observe", note="observe mode: fabricd would disable"),
    Case("approve mode", "approve", "awaiting_approval", mode="approve",
         note="run `fabricd approve {action_id}` to disable leaf-g0-r0:Ethernet1/1"),
    Case("auto mode", "disable", "running", note="disabling leaf-g0-r0:Ethernet1/1 (action {action_id})"),
    Case("auto, a protected job on the port: a person decides", "approve", "awaiting_approval", jobs=(TRAINING,),
         settings={"approve_for_priority": ["production"]}, note="(it carries llama-train)", action_mode="approve"),
    Case("auto, a job of another priority", "disable", "running", jobs=(replace(TRAINING, priority="batch"),),
         settings={"approve_for_priority": ["production"]}),
    # A flap train counted over a time fabricd was not watching (link_flap_unwatched): over, the link stable now.
    Case("auto, flapped while fabricd was not watching: ticket only", "ticket", evidence=UNWATCHED,
         note=UNWATCHED_NOTE),
    Case("approve, flapped while not watching: no approval asked", "ticket", mode="approve", evidence=UNWATCHED,
         note=UNWATCHED_NOTE),
    Case("auto, not watching, a protected job: ticket only", "ticket", evidence=UNWATCHED, jobs=(TRAINING,),
         settings={"approve_for_priority": ["production"]}, note=UNWATCHED_NOTE),
    Case("not watching, on a port fabricd holds down: leftover noise", "ignore", evidence=UNWATCHED,
         facts=PortFacts(SERVER_PORT, held=True), note="down because of fabricd"),
]  # fmt: skip


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_decide(case: Case, small: Fabric) -> None:
    f = replace(flap(small, SERVER_PORT), kind=case.kind, jobs=case.jobs)
    if case.evidence is not None:
        f = replace(f, evidence=case.evidence)
    settings = RemediationSettings(**{"mode": case.mode, **case.settings})
    d = decide(f, 7, case.facts, fabric=small, limits=SafetyLimits(), settings=settings, known=case.known)
    assert isinstance(d, Decision)
    assert d.outcome == case.outcome
    assert case.note in d.note
    assert d.escalate == case.escalate
    if case.status is None:
        assert d.action is None
    else:
        assert d.action is not None and d.action.status == case.status
        assert d.action.key == "disable:leaf-g0-r0:Ethernet1/1:finding7"
        assert d.action.mode == (case.action_mode or case.mode)
    if case.rule is not None:
        assert d.verdict is not None and not d.verdict.allowed and d.verdict.rule == case.rule
        assert d.action is not None and d.action.audit_why.startswith(f"guard ({case.rule}): ")
    elif case.status in ("observed", "awaiting_approval", "running"):
        assert d.verdict is not None and d.verdict.allowed


def test_protected_job_names_it_in_the_reason(small: Fabric) -> None:
    f = replace(flap(small, SERVER_PORT), jobs=(TRAINING,))
    settings = RemediationSettings(mode="auto", approve_for_priority=["production"])
    d = decide(f, 1, PortFacts(SERVER_PORT), fabric=small, limits=SafetyLimits(), settings=settings, known=NOTHING)
    assert d.action is not None
    assert d.action.reason.endswith(
        "(jobs: llama-train); carries llama-train (priority production): approval required"
        " (remediation.approve_for_priority)"
    )


def test_keys_name_port_and_cause() -> None:
    assert disable_key(SERVER_PORT, 12) == "disable:leaf-g0-r0:Ethernet1/1:finding12"
    assert enable_key("leaf-g0-r0", "Ethernet1/1", 40, 2) == "enable:leaf-g0-r0:Ethernet1/1:after40:try2"


def test_recurrence_keeps_the_last_20_occurrences_and_counts_all(small: Fabric) -> None:
    f = flap(small, SERVER_PORT)
    body: dict[str, Any] = {"occurrences": [{"finding_id": i} for i in range(20)], "occurrence_count": 20}
    t = Ticket(1, "x", "link_flap", "leaf-g0-r0", "Ethernet1/1", "open", "t", body, False, 0, None, T0, T0, None, None)
    out = recurrence(t, f, 99, "again", None, {"e": 1}, reopened=True)
    occurrences = out["occurrences"]
    assert isinstance(occurrences, list) and len(occurrences) == 20
    assert [o["finding_id"] for o in occurrences if isinstance(o, dict)] == [*range(1, 20), 99]
    assert out["occurrence_count"] == 21
    assert out["status_note"] == "recurred during probation after repair; again"
    assert t.body["occurrence_count"] == 20  # the stored ticket is not changed in place


def test_escalation_names_the_line_card(small: Fabric) -> None:
    title, body = escalation("leaf-1", ["Ethernet3/1/1", "Ethernet3/2/1", "Ethernet3/7/1"], ["Ethernet3/1/1"],
                             flap(small, SERVER_PORT), "budget")  # fmt: skip
    assert title == "3 faulty ports on leaf-1: likely line card 3 of leaf-1 (all 3 ports are on module 3)"
    assert body["fault"] == "escalation:leaf-1" and body["held_down_by_fabricd"] == ["Ethernet3/1/1"]


@pytest.mark.parametrize(
    ("stale", "held", "up_again", "kind", "expected"),
    [
        ((), (), (), "link_flap", False),  # a fault
        (("leaf-g0-r0",), (), (), "link_flap", True),  # stale data: never acted on
        ((), ("near",), (), "link_flap", True),  # fabricd holds it down: the echo of its own shutdown
        ((), ("peer",), (), "link_flap", True),  # the far end held down: the same link
        ((), ("near",), ("near",), "link_flap", False),  # held but up again (seed 3136): its flaps are real
        ((), ("near", "peer"), ("near",), "link_flap", True),  # the far end still held down
        ((), ("near",), (), "pfc_storm", False),  # not a link kind: a storm is not our shutdown's echo
    ],
)
def test_which_findings_are_not_even_recorded(
    small: Fabric, stale: tuple[str, ...], held: tuple[str, ...], up_again: tuple[str, ...], kind: str, expected: bool
) -> None:
    peer = small.peer(SERVER_PORT.device, SERVER_PORT.port)
    assert peer is not None
    ends = {"near": SERVER_PORT, "peer": peer}
    f = replace(flap(small, SERVER_PORT), kind=kind)
    got = ignored(f, small, set(stale), {ends[e] for e in held}, {ends[e] for e in up_again})
    assert got is expected
