"""reconcile.py as a table: fabricd's records and what the fabric shows in, the steps out (no sockets, no loop)."""

from __future__ import annotations

import pytest

from drivers.base import PortMark
from drivers.marks import Mark
from fabricd.service.reconcile import Hold, Observed, Refusal, Step, reconcile, refused_reapply, stale_holds
from topology.model import Endpoint
from topology.units import NS

NOW = 1_700_000_000 * NS
A = Endpoint("leaf-g0-r0", "Ethernet1/1")
B = Endpoint("leaf-g0-r1", "Ethernet5/1")
HOLD_A = Hold(A, action_id=3, ticket_id=7, since_ts=NOW - 60 * NS)
MARK_B = Mark(action_id=11, ticket_id=4, kind="link_corruption")


def steps(
    holds: list[Hold],
    admin: dict[Endpoint, bool],
    *,
    marks: dict[Endpoint, PortMark] | None = None,
    stale: frozenset[str] = frozenset(),
    open_tickets: frozenset[int] = frozenset({7}),
    in_flight: frozenset[Endpoint] = frozenset(),
    mode: str = "auto",
    grace_s: float = 10.0,
) -> list[tuple[Step, Endpoint]]:
    out = reconcile(holds, Observed(admin, marks, stale), open_tickets=open_tickets, in_flight=in_flight,
                    mode=mode, now=NOW, grace_ns=int(grace_s * NS))  # fmt: skip
    return [(d.step, d.endpoint) for d in out]


@pytest.mark.parametrize(
    ("case", "kwargs", "expected"),
    [
        ("held and down: records agree", {"holds": [HOLD_A], "admin": {A: False}}, []),
        ("held, up, ticket open, auto: re-apply", {"holds": [HOLD_A], "admin": {A: True}}, [(Step.REAPPLY, A)]),
        ("held, up, ticket open, approve: propose", {"holds": [HOLD_A], "admin": {A: True}, "mode": "approve"},
         [(Step.PROPOSE, A)]),
        ("held, up, ticket open, observe: release", {"holds": [HOLD_A], "admin": {A: True}, "mode": "observe"},
         [(Step.RELEASE, A)]),
        ("held, up, ticket resolved: release", {"holds": [HOLD_A], "admin": {A: True}, "open_tickets": frozenset()},
         [(Step.RELEASE, A)]),
        ("held, admin state unknown: wait", {"holds": [HOLD_A], "admin": {}}, []),
        ("held, switch stale: not judged", {"holds": [HOLD_A], "admin": {A: True}, "stale": frozenset({A.device})},
         []),
        ("held, up, an action under way on it", {"holds": [HOLD_A], "admin": {A: True}, "in_flight": frozenset({A})},
         []),
        ("held moments ago: telemetry may lag", {"holds": [HOLD_A], "admin": {A: True}, "grace_s": 120.0}, []),
        ("marked, down, no record: adopt",
         {"holds": [], "admin": {B: False}, "marks": {B: PortMark(MARK_B, admin_up=False)}}, [(Step.ADOPT, B)]),
        ("marked, down by the scan, admin unknown: adopt",
         {"holds": [], "admin": {}, "marks": {B: PortMark(MARK_B, admin_up=False)}}, [(Step.ADOPT, B)]),
        ("marked but up since (enabled by hand, a hold released in observe): the stale mark goes",
         {"holds": [], "admin": {B: True}, "marks": {B: PortMark(MARK_B, admin_up=False)}}, [(Step.UNMARK, B)]),
        ("marked and up on the switch, no hold: the stale mark goes",
         {"holds": [], "admin": {B: True}, "marks": {B: PortMark(MARK_B, admin_up=True)}}, [(Step.UNMARK, B)]),
        ("marked and up, approve mode: the mark goes too (it changes no port's state)",
         {"holds": [], "admin": {B: True}, "marks": {B: PortMark(MARK_B, admin_up=True)}, "mode": "approve"},
         [(Step.UNMARK, B)]),
        ("marked and up, observe: fabricd touches no switch",
         {"holds": [], "admin": {B: True}, "marks": {B: PortMark(MARK_B, admin_up=True)}, "mode": "observe"}, []),
        ("marked and up, its enable under way: left to the enable",
         {"holds": [], "admin": {B: True}, "marks": {B: PortMark(MARK_B, True)}, "in_flight": frozenset({B})}, []),
        ("marked and up, switch stale: not judged",
         {"holds": [], "admin": {B: True}, "marks": {B: PortMark(MARK_B, True)}, "stale": frozenset({B.device})},
         []),
        ("marked and held: records agree",
         {"holds": [Hold(B, 11, 4, NOW - 60 * NS)], "admin": {B: False}, "marks": {B: PortMark(MARK_B, False)},
          "open_tickets": frozenset({4})}, []),
        ("marked, down, switch stale: not judged",
         {"holds": [], "admin": {B: False}, "marks": {B: PortMark(MARK_B, False)}, "stale": frozenset({B.device})},
         []),
        ("marked, down, its enable under way: not adopted",
         {"holds": [], "admin": {B: False}, "marks": {B: PortMark(MARK_B, False)}, "in_flight": frozenset({B})}, []),
        ("not scanned yet: no adoption", {"holds": [], "admin": {B: False}, "marks": None}, []),
    ],
)  # fmt: skip
def test_reconcile_decides(case: str, kwargs: dict[str, object], expected: list[tuple[Step, Endpoint]]) -> None:
    assert steps(**kwargs) == expected, case  # type: ignore[arg-type]


