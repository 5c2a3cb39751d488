"""fabricd's own holds never keep a switch under its capacity floor (issue 49), on the remediator harness: the
issue's interleaving (a flap train ends, fabricd holds the uplink, then another uplink of that leaf loses its BGP
session or its link) and its variants: corruption (lowest loss first), still faulty (kept, said once), exactly once
across a restart, observe mode, taken down again once the floor allows, clean after probation."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from fabricd.detectors.finding import Finding
from fabricd.service.config import SafetyLimits
from fabricd.service.remediation.floor import RETAKE, RETURN, STUCK_QUIET_S
from topology.model import Endpoint
from topology.units import NS

from .harness import T0, Harness, flap, report, ticket_of

LEAF = "leaf-g0-r1"
HELD = Endpoint(LEAF, "Ethernet6/1")  # to spine-r1-0:Ethernet2/1, one of the leaf's 4 uplinks
OTHER = Endpoint(LEAF, "Ethernet5/1")  # another uplink: its BGP session or link goes down later


def train(h: Harness, ep: Endpoint, start: int = T0, flaps: int = 8) -> Finding:
    """A flap train of `flaps` flaps over 2.1 s from `start` (its timeline, as link_flap reports it)."""
    f = flap(h.fabric, ep, start, flaps)
    timeline = [start + i * 300_000_000 for i in range(flaps)]
    return Finding(**{**f.__dict__, "evidence": {**f.evidence, "timeline": timeline}})


def corruption(h: Harness, ep: Endpoint, loss: float, start: int = T0) -> Finding:
    peer = h.fabric.peer(ep.device, ep.port)
    assert peer is not None
    ends = tuple(sorted((str(ep), str(peer))))
    return Finding(kind="link_corruption", device=ep.device, port=ep.port, devices=(ep.device, peer.device),
                   ports=ends, start_ts=start, detected_ts=start + NS, severity="warning", confidence=1.0,
                   summary=f"link corrupts {loss:.1e}", evidence={"loss_rate": loss})  # fmt: skip


async def keep(h: Harness) -> list[str]:
    done = await h.rem.floor.keep(h.clock())
    await h.rem.idle()
    return done


def returns(h: Harness) -> list[str]:
    return [f"{a.device}:{a.port} {a.status}" for a in h.state.actions.keyed(RETURN)]


async def held_then_bgp_down(h: Harness) -> int:
    """The issue's first steps: the train on HELD ends, fabricd holds it (3 of 4 kept), a minute later OTHER's BGP
    session drops with its link up. Returns the hold's ticket."""
    (o,) = await report(h, train(h, HELD))
    assert o.action is not None and h.state.holds.is_held(HELD.device, HELD.port)
    assert o.ticket is not None
    h.clock.advance(70)  # the train is over (return_quiet_s 60)
    h.world.routed_down.add(OTHER)
    return o.ticket.id


def test_a_quiet_hold_returns_when_another_uplink_loses_bgp(make: Callable[..., Harness]) -> None:
    async def go() -> None:
        h = make()
        ticket = await held_then_bgp_down(h)
        done = await keep(h)
        why = "returned to keep leaf-g0-r1 at 3 of 4 uplinks (Ethernet5/1's BGP session is down)"
        assert done == [f"{HELD}: {why}"]
        assert returns(h) == [f"{HELD} done"]
        assert h.world.admin[HELD] is True and not h.state.holds.is_held(HELD.device, HELD.port)
        t = ticket_of(h, ticket)
        assert t.status == "open"  # the repair is still to do
        assert f"{HELD} {why}; the ticket stays open: the repair is still to do" in t.body["notes"]
        assert any(e["what"] == f"returned {HELD}" and e["why"] == why for e in h.state.audit.entries())
        assert [r.port for r in h.rem.floor.returned()] == [str(HELD)]
        # the next passes: nothing more (exactly once), also from a restarted remediator on the same state
        assert await keep(h) == []
        h.restart()
        assert await keep(h) == [] and returns(h) == [f"{HELD} done"]

    asyncio.run(go())


def test_a_link_down_returns_it_too(make: Callable[..., Harness]) -> None:
    async def go() -> None:
        h = make()
        await report(h, train(h, HELD))
        h.clock.advance(70)
        h.world.oper[Endpoint("spine-r1-1", "Ethernet1/1")] = "DOWN"  # leaf-g0-r1:Ethernet7/1's far end
        assert await keep(h) == [f"{HELD}: returned to keep leaf-g0-r1 at 3 of 4 uplinks (Ethernet7/1 is down)"]

    asyncio.run(go())


