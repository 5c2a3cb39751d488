"""Remediation with jobs: tickets name the jobs a fault hits; a protected job's port waits for a person."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

from fabricd.detectors.finding import JobRef

from .harness import SERVER_PORT, Harness, flap, report, run

FLAGSHIP = JobRef("job-b", "llama-70b-pretrain", "high", 16)
SMALL = JobRef("job-a", "llama-8b-sft", "normal", 8)


def test_the_ticket_names_the_jobs(make: Callable[..., Harness]) -> None:
    h = make()
    f = dataclasses.replace(flap(h.fabric, SERVER_PORT), jobs=(SMALL,))
    run(report(h, f))
    (t,) = h.tickets()
    assert t.title.endswith("(jobs: llama-8b-sft)")
    assert t.body["jobs"] == [{"id": "job-a", "name": "llama-8b-sft", "priority": "normal", "gpus": 8}]
    assert t.body["finding"]["jobs"] == t.body["jobs"]
    (a,) = h.state.actions.all()
    assert a.reason.endswith("(jobs: llama-8b-sft)")  # the action names them too (fabricd actions, the API)


def test_a_port_under_a_protected_job_waits_for_approval_in_auto_mode(make: Callable[..., Harness]) -> None:
    h = make(approve_for_priority=["high"])
    run(report(h, dataclasses.replace(flap(h.fabric, SERVER_PORT), jobs=(SMALL, FLAGSHIP))))
    (a,) = h.state.actions.all()
    assert (a.status, a.mode) == ("awaiting_approval", "approve")
    assert "carries llama-70b-pretrain (priority high): approval required" in a.reason
    assert h.world.touched() == []  # no switch was touched
    (t,) = h.tickets()
    assert "it carries llama-70b-pretrain" in t.body["status_note"]


def test_other_priorities_are_acted_on(make: Callable[..., Harness]) -> None:
    h = make(approve_for_priority=["high"])
    run(report(h, dataclasses.replace(flap(h.fabric, SERVER_PORT), jobs=(SMALL,))))
    (a,) = h.state.actions.all()
    assert a.status == "done" and [c[0] for c in h.world.touched()] == ["set_port_admin", "confirm", "close"]
