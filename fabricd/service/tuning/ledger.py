"""The tuning ledger as the loop decides from it (pure): the state's rows (state/tuning.py) as `admit`'s ledger, the
values the switches run by the ledger (the intent plus every change applied and not rolled back), and what an open
change needs next."""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Mapping, Sequence
from enum import StrEnum

from fabricd.tuning.inputs import PortClass
from fabricd.tuning.kpis import Kpi
from fabricd.tuning.propose import Change, Knob, Proposal
from fabricd.tuning.verify import LedgerEntry, Result
from topology.units import NS

from ..state.tuning import TuneRecord, TuneStatus

_KPIS = frozenset(str(k) for k in Kpi)
_RESULT: dict[TuneStatus, Result] = {
    "awaiting_approval": Result.PENDING,
    "applying": Result.PENDING,
    "verifying": Result.PENDING,
    "rolling_back": Result.PENDING,
    "confirmed": Result.CONFIRMED,
    "rolled_back": Result.ROLLED_BACK,
    # rejected by a person, or a push that failed: not tried again within the hold-off (a value a person said no to
    # is not put to them again every window)
    "refused": Result.ROLLED_BACK,
}
# What the switch runs by the ledger: after a change applied (or being verified or rolled back: the subject is busy,
# nothing is proposed for it meanwhile), before it once rolled back.
_APPLIED: frozenset[TuneStatus] = frozenset({"applying", "verifying", "rolling_back", "confirmed"})
RAN: tuple[TuneStatus, ...] = (*sorted(_APPLIED), "rolled_back")  # the rows values_of reads


def proposal_key(p: Proposal, window: int) -> str:
    """The same proposal in the same window is one record, whichever instance judged it (a leader that takes over
    mid-window judges its own samples, so it may meet a proposal the old leader recorded: at most once a window)."""
    text = f"{window}|{p.subject}|" + ";".join(f"{c.knob}={c.before}->{c.after}" for c in p.changes)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def changes_doc(changes: Iterable[Change]) -> list[dict[str, int | str]]:
    return [{"knob": str(c.knob), "before": c.before, "after": c.after, "low": c.low, "high": c.high} for c in changes]


def changes_of(rec: TuneRecord) -> tuple[Change, ...]:
    return tuple(
        Change(Knob(str(c["knob"])), int(c["before"]), int(c["after"]), int(c["low"]), int(c["high"]))
        for c in rec.changes
    )


def ledger_of(records: Iterable[TuneRecord]) -> list[LedgerEntry]:
    """`admit`'s ledger: every change tried or open (observe's records are not changes)."""
    out = []
    for r in records:
        if r.status in _RESULT:
            out.append(LedgerEntry(r.created_ts / NS, r.subject, PortClass(r.port_class), changes_of(r),
                                   _RESULT[r.status], r.rule is None, r.no_effect, r.status == "refused"))  # fmt: skip
    return out


def values_of(records: Sequence[TuneRecord]) -> dict[str, dict[Knob, int]]:
    """Per subject, the knobs the ledger says its switch runs, oldest change first (a later one wins)."""
    out: dict[str, dict[Knob, int]] = {}
    for r in sorted(records, key=lambda r: r.id):
        if r.status in _APPLIED:
            out.setdefault(r.subject, {}).update({c.knob: c.after for c in changes_of(r)})
        elif r.status == "rolled_back":
            out.setdefault(r.subject, {}).update({c.knob: c.before for c in changes_of(r)})
    return out


def with_values(values: Mapping[str, Mapping[Knob, int]], rec: TuneRecord, after: bool) -> dict[str, dict[Knob, int]]:
    """`values` with `rec`'s knobs at their value after it (`after`) or before it (a roll back)."""
    out = {s: dict(v) for s, v in values.items()}
    out.setdefault(rec.subject, {}).update({c.knob: c.after if after else c.before for c in changes_of(rec)})
    return out


def kpis_doc(kpis: Mapping[Kpi, float]) -> dict[str, float]:
    return {str(k): float(v) for k, v in kpis.items()}


def kpis_of(doc: Mapping[str, float]) -> dict[Kpi, float]:
    return {Kpi(k): float(v) for k, v in doc.items() if k in _KPIS}


class Step(StrEnum):
    """What an open change needs next."""

    WAIT = "wait"  # for approval, or for its verify window to fill
    APPLY = "apply"  # push the values after it (approved, or a push a leader before this one left half done)
    VERIFY = "verify"  # judge the verify window: confirm or roll back
    ROLL_BACK = "roll_back"  # push the values before it (a roll back left half done)
    REFUSE = "refuse"  # its action was rejected or cancelled: it never runs
    ABANDON = "abandon"  # a fault opened on it while verified: not judged across the fault, rolled back


def next_step(
    status: TuneStatus, action_status: str | None, applied_ts: int | None, now: int, verify_s: float,
    samples_after: int, need: int, fault: str | None = None,
) -> Step:  # fmt: skip
    """`samples_after`: samples of the subject taken since the change was applied; `need`: how many a verify window
    holds. The window is judged once `verify_s` has passed and it is full, or, if samples stay missing (a switch not
    streaming), at twice `verify_s` with what there is (verify rolls back what it cannot measure). `fault`: one open
    on the subject now (`round.fault_on`): a change being verified is then rolled back at once, its window being the
    fault's counters as much as the change's."""
    if status == "awaiting_approval":
        if action_status in ("cancelled", "refused", "failed"):
            return Step.REFUSE
        return Step.APPLY if action_status == "running" else Step.WAIT
    if status == "applying":
        return Step.APPLY
    if status == "rolling_back":
        return Step.ROLL_BACK
    if status == "verifying" and fault is not None:
        return Step.ABANDON
    if status == "verifying" and applied_ts is not None:
        waited = (now - applied_ts) / NS
        if waited >= 2 * verify_s or (waited >= verify_s and samples_after >= need):
            return Step.VERIFY
    return Step.WAIT
