"""Planned maintenance's pure parts: what a drain takes out, its plan, the guard's drain check (the drain counted
with faults, BGP-down uplinks, holds and other drains), and the undrain checks. On the small pod with 4 spines per
rail (each leaf: 4 uplinks, one to each spine: a spine drained leaves its leaves exactly 75%)."""

from __future__ import annotations

import pytest

from fabricd.service.config import SafetyLimits
from fabricd.service.guard import GuardInput, check_disable, check_drain
from fabricd.service.maintenance.plan import (
    DrainedCapacity,
    MaintenanceInputError,
    PortReading,
    SessionEnd,
    check_new,
    drained_capacity,
    errors_rose,
    next_step,
    overran,
    plan,
    still_carrying,
    target,
    undrain_problems,
)
from topology.fabric import Fabric
from topology.model import Endpoint
from topology.underlay import Underlay

from .harness import pod_variant

LIMITS = SafetyLimits()
NS = 1_000_000_000


@pytest.fixture(scope="module")
def fabric(tmp_path_factory: pytest.TempPathFactory) -> Fabric:
    return pod_variant(tmp_path_factory.mktemp("four-spines"), spines_per_rail=4)


def ep(text: str) -> Endpoint:
    device, port = text.split(":")
    return Endpoint(device, port)


def known(*, oper: tuple[str, ...] = (), routed: tuple[str, ...] = (), held: tuple[str, ...] = (),
          drained: tuple[str, ...] = ()) -> GuardInput:  # fmt: skip
    return GuardInput(frozenset(map(ep, held)), frozenset(map(ep, oper)), 0, frozenset(map(ep, routed)),
                      frozenset(map(ep, drained)))  # fmt: skip


def test_targets(fabric: Fabric) -> None:
    t = target(fabric, "switch", "spine-r0-0")
    assert t.shifted == ("spine-r0-0",) and t.spared == "spine-r0-0"
    assert len(t.ports) == 2 * len(fabric.links_of("spine-r0-0"))
    link = target(fabric, "link", "leaf-g0-r0:Ethernet5/1")
    assert [str(p) for p in link.ports] == ["leaf-g0-r0:Ethernet5/1", "spine-r0-0:Ethernet1/1"]
    assert link.shifted == ()  # maintenance mode is the whole switch's: a link's BGP session is drained instead
    underlay = Underlay(fabric)
    up, down = underlay.session("leaf-g0-r0", "Ethernet5/1"), underlay.session("spine-r0-0", "Ethernet1/1")
    assert up is not None and down is not None
    assert link.sessions == (
        SessionEnd(ep("leaf-g0-r0:Ethernet5/1"), up.peer_address, up.local_asn),
        SessionEnd(ep("spine-r0-0:Ethernet1/1"), down.peer_address, down.local_asn),
    )
    port = target(fabric, "port", "leaf-g0-r0:Ethernet5/1")
    assert [str(p) for p in port.ports] == ["leaf-g0-r0:Ethernet5/1"] and port.spared is None
    assert port.sessions == link.sessions  # both ends: neither sends over the link
    server = target(fabric, "port", "leaf-g0-r0:Ethernet1/1")
    assert server.sessions == () and server.shifted == ()  # a server's NIC: the drain hook and the shut move it


@pytest.mark.parametrize(
    ("kind", "name", "message"),
    [
        ("switch", "spine-9", "switch spine-9: not a switch of the blueprint; see `fabricd topology`"),
        ("switch", "gpu-g0-000", "switch gpu-g0-000: not a switch of the blueprint; see `fabricd topology`"),
        ("port", "leaf-g0-r0", "port 'leaf-g0-r0': name it as device:port, e.g. leaf-g0-r0:Ethernet5/1"),
        (
            "port",
            "leaf-x:Ethernet1/1",
            "port leaf-x:Ethernet1/1: no device leaf-x in the blueprint; see `fabricd topology`",
        ),
        (
            "link",
            "leaf-g0-r0:Ethernet99/1",
            "link leaf-g0-r0:Ethernet99/1: Ethernet99/1 is not a cabled port of leaf-g0-r0 in the blueprint",
        ),
    ],
)
def test_bad_targets_are_one_line(fabric: Fabric, kind: str, name: str, message: str) -> None:
    with pytest.raises(MaintenanceInputError) as e:
        target(fabric, kind, name)  # type: ignore[arg-type]
    assert str(e.value) == message


