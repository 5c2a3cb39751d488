"""The detector accuracy bench (bench/bench_detector_accuracy.py): its plan, its matching rule, and one short
recording from the twin through `fabricd detect`, so the bench cannot silently break."""

from __future__ import annotations

import asyncio
from dataclasses import asdict
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from tests.conftest import EXAMPLES, load_bench
from topology.fabric import Fabric
from topology.labels import complete_labels
from topology.model import Cabling

bench = load_bench("bench_detector_accuracy")


@pytest.fixture(scope="module")
def small_fabric(small_blueprint: Cabling) -> Fabric:
    return Fabric(complete_labels(small_blueprint))


def test_plan_is_seeded_covers_every_kind_and_keeps_pfc_faults_apart(small_fabric: Fabric) -> None:
    plan = bench.Planner(small_fabric, 11, 30.0).plan(4, failed_every=4)
    again = bench.Planner(small_fabric, 11, 30.0).plan(4, failed_every=4)
    assert [asdict(e) for e in plan] == [asdict(e) for e in again]
    assert [asdict(e) for e in plan] != [asdict(e) for e in bench.Planner(small_fabric, 12, 30.0).plan(4)]
    scenarios = [sc for ep in plan for sc in ep.scenarios]
    assert {sc.kind for sc in scenarios if sc.truth} == set(bench.KINDS)
    assert any(sc.name.endswith("pfc_deadlock_failed") for sc in plan[3].scenarios)
    for ep in plan:
        pfc = [sc.rail for sc in ep.scenarios if sc.kind in ("pfc_storm", "pfc_deadlock", "microburst")]
        assert len(pfc) == len(set(pfc)), "two PFC scenarios in one rail would interact"
        for sc in ep.scenarios:
            for st in sc.steps:
                assert st.at_s + (st.clear_s or 0.0) <= ep.duration_s
            if sc.steps[0].kind == "link_flap":  # a flap is a fault exactly when it passes 5 flaps in 10 s
                p = sc.steps[0].params
                downs = [i * p["period_s"] for i in range(p["count"])]
                assert sc.truth == (bench.flap_rule_onset(downs) is not None)


def _truth(kind: str, ports: set[str], devices: set[str], start: int = 100) -> Any:
    return bench.Truth(f"e00.{kind}", kind, start, start, start + 50, frozenset(ports), frozenset(devices))


def test_matching_counts_place_kind_and_time() -> None:
    ns = bench.NS
    link = {"leaf-g0-r0:Ethernet5/1", "spine-r0-0:Ethernet1/1"}
    truths = [
        _truth("link_flap", link, {"leaf-g0-r0", "spine-r0-0"}, 100 * ns),
        _truth("silent_corruption", set(), {"spine-r1-0"}, 100 * ns),
    ]

    def finding(kind: str, device: str, ports: list[str], ts: int) -> dict[str, object]:
        return {"kind": kind, "device": device, "port": None, "ports": ports, "devices": [device], "detected_ts": ts}

    findings = [
        finding("link_flap", "leaf-g0-r0", sorted(link), 103 * ns),  # right link: TP, 3 s after onset
        finding("link_flap", "leaf-g0-r0", sorted(link), 104 * ns),  # the same again: a duplicate, not an FP
        finding("link_flap", "leaf-g0-r0", sorted(link), 99 * ns),  # before the fault: FP
        finding("silent_corruption", "spine-r1-0", ["spine-r1-0:Ethernet5/1", "ssp-0:Ethernet3/1"], 120 * ns),  # link
    ]
    ep = bench.Episode(0, 30.0, [])
    scores = bench.score([(ep, truths, findings)])
    flap, silent = scores["link_flap"], scores["silent_corruption"]
    assert (flap.faults, flap.tp, flap.findings, flap.matching, len(flap.fps)) == (1, 1, 3, 2, 1)
    assert flap.delays == [3.0]
    assert (silent.tp, len(silent.fns), len(silent.fps)) == (0, 1, 1)  # naming a link of the switch is a miss


