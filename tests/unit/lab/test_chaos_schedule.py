"""The chaos schedule is a pure function of seed, fabric and options: the same seed replays the same run."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

from lab.chaos.facts import FabricFacts
from lab.chaos.schedule import FAULT_KINDS, ChaosOptions, ScheduleError, make_schedule
from tests.conftest import EXAMPLES
from topology.blueprint import generate_blueprint
from topology.fabric import Fabric
from topology.spec import load_spec

FACTS = FabricFacts.of(Fabric(generate_blueprint(load_spec(EXAMPLES / "small-pod.yaml"))), "small-pod")
OPTS = ChaosOptions(minutes=10)


def test_facts_of_the_small_pod() -> None:
    assert len(FACTS.server_ports) == 32 and len(FACTS.nics) == 32
    assert FACTS.uplinks_of["leaf-g0-r0"] == tuple(f"leaf-g0-r0:Ethernet{i}/1" for i in range(5, 9))
    assert FACTS.peer["leaf-g0-r0:Ethernet1/1"] == "gpu-g0-000:nic0"
    assert FACTS.cycles[0] == ("leaf-g0-r0", "spine-r0-0", "leaf-g1-r0", "spine-r0-1")


def test_the_same_seed_replays_the_same_schedule_and_another_differs() -> None:
    a, b = make_schedule(42, FACTS, OPTS), make_schedule(42, FACTS, OPTS)
    assert a == b and a.steps and a.repairs
    assert make_schedule(43, FACTS, OPTS).steps != a.steps


def test_every_fault_is_cleared_within_the_schedule_after_it_starts() -> None:
    s = make_schedule(7, FACTS, OPTS)
    starts = {x.ref: x.at_s for x in s.steps if x.what == "fault"}
    clears = {x.ref: x.at_s for x in s.steps if x.what == "clear"}
    assert starts.keys() == clears.keys()
    assert all(starts[r] <= clears[r] <= s.duration_s for r in starts)
    assert [x.at_s for x in s.steps] == sorted(x.at_s for x in s.steps)
    counts = s.counts()
    assert sum(v for k, v in counts.items() if k.startswith("fault:")) >= 60  # ~8 a minute over 10 minutes
    assert {k.split(":")[1] for k in counts if k.startswith("fault:")} == set(FAULT_KINDS)
    assert any(k.startswith("process:") for k in counts) and any(k.startswith("operator:") for k in counts)


@pytest.mark.parametrize(
    ("change", "kinds_seen"),
    [
        ({"kinds": ("link_flap",)}, {"link_flap"}),
        ({"kinds": ("bgp_down", "reboot")}, {"bgp_down", "reboot"}),
    ],
)
def test_kinds_restrict_the_faults(change: dict[str, Any], kinds_seen: set[str]) -> None:
    s = make_schedule(1, FACTS, replace(OPTS, **change))
    assert {x.kind for x in s.steps if x.what == "fault"} == kinds_seen


def test_ports_restrict_the_link_faults() -> None:
    ports = ("leaf-g0-r0:Ethernet1/1", "leaf-g0-r0:Ethernet5/1")
    s = make_schedule(3, FACTS, replace(OPTS, kinds=("link_flap", "link_down"), ports=ports))
    assert {x.params["port"] for x in s.steps if x.what == "fault"} <= set(ports)


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"kinds": ("link_flap", "meteor")}, "unknown fault kind meteor: use some of link_flap, "),
        ({"process_kinds": ("reboot_host",)}, "unknown process fault reboot_host"),
        (
            {"ports": ("leaf-g0-r0:Ethernet99/1",)},
            "port leaf-g0-r0:Ethernet99/1 is not a cabled switch port of small-pod",
        ),
        ({"ports": ("gpu-g0-000:nic0",)}, "port gpu-g0-000:nic0 is not a cabled switch port"),
        ({"minutes": 0.0}, "--minutes 0: must be more than 0 and at most 1440"),
        ({"minutes": float("inf")}, "--minutes inf: must be more than 0 and at most 1440"),
        ({"faults_per_min": float("nan")}, "--faults-per-min nan: must be at least 0 and at most 60"),
        ({"operator_per_min": -1.0}, "--operator-per-min -1: must be at least 0 and at most 10"),
        ({"kinds": ()}, "--kinds names no fault kind: use some of link_flap, "),
    ],
)
def test_bad_options_are_refused_by_name(change: dict[str, Any], message: str) -> None:
    with pytest.raises(ScheduleError, match="^" + message.replace("(", r"\(")):
        make_schedule(1, FACTS, replace(OPTS, **change))


def test_repairs_some_fast_one_in_five_on_the_wrong_cable() -> None:
    repairs = make_schedule(5, FACTS, OPTS).repairs[:400]
    fast = sum(r.delay_s < 1 for r in repairs)
    wrong = sum(r.wrong_cable for r in repairs)
    assert 60 <= fast <= 140  # a quarter
    assert 50 <= wrong <= 110  # a fifth
    assert all(0.05 <= r.delay_s <= 25 for r in repairs)


def test_a_miscable_swaps_with_another_rail() -> None:
    s = make_schedule(11, FACTS, replace(OPTS, kinds=("miscable",)))
    swaps = [x.params for x in s.steps if x.what == "fault"]
    assert swaps
    for p in swaps:
        a, b = p["port"].split(":")[0], p["other"].split(":")[0]
        assert FACTS.rail[a] != FACTS.rail[b]
        assert (p["port"] in FACTS.server_ports) == (p["other"] in FACTS.server_ports)