# what is drained, what is already gone -> rule, reason (exact)
DRAIN_CASES = [
    pytest.param(("switch", "spine-r0-0"), {}, "ok", "capacity allows it", id="spine-leaves-75pct"),
    pytest.param(
        ("switch", "spine-r0-0"),
        {"oper": ("leaf-g0-r0:Ethernet6/1",)},
        "capacity",
        "leaf-g0-r0 would keep 800 of 1600 Gb/s uplink capacity (50%), below the 75% limit",
        id="spine-with-an-uplink-down",
    ),
    pytest.param(
        ("switch", "spine-r0-0"),
        {"routed": ("leaf-g1-r0:Ethernet7/1", "spine-r0-2:Ethernet2/1")},
        "capacity",
        "leaf-g1-r0 would keep 800 of 1600 Gb/s uplink capacity (50%), below the 75% limit; 1 uplink(s) "
        "counted lost because their BGP session is down",
        id="spine-with-a-bgp-down-uplink",
    ),
    pytest.param(
        ("switch", "spine-r0-0"),
        {"drained": ("leaf-g0-r0:Ethernet8/1", "spine-r0-3:Ethernet1/1")},
        "capacity",
        "leaf-g0-r0 would keep 800 of 1600 Gb/s uplink capacity (50%), below the 75% limit",
        id="spine-with-another-drain",
    ),
    pytest.param(
        ("switch", "spine-r0-0"),
        {"held": ("leaf-g0-r0:Ethernet6/1",)},
        "capacity",
        "leaf-g0-r0 would keep 800 of 1600 Gb/s uplink capacity (50%), below the 75% limit",
        id="spine-with-a-hold",
    ),
    pytest.param(
        ("switch", "spine-r1-0"),
        {"oper": ("leaf-g0-r0:Ethernet6/1",)},
        "ok",
        "capacity allows it",
        id="other-rail-unaffected",
    ),
    pytest.param(("link", "leaf-g0-r0:Ethernet5/1"), {}, "ok", "capacity allows it", id="one-uplink"),
    pytest.param(("port", "leaf-g0-r0:Ethernet1/1"), {}, "ok", "capacity allows it", id="server-port"),
]


@pytest.mark.parametrize(("what", "gone", "rule", "reason"), DRAIN_CASES)
def test_drain_check(fabric: Fabric, what: tuple[str, str], gone: dict[str, tuple[str, ...]], rule: str,
                     reason: str) -> None:  # fmt: skip
    t = target(fabric, what[0], what[1])  # type: ignore[arg-type]
    v = check_drain(fabric, LIMITS, t.ports, known(**gone), t.spared)
    assert (v.rule, v.reason) == (rule, reason)


def test_a_fault_elsewhere_is_judged_with_the_drain_counted(fabric: Fabric) -> None:
    """A flap on a leaf uplink while a spine is drained: taking it down would leave 50%, refused."""
    spine = target(fabric, "switch", "spine-r0-0")
    flap = ep("leaf-g0-r0:Ethernet6/1")
    assert check_disable(fabric, LIMITS, flap, known()).allowed
    v = check_disable(fabric, LIMITS, flap, known(drained=tuple(map(str, spine.ports))))
    assert (v.rule, v.reason) == (
        "capacity",
        "leaf-g0-r0 would keep 800 of 1600 Gb/s uplink capacity (50%), below the 75% limit",
    )