def test_one_short_recording_through_fabricd_detect(tmp_path: Path, small_fabric: Fabric) -> None:
    """A flap, a corrupting link and a few flaps (noise), 9 s from the twin (no lossless config needed for them)."""
    flap = bench.Scenario(
        "e00.r0.link_flap",
        "link_flap",
        True,
        0,
        "leaf-g0-r0:Ethernet1/1",
        [bench.Step(2.0, "link_flap", {"port": "leaf-g0-r0:Ethernet1/1", "count": 5, "period_s": 0.6, "down_s": 0.2})],
    )
    corrupt = bench.Scenario(
        "e00.r1.link_corruption",
        "link_corruption",
        True,
        1,
        "spine-r1-0:Ethernet1/1",
        [bench.Step(2.0, "link_corruption", {"port": "spine-r1-0:Ethernet1/1", "rate": 1e-4}, clear_s=6.0)],
    )
    noise = bench.Scenario(
        "e00.r2.few_flaps",
        "few_flaps",
        False,
        2,
        "leaf-g1-r2:Ethernet2/1",
        [bench.Step(2.5, "link_flap", {"port": "leaf-g1-r2:Ethernet2/1", "count": 2, "period_s": 1.0})],
    )
    episode = bench.Episode(0, 9.0, [flap, corrupt, noise])
    results = asyncio.run(bench.run(EXAMPLES / "small-pod.yaml", [episode], tmp_path, lossless=False))
    ((rec, findings),) = results
    assert rec.trace.stat().st_size > 0 and rec.probes.stat().st_size > 0
    for sc in episode.scenarios:
        (record,) = sc.records
        assert rec.start_ns < record["start_ts"] < rec.end_ns
    scores, naive, _ = bench.evaluate(results, small_fabric)
    assert {k: (s.tp, s.faults) for k, s in scores.items() if s.faults} == {
        "link_flap": (1, 1),
        "link_corruption": (1, 1),
    }
    assert [line for s in scores.values() for line in s.fps] == [], findings
    # the naive baseline sees the same recording: the two downs of the noise link are "flapping" to it
    assert naive["link_flap"].fps
    assert bench.load(tmp_path)[0].episode.scenarios[0].records == flap.records
    assert 0.0 <= scores["link_flap"].delays[0] <= 3.0  # after the fifth flap, within a tick or two


def _dci() -> ModuleType:
    dci: ModuleType = bench.accuracy_dci  # the bench's DR part, as the bench loaded it
    return dci


def test_dci_plan_holds_every_case_once_per_round() -> None:
    dci = _dci()
    plan = dci.plan(2, 30.0)
    names = [ep.scenarios[0].name.split(".", 1)[1] for ep in plan]
    assert names[:8] == names[8:] and len(set(names)) == 8
    truth = {ep.scenarios[0].name.split(".", 1)[1]: ep.scenarios[0].truth for ep in plan[:8]}
    assert truth == {
        "balanced": False, "skew10": False, "skew20": True, "skew40": True, "skew20-spread": True,
        "drops-one": True, "drops-half": True, "burst": False,
    }  # fmt: skip
    half = next(ep for ep in plan if ep.scenarios[0].name.endswith("drops-half")).scenarios[0]
    assert len(half.steps) == 4 and half.where.count(",") == 3


def test_dci_scoring_matches_place_and_cause() -> None:
    dci = _dci()
    ns = bench.NS
    eps = {ep.scenarios[0].name.split(".", 1)[1]: ep for ep in dci.plan(1, 30.0)}

    def f(kind: str, ts: int, ports: list[str], **ev: object) -> dict[str, Any]:
        return {"kind": kind, "detected_ts": ts, "ports": ports, "evidence": ev, "summary": kind}

    lh = {"dci": "campus-b", "group": "DCI campus-b long-haul ports"}
    rows = [
        (eps["skew20"], 10 * ns, [f("dci_imbalance", 22 * ns, [], cause="hash_polarization", **lh)]),
        (eps["skew20-spread"], 10 * ns, [f("dci_imbalance", 21 * ns, [], cause="hash_polarization", **lh)]),
        (eps["skew40"], 10 * ns, [f("dci_imbalance", 5 * ns, [], cause="hash_polarization", **lh)]),  # too early
        (eps["drops-one"], 10 * ns, [f("dci_drops", 14 * ns, [eps["drops-one"].scenarios[0].where])]),
        (eps["drops-half"], 10 * ns, [f("dci_drops", 14 * ns, ["dr-campus-b-0:Ethernet5/1"])]),  # wrong set
        (eps["balanced"], 10 * ns, [f("dci_imbalance", 20 * ns, [], **lh)]),  # a false finding
    ]
    s = dci.score(rows)
    imb, drops = s["dci_imbalance"], s["dci_drops"]
    assert (imb.cases, imb.found, imb.findings, imb.matching) == (3, 2, 4, 2)
    assert imb.delays == [12.0, 11.0] and len(imb.wrong_cause) == 1 and "too_few_flows" in imb.wrong_cause[0]
    assert imb.misses == ["d03.skew40"] and len(imb.false) == 2
    assert (drops.cases, drops.found, drops.precision) == (2, 1, 0.5)
