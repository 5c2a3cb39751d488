"""Verify a change from KPI windows before and after it, and decide from a ledger whether a new one may start.

- Confirm only when the target KPI improved by `tuning.verify_margin` (10 %) and no guard KPI (throughput, drops,
  pause time, reorders) got worse by more than `tuning.guard_tolerance` (2 %, issue 51) plus a small noise floor;
  anything unmeasured after the change rolls it back (a change that cannot be judged is not kept). A correction into
  bounds has no target: it is kept unless a guard regressed.
- Admission (hysteresis and budget): one experiment per subject at a time; at most `changes_per_hour` changes in the
  last hour and `changes_per_hour_per_class` per port class; never back to a value rolled back within
  `holdoff_minutes`; never reversing the direction of a change confirmed within the hold-off (A -> B -> A, or
  A -> B -> A' on the way back: flapping). A correction into bounds skips the hysteresis (safety beats history)
  but not the budget or the one-at-a-time rule.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum

from policies.policy import TuningPolicy

from .inputs import PortClass
from .kpis import GUARDS, HIGHER_IS_BETTER, Kpi, Kpis
from .propose import Change, Knob, Proposal, Tried

# Below these absolute changes a KPI has not moved (fabricd's noise floors): 1 ms of pause per second (0.1 % of the
# time), one reorder per second (Meta's bar, congestion-tuning.md §4 [meta24]), 1 us of p99 queueing, 0.01 of the
# coefficient of variation or the imbalance. Drops and throughput have none: one more drop is a regression.
NOISE: dict[Kpi, float] = {
    Kpi.PAUSE: 1000.0,
    Kpi.UNDERUSE: 0.001,  # 0.1 % of line rate
    Kpi.REORDERS: 1.0,
    Kpi.QUEUE_DELAY: 1.0,
    Kpi.THROUGHPUT_CV: 0.01,
    Kpi.IMBALANCE: 0.01,
}
HOUR_S = 3600.0


class Decision(StrEnum):
    CONFIRM = "confirm"
    ROLL_BACK = "roll_back"


@dataclass(frozen=True)
class Check:
    decision: Decision
    why: str
    target_change: float | None  # relative change of the target KPI (-0.3: 30 % lower); None without a target
    regressions: tuple[Kpi, ...]
    # Rolled back only because the target did not move by the margin either way, nothing regressed: the value is
    # harmless, and the next proposal may step past it (propose's `tried`; a threshold not yet crossed).
    no_effect: bool = False


def _worse(kpi: Kpi, before: float, after: float) -> float:
    """How much worse `after` is than `before`, in the KPI's own units (negative: better)."""
    return before - after if kpi in HIGHER_IS_BETTER else after - before


def verify(before: Kpis, after: Kpis, target: Kpi | None, tuning: TuningPolicy) -> Check:
    regressions: list[Kpi] = []
    lines: list[str] = []
    for kpi in GUARDS:
        if kpi == target or kpi not in before:
            continue
        if kpi not in after:
            return Check(Decision.ROLL_BACK, f"guard {kpi} not measured after the change", None, (kpi,))
        b, a = before[kpi], after[kpi]
        if _worse(kpi, b, a) > tuning.guard_tolerance * abs(b) + NOISE.get(kpi, 0.0):
            regressions.append(kpi)
            lines.append(f"{kpi} {b:.6g} -> {a:.6g}")
    change: float | None = None
    if target is not None:
        if target not in before or target not in after:
            return Check(Decision.ROLL_BACK, f"target {target} not measured before and after", None, tuple(regressions))
        b, a = before[target], after[target]
        change = (a - b) / abs(b) if b else 0.0
        need = tuning.verify_margin * abs(b)
        gain = -_worse(target, b, a)
        if gain < need or gain <= NOISE.get(target, 0.0):
            why = f"target {target} {b:.6g} -> {a:.6g}: not better by {tuning.verify_margin:.0%}"
            if regressions:
                why += f"; regressed: {', '.join(lines)}"
            worse = -gain > tuning.guard_tolerance * abs(b) + NOISE.get(target, 0.0)
            return Check(Decision.ROLL_BACK, why, change, tuple(regressions), not regressions and not worse)
    if regressions:
        return Check(Decision.ROLL_BACK, f"regressed: {', '.join(lines)}", change, tuple(regressions))
    what = f"target {target} {before[target]:.6g} -> {after[target]:.6g}" if target is not None else "a correction"
    return Check(Decision.CONFIRM, f"{what}, no guard worse", change, ())


