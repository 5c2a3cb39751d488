"""dci_imbalance and dci_drops over DR port samples (pure: traces written here, run through `run_trace`)."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest

from fabricd.detectors import Finding, run_trace
from fabricd.detectors.dci_ports import dci_groups, judge, likely_cause
from fabricd.telemetry import render
from tests.conftest import EXAMPLES
from topology.blueprint import generate_blueprint
from topology.fabric import Fabric
from topology.labels import complete_labels
from topology.spec import load_spec

NS = 1_000_000_000
T0 = 1_700_000_000 * NS
Port = tuple[str, str]
LINE_BPS = 400e9 / 8


@pytest.fixture(scope="module")
def fabric() -> Fabric:
    return Fabric(complete_labels(generate_blueprint(load_spec(EXAMPLES / "small-dci.yaml"))))


def long_haul(fabric: Fabric) -> list[Port]:
    return list(next(g for g in dci_groups(fabric) if g.kind == "dci").members)


Shares = Callable[[int, Port], float]  # (second, port) -> share of the mean load (1 = even)
Drops = Callable[[int, Port], float]  # (second, port) -> share of egress packets dropped


def write(
    tmp: Path,
    ports: list[Port],
    seconds: int,
    shares: Shares,
    drops: Drops | None = None,
    down: set[Port] | None = None,
) -> Path:
    """1 s samples of the DR ports' egress counters at 50 % of 400G times each port's share (+-2 % fixed spread)."""
    lines: list[dict[str, object]] = []
    c = {p: {"oct": 0.0, "pkt": 0.0, "drop": 0.0} for p in ports}
    for i, p in enumerate(ports):
        up = "DOWN" if down and p in down else "UP"
        lines.append({"ts": T0 - NS // 2, "device": p[0], "path": render(p[1], "oper-status"), "value": up})
        c[p]["spread"] = 1 + 0.02 * ((i * 7) % 5 - 2) / 2
    for t in range(seconds):
        ts = T0 + t * NS
        for p in ports:
            load = 0.0 if down and p in down else 0.5 * LINE_BPS * shares(t, p) * c[p]["spread"]
            pkts = load / 4200
            c[p]["oct"] += load
            c[p]["pkt"] += pkts
            c[p]["drop"] += pkts * (drops(t, p) if drops else 0.0)
            for leaf, key in (("if.out-octets", "oct"), ("if.out-pkts", "pkt"), ("if.out-discards", "drop")):
                lines.append({"ts": ts, "device": p[0], "path": render(p[1], leaf), "value": int(c[p][key])})
            q = render(p[1], "queue.dropped-pkts", "3")
            lines.append({"ts": ts, "device": p[0], "path": q, "value": int(c[p]["drop"])})
    path = tmp / "dci.jsonl"
    path.write_text("".join(json.dumps(x) + "\n" for x in lines))
    return path


def polarized(skew: float, start: int = 0, end: int = 10**9) -> Shares:
    def f(t: int, p: Port) -> float:
        if not start <= t < end:
            return 1.0
        hi = int(p[1].removeprefix("Ethernet").split("/")[0]) % 2 == 1
        return 1 + skew / 2 if hi else 1 - skew / 2

    return f


def run(fabric: Fabric, trace: Path) -> list[Finding]:
    return run_trace(trace, fabric)


def of(kind: str, found: list[Finding]) -> list[Finding]:
    return [f for f in found if f.kind == kind]


def test_groups_from_the_cabling(fabric: Fabric) -> None:
    groups = dci_groups(fabric)
    lh = [g for g in groups if g.kind == "dci"]
    assert [g.name for g in lh] == ["campus-b"] and len(lh[0].members) == 8
    assert lh[0].distance_km == 120 and lh[0].dci_tbps == pytest.approx(3.2)
    assert sorted(g.name for g in groups if g.kind == "uplinks") == ["dr-campus-b-0", "dr-campus-b-1"]


@pytest.mark.parametrize(
    ("loads", "up", "cause"),
    [
        ({("a", "1"): 1.1, ("a", "2"): 0.9, ("b", "1"): 1.1, ("b", "2"): 0.9}, None, "hash_polarization"),
        ({("a", "1"): 1.15, ("a", "2"): 1.05, ("b", "1"): 0.95, ("b", "2"): 0.85}, None, "too_few_flows"),
        ({("a", "1"): 1.3, ("a", "2"): 1.3, ("b", "1"): 1.3, ("b", "2"): 0.0}, {("b", "2")}, "member_down"),
        ({("a", "1"): 1.3, ("a", "2"): 1.3, ("b", "1"): 1.3, ("b", "2"): 0.01}, set(), "member_down"),
    ],
    ids=["two-clusters", "even-spread", "down", "up-but-idle"],
)
def test_likely_cause_from_the_shape(loads: dict[Port, float], up: set[Port] | None, cause: str) -> None:
    ups = {p: p not in (up or set()) for p in loads}
    got, fix, named = likely_cause(loads, ups)
    assert got == cause and fix
    if cause == "member_down":
        assert named == ["b:2"]


def test_judge_alpha_is_mean_over_max() -> None:
    loads = {("a", "1"): 110.0, ("a", "2"): 90.0}
    skew, alpha, util, rate = judge(loads, dict.fromkeys(loads, True), 1.6e-6, {p: (1.0, 1000.0) for p in loads})
    assert skew == pytest.approx(0.2) and alpha == pytest.approx(100 / 110)
    assert util == pytest.approx(100 * 8 / 1.6e3) and rate == pytest.approx(1e-3)


def test_balanced_link_is_quiet(fabric: Fabric, tmp_path: Path) -> None:
    assert run(fabric, write(tmp_path, long_haul(fabric), 60, lambda t, p: 1.0)) == []


def test_ten_percent_is_within_tolerance(fabric: Fabric, tmp_path: Path) -> None:
    assert run(fabric, write(tmp_path, long_haul(fabric), 60, polarized(0.10))) == []


@pytest.mark.parametrize("skew", [0.2, 0.4])
def test_skew_is_found_with_ports_cause_and_cost(fabric: Fabric, tmp_path: Path, skew: float) -> None:
    found = run(fabric, write(tmp_path, long_haul(fabric), 60, polarized(skew, start=15)))
    (f,) = of("dci_imbalance", found)
    assert f.evidence["dci"] == "campus-b" and f.evidence["cause"] == "hash_polarization"
    assert f.evidence["skew"] == pytest.approx(skew, abs=0.05)
    assert f.evidence["alpha_lb"] == pytest.approx(1 / (1 + skew / 2), abs=0.02)
    # the overloaded members (odd port numbers) are named
    assert set(f.ports) == {f"{d}:{p}" for d, p in long_haul(fabric) if p in ("Ethernet5/1", "Ethernet7/1")}
    assert f.evidence["extra_compute_loss"] > 0 and "compute for a 7e+09-param PP job" in f.summary
    delay = (f.detected_ts - (T0 + 15 * NS)) / NS
    assert 5 <= delay <= 16  # the window fills past 15 %, then the hold
    assert of("dci_drops", found) == []


def test_short_burst_is_not_a_finding(fabric: Fabric, tmp_path: Path) -> None:
    found = run(fabric, write(tmp_path, long_haul(fabric), 60, polarized(0.4, start=20, end=22)))
    assert found == []


def test_hysteresis_clears_only_under_the_clear_threshold(fabric: Fabric, tmp_path: Path) -> None:
    # 30 % for 25 s, then 12 %: between clear (10 %) and raise (15 %) the incident stays one finding
    def shares(t: int, p: Port) -> float:
        return polarized(0.30 if t < 40 else 0.12, start=15)(t, p)

    found = run(fabric, write(tmp_path, long_haul(fabric), 80, shares))
    assert len(of("dci_imbalance", found)) == 1


def test_member_down_is_named(fabric: Fabric, tmp_path: Path) -> None:
    ports = long_haul(fabric)
    gone = ports[3]
    found = run(fabric, write(tmp_path, ports, 40, lambda t, p: 8 / 7, down={gone}))
    (f,) = of("dci_imbalance", found)
    assert f.evidence["cause"] == "member_down" and f.ports == (f"{gone[0]}:{gone[1]}",)
    assert f.evidence["down"] == [f"{gone[0]}:{gone[1]}"] and f.severity == "critical"


def test_drops_on_one_port(fabric: Fabric, tmp_path: Path) -> None:
    ports = long_haul(fabric)
    bad = ports[1]
    found = run(fabric, write(tmp_path, ports, 40, lambda t, p: 1.0, lambda t, p: 1e-4 if p == bad and t >= 10 else 0))
    (f,) = of("dci_drops", found)
    assert f.ports == (f"{bad[0]}:{bad[1]}",) and (f.device, f.port) == bad
    assert f.evidence["drops"][f"{bad[0]}:{bad[1]}"]["drop_rate"] == pytest.approx(1e-4, rel=0.05)
    assert f.evidence["cause"] == "port" and of("dci_imbalance", found) == []


def test_drops_on_half_the_ports_are_congestion(fabric: Fabric, tmp_path: Path) -> None:
    ports = long_haul(fabric)
    half = set(ports[::2])
    found = run(fabric, write(tmp_path, ports, 40, lambda t, p: 1.0, lambda t, p: 1e-5 if p in half else 0))
    (f,) = of("dci_drops", found)
    assert set(f.ports) == {f"{d}:{p}" for d, p in half}
    assert f.evidence["cause"] == "congestion" and f.severity == "critical"
    assert f.evidence["dropping_ports"] == 4


def test_a_drop_burst_is_not_a_finding(fabric: Fabric, tmp_path: Path) -> None:
    ports = long_haul(fabric)
    found = run(fabric, write(tmp_path, ports, 40, lambda t, p: 1.0, lambda t, p: 1e-3 if t in (20, 21) else 0))
    assert found == []


def test_a_fabric_without_dci_has_no_groups(small_fabric: Fabric) -> None:
    assert dci_groups(small_fabric) == []


def test_a_drs_campus_uplinks_are_their_own_ecmp_group(fabric: Fabric, tmp_path: Path) -> None:
    up = next(g for g in dci_groups(fabric) if g.kind == "uplinks" and g.name == "dr-campus-b-1")
    assert len(up.members) == 4  # its links to the campus top tier (2 superspines, 2 links each)
    found = run(fabric, write(tmp_path, list(up.members) + long_haul(fabric), 60, polarized(0.3, start=10)))
    groups = {f.evidence["group"] for f in of("dci_imbalance", found)}
    # the skew is on every group written here; each is judged on its own
    assert groups == {"DCI campus-b long-haul ports", "dr-campus-b-1 campus uplinks"}
    (f,) = [f for f in found if f.evidence["group"] == "dr-campus-b-1 campus uplinks"]
    assert f.devices == ("dr-campus-b-1",) and all(p.startswith("dr-campus-b-1:") for p in f.ports)