def test_plan_per_platform_and_kind(fabric: Fabric) -> None:
    spine = target(fabric, "switch", "spine-r0-0")
    names = [s.name for s in plan(fabric, spine, shut=False, threshold_bps=1e6, timeout_s=60)]
    assert names == ["guard", "shift", "verify", "drained"]
    steps = plan(fabric, spine, shut=True, threshold_bps=1e6, timeout_s=60)
    assert [s.name for s in steps] == ["guard", "shift", "verify", "shut", "hold", "drained"]
    assert steps[1].text == "shift traffic away from spine-r0-0: maintenance mode, BGP graceful shutdown (65535:0)"
    link = plan(fabric, target(fabric, "link", "leaf-g0-r0:Ethernet5/1"), shut=False, threshold_bps=1e6, timeout_s=60)
    assert [s.name for s in link] == ["guard", "shift_session", "shift_session", "verify", "shut", "hold", "drained"]
    assert link[1].text == (
        "de-prefer leaf-g0-r0:Ethernet5/1's BGP session to 10.0.0.0: RFC 8326 65535:0 and AS 4200000000 prepended "
        "3 times"
    )
    server = plan(fabric, target(fabric, "port", "leaf-g0-r0:Ethernet1/1"), shut=False, threshold_bps=1e6,
                  timeout_s=60)  # fmt: skip
    assert [s.name for s in server] == ["guard", "shut", "hold", "drained"]
    assert next_step(steps, 0) == steps[0] and next_step(steps, 3) == steps[3] and next_step(steps, 6) is None


def test_sonic_switches_shift_with_tsa(tmp_path_factory: pytest.TempPathFactory) -> None:
    platforms = {"leaf": "sonic", "spine": "sonic", "superspine": "sonic", "dr": "sonic"}
    sonic = pod_variant(tmp_path_factory.mktemp("sonic"), spines_per_rail=4, platforms=platforms)
    steps = plan(sonic, target(sonic, "switch", "spine-r0-0"), shut=False, threshold_bps=1e6, timeout_s=60)
    assert steps[1].text == "shift traffic away from spine-r0-0: TSA (traffic shift away)"


def test_new_drain_checks(fabric: Fabric) -> None:
    spine = target(fabric, "switch", "spine-r0-0")
    check_new(spine, [], None, 100 * NS)
    check_new(spine, [], 200 * NS, 100 * NS)
    with pytest.raises(MaintenanceInputError, match=r"^switch spine-r0-0: leaf-g0-r0:Ethernet5/1 is already drained"):
        check_new(spine, [ep("leaf-g0-r0:Ethernet5/1")], None, 100 * NS)
    with pytest.raises(MaintenanceInputError, match=r"^--until is in the past; give a time after now \(UTC\), e.g. "):
        check_new(spine, [], 50 * NS, 100 * NS)


def test_still_carrying() -> None:
    rates = {ep("a:1"): 10.0, ep("a:2"): 5e9, ep("a:3"): None}
    assert still_carrying(rates, 1e6) == ["a:2: 5e+09 b/s", "a:3: no rate yet"]
    assert still_carrying({ep("a:1"): 0.0}, 1e6) == []


def test_undrain_problems(fabric: Fabric) -> None:
    a, b = ep("leaf-g0-r0:Ethernet5/1"), ep("spine-r0-0:Ethernet1/1")
    good = {a: PortReading(True, b, True, 0), b: PortReading(True, a, True, 0)}
    assert undrain_problems(fabric, good, 10) == []
    swapped = ep("leaf-g1-r0:Ethernet5/1")
    bad = {
        a: PortReading(True, swapped, False, 12),
        b: PortReading(False, None, None, 0),
    }
    assert undrain_problems(fabric, bad, 10) == [
        "leaf-g0-r0:Ethernet5/1 faces leaf-g1-r0:Ethernet5/1 by LLDP, the blueprint has spine-r0-0:Ethernet1/1: "
        "move the cable back to spine-r0-0:Ethernet1/1",
        "leaf-g0-r0:Ethernet5/1: its BGP session is not established",
        "leaf-g0-r0:Ethernet5/1: error counters rose by 12 in 10 s (clean the optic or reseat the cable, then undrain "
        "again)",
        "spine-r0-0:Ethernet1/1 is down",
    ]
    silent = {a: PortReading(True, None, None, 0)}
    assert undrain_problems(fabric, silent, 10) == [
        "leaf-g0-r0:Ethernet5/1: no fresh LLDP neighbour heard yet (the blueprint has spine-r0-0:Ethernet1/1 there)"
    ]


