"""The safety guard, table-driven on the small pod (4 uplinks per leaf: 2 to each of its rail's 2 spines) and on
a variant with oversubscription 2 (2 uplinks per leaf, one to each spine)."""

from __future__ import annotations

import pytest

from fabricd.service.config import SafetyLimits
from fabricd.service.guard import GuardInput, budgets, check_disable, is_uplink
from tests.conftest import EXAMPLES
from topology.fabric import Fabric
from topology.load import load_fabric
from topology.model import Endpoint

from .harness import pod_variant

DEFAULT = SafetyLimits()


@pytest.fixture(scope="module")
def fabrics(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Fabric]:
    return {
        "small": load_fabric(EXAMPLES / "small-pod.yaml", None)[1],
        "two_uplinks": pod_variant(tmp_path_factory.mktemp("two-uplinks"), oversubscription=2.0),
    }


def ep(text: str) -> Endpoint:
    device, port = text.split(":")
    return Endpoint(device, port)


def eps(*texts: str) -> frozenset[Endpoint]:
    return frozenset(ep(t) for t in texts)


def test_fabric_shapes(fabrics: dict[str, Fabric]) -> None:
    """What the table below relies on."""
    small, two = fabrics["small"], fabrics["two_uplinks"]
    up = [str(lk.other("leaf-g0-r0")) for lk in small.links_of("leaf-g0-r0") if is_uplink(small, "leaf-g0-r0", lk)]
    assert up == [
        "spine-r0-0:Ethernet1/1",
        "spine-r0-0:Ethernet2/1",
        "spine-r0-1:Ethernet1/1",
        "spine-r0-1:Ethernet2/1",
    ]
    up = [str(lk.other("leaf-g0-r0")) for lk in two.links_of("leaf-g0-r0") if is_uplink(two, "leaf-g0-r0", lk)]
    assert up == ["spine-r0-0:Ethernet1/1", "spine-r0-1:Ethernet1/1"]
    assert str(small.peer("leaf-g0-r0", "Ethernet1/1")) == "gpu-g0-000:nic0"
    down = small.link_of("spine-r0-0", "Ethernet1/1")
    assert down is not None and not is_uplink(small, "spine-r0-0", down)


