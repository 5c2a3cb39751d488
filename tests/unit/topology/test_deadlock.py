"""Deadlock risk: bouncing routes after failures close cycles of egress queues; a healthy Clos never does."""

from __future__ import annotations

import time

import pytest

from topology.blueprint import generate_blueprint
from topology.deadlock import deadlock_risk, parse_link, resolve_failed, rotate_to_min
from topology.errors import InputError
from topology.fabric import Fabric
from topology.labels import complete_labels
from topology.model import Cabling, Role
from topology.spec import FabricSpec

# small-pod: rails 0 and 1 each lose a different superspine, so traffic between them bounces through rails 2/3.
SPLIT = ["spine-r0-0--ssp-1", "spine-r0-1--ssp-1", "spine-r1-0--ssp-0", "spine-r1-1--ssp-0"]
# Two tiers, one rail, four leaves: the classic two-failure cycle (leaf-g2 loses spine 1, leaf-g3 loses spine 0).
TWO_FAILURES = ["leaf-g2-r0--spine-r0-1", "leaf-g3-r0:Ethernet2/1--spine-r0-0:Ethernet4/1"]


@pytest.fixture(scope="module")
def small(small_blueprint: Cabling) -> Fabric:
    return Fabric(complete_labels(small_blueprint))


@pytest.fixture(scope="module")
def tiny() -> Fabric:
    spec = FabricSpec(name="tiny", rails=1, aggregation_groups=4, servers_per_group=1, spines_per_rail=2)
    return Fabric(complete_labels(generate_blueprint(spec)))


def _pairs(fabric: Fabric) -> list[str]:
    """Every switch pair cabled to each other, as devA--devB."""
    out = set()
    for link in fabric.links:
        a, b = fabric.device(link.a.device), fabric.device(link.b.device)
        if a.is_switch and b.is_switch:
            out.add("--".join(sorted((a.name, b.name))))
    return sorted(out)


def test_a_healthy_clos_has_no_cycle(small: Fabric, tiny: Fabric) -> None:
    assert deadlock_risk(small, []) == []
    assert deadlock_risk(tiny, []) == []


def test_one_failed_link_never_closes_a_cycle(small: Fabric, tiny: Fabric) -> None:
    # A cycle needs bounces in both directions; one failure in a redundant Clos leaves valley-free routes.
    for fabric in (small, tiny):
        for pair in _pairs(fabric):
            assert deadlock_risk(fabric, [pair]) == [], pair


def test_bounces_that_close_no_cycle_are_no_risk() -> None:
    # Three leaves: both bouncing pairs turn at the one remaining leaf, which never waits on itself.
    spec = FabricSpec(name="three", rails=1, aggregation_groups=3, servers_per_group=1, spines_per_rail=2)
    fabric = Fabric(complete_labels(generate_blueprint(spec)))
    assert deadlock_risk(fabric, ["leaf-g1-r0--spine-r0-1", "leaf-g2-r0--spine-r0-0"]) == []


def test_two_failures_in_two_tiers_form_the_classic_cycle(tiny: Fabric) -> None:
    risks = deadlock_risk(tiny, TWO_FAILURES)
    assert [r.queues for r in risks] == [
        ("leaf-g0-r0:Ethernet2/1", "spine-r0-0:Ethernet2/1", "leaf-g1-r0:Ethernet3/1", "spine-r0-1:Ethernet1/1"),
        ("leaf-g0-r0:Ethernet3/1", "spine-r0-1:Ethernet2/1", "leaf-g1-r0:Ethernet2/1", "spine-r0-0:Ethernet1/1"),
    ]
    r = risks[0]
    assert r.devices == ("leaf-g0-r0", "spine-r0-0", "leaf-g1-r0", "spine-r0-1")
    assert r.bounces == ("spine-r0-0>leaf-g1-r0>spine-r0-1", "spine-r0-1>leaf-g0-r0>spine-r0-0")
    assert r.failed == ("leaf-g2-r0--spine-r0-1", "leaf-g3-r0:Ethernet2/1--spine-r0-0:Ethernet4/1")
    assert r.pairs == ("leaf-g2-r0>leaf-g3-r0", "leaf-g3-r0>leaf-g2-r0")
    assert r.name.startswith("leaf-g0-r0:Ethernet2/1 -> ") and r.name.endswith(" -> leaf-g0-r0:Ethernet2/1")
    assert r.to_dict()["cycle"] == list(r.queues)