def test_errors_rose() -> None:
    assert errors_rose({"if.in-errors": 5.0}, {"if.in-errors": 5.0}) == 0
    assert (
        errors_rose({"if.in-errors": 5.0, "if.in-fcs-errors": 1.0}, {"if.in-errors": 9.0, "if.in-fcs-errors": 3.0}) == 6
    )
    assert errors_rose({"if.in-errors": 500.0}, {"if.in-errors": 4.0}) == 4  # the switch restarted: from zero
    assert errors_rose({}, {"eth.in-crc-errors": 2.0}) == 2 and errors_rose({"if.in-errors": 3.0}, {}) == 0


LEAF_UP = DrainedCapacity("leaf-g0-r0", "uplink", 1, 400.0)
SPINE_DOWN = DrainedCapacity("spine-r0-0", "downlink", 1, 400.0)
CAPACITY_CASES = [
    pytest.param([], [], id="nothing drained"),
    # a port drain of either end takes the link from both switches; a link drain counts it once, not twice
    pytest.param(["leaf-g0-r0:Ethernet5/1"], [LEAF_UP, SPINE_DOWN], id="leaf uplink port"),
    pytest.param(["spine-r0-0:Ethernet1/1"], [LEAF_UP, SPINE_DOWN], id="spine downlink port"),
    pytest.param(["leaf-g0-r0:Ethernet5/1", "spine-r0-0:Ethernet1/1"], [LEAF_UP, SPINE_DOWN], id="link"),
    # a server-facing port: the leaf's downlink; servers get no row
    pytest.param(["leaf-g0-r0:Ethernet1/1"], [DrainedCapacity("leaf-g0-r0", "downlink", 1, 400.0)], id="server port"),
    # a whole spine: its 2 leaves lose an uplink each, its 2 superspines a downlink each, itself all 4 links
    pytest.param(
        "spine-r0-0",
        [
            DrainedCapacity("leaf-g0-r0", "uplink", 1, 400.0),
            DrainedCapacity("leaf-g1-r0", "uplink", 1, 400.0),
            DrainedCapacity("spine-r0-0", "downlink", 2, 800.0),
            DrainedCapacity("spine-r0-0", "uplink", 2, 800.0),
            DrainedCapacity("ssp-0", "downlink", 1, 400.0),
            DrainedCapacity("ssp-1", "downlink", 1, 400.0),
        ],
        id="spine switch",
    ),
    pytest.param(["leaf-g0-r0:Ethernet99/1", "nope:Ethernet1/1"], [], id="not in the blueprint"),
]


@pytest.mark.parametrize(("drained", "want"), CAPACITY_CASES)
def test_drained_capacity(fabric: Fabric, drained: str | list[str], want: list[DrainedCapacity]) -> None:
    ports = target(fabric, "switch", drained).ports if isinstance(drained, str) else tuple(map(ep, drained))
    got = drained_capacity(fabric, ports)
    assert got == want
    # each drained inter-switch link is one switch's uplink: summed, the uplink rows count it once
    links = {lk for p in ports if (lk := fabric.link_of(p.device, p.port)) and fabric.device(lk.a.device).is_switch
             and fabric.device(lk.b.device).is_switch}  # fmt: skip
    assert sum(c.links for c in got if c.direction == "uplink") == len(links)


def test_overran() -> None:
    assert overran(100, "drained", 101) and not overran(100, "drained", 100)
    assert not overran(None, "drained", 10**20) and not overran(100, "undrained", 101)