class Result(StrEnum):
    PENDING = "pending"  # applied, being verified
    CONFIRMED = "confirmed"
    ROLLED_BACK = "rolled_back"


@dataclass(frozen=True)
class LedgerEntry:
    """One change tried: when, on what, which knobs, and how it ended."""

    at_s: float
    subject: str
    port_class: PortClass
    changes: tuple[Change, ...]
    result: Result
    corrective: bool = False
    no_effect: bool = False  # rolled back for want of an effect, harmless (Check.no_effect)
    refused: bool = False  # never applied (a person said no, or the push failed): held off as a rolled back one


@dataclass(frozen=True)
class Admission:
    allowed: bool
    why: str


def no_effect_values(ledger: Sequence[LedgerEntry], subject: str, now_s: float, tuning: TuningPolicy) -> Tried:
    """Per knob, the values tried on `subject` within the hold-off that did nothing either way: propose steps past
    them rather than stalling on a plateau (admission still never returns to them within the hold-off)."""
    holdoff = tuning.holdoff_minutes * 60
    out: dict[Knob, set[int]] = {}
    for e in ledger:
        if (
            e.subject == subject
            and e.no_effect
            and e.result is Result.ROLLED_BACK
            and now_s - holdoff < e.at_s <= now_s
        ):
            for c in e.changes:
                out.setdefault(c.knob, set()).add(c.after)
    return {k: frozenset(v) for k, v in out.items()}


def _sign(c: Change) -> int:
    return (c.after > c.before) - (c.after < c.before)


def admit(p: Proposal, ledger: Sequence[LedgerEntry], now_s: float, tuning: TuningPolicy) -> Admission:
    """May this proposal be tried now?"""
    if any(e.subject == p.subject and e.result is Result.PENDING for e in ledger):
        return Admission(False, f"a change on {p.subject} is still being verified")
    hour = [e for e in ledger if now_s - HOUR_S < e.at_s <= now_s]
    if len(hour) >= tuning.changes_per_hour:
        return Admission(False, f"{len(hour)} changes in the last hour (budget {tuning.changes_per_hour})")
    same_class = sum(1 for e in hour if e.port_class == p.port_class)
    if same_class >= tuning.changes_per_hour_per_class:
        return Admission(
            False,
            f"{same_class} {p.port_class} changes in the last hour "
            f"(budget {tuning.changes_per_hour_per_class} per class)",
        )
    if p.corrective:
        return Admission(True, "a correction into bounds (no hold-off)")
    holdoff = tuning.holdoff_minutes * 60
    recent = [e for e in ledger if e.subject == p.subject and now_s - holdoff < e.at_s <= now_s]
    for c in p.changes:
        for e in sorted(recent, key=lambda e: e.at_s, reverse=True):
            for old in e.changes:
                if old.knob != c.knob:
                    continue
                if e.result is Result.ROLLED_BACK and old.after == c.after:
                    ended = "refused" if e.refused else "rolled back"
                    return Admission(
                        False, f"{c.knob} -> {c.after} was {ended} {(now_s - e.at_s) / 60:.0f} min ago (hold-off)"
                    )
                if e.result is Result.CONFIRMED and _sign(old) * _sign(c) < 0:
                    return Admission(
                        False,
                        f"{c.knob} {c.before} -> {c.after} would reverse {old.before} -> {old.after}, confirmed "
                        f"{(now_s - e.at_s) / 60:.0f} min ago (no flapping within the hold-off)",
                    )
    return Admission(True, "within budget, no hold-off")
