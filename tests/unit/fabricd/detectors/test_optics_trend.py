"""predicted_failure: the trend fit (pure), and the twin on a simulated clock: a gradual optics fault is predicted
hours before the link fails, a day of healthy temperature wander is not, and a repaired optic clears."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from fabricd.detectors import Detector, Finding, run_trace
from fabricd.detectors.optics_trend import OpticsTrendState, detect, fit
from fabricd.telemetry import Snapshot
from lab.faults import FaultInjector
from lab.model import Twin
from lab.simclock import simulate, write_trace
from topology.fabric import Fabric
from topology.units import NS

T0 = 1_700_000_000 * NS
PORT = "leaf-g0-r1:Ethernet2/1"
H = 3600


@pytest.mark.parametrize(
    ("values", "slope", "t_strong"),
    [
        (np.linspace(-2.0, -3.5, 36), -0.25, True),  # 1.5 dB over 6 h
        (-2.0 + 0.2 * np.sin(np.linspace(0, np.pi / 2, 36)), None, False),  # a quarter of a daily cycle
        (np.full(36, -2.0), 0.0, False),
    ],
    ids=["falling", "temperature", "flat"],
)
def test_fit(values: np.ndarray, slope: float | None, t_strong: bool) -> None:
    noisy = values + np.random.default_rng(1).normal(0, 0.03, len(values))
    f = fit(noisy.astype(np.float32)[None, :], 600 / 3600)
    if slope is not None:
        assert f["slope"][0] == pytest.approx(slope, abs=0.02)
    assert bool(f["t"][0] <= -6) is t_strong
    assert abs(f["slope"][0]) < 0.1 or slope is not None  # the daily wander never passes 0.1 dB/h


Fault = tuple[float, str, dict[str, object]]  # (hours in, kind, params); kind "clear" clears every fault


def run(
    small_fabric: Fabric,
    tmp_path: Path,
    hours: float,
    faults: list[Fault],
    devices: tuple[str, ...] = ("leaf-g0-r0", "leaf-g0-r1"),
) -> list[dict[str, Any]]:
    """`hours` of the twin at 60 s samples of `devices` (two leaves: 16 ports), faults at their times, then detect."""
    clock = [T0]
    twin = Twin(small_fabric, clock=lambda: clock[0])
    inj = FaultInjector(twin)

    def event(kind: str, params: dict[str, object]) -> Callable[[int], object]:
        return lambda at: inj.clear(now_ns=at) if kind == "clear" else inj.inject(kind, params, at)

    events = [(h * H, event(kind, params)) for h, kind, params in faults]
    trace = tmp_path / "t.jsonl"
    write_trace(simulate(twin, T0, hours * H, 60, devices=list(devices), events=events), trace)
    return [f.to_dict() for f in run_trace(trace, small_fabric, tick_s=60, pass_gap_s=0)]


def hours_in(ts: object) -> float:
    assert isinstance(ts, int)
    return (ts - T0) / NS / H


@pytest.mark.slow  # several seconds: CI runs it, `pytest tests/unit -m "not slow"` does not
def test_a_gradual_fault_is_predicted_hours_before_the_link_fails(small_fabric: Fabric, tmp_path: Path) -> None:
    # 0.25 dB/h from hour 2: the twin's link starts to lose frames past 6 dB, at hour 26
    # the failing optic's leaf only (the healthy day below watches two leaves for false predictions)
    fault: Fault = (2, "optics_degrade", {"port": PORT, "db_per_hour": 0.25})
    found = run(small_fabric, tmp_path, 28, [fault], devices=("leaf-g0-r1",))
    (pred,) = [f for f in found if f["kind"] == "predicted_failure"]
    assert pred["ports"] == [PORT] and pred["severity"] == "warning"
    detected = hours_in(pred["detected_ts"])
    assert 2 < detected <= 5  # the fall is sure within ~2 h of 10-minute buckets
    failed = [hours_in(f["detected_ts"]) for f in found if f["kind"] == "link_corruption"]
    assert failed and min(failed) >= 26
    assert min(failed) - detected >= 20  # hours of lead time
    assert "gpu-g0-001:nic1" in str(pred["evidence"]["repair"])
    assert {f["kind"] for f in found} == {"predicted_failure", "link_corruption"}


@pytest.mark.slow  # several seconds: CI runs it, `pytest tests/unit -m "not slow"` does not
def test_a_healthy_day_with_temperature_wander_raises_nothing(small_fabric: Fabric, tmp_path: Path) -> None:
    assert run(small_fabric, tmp_path, 26, []) == []


@pytest.mark.slow  # several seconds: CI runs it, `pytest tests/unit -m "not slow"` does not
def test_a_repaired_optic_clears(small_fabric: Fabric, tmp_path: Path) -> None:
    clock = [T0]
    twin = Twin(small_fabric, clock=lambda: clock[0])
    inj = FaultInjector(twin)
    events = [
        (1 * H, lambda at: inj.inject("optics_degrade", {"port": PORT, "db_per_hour": 0.5}, at)),
        (6 * H, lambda at: inj.clear(now_ns=at)),  # the optic was replaced at hour 6
    ]
    trace = tmp_path / "t.jsonl"
    write_trace(simulate(twin, T0, 14 * H, 60, devices=["leaf-g0-r1"], events=events), trace)
    passes: list[tuple[int, int]] = []  # (pass time, active predictions)

    def watch(snap: Snapshot, fab: Fabric, st: OpticsTrendState, now: int) -> list[Finding]:
        out = detect(snap, fab, st, now)
        passes.append((now, len(out)))
        return out

    run_trace(trace, small_fabric, tick_s=60, pass_gap_s=0, detectors=[Detector("t", watch, OpticsTrendState)])
    active = [hours_in(t) for t, n in passes if n]
    assert active and min(active) < 6  # predicted while it fell
    assert max(active) < 13 and passes[-1][1] == 0  # and cleared within hours of the repair


def test_a_rising_pre_fec_ber_alone_is_predicted(small_fabric: Fabric, tmp_path: Path) -> None:
    # receive power steady, the BER climbing a tenth of a decade an hour from 1e-8 (a laser or FEC lane ageing)
    from fabricd.telemetry import render

    lines = []
    for minute in range(12 * 60):
        ts = T0 + minute * 60 * NS
        ber = 1e-8 * 10 ** (0.1 * max(0.0, minute / 60 - 2))
        for port, value in ((PORT, ber), ("leaf-g0-r1:Ethernet3/1", 1e-8)):
            dev, name = port.split(":")
            lines.append({"ts": ts, "device": dev, "path": render(name, "fec.pre-fec-ber", "1"), "value": value})
            lines.append({"ts": ts, "device": dev, "path": render(name, "optics.input-power", "0"), "value": -2.0})
    trace = tmp_path / "ber.jsonl"
    trace.write_text("".join(json.dumps(x) + "\n" for x in lines))
    (f,) = run_trace(trace, small_fabric, tick_s=60, pass_gap_s=0)
    assert f.kind == "predicted_failure" and f.ports == (PORT,)
    assert f.evidence["deadline_from"] == "pre_fec_ber" and "rx" not in f.evidence
    assert f.evidence["pre_fec_ber"]["decades_per_hour"] == pytest.approx(0.1, abs=0.01)
    # 1e-8 -> 2.4e-4 is 4.4 decades: ~44 h after the onset at hour 2
    assert 30 <= f.evidence["eta_hours"] + hours_in(f.detected_ts) - 2 <= 50
    assert "pre-FEC BER rises 0.10 decades/h" in f.summary


@pytest.mark.slow  # several seconds: CI runs it, `pytest tests/unit -m "not slow"` does not
def test_a_module_warming_toward_its_alarm_is_predicted(small_fabric: Fabric, tmp_path: Path) -> None:
    # power and BER steady; the module warms 2 C/h from hour 2 (a failing laser cooler): 70 C is reached ~hour 19
    found = run(
        small_fabric, tmp_path, 8, [(2, "optics_degrade", {"port": PORT, "db_per_hour": 0.001, "c_per_hour": 2})]
    )
    (f,) = found
    assert f["kind"] == "predicted_failure" and f["ports"] == [PORT]
    ev = f["evidence"]
    assert ev["deadline_from"] == "temperature" and "rx" not in ev
    assert 1.0 <= ev["temperature"]["c_per_hour"] <= 2.2  # the 6 h fit still holds flat hours from before the onset
    assert 30 <= ev["temperature"]["c_fitted"] <= 55 and ev["temperature"]["limit_c"] == 70.0
    assert 12 <= ev["eta_hours"] + hours_in(f["detected_ts"]) <= 26
    assert "module temperature rises" in f["summary"] and "70 C, the module's alarm temperature" in f["summary"]


def test_fec_corrections_alone_predict_where_no_ber_or_power_is_served(small_fabric: Fabric, tmp_path: Path) -> None:
    # a platform serving neither pre-FEC BER nor receive power: the corrected-codeword counter still shows the fall
    twin = Twin(small_fabric, clock=lambda: T0)
    inj = FaultInjector(twin)
    events = [(2 * H, lambda at: inj.inject("optics_degrade", {"port": PORT, "db_per_hour": 0.25}, at))]
    trace = tmp_path / "t.jsonl"
    write_trace(simulate(twin, T0, 8 * H, 60, devices=["leaf-g0-r1"], events=events, gauges=()), trace)
    (f,) = run_trace(trace, small_fabric, tick_s=60, pass_gap_s=0)
    assert f.kind == "predicted_failure" and f.ports == (PORT,)
    ev = f.evidence
    assert ev["deadline_from"] == "fec_corrected" and "rx" not in ev and "pre_fec_ber" not in ev
    # 0.25 dB/h is a decade of BER per 12 h in the twin (3 dB a decade): ~0.08 decades/h once the fit holds the fall
    assert 0.04 <= ev["fec_corrected"]["decades_per_hour"] <= 0.1
    assert 4.5 <= hours_in(f.detected_ts) <= 7  # a quarter of a decade off the best takes 3 h at this rate
    assert 30 <= ev["eta_hours"] <= 60  # 1.9e-8 -> 2.4e-4 implied BER at ~0.08 decades/h
    assert "FEC corrections rise" in f.summary
