"""Counters to per-interval deltas, and gauges to per-interval values, over a window of samples.

A cumulative counter that goes down was reset (a reboot, a `sonic-clear`, a 32-bit counter wrapping: they look the
same from outside): that one interval is dropped, never read as a huge or negative rate. An interval where either end
lacks the counter is dropped too. Too few usable intervals and the rule is "not judged", with this text as the why.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TypeVar

# At least this many usable intervals before a rule judges anything (fabricd's choice: two intervals can be one
# burst; three show a trend).
MIN_INTERVALS = 3

S = TypeVar("S")


@dataclass(frozen=True)
class Series:
    """Usable intervals of one counter: the end time, the length and the increase of each."""

    name: str
    t_s: tuple[float, ...]
    dt_s: tuple[float, ...]
    delta: tuple[float, ...]
    resets: int

    @property
    def total(self) -> float:
        return sum(self.delta)

    @property
    def seconds(self) -> float:
        return sum(self.dt_s)

    @property
    def rate(self) -> float:
        """Mean increase per second over the usable intervals."""
        return self.total / self.seconds if self.seconds > 0 else 0.0

    def rates(self) -> tuple[float, ...]:
        return tuple(d / dt for d, dt in zip(self.delta, self.dt_s, strict=True))

    def at(self, t_s: float) -> float | None:
        """The increase of the interval ending at t_s, if usable."""
        for t, d in zip(self.t_s, self.delta, strict=True):
            if t == t_s:
                return d
        return None


@dataclass(frozen=True)
class Missing:
    """Why a counter gives nothing to judge on."""

    why: str


def counter(
    samples: Sequence[S], name: str, get: Callable[[S], int | None], t: Callable[[S], float]
) -> Series | Missing:
    """Per-interval increases of a cumulative counter; resets and gaps dropped."""
    ts, dts, ds = [], [], []
    resets = 0
    for a, b in itertools.pairwise(samples):
        va, vb, dt = get(a), get(b), t(b) - t(a)
        if va is None or vb is None or dt <= 0:
            continue
        if vb < va:
            resets += 1
            continue
        ts.append(t(b))
        dts.append(dt)
        ds.append(float(vb - va))
    if not any(get(s) is not None for s in samples):
        return Missing(f"no {name} in this window (not reported by the source)")
    if len(ds) < MIN_INTERVALS:
        detail = f"; {resets} counter reset(s)" if resets else ""
        return Missing(
            f"{name}: {len(ds)} usable interval(s) of {max(len(samples) - 1, 0)}, need {MIN_INTERVALS}{detail}"
        )
    return Series(name, tuple(ts), tuple(dts), tuple(ds), resets)


def gauge(samples: Sequence[S], name: str, get: Callable[[S], int | None], t: Callable[[S], float]) -> Series | Missing:
    """A gauge's value at each sample after the first (the interval it closes), as a Series with delta = value."""
    ts, dts, vs = [], [], []
    for a, b in itertools.pairwise(samples):
        v, dt = get(b), t(b) - t(a)
        if v is None or dt <= 0:
            continue
        ts.append(t(b))
        dts.append(dt)
        vs.append(float(v))
    if not any(get(s) is not None for s in samples):
        return Missing(f"no {name} in this window (not reported by the source)")
    if len(vs) < MIN_INTERVALS:
        return Missing(f"{name}: {len(vs)} usable interval(s) of {max(len(samples) - 1, 0)}, need {MIN_INTERVALS}")
    return Series(name, tuple(ts), tuple(dts), tuple(vs), 0)


def percentile(values: Sequence[float], q: float) -> float:
    """Nearest-rank percentile (q in 0..1) of a non-empty sequence."""
    ordered = sorted(values)
    k = min(len(ordered) - 1, max(0, math.ceil(q * len(ordered)) - 1))
    return ordered[k]


def correlation(xs: Sequence[float], ys: Sequence[float]) -> float:
    """Pearson correlation; 0 when either side is flat."""
    n = len(xs)
    mx, my = sum(xs) / n, sum(ys) / n
    sxy = sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True))
    sxx = sum((x - mx) ** 2 for x in xs)
    syy = sum((y - my) ** 2 for y in ys)
    if sxx == 0 or syy == 0:
        return 0.0
    return float(sxy / (sxx * syy) ** 0.5)
