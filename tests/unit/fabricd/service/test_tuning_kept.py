"""What plan/apply keep of the tuning loop's work (fabricd/service/tuning/kept.py): the confirmed values laid over the
intent, each with the change that set it; open changes named; `without` plans the bare intent. Tables over a ledger."""

from __future__ import annotations

import pytest

from fabricd.service.state.tuning import TuneRecord, TuneStatus
from fabricd.service.tuning.kept import Kept, knob_of, tuned_intent
from fabricd.tuning.propose import Knob
from policies.intent import Intent, derive_intent
from policies.policy import Policy
from tests.conftest import EXAMPLES
from topology.blueprint import generate_blueprint
from topology.fabric import Fabric
from topology.spec import load_spec

LEAF, PORT = "leaf-g0-r0", "Ethernet1/1"
SUBJECT = f"{LEAF}:{PORT}"


@pytest.fixture(scope="module")
def intent_fabric() -> tuple[Intent, Fabric]:
    spec = load_spec(EXAMPLES / "small-pod.yaml")
    fabric = Fabric(generate_blueprint(spec))
    return derive_intent(fabric, spec, Policy(), {LEAF}), fabric


def rec(id: int, status: TuneStatus, before: int, after: int, knob: Knob = Knob.KMIN, subject: str = SUBJECT
        ) -> TuneRecord:  # fmt: skip
    return TuneRecord(id, f"k{id}", None, subject, subject.split(":")[0], "server", "pfc_before_ecn", "pause_us_per_s",
                      [{"knob": str(knob), "before": before, "after": after, "low": 1, "high": 10**8}], "why", "auto",
                      status, "", {}, {}, False, id, id, 1_000 + id)  # fmt: skip


def kmin(intent: Intent) -> int:
    dev = intent.device(LEAF)
    assert dev is not None
    return next(p.ecn.min_bytes for p in dev.ports if p.port == PORT)


# ledger (status, after) in order -> the kept value and the change it comes from (None: nothing kept)
CASES = [
    ([], None),
    ([("confirmed", 7)], (7, 1)),
    ([("confirmed", 7), ("confirmed", 9)], (9, 2)),  # the later confirmed change wins
    ([("confirmed", 7), ("rolled_back", 9)], (7, 1)),  # a roll back put 7 back: kept from change 1
    ([("rolled_back", 9)], None),  # nothing confirmed
    ([("observed", 9), ("refused", 9), ("awaiting_approval", 9)], None),  # never ran
    ([("confirmed", 7), ("verifying", 9)], (7, 1)),  # an open change is the loop's: not kept, named as in flight
]


@pytest.mark.parametrize(("ledger", "want"), CASES)
def test_kept_values(intent_fabric: tuple[Intent, Fabric], ledger: list[tuple[TuneStatus, int]],
                     want: tuple[int, int] | None) -> None:  # fmt: skip
    intent, fabric = intent_fabric
    base = kmin(intent)
    records = [rec(i + 1, status, base, base + after * 1000) for i, (status, after) in enumerate(ledger)]
    got = tuned_intent(intent, fabric, records)
    if want is None:
        assert got.kept == [] and kmin(got.intent) == base
    else:
        value, change = want[0] * 1000 + base, want[1]
        assert got.kept == [Kept(SUBJECT, Knob.KMIN, base, value, change, 1_000 + change)]
        assert kmin(got.intent) == value
        assert kmin(tuned_intent(intent, fabric, records, without=True).intent) == base  # --without-tuning
    assert [r.id for r in got.in_flight] == [r.id for r in records if r.status in ("awaiting_approval", "verifying")]


def test_a_value_the_intent_already_has_or_another_device_is_not_kept(intent_fabric: tuple[Intent, Fabric]) -> None:
    intent, fabric = intent_fabric
    base = kmin(intent)
    got = tuned_intent(intent, fabric, [rec(1, "confirmed", 1, base), rec(2, "confirmed", 1, 5, subject="leaf-x:E1")])
    assert got.kept == [] and got.intent == intent


def test_knob_of_reads_what_patch_intent_writes(intent_fabric: tuple[Intent, Fabric]) -> None:
    intent, fabric = intent_fabric
    for knob in (Knob.KMIN, Knob.KMAX, Knob.PMAX, Knob.FLOWLET):
        base = knob_of(next(p for p in intent.devices[0].ports if p.port == PORT), knob)
        assert base is not None
        records = [rec(1, "confirmed", base, base + 1, knob)]
        port = next(p for p in tuned_intent(intent, fabric, records).intent.devices[0].ports if p.port == PORT)
        assert knob_of(port, knob) == base + 1
