"""bench/bench_scaleout.py's collector-failover gap, from the arrival times of each switch's messages (no socket): the
gap runs from a switch's real last message before the signal, so a switch that never moved is not read as a failover
gap, and a switch that went silent counts up to when the round was judged."""

from __future__ import annotations

from typing import Any

import pytest

from tests.conftest import load_bench

bench = load_bench("bench_scaleout")
INTERVAL = 1.09


def arrivals(**stamps: list[float]) -> Any:
    a = bench.Arrivals()
    for subject, times in stamps.items():
        for t in times:
            a.saw(subject, t)
    return a


@pytest.mark.parametrize(
    ("stamps", "times", "worst", "parts"),
    [
        pytest.param(
            # samples every interval, the last 0.05 s before the signal: its gap is an interval, not 2 s
            {"stay": [7.86, 8.95, 10.05, 11.13, 12.22]},
            (8.5, 9.0, 9.5, 12.3),
            1.1,
            (0.05, 0.5, 0.55),
            id="a switch that never moved: one interval",
        ),
        pytest.param(
            # last sample 0.8 s before the kill, taken 0.5 s after it, first message 0.2 s after the take
            {"moved": [7.11, 8.2, 9.7, 10.79, 11.88]},
            (8.5, 9.0, 9.5, 12.0),
            1.5,
            (0.8, 0.5, 0.2),
            id="a moved switch: phase + take + first message",
        ),
        pytest.param(
            {"stay": [8.95, 10.04, 11.13], "moved": [7.11, 8.2, 9.7, 10.79, 11.88]},
            (8.5, 9.0, 9.5, 12.0),
            1.5,
            (0.8, 0.5, 0.2),
            id="the worst of both is the moved one",
        ),
        pytest.param(
            {"dark": [7.0, 8.1]},
            (7.5, 9.0, 9.5, 12.3),
            4.2,
            (0.9, 0.5, 2.8),
            id="a switch silent since the signal: up to the judgement",
        ),
        pytest.param(
            # the first message came quickly, the next one late: the worst gap is not the failover's first
            {"late": [8.8, 9.7, 11.5, 12.2]},
            (8.5, 9.0, 9.5, 12.3),
            1.8,
            (0.0, 0.0, 0.0),
            id="a later gap is the worst: no parts",
        ),
    ],
)
def test_worst_gap(
    stamps: dict[str, list[float]], times: tuple[float, float, float, float], worst: float,
    parts: tuple[float, float, float],
) -> None:  # fmt: skip
    """`times`: when the bench forgets older arrivals (both collectors hold a share), the signal, the take, the end."""
    forget, t0, owned, end = times
    a = arrivals(**stamps)
    a.forget_before(forget)  # what the bench does once both collectors hold a share, before the signal
    got, got_parts = a.worst_gap(t0, owned, end)
    assert got == pytest.approx(worst)
    assert got_parts == pytest.approx(parts)


def test_forget_keeps_each_switchs_last_message_before() -> None:
    a = arrivals(x=[1.0, 2.0, 3.0, 4.0], y=[1.5, 3.5])
    a.forget_before(3.2)
    assert a.stamps == {"x": [3.0, 4.0], "y": [1.5, 3.5]}
    assert a.sent_since(3.4) == 2
    assert a.sent_since(3.6) == 1
