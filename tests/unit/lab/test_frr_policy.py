"""FRR configured through vtysh on the SONiC twin (lab/frr_policy.py): a drain's route map on one neighbour, as FRR
takes it and refuses it, and what the traffic model does with it."""

from __future__ import annotations

import pytest

from lab.frr_policy import FrrPolicy

N1, N2 = "10.0.0.0", "10.0.0.2"
DRAIN = [
    "configure terminal", "route-map FABRICD-DRAIN permit 10", "set community 65535:0 additive",
    "set as-path prepend 65001 65001 65001", "exit", "router bgp 65001", "address-family ipv4 unicast",
    f"neighbor {N1} route-map FABRICD-DRAIN out", "end",
]  # fmt: skip


def policy() -> FrrPolicy:
    return FrrPolicy(65001, {N1, N2})


def test_a_drain_route_map_on_one_neighbour_and_back() -> None:
    p = policy()
    assert p.run(DRAIN) == ("", "", 0)
    assert p.depreferred() == {N1}
    back = ["configure terminal", "router bgp 65001", "address-family ipv4 unicast",
            f"no neighbor {N1} route-map FABRICD-DRAIN out", "end"]  # fmt: skip
    assert p.run(back) == ("", "", 0) and p.depreferred() == frozenset()


@pytest.mark.parametrize(
    ("sets", "depreferred"),
    [
        (["set community 65535:0"], True),
        (["set community graceful-shutdown additive"], True),
        (["set as-path prepend 65001"], True),
        (["set community 65000:1 additive"], False),  # another community: nothing moves
        ([], False),
    ],
)
def test_what_de_prefers(sets: list[str], depreferred: bool) -> None:
    p = policy()
    cmds = ["configure terminal", "route-map M permit 10", *sets, "exit", "router bgp 65001",
            "address-family ipv4 unicast", f"neighbor {N2} route-map M out", "end"]  # fmt: skip
    assert p.run(cmds)[2] == 0
    assert p.depreferred() == ({N2} if depreferred else frozenset())


@pytest.mark.parametrize(
    ("commands", "error"),
    [
        (["route-map M permit 10"], "% Unknown command: route-map M permit 10"),  # not in configure mode
        (["configure terminal", "router bgp 65002"], "% BGP is already running; AS is 65001"),
        (
            ["configure terminal", "router bgp 65001", "neighbor 10.9.9.9 route-map M out"],
            "% Specify remote-as or peer-group commands first",
        ),
        (["configure terminal", "bogus"], "% Unknown command: bogus"),
    ],
)
def test_what_frr_refuses(commands: list[str], error: str) -> None:
    p = policy()
    _, err, rc = p.run(commands)
    assert rc == 1 and err.splitlines()[0] == error and p.depreferred() == frozenset()