# fabric, limits, target, held down by fabricd, oper-down, disables in the last hour -> rule, reason (exact)
CASES = [
    pytest.param(
        "small", DEFAULT, "leaf-g0-r0:Ethernet1/1", (), (), 0,
        "ok", "capacity and budgets allow it", id="server-port",
    ),
    pytest.param(
        "small", DEFAULT, "leaf-g0-r0:Ethernet5/1", (), (), 0,
        "ok", "capacity and budgets allow it", id="uplink-1-of-4-keeps-exactly-75pct",
    ),
    pytest.param(
        "small", DEFAULT, "leaf-g0-r0:Ethernet5/1", (), ("leaf-g0-r0:Ethernet7/1",), 0,
        "capacity", "leaf-g0-r0 would keep 800 of 1600 Gb/s uplink capacity (50%), below the 75% limit",
        id="uplink-1-of-4-with-another-oper-down",
    ),
    pytest.param(
        "small", DEFAULT, "leaf-g0-r0:Ethernet5/1", (), ("leaf-g0-r0:Ethernet6/1",), 0,
        "redundancy", "leaf-g0-r0:Ethernet5/1 is the last working link of its bundle to spine-r0-0",
        id="last-of-bundle",
    ),
    pytest.param(
        "two_uplinks", DEFAULT, "leaf-g0-r0:Ethernet5/1", (), (), 0,
        "capacity", "leaf-g0-r0 would keep 400 of 800 Gb/s uplink capacity (50%), below the 75% limit",
        id="uplink-1-of-2",
    ),
    pytest.param(
        "two_uplinks", SafetyLimits(min_uplink_fraction=0.5), "leaf-g0-r0:Ethernet5/1", (), (), 0,
        "ok", "capacity and budgets allow it", id="uplink-1-of-2-at-50pct",
    ),
    pytest.param(
        "two_uplinks", SafetyLimits(min_uplink_fraction=0.5), "leaf-g0-r0:Ethernet5/1",
        (), ("leaf-g0-r0:Ethernet6/1",), 0,
        "capacity", "leaf-g0-r0 would keep 0 of 800 Gb/s uplink capacity (0%), below the 50% limit",
        id="uplink-1-of-2-at-50pct-other-oper-down",
    ),
    pytest.param(
        "two_uplinks", SafetyLimits(min_uplink_fraction=0.5), "spine-r0-0:Ethernet1/1",
        (), ("leaf-g0-r0:Ethernet6/1",), 0,
        "capacity", "leaf-g0-r0 would keep 0 of 800 Gb/s uplink capacity (0%), below the 50% limit",
        id="spine-end-checks-the-leafs-capacity",
    ),
    pytest.param(
        "small", DEFAULT, "leaf-g0-r0:Ethernet1/1", ("leaf-g0-r0:Ethernet2/1", "leaf-g0-r0:Ethernet3/1"), (), 0,
        "switch_budget", "leaf-g0-r0 already has 2 ports held down (limit 2)", id="switch-budget",
    ),
    pytest.param(
        "small", SafetyLimits(max_down_per_switch=1), "leaf-g0-r0:Ethernet1/1", ("leaf-g0-r0:Ethernet2/1",), (), 0,
        "switch_budget", "leaf-g0-r0 already has 1 ports held down (limit 1)", id="switch-budget-1",
    ),
    pytest.param(
        "small", DEFAULT, "leaf-g0-r0:Ethernet1/1",
        ("leaf-g1-r0:Ethernet1/1", "leaf-g1-r0:Ethernet2/1", "spine-r0-1:Ethernet5/1", "spine-r0-1:Ethernet6/1"), (), 0,
        "rail_budget", "rail 0 already has 4 ports held down (limit 4)", id="rail-budget",
    ),
    pytest.param(
        "small", DEFAULT, "leaf-g0-r0:Ethernet1/1",
        ("leaf-g0-r0:Ethernet2/1", "leaf-g0-r1:Ethernet1/1", "leaf-g0-r2:Ethernet1/1", "leaf-g0-r3:Ethernet1/1",
         "leaf-g1-r0:Ethernet1/1", "leaf-g1-r1:Ethernet1/1", "leaf-g1-r2:Ethernet1/1", "leaf-g1-r3:Ethernet1/1"),
        (), 0,
        "fabric_budget", "8 ports held down fabric-wide (limit 8)", id="fabric-budget",
    ),
    pytest.param(
        "small", DEFAULT, "leaf-g0-r0:Ethernet1/1", (), (), 10,
        "rate", "10 ports disabled in the last hour (limit 10)", id="rate",
    ),
    pytest.param(
        "small", DEFAULT, "leaf-g0-r0:Ethernet1/1", (), (), 9,
        "ok", "capacity and budgets allow it", id="rate-one-below",
    ),
    pytest.param(
        "small", DEFAULT, "spine-r0-0:Ethernet1/1", ("leaf-g0-r0:Ethernet5/1",), (), 0,
        "redundancy", "the other end leaf-g0-r0:Ethernet5/1 is already held down by fabricd", id="peer-held",
    ),
    pytest.param(
        "small", DEFAULT, "leaf-g0-r0:Ethernet99/1", (), (), 0,
        "unknown_port", "leaf-g0-r0:Ethernet99/1 is not a cabled port of the fabric; not touching it", id="unknown",
    ),
    pytest.param(
        "small", DEFAULT, "nosuch-switch:Ethernet1/1", (), (), 0,
        "unknown_port", "nosuch-switch:Ethernet1/1 is not a cabled port of the fabric; not touching it",
        id="unknown-device",
    ),
    # A link is down when either end is: fabricd holding down the spine end of a leaf uplink costs the leaf that
    # uplink even before telemetry shows the leaf end down.
    pytest.param(
        "small", DEFAULT, "leaf-g0-r0:Ethernet5/1", ("spine-r0-1:Ethernet1/1",), (), 0,
        "capacity", "leaf-g0-r0 would keep 800 of 1600 Gb/s uplink capacity (50%), below the 75% limit",
        id="far-end-held-counts-for-capacity",
    ),
    pytest.param(
        "small", DEFAULT, "leaf-g0-r0:Ethernet5/1", ("spine-r0-0:Ethernet2/1",), (), 0,
        "redundancy", "leaf-g0-r0:Ethernet5/1 is the last working link of its bundle to spine-r0-0",
        id="far-end-held-counts-for-bundle",
    ),
]  # fmt: skip


