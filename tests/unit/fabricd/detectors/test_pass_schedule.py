"""When `fabricd detect` runs the detectors over a trace: on tick boundaries, and between them soon after new
records arrive, at most every `pass_gap_s` (the service does the same on its clock)."""

from __future__ import annotations

from pathlib import Path

import pytest

from fabricd.detectors import Detector, Finding, run_trace
from fabricd.detectors.runner import SETTLE_S
from fabricd.telemetry import Snapshot
from topology.fabric import Fabric

from .tracegen import NS, T0, TraceGen

# Four switches sampling 0.2 s apart within each second.
PHASES = {"leaf-g0-r0": 0.1, "leaf-g1-r0": 0.3, "spine-r0-0": 0.5, "spine-r0-1": 0.7}
SETTLE = int(SETTLE_S * NS)


def passes(fabric: Fabric, trace: Path, pass_gap_s: float) -> list[float]:
    seen: list[int] = []

    def recording(snapshot: Snapshot, fabric: Fabric, state: object, now: int) -> list[Finding]:
        seen.append(now)
        return []

    assert run_trace(trace, fabric, detectors=[Detector("r", recording, object)], pass_gap_s=pass_gap_s) == []
    return [round((t - T0) / NS, 3) for t in seen]


@pytest.fixture
def trace(small_fabric: Fabric, tmp_path: Path) -> Path:
    g = TraceGen(small_fabric, set(PHASES))
    g.run_phased(4, PHASES, [])
    return g.write(tmp_path / "t.jsonl")


def during_second(got: list[float], k: int) -> list[float]:
    return [t for t in got if k < t < k + 1]


def test_a_pass_follows_each_sample_burst_by_the_settle_time(small_fabric: Fabric, trace: Path) -> None:
    got = passes(small_fabric, trace, pass_gap_s=0.2)
    for k in (1, 2, 3):
        assert during_second(got, k) == [round(k + p + SETTLE_S, 3) for p in sorted(PHASES.values())]
    assert {2.0, 3.0, 4.0} <= set(got)  # the tick boundaries run as well (1 s had no record: no tick)


def test_the_gap_bounds_sample_passes(small_fabric: Fabric, trace: Path) -> None:
    got = passes(small_fabric, trace, pass_gap_s=0.5)
    for k in (1, 2, 3):
        # 1.325 and 1.525 come under 0.5 s after 1.125: one pass at 1.625 takes both (and 1.7's waits for the tick).
        assert during_second(got, k) == [round(k + 0.1 + SETTLE_S, 3), round(k + 0.1 + SETTLE_S + 0.5, 3)]
    assert {2.0, 3.0, 4.0} <= set(got)


def test_ticks_only(small_fabric: Fabric, trace: Path) -> None:
    assert [t for t in passes(small_fabric, trace, pass_gap_s=0) if t > 0] == [2.0, 3.0, 4.0]