def test_failures_on_small_pod_form_a_cycle_naming_them(small: Fabric) -> None:
    started = time.perf_counter()
    risks = deadlock_risk(small, SPLIT)
    assert time.perf_counter() - started < 1.0
    assert risks
    first = risks[0]
    assert first.devices == ("spine-r2-0", "ssp-0", "spine-r3-0", "ssp-1")
    assert first.queues == (
        "spine-r2-0:Ethernet5/1",
        "ssp-0:Ethernet13/1",
        "spine-r3-0:Ethernet7/1",
        "ssp-1:Ethernet9/1",
    )
    assert first.parallel[0] == ("spine-r2-0:Ethernet5/1", "spine-r2-0:Ethernet6/1")  # two cables per hop
    assert first.bounces == ("ssp-0>spine-r3-0>ssp-1", "ssp-1>spine-r2-0>ssp-0")
    assert first.failed == tuple(sorted(SPLIT))
    assert "leaf-g0-r0>leaf-g0-r1" in first.pairs and "leaf-g0-r1>leaf-g0-r0" in first.pairs
    for r in risks:
        assert r.failed == tuple(sorted(SPLIT))
        assert {small.device(d).role for d in r.devices} == {Role.SPINE, Role.SUPERSPINE}
        # each queue's link leads to the next switch of the cycle
        for q, nxt in zip(r.queues, (*r.devices[1:], r.devices[0]), strict=True):
            peer = small.peer(*q.split(":", 1))
            assert peer is not None and peer.device == nxt
    assert len({r.devices for r in risks}) == len(risks)


def test_one_cable_of_a_bundle_is_not_the_bundle(small: Fabric) -> None:
    # spine-r0-0 keeps its second cable to ssp-1: rail 0 still reaches ssp-1 valley-free.
    one_cable = ["spine-r0-0:Ethernet7/1--ssp-1:Ethernet1/1", *SPLIT[1:]]
    assert deadlock_risk(small, one_cable) == []


def test_link_names_resolve_to_cables(small: Fabric) -> None:
    assert parse_link(" leaf-g0-r0:Ethernet5/1--spine-r0-0:Ethernet1/1 ") == (
        "leaf-g0-r0:Ethernet5/1",
        "spine-r0-0:Ethernet1/1",
    )
    bundle, cable, again = resolve_failed(
        small,
        [
            "spine-r0-0--leaf-g0-r0",
            "spine-r0-0:Ethernet1/1--leaf-g0-r0:Ethernet5/1",
            ("spine-r0-0:Ethernet2/1", "leaf-g0-r0"),  # one port named: the cable on it
        ],
    )
    assert bundle.name == "leaf-g0-r0--spine-r0-0" and len(bundle.links) == 2
    assert cable.name == "leaf-g0-r0:Ethernet5/1--spine-r0-0:Ethernet1/1" and len(cable.links) == 1
    assert again.name == "leaf-g0-r0:Ethernet6/1--spine-r0-0:Ethernet2/1"
    # the same link named twice is one failure
    assert len(resolve_failed(small, ["ssp-0--spine-r0-0", "spine-r0-0--ssp-0"])) == 1


@pytest.mark.parametrize(
    ("link", "message"),
    [
        ("leaf-g0-r0", "leaf-g0-r0: not a link name; name a link as devA:port--devB:port"),
        ("leaf-g0-r0--", "not a link name"),
        ("leaf-g7-r9--spine-r0-0", "leaf-g7-r9--spine-r0-0: no device 'leaf-g7-r9' in this fabric"),
        ("leaf-g0-r0:Ethernet99/1--spine-r0-0", "'leaf-g0-r0:Ethernet99/1' is not a cabled port"),
        ("leaf-g0-r0--leaf-g1-r0", "leaf-g0-r0 and leaf-g1-r0 are not cabled to each other"),
        ("leaf-g0-r0:Ethernet5/1--spine-r0-1", "leaf-g0-r0:Ethernet5/1 and spine-r0-1 are not cabled"),
    ],
)
def test_bad_links_raise_input_errors_naming_them(small: Fabric, link: str, message: str) -> None:
    with pytest.raises(InputError) as info:
        deadlock_risk(small, [link])
    assert message in str(info.value)
    assert str(info.value).startswith(link.strip())


def test_rotation_starts_at_the_smallest_element() -> None:
    assert rotate_to_min(["spine-b", "leaf-a", "spine-a"]) == ("leaf-a", "spine-a", "spine-b")
