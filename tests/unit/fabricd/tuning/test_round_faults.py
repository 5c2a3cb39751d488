"""A subject with a fault open on it is not judged (fabricd/tuning/round.py `without_faults`): its counters are the
fault's (lab chaos seed 51051: a PFC storm from gpu-g0-000:nic3 had the loop proposing ECN changes on its rail)."""

from __future__ import annotations

import pytest

from fabricd.tuning.round import Skipped, fault_on, without_faults

from . import windows as w

PORT = w.port()  # leaf-1:Ethernet1/1
GROUP = w.group(members={"Ethernet1/1": [0] * 5, "Ethernet2/1": [0] * 5})


@pytest.mark.parametrize(
    ("faulted", "ports", "groups", "skipped"),
    [
        ({}, [PORT.subject], [GROUP.subject], []),
        ({"leaf-1:Ethernet1/1": "pfc_storm finding 7"}, [], [],
         [Skipped(PORT.subject, "pfc_storm finding 7"), Skipped(GROUP.subject, "pfc_storm finding 7")]),
        ({"leaf-1:Ethernet2/1": "link_flap finding 3"}, [PORT.subject], [], [Skipped(GROUP.subject,
                                                                                      "link_flap finding 3")]),
        ({"leaf-2:Ethernet1/1": "pfc_storm finding 9"}, [PORT.subject], [GROUP.subject], []),  # another switch's
    ],
    ids=["nothing open", "storm on the port and a member", "flap on a member only", "same port name elsewhere"],
)  # fmt: skip
def test_a_subject_with_a_fault_open_on_it_is_not_judged(
    faulted: dict[str, str], ports: list[str], groups: list[str], skipped: list[Skipped]
) -> None:
    kept_p, kept_g, out = without_faults([PORT], [GROUP], faulted)
    assert [p.subject for p in kept_p] == ports
    assert [g.subject for g in kept_g] == groups
    assert out == skipped


@pytest.mark.parametrize(
    ("faulted", "port", "group"),
    [
        ({}, None, None),
        ({"leaf-1:Ethernet1/1": "pfc_storm finding 7"}, "pfc_storm finding 7", "pfc_storm finding 7"),
        ({"leaf-1:Ethernet2/1": "link_flap finding 3"}, None, "link_flap finding 3"),
    ],
    ids=["nothing open", "on the port (a member too)", "on another member only"],
)  # fmt: skip
def test_the_fault_on_one_subject(faulted: dict[str, str], port: str | None, group: str | None) -> None:
    assert fault_on(PORT, faulted) == port
    assert fault_on(GROUP, faulted) == group
