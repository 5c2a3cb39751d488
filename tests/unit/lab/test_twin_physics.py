"""Counters obey physics, healthy and under every fault kind that shapes traffic: what one end of a switch-to-switch
cable sends (packets, octets) the other end receives, frames that arrive corrupted included, and the pause frames one
end sends are the ones the other receives; every switch sends what it receives, less what it drops or discards as
corrupted; traffic follows ECMP over the cables that still lead to its destination; ECN marks only where a queue
passes its thresholds. Pure: a Twin on a fixed clock, no sockets."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from lab.counters import COL, ecn_mark_share
from lab.faults import FaultInjector
from lab.model import PortConfig, Twin
from tests.conftest import EXAMPLES
from topology.blueprint import generate_blueprint
from topology.fabric import Fabric
from topology.labels import complete_labels
from topology.model import Cabling
from topology.spec import load_spec
from topology.units import NS

T0 = 1_700_000_000 * NS
OUT_IN = [(f"if.out-{c}", f"if.in-{c}") for c in ("pkts", "unicast-pkts", "octets")]
OUT_IN += [(f"pfc{p}.out-frames", f"pfc{p}.in-frames") for p in range(8)]
OUT_IN += [("eth.out-mac-pause-frames", "eth.in-mac-pause-frames")]

FAULTS: dict[str, dict[str, Any]] = {
    "healthy": {},
    "pfc_storm": {"nic": "gpu-g1-000:nic1"},
    "pfc_deadlock": {"cycle": "leaf-g0-r0,spine-r0-0,leaf-g1-r0,spine-r0-1"},
    "link_corruption": {"port": "leaf-g0-r0:Ethernet5/1", "rate": 1e-4},
    "link_down": {"port": "leaf-g0-r1:Ethernet6/1"},
    "optics": {"port": "spine-r1-0:Ethernet1/1", "loss_db": 8},
    "silent_corruption": {"device": "spine-r0-1", "rate": 1e-3},
    "microburst": {"nic": "gpu-g0-001:nic2"},
    "link_flap": {"port": "leaf-g1-r2:Ethernet7/1", "interval_s": 2, "count": 3},
}
DCI_FAULTS: dict[str, dict[str, Any]] = {
    "dci_imbalance": {"dci": "campus-b", "skew": 0.4},
    "dci_drops": {"port": "dr-campus-b-1:Ethernet6/1", "rate": 1e-3},
    "link_corruption": {"port": "dr-campus-b-0:Ethernet5/1", "rate": 1e-4},
    "link_down": {"port": "dr-campus-b-0:Ethernet7/1"},
}


class Clock:
    def __init__(self) -> None:
        self.t = T0

    def __call__(self) -> int:
        return self.t


@pytest.mark.parametrize("fault", FAULTS)
def test_each_cable_receives_what_it_sends(small_blueprint: Cabling, fault: str) -> None:
    clock = Clock()
    twin = Twin(Fabric(small_blueprint), clock=clock)
    for name, sw in twin.switches.items():  # lossless everywhere, so pause is honoured and spreads
        for port in sw.ports:
            twin.set_port_config(name, port, PortConfig(pfc_enabled=True, no_drop=frozenset({3})))
    if fault != "healthy":
        FaultInjector(twin).inject(fault, FAULTS[fault], clock.t)
    clock.t += NS
    twin.advance(clock.t)
    start = {n: sw.values(clock.t).astype(np.float64) for n, sw in twin.switches.items()}
    clock.t += 10 * NS
    twin.advance(clock.t)
    moved = {n: sw.values(clock.t).astype(np.float64) - start[n] for n, sw in twin.switches.items()}
    cables = [(twin.switches[a.device], twin.switches[a.device].index[a.port],
               twin.switches[b.device], twin.switches[b.device].index[b.port])
              for a, b in twin.links if twin.is_switch(a.device) and twin.is_switch(b.device)]  # fmt: skip
    assert len(cables) == 64  # every switch-to-switch cable of the small pod
    checked = 0
    for sa, ra, sb, rb in cables:
        for out, into in OUT_IN:
            sent, got = moved[sa.name][ra, COL[out]], moved[sb.name][rb, COL[into]]
            assert got == pytest.approx(sent, rel=1e-9, abs=2), (fault, sa.name, sa.ports[ra], out)
            sent, got = moved[sb.name][rb, COL[out]], moved[sa.name][ra, COL[into]]
            assert got == pytest.approx(sent, rel=1e-9, abs=2), (fault, sb.name, sb.ports[rb], out)
            checked += 1
    assert checked == len(cables) * len(OUT_IN)
    if fault == "pfc_storm":  # the storm's pause crossed cables: the invariant held on moving counters
        assert any(moved[sa.name][ra, COL["pfc3.out-frames"]] > 0 for sa, ra, _, _ in cables)
    if fault == "link_corruption":  # the corrupted frames still arrived (and count as errors there)
        leaf = twin.switches["leaf-g0-r0"]
        row = leaf.index["Ethernet5/1"]
        assert moved["leaf-g0-r0"][row, COL["if.in-errors"]] > 0


def lossless_twin(cabling: Cabling, clock: Clock, ecn: dict[int, tuple[int, int, int]] | None = None) -> Twin:
    twin = Twin(Fabric(cabling), clock=clock)
    for name, sw in twin.switches.items():
        for port in sw.ports:
            twin.set_port_config(name, port, PortConfig(pfc_enabled=True, no_drop=frozenset({3}), ecn=dict(ecn or {})))
    return twin


def moved_over(twin: Twin, clock: Clock, seconds: int) -> dict[str, np.ndarray]:
    clock.t += NS
    twin.advance(clock.t)
    start = {n: sw.values(clock.t).astype(np.float64) for n, sw in twin.switches.items()}
    clock.t += seconds * NS
    twin.advance(clock.t)
    return {n: sw.values(clock.t).astype(np.float64) - start[n] for n, sw in twin.switches.items()}


def small_dci() -> Cabling:
    return complete_labels(generate_blueprint(load_spec(EXAMPLES / "small-dci.yaml")))


@pytest.mark.parametrize(
    ("fabric", "fault"), [("small-pod", f) for f in FAULTS] + [("small-dci", f) for f in DCI_FAULTS]
)
def test_each_switch_sends_what_it_receives_less_what_it_drops(
    small_blueprint: Cabling, fabric: str, fault: str
) -> None:
    clock = Clock()
    twin = lossless_twin(small_blueprint if fabric == "small-pod" else small_dci(), clock)
    if fault != "healthy":
        params = (FAULTS if fabric == "small-pod" else DCI_FAULTS)[fault]
        FaultInjector(twin).inject(fault, params, clock.t)
    moved = moved_over(twin, clock, 10)
    lost = 0.0
    for name, m in moved.items():
        received = m[:, COL["if.in-pkts"]].sum()
        sent = m[:, COL["if.out-pkts"]].sum()
        dropped = m[:, COL["if.out-discards"]].sum()
        corrupted = m[:, COL["if.in-errors"]].sum()
        assert received > 0, name  # every switch carries traffic, superspines and DRs included
        assert received == pytest.approx(sent + dropped + corrupted, rel=1e-9, abs=4 * len(m)), (fault, name)
        # a port's queues send what the port sends
        queues = sum(m[:, COL[f"q{q}.transmit-pkts"]] for q in range(8))
        assert queues == pytest.approx(m[:, COL["if.out-pkts"]], rel=1e-9, abs=16), (fault, name)
        lost += dropped + corrupted
    assert (lost > 0) == (fault in ("dci_drops", "link_corruption", "optics")), fault


def rate(twin: Twin, device: str, port: str, column: str = "if.out-octets") -> float:
    sw = twin.switch(device)
    return float(sw.rate[sw.index[port], COL[column]])


def uplinks(twin: Twin, leaf: str) -> list[str]:
    return [p for p in twin.switch(leaf).ports if twin.peers[(leaf, p)].device.startswith("spine")]


def test_a_leaf_spreads_its_traffic_over_the_uplinks_still_up(small_blueprint: Cabling) -> None:
    clock = Clock()
    twin = lossless_twin(small_blueprint, clock)
    leaf = "leaf-g0-r0"
    ups = uplinks(twin, leaf)
    assert len(ups) == 4  # 2 spines x 2 parallel cables
    before = {p: rate(twin, leaf, p) for p in ups}
    arriving = sum(rate(twin, leaf, p, "if.in-octets") for p in ups)
    assert max(before.values()) == pytest.approx(min(before.values()), rel=1e-9)  # ECMP: equal shares
    inj = FaultInjector(twin)
    inj.inject("link_down", {"port": f"{leaf}:{ups[0]}"}, clock.t)
    after = {p: rate(twin, leaf, p) for p in ups}
    assert after[ups[0]] == 0
    for p in ups[1:]:  # the same destinations, one cable fewer: each of the other three carries a third more
        assert after[p] == pytest.approx(before[p] * 4 / 3, rel=1e-9)
    # the spines bring the leaf what they brought before, over the cables left
    assert sum(rate(twin, leaf, p, "if.in-octets") for p in ups) == pytest.approx(arriving, rel=1e-9)
    # both cables to spine-r0-0 down: the spine no longer reaches the leaf, so no leaf sends to it through there
    spine0 = [p for p in ups if twin.peers[(leaf, p)].device == "spine-r0-0"]
    inj.inject("link_down", {"port": f"{leaf}:{next(p for p in spine0 if p != ups[0])}"}, clock.t + NS)
    other = "leaf-g1-r0"
    via0 = [p for p in uplinks(twin, other) if twin.peers[(other, p)].device == "spine-r0-0"]
    via1 = [p for p in uplinks(twin, other) if twin.peers[(other, p)].device == "spine-r0-1"]
    assert sum(rate(twin, other, p) for p in via1) > 1.5 * sum(rate(twin, other, p) for p in via0)
    spine1 = twin.switch("spine-r0-1")
    toward = [p for p in spine1.ports if twin.peers[("spine-r0-1", p)].device == leaf]
    assert sum(rate(twin, "spine-r0-1", p) for p in toward) == pytest.approx(arriving, rel=1e-9)


@pytest.mark.parametrize(
    ("util", "paused", "lo", "hi", "prob", "expect"),
    [
        (0.0, 0.0, 600_000, 6_000_000, 5, (0.0, 0.0)),
        (0.45, 0.0, 600_000, 6_000_000, 5, (0.0, 1e-6)),  # a healthy port: the queue stays far below the minimum
        (0.45, 0.0, 20_000, 200_000, 5, (1e-3, 0.05)),  # thresholds near empty mark even a light queue
        (0.9, 0.0, 600_000, 6_000_000, 5, (1e-4, 0.01)),  # a busy queue reaches the ramp
        (0.45, 0.5, 600_000, 6_000_000, 5, (1e-4, 0.01)),  # paused half the time: as busy as 0.9
        (0.999, 0.0, 600_000, 6_000_000, 5, (0.5, 1.0)),  # past the maximum: nearly every packet
        (0.5, 1.0, 600_000, 6_000_000, 5, (0.5, 1.0)),  # a stuck queue is full
    ],
)
def test_ecn_marks_follow_the_queue_depth_against_its_thresholds(
    util: float, paused: float, lo: int, hi: int, prob: int, expect: tuple[float, float]
) -> None:
    share = ecn_mark_share(util, paused, lo, hi, prob)
    assert expect[0] <= share <= expect[1]


def test_ecn_marks_rise_with_load_and_fall_with_thresholds() -> None:
    loads = [ecn_mark_share(u / 100, 0.0, 600_000, 6_000_000, 5) for u in range(0, 100, 5)]
    assert loads == sorted(loads) and loads[-1] > loads[0]
    mins = [ecn_mark_share(0.8, 0.0, m, 6_000_000, 5) for m in (50_000, 200_000, 600_000, 2_000_000)]
    assert mins == sorted(mins, reverse=True)


def test_the_twin_marks_only_the_queues_that_pass_their_thresholds() -> None:
    clock = Clock()
    twin = lossless_twin(small_dci(), clock, ecn={3: (600_000, 6_000_000, 5)})
    moved = moved_over(twin, clock, 10)
    for name, m in moved.items():  # healthy at 30-60 % load: no queue reaches 600 kB
        assert m[:, COL["q3.ecn-marked-pkts"]].sum() <= 1e-6 * m[:, COL["q3.transmit-pkts"]].sum(), name
    FaultInjector(twin).inject("dci_imbalance", {"dci": "campus-b", "skew": 1.5}, clock.t)
    moved = moved_over(twin, clock, 10)
    heavy = light = 0
    for e in twin.dci_ports["campus-b"]:
        m = moved[e.device][twin.switch(e.device).index[e.port]]
        util = m[COL["if.out-octets"]] * 8 / 10 / 400e9
        if util > 0.8:  # the heavy half of the hash: its queue reaches the ramp
            heavy += 1
            assert m[COL["q3.ecn-marked-pkts"]] > 1e-4 * m[COL["q3.transmit-pkts"]]
        else:
            light += 1
            assert m[COL["q3.ecn-marked-pkts"]] <= 1e-6 * m[COL["q3.transmit-pkts"]]
    assert heavy == light == 4


def test_a_slow_counter_keeps_its_rate_while_the_twin_changes_often(small_blueprint: Cabling) -> None:
    """A link corrupting 1e-6 of a light load counts under one error a second; flaps elsewhere change the twin's
    state every fraction of a second. Each change rebases the counters: the fraction of an error must carry over,
    or the errors never show (the accuracy bench missed such a link)."""
    clock = Clock()
    twin = lossless_twin(small_blueprint, clock)
    port = next(p for p in twin.switch("ssp-1").ports if twin.peers[("ssp-1", p)].device.startswith("spine"))
    FaultInjector(twin).inject("link_corruption", {"port": f"ssp-1:{port}", "rate": 1e-6}, clock.t)
    per_s = rate(twin, "ssp-1", port, "if.in-errors")
    assert 0.1 < per_s < 1.0  # a light cable: fewer than one error a second
    start = twin.switch("ssp-1").value(port, "if.in-errors", clock.t)
    for _ in range(200):  # 20 s, a state change every 0.1 s
        clock.t += NS // 10
        twin.touch()
        twin.advance(clock.t)
    counted = twin.switch("ssp-1").value(port, "if.in-errors", clock.t) - start
    assert abs(counted - per_s * 20) <= 1
