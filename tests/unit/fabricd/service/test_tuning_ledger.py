"""The tuning ledger as the service loop decides from it (fabricd/service/tuning/ledger.py): what an open change needs
next, what the switches run by the ledger, and what `admit` sees of each status. Tables."""

from __future__ import annotations

import pytest

from fabricd.service.state.tuning import TuneRecord, TuneStatus
from fabricd.service.tuning.ledger import Step, ledger_of, next_step, values_of, with_values
from fabricd.tuning.propose import Knob
from fabricd.tuning.verify import Result
from topology.units import NS

T0 = 1_800_000_000 * NS
KMIN = "ecn.min_bytes"


def rec(id: int, status: TuneStatus, before: int, after: int, subject: str = "leaf-1:Ethernet1/1") -> TuneRecord:
    return TuneRecord(id, f"k{id}", None, subject, "leaf-1", "server", "pfc_before_ecn", "pause_us_per_s",
                      [{"knob": KMIN, "before": before, "after": after, "low": 1, "high": 10**7}], "why", "auto",
                      status, "", {}, {}, False, T0 + id * NS, None, None)  # fmt: skip


# status, action status, applied (s before now; None: not applied), samples since, need -> step (verify_s 10)
NEXT = [
    ("awaiting_approval", "awaiting_approval", None, 0, 4, Step.WAIT),  # nobody said yes yet
    ("awaiting_approval", "running", None, 0, 4, Step.APPLY),  # approved while no loop ran it (a takeover)
    ("awaiting_approval", "cancelled", None, 0, 4, Step.REFUSE),  # `fabricd reject`
    ("applying", "running", None, 0, 4, Step.APPLY),  # a push left half done: pushed again (a no-op if it landed)
    ("verifying", "running", 5, 10, 4, Step.WAIT),  # the verify window has not passed
    ("verifying", "running", 10, 3, 4, Step.WAIT),  # passed, but not full (a new leader's first samples)
    ("verifying", "running", 10, 4, 4, Step.VERIFY),
    ("verifying", "running", 20, 1, 4, Step.VERIFY),  # samples stay missing: judged with what there is
    ("rolling_back", "running", 30, 9, 4, Step.ROLL_BACK),  # a roll back left half done
    ("confirmed", "done", 30, 9, 4, Step.WAIT),
]


@pytest.mark.parametrize(("status", "action", "applied_s", "samples", "need", "step"), NEXT)
def test_next_step(status: TuneStatus, action: str, applied_s: int | None, samples: int, need: int, step: Step) -> None:
    now = T0 + 100 * NS
    applied = None if applied_s is None else now - applied_s * NS
    assert next_step(status, action, applied, now, 10.0, samples, need) is step


def test_values_follow_the_ledger_in_order() -> None:
    # confirmed 100 -> 50, then 50 -> 25 rolled back, then 50 -> 40 being verified: the switch runs 40
    ledger = [rec(1, "confirmed", 100, 50), rec(2, "rolled_back", 50, 25), rec(3, "verifying", 50, 40)]
    assert values_of(ledger) == {"leaf-1:Ethernet1/1": {Knob.KMIN: 40}}
    assert values_of(ledger[:2]) == {"leaf-1:Ethernet1/1": {Knob.KMIN: 50}}
    assert values_of([rec(1, "observed", 100, 50), rec(2, "refused", 100, 50)]) == {}  # never applied
    # the values to push to roll change 3 back, and to apply it
    assert with_values(values_of(ledger[:2]), ledger[2], after=False)["leaf-1:Ethernet1/1"] == {Knob.KMIN: 50}
    assert with_values({}, ledger[2], after=True) == {"leaf-1:Ethernet1/1": {Knob.KMIN: 40}}


@pytest.mark.parametrize(
    ("status", "result"),
    [("observed", None), ("awaiting_approval", Result.PENDING), ("applying", Result.PENDING),
     ("verifying", Result.PENDING), ("rolling_back", Result.PENDING), ("confirmed", Result.CONFIRMED),
     ("rolled_back", Result.ROLLED_BACK), ("refused", Result.ROLLED_BACK)],
)  # fmt: skip
def test_what_admit_sees_of_each_status(status: TuneStatus, result: Result | None) -> None:
    # observe's records are no change; a refused value (rejected, or a failed push) is held off like a rolled back one
    got = ledger_of([rec(1, status, 100, 50)])
    assert [e.refused for e in got] == ([] if result is None else [status == "refused"])
    assert [e.result for e in got] == ([] if result is None else [result])
    assert all(e.at_s == T0 / NS + 1 and e.changes[0].after == 50 for e in got)


@pytest.mark.parametrize(
    ("status", "applied_s", "samples", "step"),
    [
        ("verifying", 5, 10, Step.ABANDON),  # before its window has passed
        ("verifying", 10, 4, Step.ABANDON),  # even when the window is full: it is the fault's too
        ("applying", None, 0, Step.APPLY),  # not yet applied: the push goes on (the next round judges nothing)
        ("rolling_back", 30, 9, Step.ROLL_BACK),
        ("awaiting_approval", None, 0, Step.WAIT),
    ],
)  # fmt: skip
def test_a_fault_open_on_the_subject_abandons_only_a_change_being_verified(
    status: TuneStatus, applied_s: int | None, samples: int, step: Step
) -> None:
    now = T0 + 100 * NS
    applied = None if applied_s is None else now - applied_s * NS
    action = "awaiting_approval" if status == "awaiting_approval" else "running"
    assert next_step(status, action, applied, now, 10.0, samples, 4, "pfc_storm finding 7") is step
