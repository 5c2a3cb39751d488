"""link_corruption's window totals, read column-wise for speed, equal the sample-by-sample sums they replace."""

from __future__ import annotations

import random
from collections import deque
from dataclasses import astuple

import pytest

from fabricd.detectors.link_corruption import COUNTED, FRAME_LEAVES, _Port, _Sample, _Totals, _totals

NS = 1_000_000_000


def _reference(samples: deque[_Sample]) -> tuple[object, ...]:
    """The one-sample-at-a-time loop `_totals` was written as."""
    d: dict[str, float] = {}
    frames, errored, first = 0.0, 0, 0
    for smp in samples:
        for k, v in smp.d.items():
            d[k] = d.get(k, 0.0) + v
        f = next((smp.d[leaf] for leaf in FRAME_LEAVES if leaf in smp.d), 0.0)
        if f > 0:
            frames += f
            errored += 1
            first = first or smp.start
    span = (samples[-1].ts - samples[0].start) / NS
    return (list(d.items()), frames, errored, first, span, [s.ber for s in samples if s.ber is not None])


def _window(rng: random.Random, n: int, mixed: bool) -> _Port:
    ps = _Port()
    leaves = ["if.in-pkts", rng.choice(FRAME_LEAVES), *rng.sample(COUNTED[4:], 2)]
    for k in range(n):
        have = [lf for lf in leaves if not mixed or lf == "if.in-pkts" or rng.random() < 0.7]
        if mixed and rng.random() < 0.3:
            have.reverse()  # another order of the same leaves
        d = {lf: float(rng.choice([0, 0, 1, 7, rng.randint(1, 1 << 40)])) for lf in have}
        d["if.in-pkts"] = rng.random() * 1e9  # inexact sums: the addition order shows in the last bits
        start = 0 if rng.random() < 0.1 else (100 + k) * NS  # 0: the loop's `first or start` edge
        ps.samples.append(_Sample((101 + k) * NS, start, d, rng.random() if rng.random() < 0.5 else None))
    return ps


@pytest.mark.parametrize("mixed", [False, True], ids=["same leaves", "mixed leaves"])
def test_totals_equal_the_sample_by_sample_sums(mixed: bool) -> None:
    rng = random.Random(7)
    for n in (1, 2, 5, 60, 300):
        for _ in range(20):
            ps = _window(rng, n, mixed)
            now = (101 + n) * NS
            horizon_drops = rng.randint(0, n - 1)
            window_s = n - horizon_drops + 0.5  # the oldest samples may leave the window first
            t = _totals(ps, now, window_s)
            assert isinstance(t, _Totals)
            d, *rest = astuple(t)
            assert (list(d.items()), *rest) == _reference(ps.samples)
    assert _totals(_window(rng, 3, False), 1000 * NS, 10.0) is None  # every sample older than the window