def test_still_flapping_is_kept_and_said_once(make: Callable[..., Harness]) -> None:
    async def go() -> None:
        h = make()
        await report(h, train(h, HELD))
        h.clock.advance(20)  # the train ended 18 s ago: not quiet yet
        h.world.routed_down.add(OTHER)
        why = "leaf-g0-r1 under its floor (2 of 4 uplinks, 50% < 75%): its candidate still faulty"
        assert await keep(h) == [why]
        assert await keep(h) == []  # said once
        assert returns(h) == [] and h.world.admin[HELD] is False
        assert h.rem.floor.stuck == {LEAF: why}
        h.clock.advance(60)  # now quiet: it comes back, and the switch is no longer stuck
        assert len(await keep(h)) == 1 and h.rem.floor.stuck == {}

    asyncio.run(go())


def test_a_shortfall_toggling_with_a_flapping_uplink_is_said_once_a_spell(make: Callable[..., Harness]) -> None:
    """OTHER's BGP session flaps: the leaf crosses its floor every few seconds. One audit line and one ticket note
    for the spell (the old code said it again at each crossing); again once the leaf held its floor STUCK_QUIET_S."""

    async def go() -> None:
        h = make()
        ticket = ticket_of(h, (await report(h, train(h, HELD)))[0].ticket.id)  # type: ignore[union-attr]
        h.clock.advance(20)  # still flapping by return_quiet_s: kept down
        why = "leaf-g0-r1 under its floor (2 of 4 uplinks, 50% < 75%): its candidate still faulty"
        said = []
        for _ in range(4):
            h.world.routed_down.add(OTHER)
            said += await keep(h)
            assert h.rem.floor.stuck == {LEAF: why}
            h.clock.advance(2)
            h.world.routed_down.discard(OTHER)
            said += await keep(h)
            assert h.rem.floor.stuck == {}
            h.clock.advance(2)
        assert said == [why]
        assert [e["why"] for e in h.state.audit.entries() if e["what"] == f"{LEAF} under its floor"] == [why]
        assert ticket_of(h, ticket.id).body["notes"].count(why) == 1
        h.clock.advance(STUCK_QUIET_S + 1)  # a new spell: said again (the train is quiet now: it goes back)
        h.world.routed_down.add(OTHER)
        assert len(await keep(h)) == 1 and returns(h) == [f"{HELD} done"]

    asyncio.run(go())


def test_corruption_lowest_loss_first(make: Callable[..., Harness]) -> None:
    async def go() -> None:
        h = make(limits=SafetyLimits(min_uplink_fraction=0.5))
        seven = Endpoint(LEAF, "Ethernet7/1")
        await report(h, corruption(h, HELD, 8e-6), corruption(h, seven, 2e-6, T0 + NS))
        assert h.state.holds.is_held(LEAF, HELD.port) and h.state.holds.is_held(LEAF, seven.port)
        h.world.routed_down.add(OTHER)  # 1 of 4 up: 25 % < 50 %; one return restores it
        assert await keep(h) == [f"{seven}: returned to keep leaf-g0-r1 at 2 of 4 uplinks (Ethernet5/1's BGP "
                                 "session is down)"]  # fmt: skip
        assert h.state.holds.is_held(LEAF, HELD.port)

    asyncio.run(go())


def test_a_return_under_way_counts_as_back(make: Callable[..., Harness]) -> None:
    """Two holds, room for one back: a pass while the first return's enable is still under way does not return the
    second (the twin did: the port being enabled, still down, counted lost)."""

    async def go() -> None:
        h = make(limits=SafetyLimits(min_uplink_fraction=0.5))
        seven = Endpoint(LEAF, "Ethernet7/1")
        await report(h, corruption(h, HELD, 8e-6), corruption(h, seven, 2e-6, T0 + NS))
        h.world.routed_down.add(OTHER)
        first = await h.rem.floor.keep(h.clock())  # its enable spawned, not yet run
        assert [a.status for a in h.state.actions.keyed(RETURN)] == ["running"]
        second = await h.rem.floor.keep(h.clock())
        await h.rem.idle()
        assert [*first, *second] == [f"{seven}: returned to keep leaf-g0-r1 at 2 of 4 uplinks (Ethernet5/1's BGP "
                                     "session is down)"]  # fmt: skip
        assert returns(h) == [f"{seven} done"] and h.state.holds.is_held(LEAF, HELD.port)

    asyncio.run(go())


def test_corruption_above_max_return_loss_stays_down(make: Callable[..., Harness]) -> None:
    async def go() -> None:
        h = make()
        await report(h, corruption(h, HELD, 3e-4))
        h.world.routed_down.add(OTHER)
        assert await keep(h) == ["leaf-g0-r1 under its floor (2 of 4 uplinks, 50% < 75%): its candidate still faulty"]
        assert returns(h) == []

    asyncio.run(go())


def test_observe_mode_says_it_and_touches_nothing(make: Callable[..., Harness]) -> None:
    async def go() -> None:
        h = make()
        await held_then_bgp_down(h)
        await h.rem.requests.set_mode("observe", "ops", "incident")
        calls = len(h.world.touched())
        assert await keep(h) == []
        assert returns(h) == [] and len(h.world.touched()) == calls
        assert [e["what"] for e in h.state.audit.entries() if e["what"].startswith("would return")] == [
            f"would return {HELD}"
        ]

    asyncio.run(go())


