from __future__ import annotations

import json
import math
from collections.abc import Callable
from pathlib import Path

import pytest

from fabricd.detectors import LinkFlapConfig, run_trace
from topology.fabric import Fabric

from .tracegen import NS, T0, TraceGen, at

LEAF_END = ("leaf-g0-r0", "Ethernet5/1")
SPINE_END = ("spine-r0-0", "Ethernet1/1")
BOTH = [LEAF_END, SPINE_END]


def flaps(
    n: int, start: int = 2, every_s: float = 1.0, ends: list[tuple[str, str]] = BOTH
) -> Callable[[TraceGen], None]:
    def build(g: TraceGen) -> None:
        def step(k: int) -> None:
            for j in range(n):
                t = start - 0.5 + j * every_s
                if k - 1 < t <= k:  # events between sample k-1 and sample k
                    g.flap(at(t), ends, down_s=min(0.3, every_s / 2))

        g.run(start + int(n * every_s) + 3, step)

    return build


def split_flaps(n: int, every_s: float = 1.4, down_s: float = 0.7, start: float = 1.8) -> Callable[[TraceGen], None]:
    """Flaps whose up comes after the next sample: each sample's carrier-transitions holds one change of a flap, and
    its oper-status events arrive in the interval they happened in (as the twin streams them)."""

    def build(g: TraceGen) -> None:
        changes = sorted((start + j * every_s + d, up) for j in range(n) for d, up in ((0.0, False), (down_s, True)))

        def step(k: int) -> None:
            for t, up in changes:
                if k - 1 < t <= k:
                    for p in BOTH:
                        g.oper(at(t), p, up)

        g.run(math.ceil(changes[-1][0]) + 3, step)

    return build


def carrier_only(transitions: int) -> Callable[[TraceGen], None]:
    """Flaps shorter than a sample: no oper-status event, only carrier-transitions moves (on both ends)."""

    def build(g: TraceGen) -> None:
        def step(k: int) -> None:
            if k == 3:
                for p in BOTH:
                    g.c[p]["carrier"] += transitions

        g.run(6, step)

    return build


CASES = [
    ("five flaps in 5 s", flaps(5), 1),
    ("one flap", flaps(1), 0),
    ("four flaps at once-ish", flaps(4, every_s=0.2), 0),
    ("five flaps seen from one end only", flaps(5, ends=[LEAF_END]), 1),
    ("five flaps spread over 60 s", flaps(5, every_s=15.0), 0),
    ("three flaps, each up in the next sample", split_flaps(3), 0),
    ("five flaps, each up in the next sample", split_flaps(5), 1),
    ("five sub-sample flaps, counters only", carrier_only(10), 1),
    ("one sub-sample flap, counters only", carrier_only(2), 0),
]


@pytest.mark.parametrize(("name", "build", "expected"), CASES, ids=[c[0] for c in CASES])
def test_link_flap_cases(
    name: str, build: Callable[[TraceGen], None], expected: int, small_fabric: Fabric, tmp_path: Path
) -> None:
    g = TraceGen(small_fabric, {"leaf-g0-r0", "spine-r0-0"})
    build(g)
    found = [f for f in run_trace(g.write(tmp_path / "t.jsonl"), small_fabric) if f.kind == "link_flap"]
    assert len(found) == expected, [f.summary for f in found]
    for f in found:
        assert (f.device, f.port) == LEAF_END
        assert f.ports == ("leaf-g0-r0:Ethernet5/1", "spine-r0-0:Ethernet1/1")
        assert f.devices == ("leaf-g0-r0", "spine-r0-0")
        assert f.evidence["penalty"] > LinkFlapConfig().suppress
        assert f.start_ts <= f.detected_ts


class LateEvents(TraceGen):
    """Oper-status events that arrive `lag_s` after they happened: after the carrier-transitions sample that already
    counted their changes, and after the tick that judged it (a busy device sends the sample first)."""

    def __init__(self, fabric: Fabric, lag_s: float) -> None:
        super().__init__(fabric, {"leaf-g0-r0", "spine-r0-0"})
        self.lag = int(lag_s * NS)

    def write(self, path: Path) -> Path:
        def arrival(r: dict[str, object]) -> int:
            ts = int(str(r["ts"]))
            late = str(r["path"]).endswith("oper-status") and ts > T0
            return ts + self.lag if late else ts

        self.lines.sort(key=arrival)
        path.write_text("".join(json.dumps(r) + "\n" for r in self.lines))
        return path


LATE_CASES = [
    ("four flaps, events after the sample that counted them", 4, 1.6, 0),
    ("five flaps, events after the sample that counted them", 5, 1.6, 1),
    ("five flaps, events late but within the sample's tick", 5, 0.4, 1),
]


@pytest.mark.parametrize(("name", "n", "lag_s", "expected"), LATE_CASES, ids=[c[0] for c in LATE_CASES])
def test_late_events_count_each_flap_once(
    name: str, n: int, lag_s: float, expected: int, small_fabric: Fabric, tmp_path: Path
) -> None:
    g = LateEvents(small_fabric, lag_s)
    flaps(n)(g)
    found = [f for f in run_trace(g.write(tmp_path / "t.jsonl"), small_fabric) if f.kind == "link_flap"]
    assert len(found) == expected, [f.summary for f in found]
    for f in found:
        assert f.evidence["flaps"] == n
        assert f.evidence["sources"] == {"event": n, "counter": 0}  # each late event took over its counted flap
        assert f.evidence["timeline"] == [at(1.5 + j) for j in range(n)]


def test_flaps_across_samples_count_once(small_fabric: Fabric, tmp_path: Path) -> None:
    g = TraceGen(small_fabric, {"leaf-g0-r0", "spine-r0-0"})
    split_flaps(6)(g)
    (f,) = run_trace(g.write(tmp_path / "t.jsonl"), small_fabric)
    assert f.evidence["flaps"] == 6
    assert f.evidence["sources"] == {"event": 6, "counter": 0}
    # the fifth flap (at 1.8 + 4 * 1.4 s) completes 5 in 10 s; it is found at the end of its tick
    assert at(1.8 + 4 * 1.4) <= f.detected_ts <= at(1.8 + 4 * 1.4) + 2 * NS


def test_five_flaps_timeline_counts_each_flap_once(small_fabric: Fabric, tmp_path: Path) -> None:
    g = TraceGen(small_fabric, {"leaf-g0-r0", "spine-r0-0"})
    flaps(5)(g)
    (f,) = run_trace(g.write(tmp_path / "t.jsonl"), small_fabric)
    assert f.evidence["flaps"] == 5
    assert f.evidence["sources"] == {"event": 5, "counter": 0}
    assert f.evidence["timeline"] == [at(1.5 + j) for j in range(5)]
    assert f.start_ts == at(1.5)
    assert f.evidence["suppressed_ts"] == at(5.5)  # the 5th flap crossed the threshold: latency counts from here
    # detected at the end of the tick holding the 5th flap (5.5 s): within one sample interval + 1 s
    assert f.detected_ts - at(5.5) <= 2 * NS
    assert f.severity == "warning" and f.confidence == 1.0
    d = f.to_dict()
    assert set(d) >= {"kind", "device", "port", "priority", "devices", "ports", "start_ts", "detected_ts"}
    assert d["summary"].startswith("link leaf-g0-r0:Ethernet5/1 <-> spine-r0-0:Ethernet1/1 flapped 5 times")