@pytest.mark.parametrize(("fabric", "limits", "target", "held", "down", "rate", "rule", "reason"), CASES)
def test_check_disable(
    fabrics: dict[str, Fabric],
    fabric: str,
    limits: SafetyLimits,
    target: str,
    held: tuple[str, ...],
    down: tuple[str, ...],
    rate: int,
    rule: str,
    reason: str,
) -> None:
    known = GuardInput(held_down=eps(*held), oper_down=eps(*down), disables_last_hour=rate)
    v = check_disable(fabrics[fabric], limits, ep(target), known)
    assert (v.rule, v.reason) == (rule, reason)
    assert v.allowed is (rule == "ok")


def test_a_bgp_session_down_with_its_link_up_counts_as_lost_capacity(fabrics: dict[str, Fabric]) -> None:
    """The same disable the guard allows (3 of 4 uplinks keep 75%) is refused when another uplink's BGP session is
    down: that link carries no routed traffic, whatever its oper status says."""
    target = ep("leaf-g0-r0:Ethernet5/1")
    allowed = check_disable(fabrics["small"], DEFAULT, target, GuardInput(frozenset(), frozenset(), 0))
    assert allowed.allowed
    routed = eps("leaf-g0-r0:Ethernet7/1", "spine-r0-1:Ethernet1/1")
    v = check_disable(fabrics["small"], DEFAULT, target, GuardInput(frozenset(), frozenset(), 0, routed))
    assert (v.allowed, v.rule) == (False, "capacity")
    assert v.reason == (
        "leaf-g0-r0 would keep 800 of 1600 Gb/s uplink capacity (50%), below the 75% limit; 1 uplink(s) counted lost"
        " because their BGP session is down"
    )


def test_rule_order_rate_before_budgets(fabrics: dict[str, Fabric]) -> None:
    """When several limits hold, the rate limit is the one named (it is the cheapest to explain)."""
    known = GuardInput(eps("leaf-g0-r0:Ethernet2/1", "leaf-g0-r0:Ethernet3/1"), frozenset(), 10)
    v = check_disable(fabrics["small"], DEFAULT, ep("leaf-g0-r0:Ethernet1/1"), known)
    assert v.rule == "rate"


def test_zero_budgets_refuse_everything(fabrics: dict[str, Fabric]) -> None:
    limits = SafetyLimits(max_actions_per_hour=0)
    v = check_disable(fabrics["small"], limits, ep("leaf-g0-r0:Ethernet1/1"), GuardInput(frozenset(), frozenset(), 0))
    assert (v.allowed, v.rule) == (False, "rate")


@pytest.mark.parametrize(
    ("held", "last_hour", "used"),
    [
        ((), 0, {"rate": 0, "switch_budget": 0, "rail_budget": 0, "fabric_budget": 0}),
        # two ports on one leaf of rail 0, one on a leaf of rail 1: the busiest switch holds 2, the busiest rail 2
        (
            ("leaf-g0-r0:Ethernet2/1", "leaf-g0-r0:Ethernet3/1", "leaf-g1-r1:Ethernet1/1"),
            5,
            {"rate": 5, "switch_budget": 2, "rail_budget": 2, "fabric_budget": 3},
        ),
    ],
    ids=["idle", "three-held"],
)
def test_budgets_say_what_is_used_of_each_limit(
    fabrics: dict[str, Fabric], held: tuple[str, ...], last_hour: int, used: dict[str, int]
) -> None:
    got = budgets(fabrics["small"], DEFAULT, GuardInput(eps(*held), frozenset(), last_hour))
    assert {b.limit: b.used for b in got} == used
    assert {b.limit: b.allowed for b in got} == {"rate": 10, "switch_budget": 2, "rail_budget": 4, "fabric_budget": 8}


def test_a_used_up_budget_is_the_rule_that_refuses(fabrics: dict[str, Fabric]) -> None:
    # budgets() and check_disable() agree: the switch budget shows 2 of 2 and a third port on that switch is refused
    known = GuardInput(eps("leaf-g0-r0:Ethernet2/1", "leaf-g0-r0:Ethernet3/1"), frozenset(), 0)
    (switch,) = [b for b in budgets(fabrics["small"], DEFAULT, known) if b.limit == "switch_budget"]
    assert switch.used >= switch.allowed
    assert check_disable(fabrics["small"], DEFAULT, ep("leaf-g0-r0:Ethernet1/1"), known).rule == switch.limit
