"""What every chaos invariant reports (a violation naming the time, the place and what was seen) and the invariants'
names; lab/chaos/invariants.py runs them all."""

from __future__ import annotations

from dataclasses import dataclass

INVARIANTS = (
    "capacity",
    "capacity_held",
    "marks_records",
    "hold_released",
    "foreign_enable",
    "exactly_once",
    "budgets",
    "wrong_neighbour",
    "detection",
    "convergence",
    "tuning_once",
    "tuning_settled",
    "tuning_audited",
    "tuning_running",
)


@dataclass(frozen=True)
class Violation:
    invariant: str
    t: float
    where: str
    detail: str

    def line(self, start_s: float, seed: int) -> str:
        return f"{self.invariant} at +{self.t - start_s:.1f}s (seed {seed}) {self.where}: {self.detail}"