def test_switched_off(make: Callable[..., Harness]) -> None:
    async def go() -> None:
        h = make(keep_floor=False)
        await held_then_bgp_down(h)
        assert await keep(h) == [] and returns(h) == []

    asyncio.run(go())


def test_a_returned_port_faulty_again_goes_down_once_the_floor_allows(make: Callable[..., Harness]) -> None:
    async def go() -> None:
        h = make()
        ticket = await held_then_bgp_down(h)
        await keep(h)
        h.clock.advance(5)
        # it flaps again while OTHER's BGP is still down: the guard refuses (the floor), the finding stays active
        again = h.clock()
        (o,) = await report(h, train(h, HELD, start=again))
        assert o.action is not None and o.action.status == "refused"
        assert await keep(h) == []  # not yet: the floor does not allow it
        h.world.routed_down.clear()  # BGP back
        assert await keep(h) == []  # up for less than min_up_s (300 s): no flapping between the two
        h.clock.advance(300)
        # the same train goes on (the detector refreshes its finding: no new incident to decide)
        assert await report(h, train(h, HELD, start=again)) == []
        done = await keep(h)
        assert len(done) == 1 and "still faulty" in done[0]
        (a,) = h.state.actions.keyed(RETAKE)
        assert a.status == "done" and a.ticket_id == ticket and h.world.admin[HELD] is False
        assert await keep(h) == []  # exactly once

    asyncio.run(go())


def test_a_returned_port_clean_for_its_probation_stays_up(make: Callable[..., Harness]) -> None:
    async def go() -> None:
        h = make(probation_s=600)
        ticket = await held_then_bgp_down(h)
        await keep(h)
        h.world.routed_down.clear()
        h.clock.advance(601)
        assert await keep(h) == []
        t = ticket_of(h, ticket)
        assert t.body["status_note"] == f"{HELD} stayed clean for its probation after its return: it stays up"
        assert h.world.admin[HELD] is True and t.status == "open"
        await keep(h)
        assert ticket_of(h, ticket).body["returned_clean"] == t.body["returned_clean"]  # once

    asyncio.run(go())


def test_a_worse_newcomer_takes_the_held_ones_place(make: Callable[..., Harness]) -> None:
    """Item 3: room to disable one uplink of four; a mild corruption came first and is held; a worse one arrives and
    is refused by the guard: the mild one goes back up, the worse one down (CorrOpt: the set, not the order)."""

    async def go() -> None:
        h = make()
        mild, worse = OTHER, HELD
        (o1,) = await report(h, corruption(h, mild, 2e-6))
        assert o1.action is not None and h.state.holds.is_held(mild.device, mild.port)
        (o2,) = await report(h, corruption(h, worse, 4e-4, T0 + 5 * NS))
        assert o2.action is not None and o2.action.status == "refused"
        h.clock.advance(1)
        done = await keep(h)
        assert done == [f"{mild}: enable (running): returned to make room for {worse} (4.0e-04), whose fault costs "
                        "more than this one's (2.0e-06; CorrOpt: the worse link goes down)"]  # fmt: skip
        assert h.world.admin[mild] is True and not h.state.holds.is_held(mild.device, mild.port)
        h.clock.advance(1)
        done = await keep(h)  # the mild one is up: now the guard has room for the worse one
        assert len(done) == 1 and done[0].startswith(f"{worse}: disable (running): the floor has room for it now")
        assert h.world.admin[worse] is False and h.state.holds.is_held(worse.device, worse.port)
        assert o2.ticket is not None and h.state.holds.all()[0]["ticket_id"] == o2.ticket.id
        for _ in range(3):  # settled: no flapping between the two
            h.clock.advance(60)
            assert await keep(h) == []
        assert h.world.admin[mild] is True

    asyncio.run(go())


def test_about_as_bad_newcomer_does_not_swap(make: Callable[..., Harness]) -> None:
    async def go() -> None:
        h = make()
        await report(h, corruption(h, OTHER, 1e-4))
        (o2,) = await report(h, corruption(h, HELD, 1.5e-4, T0 + 5 * NS))
        assert o2.action is not None and o2.action.status == "refused"
        assert await keep(h) == []
        assert h.state.holds.is_held(OTHER.device, OTHER.port) and h.world.admin.get(HELD, True)

    asyncio.run(go())


def test_a_refused_newcomer_goes_down_once_capacity_is_back(make: Callable[..., Harness]) -> None:
    async def go() -> None:
        h = make()
        h.world.routed_down.add(OTHER)
        (o,) = await report(h, corruption(h, HELD, 1e-4))
        assert o.action is not None and o.action.status == "refused"
        assert await keep(h) == []  # still no room
        h.world.routed_down.clear()
        done = await keep(h)
        assert len(done) == 1 and done[0].startswith(f"{HELD}: disable (running): the floor has room for it now")
        assert h.world.admin[HELD] is False
        assert await keep(h) == []

    asyncio.run(go())
