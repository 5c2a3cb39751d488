"""link_flap over a time fabricd was not watching: the remembered carrier-transitions value against the first fresh
one, as a table. Pure: no store, no socket, no clock."""

from __future__ import annotations

from dataclasses import dataclass, field

import pytest

from fabricd.detectors.link_flap import LinkFlapConfig
from fabricd.detectors.link_flap_unwatched import CarrierSample, flap_train, missed
from topology.fabric import Fabric
from topology.units import NS

T0 = 1_700_000_000 * NS  # 2023-11-14 22:13:20 UTC
SERVER = "leaf-g0-r0:Ethernet1/1"  # faces gpu-g0-000:nic0 (a NIC streams no counters)
UP_LEAF, UP_SPINE = "leaf-g0-r0:Ethernet5/1", "spine-r0-0:Ethernet1/1"  # an uplink: both ends stream


def s(value: int, after_s: float = 0.0) -> CarrierSample:
    return CarrierSample(value, T0 + int(after_s * NS))


@dataclass(frozen=True)
class Case:
    name: str
    remembered: dict[str, CarrierSample]
    fresh: dict[str, CarrierSample]
    found: list[tuple[str, str, int, int]] = field(default_factory=list)  # (device, port, flaps, transitions)
    cfg: LinkFlapConfig = field(default_factory=LinkFlapConfig)


CASES = [
    Case("8 flaps during a 60 s restart", {SERVER: s(40)}, {SERVER: s(56, 60)},
         [("leaf-g0-r0", "Ethernet1/1", 8, 16)]),
    Case("5 downs (the last up between samples): a train", {SERVER: s(40)}, {SERVER: s(49, 60)},
         [("leaf-g0-r0", "Ethernet1/1", 5, 9)]),
    Case("4 flaps: not a train (link_flap needs 5)", {SERVER: s(40)}, {SERVER: s(48, 60)}),
    Case("no change", {SERVER: s(40)}, {SERVER: s(40, 60)}),
    Case("the counter went back (the switch rebooted): no flap", {SERVER: s(400)}, {SERVER: s(20, 60)}),
    Case("remembered 15 min before: still an incident", {SERVER: s(0)}, {SERVER: s(16, 900)},
         [("leaf-g0-r0", "Ethernet1/1", 8, 16)]),
    Case("remembered longer ago than 15 min: history", {SERVER: s(0)}, {SERVER: s(16, 901)}),
    Case("a shorter window set", {SERVER: s(0)}, {SERVER: s(16, 120)}, cfg=LinkFlapConfig(unwatched_max_s=60.0)),
    Case("nothing remembered of the port (a first run)", {}, {SERVER: s(56, 60)}),
    Case("no fresh sample yet", {SERVER: s(40)}, {}),
    Case("a fresh sample no newer than the remembered one", {SERVER: s(40, 60)}, {SERVER: s(56, 60)}),
    Case("both ends of an uplink count one flap once", {UP_LEAF: s(10), UP_SPINE: s(7)},
         {UP_LEAF: s(24, 30), UP_SPINE: s(23, 30)}, [("leaf-g0-r0", "Ethernet5/1", 8, 16)]),
    Case("the spine end alone saw the train (the leaf's counters were cleared)", {UP_LEAF: s(10), UP_SPINE: s(7)},
         {UP_LEAF: s(2, 30), UP_SPINE: s(19, 30)}, [("leaf-g0-r0", "Ethernet5/1", 6, 12)]),
    Case("a dampening that needs only 3 flaps", {SERVER: s(0)}, {SERVER: s(6, 60)},
         [("leaf-g0-r0", "Ethernet1/1", 3, 6)], cfg=LinkFlapConfig(suppress=2500.0)),
    Case("two links, one train", {SERVER: s(0), UP_LEAF: s(0)}, {SERVER: s(2, 60), UP_LEAF: s(12, 60)},
         [("leaf-g0-r0", "Ethernet5/1", 6, 12)]),
]  # fmt: skip


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_missed(case: Case, small_fabric: Fabric) -> None:
    now = T0 + 1000 * NS
    out = missed(case.remembered, case.fresh, small_fabric, case.cfg, now)
    assert [(f.device, f.port, f.evidence["flaps"], f.evidence["unwatched"]["transitions"]) for f in out] == case.found
    for f in out:
        assert f.kind == "link_flap" and f.detected_ts == now
        assert f.evidence["unwatched"]["from_ts"] == f.start_ts == min(x.ts for x in case.remembered.values())
        assert f.evidence["unwatched"]["to_ts"] > f.start_ts


def test_the_finding_says_when_and_how_often(small_fabric: Fabric) -> None:
    (f,) = missed({SERVER: s(40)}, {SERVER: s(56, 75)}, small_fabric, LinkFlapConfig(), T0 + 76 * NS)
    assert f.summary == (
        "link gpu-g0-000:nic0--leaf-g0-r0:Ethernet1/1 went down 8 times while fabricd was not watching "
        "(between 2023-11-14 22:13:20 UTC and 2023-11-14 22:14:35 UTC)"
    )
    assert f.evidence == {
        "unwatched": {"from_ts": T0, "to_ts": T0 + 75 * NS, "transitions": 16},
        "flaps": 8,
        "counted_at": SERVER,
        "flap_train": 5,
    }
    assert (f.devices, f.ports) == (("gpu-g0-000", "leaf-g0-r0"), ("gpu-g0-000:nic0", SERVER))
    assert f.severity == "warning"


def test_the_train_is_what_link_flap_calls_flapping() -> None:
    # 5 flaps at once leave 5000 > 4100; 4 leave 4000, never a finding (docs/detectors.md)
    assert flap_train(LinkFlapConfig()) == 5
    assert flap_train(LinkFlapConfig(penalty=1000.0, suppress=4000.0)) == 5  # the penalty must pass suppress
    assert flap_train(LinkFlapConfig(suppress=2500.0)) == 3
