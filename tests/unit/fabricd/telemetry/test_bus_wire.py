"""The collectors' wire format and their share of the switches: pure, no bus."""

from __future__ import annotations

import pytest

from fabricd.telemetry import bus_wire
from fabricd.telemetry.collector import fair_share, plan_claims


def test_a_batch_round_trips_with_its_switch() -> None:
    responses = [b"\x0a\x03abc", b"", b"\x18\x01"]
    device, out = bus_wire.unpack(bus_wire.pack("leaf-g0-r0", responses))
    assert device == "leaf-g0-r0" and list(out) == responses


@pytest.mark.parametrize(
    ("data", "why"),
    [
        (b"\x00", "shorter than its header"),
        (b"\x00\x09leaf", "the switch name runs past the end"),
        (bus_wire.pack("leaf", [b"abc"])[:-1], "a response runs past the end"),
        (bus_wire.pack("leaf", []) + b"\x00\x00", "a response length runs past the end"),
        (b"\x00\x02\xff\xfe", "not UTF-8"),
    ],
)
def test_a_malformed_batch_is_named(data: bytes, why: str) -> None:
    with pytest.raises(bus_wire.WireError, match=why):
        bus_wire.unpack(data)


def test_subjects_are_one_token_per_switch() -> None:
    assert bus_wire.subject("leaf-g0-r0") == "fabricd.tm.leaf-g0-r0"
    assert bus_wire.subject("dc1.leaf 1") == "fabricd.tm.x" + b"dc1.leaf 1".hex()  # '.' and ' ' cannot


SWITCHES = [f"sw{i}" for i in range(10)]


@pytest.mark.parametrize(
    ("mine", "taken", "members", "claims", "gives"),
    [
        (set(), set(), 1, 10, 0),  # alone: all of them
        (set(), set(), 3, 4, 0),  # ceil(10 / 3)
        (set(SWITCHES[:10]), set(SWITCHES), 2, 0, 5),  # a second collector joined: give half back
        ({"sw0"}, set(SWITCHES) - {"sw9"}, 3, 1, 0),  # only sw9 is free: take it, not more
        (set(SWITCHES[:4]), set(SWITCHES[:4]), 3, 0, 0),  # at its share: nothing to do
    ],
)
def test_plan_claims_takes_up_to_the_fair_share(
    mine: set[str], taken: set[str], members: int, claims: int, gives: int
) -> None:
    take, give = plan_claims("c1", SWITCHES, taken, mine, members)
    assert (len(take), len(give)) == (claims, gives)
    assert not set(take) & (taken | mine) and set(give) <= mine
    assert fair_share(10, members) >= len(mine) - len(give)


def test_two_collectors_prefer_different_switches() -> None:
    a, _ = plan_claims("collector-a", SWITCHES, set(), set(), 2)
    b, _ = plan_claims("collector-b", SWITCHES, set(), set(), 2)
    assert len(a) == len(b) == 5 and a != b