def test_reasons_name_the_port_the_ticket_and_the_mark() -> None:
    (d,) = reconcile([HOLD_A], Observed({A: True}), open_tickets={7}, in_flight=(), mode="auto", now=NOW, grace_ns=0)
    assert d.why.startswith("leaf-g0-r0:Ethernet1/1 is up again although its ticket 7 is open")
    assert d.hold == HOLD_A
    (d,) = reconcile([], Observed({}, {B: PortMark(MARK_B, False)}), open_tickets=(), in_flight=(), mode="auto",
                     now=NOW, grace_ns=0)  # fmt: skip
    assert d.mark == MARK_B
    assert "action 11, ticket 4, link_corruption" in d.why


def test_stale_holds_are_the_held_ports_shown_up() -> None:
    holds = [HOLD_A, Hold(B, 5, None, NOW)]
    assert stale_holds(holds, {A: True, B: False}, now=NOW, grace_ns=0) == {A}
    assert stale_holds(holds, {}, now=NOW, grace_ns=0) == set()
    # a hold just made counts whatever telemetry still shows: its shutdown may not have streamed yet
    assert stale_holds([Hold(B, 5, None, NOW)], {B: True}, now=NOW + NS, grace_ns=10 * NS) == set()
    assert stale_holds([Hold(B, 5, None, NOW)], {B: True}, now=NOW + 11 * NS, grace_ns=10 * NS) == {B}


RATE = Refusal("rate", "1 port disabled in the last hour; the limit is 1")
CAPACITY = Refusal("capacity", "leaf-g0-r0 would keep 50% of its uplinks")


@pytest.mark.parametrize(
    ("case", "refusal", "before", "news"),
    [
        ("a first refusal is news", RATE, None, True),
        ("the same refusal pass after pass is not", RATE, RATE, False),
        ("another reason is news", CAPACITY, RATE, True),
    ],
)
def test_refused_reapply_keeps_the_hold_and_says_so_once(
    case: str, refusal: Refusal, before: Refusal | None, news: bool
) -> None:
    why, is_news = refused_reapply(HOLD_A, refusal, before)
    assert is_news is news, case
    assert why.startswith(f"{A} is up again and its ticket 7 is open, but the guard refuses taking it down again "
                          f"({refusal.rule}): {refusal.reason}; the hold stays")  # fmt: skip


@pytest.mark.parametrize(
    ("case", "open_tickets", "mode", "expected"),
    [
        ("refused before, ticket open, auto: tried again", frozenset({7}), "auto", [(Step.REAPPLY, A)]),
        ("refused before, approve: proposed again", frozenset({7}), "approve", [(Step.PROPOSE, A)]),
        ("refused before, ticket resolved since: released", frozenset(), "auto", [(Step.RELEASE, A)]),
    ],
)
def test_a_hold_to_reapply_is_decided_again_every_pass(
    case: str, open_tickets: frozenset[int], mode: str, expected: list[tuple[Step, Endpoint]]
) -> None:
    # reconcile keeps no memory of refusals: a hold whose port is up is decided anew every pass (the refusal only
    # decides what the carrying out records)
    assert steps([HOLD_A], {A: True}, open_tickets=open_tickets, mode=mode) == expected, case
