"""Counters obey the physics of cables, healthy and under every fault kind that shapes traffic: what one end of a
switch-to-switch cable sends (packets, octets) the other end receives, frames that arrive corrupted included, and
the pause frames one end sends are the ones the other receives. Pure: a Twin on a fixed clock, no sockets."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from lab.counters import COL
from lab.faults import FaultInjector
from lab.model import PortConfig, Twin
from topology.fabric import Fabric
from topology.model import Cabling
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
