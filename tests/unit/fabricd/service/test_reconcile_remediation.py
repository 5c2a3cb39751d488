"""The remediator reconciling its records with the (fake) switches every pass: marks written and removed with the
admin change, stale holds re-applied or released, marked ports without a record adopted, stale holds never counted
against the guard's budgets."""

from __future__ import annotations

from collections.abc import Callable, Coroutine
from typing import Any, TypeVar

import pytest

from drivers.marks import Mark
from fabricd.detectors.finding import Finding
from fabricd.service.config import SafetyLimits
from fabricd.service.remediation.errors import ActionError
from fabricd.service.remediation.incidents import Outcome
from topology.model import Endpoint
from topology.units import NS

from .harness import SERVER_PORT, UPLINK, Harness, flap, report, run

R = TypeVar("R")


def settled(h: Harness, coro: Coroutine[Any, Any, R]) -> R:
    """Run `coro` and the switch work it starts, in one event loop."""

    async def go() -> R:
        out = await coro
        await h.rem.idle()
        return out

    return run(go())


def _held(h: Harness) -> list[tuple[str, str, int, int | None]]:
    return [(p["device"], p["port"], p["action_id"], p["ticket_id"]) for p in h.state.holds.all()]


def _up_by_hand(h: Harness) -> None:
    """The held port is up again without fabricd (a hand-typed `no shutdown`, a reboot), a minute on."""
    h.world.admin[SERVER_PORT] = True
    h.world.oper[SERVER_PORT] = "UP"
    h.clock.advance(60)


def test_the_shutdown_carries_the_mark_and_the_enable_removes_it(make: Callable[..., Harness]) -> None:
    h = make()
    run(report(h, flap(h.fabric, SERVER_PORT)))
    (t,) = h.tickets()
    (a,) = h.state.actions.all()
    assert h.world.marks == {SERVER_PORT: Mark(a.id, t.id, "link_flap")}
    settled(h, h.rem.requests.resolve(t.id, "tech"))
    assert h.world.marks == {}
    assert h.world.admin[SERVER_PORT] is True


def test_the_session_gets_the_description_telemetry_streams_so_it_reads_none(make: Callable[..., Harness]) -> None:
    """The mark goes beside the operator's description; the one the switch streams is handed to the session, so the
    disable does not read it from the switch first. The enable always has the session read the switch's own (None):
    a ticket resolved moments after the disable found telemetry without the mark yet, and the enable kept the mark
    on a port that was up (issue 37). A switch that streams none: the session reads it (None)."""
    h = make()
    h.world.descriptions[SERVER_PORT] = "to gpu-g0-000 nic0"  # streamed before the disable: no mark in it
    run(report(h, flap(h.fabric, SERVER_PORT)))
    (t,) = h.tickets()
    settled(h, h.rem.requests.resolve(t.id, "tech"))
    assert h.world.described == ["to gpu-g0-000 nic0", None]  # the disable, then the enable
    h2 = make()
    run(report(h2, flap(h2.fabric, SERVER_PORT)))
    assert h2.world.described == [None]


def test_a_hold_whose_port_came_back_up_is_reapplied_in_auto_mode(make: Callable[..., Harness]) -> None:
    h = make()
    run(report(h, flap(h.fabric, SERVER_PORT)))
    (t,) = h.tickets()
    (first,) = h.state.actions.all()
    # the switch was replaced (or rebooted without its config): the port is up, the mark is gone
    h.world.admin[SERVER_PORT] = True
    h.world.oper[SERVER_PORT] = "UP"
    h.world.marks.clear()
    h.clock.advance(60)
    notes = settled(h, h.rem.reconciler.reconcile_pass(h.clock()))
    assert notes == [
        f"{SERVER_PORT} is up again although its ticket {t.id} is open (a reboot, a replaced switch or a hand-typed "
        "`no shutdown`): taking it down again"
    ]
    second = [a for a in h.state.actions.all() if a.id != first.id]
    assert [(a.op, a.status, a.key, a.ticket_id) for a in second] == [
        ("disable", "done", f"reapply:{SERVER_PORT}:after{first.id}", t.id)
    ]
    assert _held(h) == [(SERVER_PORT.device, SERVER_PORT.port, second[0].id, t.id)]
    assert h.world.admin[SERVER_PORT] is False
    assert h.world.marks == {SERVER_PORT: Mark(second[0].id, t.id, "link_flap")}
    assert any(r["what"] == f"re-apply {SERVER_PORT}" for r in h.state.audit.entries())
    # the next pass finds records and switch in agreement: nothing more
    h.clock.advance(60)
    assert run(h.rem.reconciler.reconcile_pass(h.clock())) == []


def test_a_hold_up_again_is_released_in_observe_mode_and_noted_on_its_ticket(make: Callable[..., Harness]) -> None:
    h = make()
    run(report(h, flap(h.fabric, SERVER_PORT)))
    (t,) = h.tickets()
    h.rem.ctx.settings = h.rem.ctx.settings.model_copy(update={"mode": "observe"})
    h.world.admin[SERVER_PORT] = True
    h.clock.advance(60)
    h.world.calls.clear()
    (note,) = run(h.rem.reconciler.reconcile_pass(h.clock()))
    assert note.endswith("mode observe: fabricd leaves it up")
    assert _held(h) == []
    assert h.world.calls == []  # observe never touches a switch
    assert h.state.tickets.get(t.id).body["status_note"] == note  # type: ignore[union-attr]
    assert any(r["what"] == f"released hold on {SERVER_PORT}" for r in h.state.audit.entries())


def test_a_reapply_the_guard_refuses_keeps_the_hold_to_reapply_until_it_can(make: Callable[..., Harness]) -> None:
    """Issue 42: a refused re-apply is not a release. The hold stays, to re-apply; the refusal is audited and noted
    on the ticket once (not every pass); it is retried every pass and applied as soon as the guard allows."""
    h = make(limits=SafetyLimits(max_actions_per_hour=1))
    run(report(h, flap(h.fabric, SERVER_PORT)))
    (t,) = h.tickets()
    (first,) = h.state.actions.all()
    h.world.admin[SERVER_PORT] = True  # a reboot brought it back without fabricd's change
    h.world.oper[SERVER_PORT] = "UP"
    h.clock.advance(60)  # still within the hour: the one action allowed is spent
    (note,) = run(h.rem.reconciler.reconcile_pass(h.clock()))
    assert note.startswith(f"{SERVER_PORT} is up again and its ticket {t.id} is open, but the guard refuses taking it "
                           "down again (rate): ")  # fmt: skip
    assert note.endswith(f"the hold stays, to re-apply as soon as the guard allows it (or resolve ticket {t.id}, or "
                         f"release the hold: fabricd release {SERVER_PORT} --reason ...)")  # fmt: skip
    assert _held(h) == [(SERVER_PORT.device, SERVER_PORT.port, first.id, t.id)]  # kept
    assert [r["port"] for r in h.rem.reconciler.to_reapply()] == [str(SERVER_PORT)]
    ticket = h.state.tickets.get(t.id)
    assert ticket is not None and ticket.status == "open" and ticket.body["status_note"] == note
    assert [e["what"] for e in h.state.audit.entries(1)] == [f"re-apply of {SERVER_PORT} refused"]
    h.clock.advance(60)
    assert run(h.rem.reconciler.reconcile_pass(h.clock())) == []  # the same refusal: nothing new to say
    notes_before = len(ticket.body.get("notes", []))
    after = h.state.tickets.get(t.id)
    assert after is not None and len(after.body.get("notes", [])) == notes_before
    h.clock.advance(3600)  # the hour is over: the guard allows it now
    (again,) = settled(h, h.rem.reconciler.reconcile_pass(h.clock()))
    assert "taking it down again" in again
    (second,) = [a for a in h.state.actions.all() if a.id != first.id]
    assert (second.op, second.status) == ("disable", "done") and h.world.admin[SERVER_PORT] is False
    assert _held(h) == [(SERVER_PORT.device, SERVER_PORT.port, second.id, t.id)]
    assert h.rem.reconciler.to_reapply() == []


def test_a_refused_reapply_is_shared_a_standby_lists_it_and_a_new_leader_says_nothing_new(
    make: Callable[..., Harness],
) -> None:
    """Chaos seed 3135: the leader kept its refusals in memory, so a standby's health listed no hold to re-apply and
    a new leader audited and noted the same refusal again. They are in the shared state now."""
    from .harness import make_remediator

    h = make(limits=SafetyLimits(max_actions_per_hour=1))
    run(report(h, flap(h.fabric, SERVER_PORT)))
    (t,) = h.tickets()
    _up_by_hand(h)
    (note,) = run(h.rem.reconciler.reconcile_pass(h.clock()))
    audited = len(h.state.audit.entries())
    noted = (h.state.tickets.get(t.id) or t).body.get("notes")
    other = make_remediator(
        h.fabric, h.state, h.world, h.clock, h.published, limits=SafetyLimits(max_actions_per_hour=1)
    )
    assert other.reconciler.to_reapply() == h.rem.reconciler.to_reapply() != []  # the standby answers as the leader
    (r,) = other.reconciler.to_reapply()
    assert (r["port"], r["ticket_id"], r["rule"]) == (str(SERVER_PORT), t.id, "rate")
    h.clock.advance(60)
    assert run(other.reconciler.reconcile_pass(h.clock())) == []  # the new leader: the same refusal, nothing new to say
    assert len(h.state.audit.entries()) == audited
    assert (h.state.tickets.get(t.id) or t).body.get("notes") == noted and note in str(h.state.tickets.get(t.id))
    run(other.requests.release_hold(SERVER_PORT, "alice", "checked"))
    assert h.rem.reconciler.to_reapply() == [] and h.state.holds.refused_reapplies() == []


def test_a_flap_on_a_held_port_up_again_is_a_finding_noted_on_its_ticket_not_a_second_disable(
    make: Callable[..., Harness],
) -> None:
    """Chaos seed 3136: a held port enabled by hand (its re-apply refused by the rate) flapped; the flap was dropped
    as the echo of fabricd's own shutdown until the hold went, 90 s later. The port is up: the flap is real."""
    h = make(limits=SafetyLimits(max_actions_per_hour=1))
    run(report(h, flap(h.fabric, SERVER_PORT)))
    (t,) = h.tickets()
    (first,) = h.state.actions.all()
    _up_by_hand(h)
    run(h.rem.reconciler.reconcile_pass(h.clock()))
    assert h.rem.reconciler.to_reapply() != []
    h.clock.advance(5)
    (out,) = run(report(h, flap(h.fabric, SERVER_PORT, start_ts=h.clock() - 5 * NS)))
    assert out.action is None and out.ticket is not None and out.ticket.id == t.id
    assert (out.ticket.recurrences, out.ticket.status) == (1, "open")
    assert "held under its open ticket but up again" in str(out.ticket.body.get("status_note"))
    assert h.state.actions.all() == [first]  # reconcile re-applies the hold when the guard allows: one disable
    assert len(h.state.findings.all()) == 2


def test_a_flap_on_a_held_port_fabricd_is_enabling_is_left_to_that_enable(make: Callable[..., Harness]) -> None:
    """A repair's enable verifying the port: the port is up with its hold still recorded, and its flaps decide that
    enable (and make the next incident once the hold is gone), not a finding noted on the ticket."""
    h = make()
    run(report(h, flap(h.fabric, SERVER_PORT)))
    (t,) = h.tickets()
    h.world.admin[SERVER_PORT] = True
    h.clock.advance(60)
    h.state.actions.add("enable", SERVER_PORT.device, SERVER_PORT.port, "auto", "running", "repaired", h.clock(),
                        ticket_id=t.id)  # fmt: skip
    assert h.rem.holds.stale_holds() == {SERVER_PORT} and h.rem.holds.up_again() == set()
    (out,) = run(report(h, flap(h.fabric, SERVER_PORT, start_ts=h.clock() - 5 * NS)))
    assert out == Outcome(None, None, None)
    ticket = h.state.tickets.get(t.id)
    assert ticket is not None and ticket.recurrences == 0


def test_a_hold_to_reapply_goes_with_a_resolve_or_a_persons_release(make: Callable[..., Harness]) -> None:
    h = make(limits=SafetyLimits(max_actions_per_hour=1))
    run(report(h, flap(h.fabric, SERVER_PORT)))
    (_t,) = h.tickets()
    _up_by_hand(h)
    run(h.rem.reconciler.reconcile_pass(h.clock()))
    assert h.rem.reconciler.to_reapply() != []
    with pytest.raises(ActionError, match="fabricd holds no hold on leaf-g0-r0:Ethernet2/1"):
        run(h.rem.requests.release_hold(Endpoint("leaf-g0-r0", "Ethernet2/1"), "alice", "cable checked"))
    note = run(h.rem.requests.release_hold(SERVER_PORT, "alice", "the optic was replaced, it is fine"))
    assert note == "released by alice: the optic was replaced, it is fine"
    assert _held(h) == [] and h.rem.reconciler.to_reapply() == []
    unmarked, entry = h.state.audit.entries(2)
    assert (entry["what"], entry["actor"], entry["why"]) == (f"released hold on {SERVER_PORT}", "alice", note)
    # chaos seed 6174: a released hold's port kept fabricd's mark while up; the mark goes with the hold
    assert (unmarked["what"], unmarked["why"]) == (
        f"unmark {SERVER_PORT}",
        f"removed fabricd's mark from {SERVER_PORT}",
    )
    assert SERVER_PORT not in h.world.marks and h.world.admin[SERVER_PORT] is True
    h.clock.advance(60)
    assert run(h.rem.reconciler.reconcile_pass(h.clock())) == []  # nothing left to re-apply


def test_a_held_port_still_down_is_not_released_by_a_person(make: Callable[..., Harness]) -> None:
    h = make()
    run(report(h, flap(h.fabric, SERVER_PORT)))
    (t,) = h.tickets()
    h.clock.advance(60)
    with pytest.raises(ActionError, match=f"is down and held by fabricd \\(ticket {t.id}\\): resolve the ticket"):
        run(h.rem.requests.release_hold(SERVER_PORT, "alice", "why not"))
    assert len(_held(h)) == 1


def test_a_reapply_waits_for_fresh_telemetry_from_the_switches_its_verdict_rests_on(
    make: Callable[..., Harness],
) -> None:
    """Issue 42: after a restart, what the leaf's spines streamed before it does not count: the re-apply waits
    (bounded) for their fresh word, then judges on what it knows and says what it did not."""
    h = make()
    run(report(h, flap(h.fabric, UPLINK)))
    (_t,) = h.tickets()
    (first,) = h.state.actions.all()
    h.world.admin[UPLINK] = True
    h.world.oper[UPLINK] = "UP"
    h.clock.advance(60)
    spine = h.fabric.peer(UPLINK.device, UPLINK.port)
    assert spine is not None
    (waits,) = run(h.rem.reconciler.reconcile_pass(h.clock(), [spine.device]))
    assert waits == f"{UPLINK}: re-applying its hold waits for fresh telemetry from {spine.device}"
    h.clock.advance(5)
    assert run(h.rem.reconciler.reconcile_pass(h.clock(), [spine.device])) == []  # still waiting, nothing new
    assert len(h.state.actions.all()) == 1 and _held(h)[0][2] == first.id
    h.clock.advance(1)
    (done,) = settled(h, h.rem.reconciler.reconcile_pass(h.clock()))  # fresh now: judged
    assert "taking it down again" in done and h.world.admin[UPLINK] is False


def test_a_marked_port_with_no_record_is_adopted(make: Callable[..., Harness]) -> None:
    h = make()
    # the state was lost: the switch still says fabricd shut this port for ticket 4 (action 11)
    h.world.marks[UPLINK] = Mark(11, 4, "link_corruption")
    h.world.admin[UPLINK] = False
    h.world.oper[UPLINK] = "DOWN"
    notes = run(h.rem.reconciler.reconcile())
    (t,) = h.tickets()
    (a,) = h.state.actions.all()
    assert notes == [
        f"{UPLINK} is down with fabricd's mark (action 11, ticket 4, link_corruption) but fabricd has no record of "
        f"it (state lost or restored from an older copy): adopted; re-marked {UPLINK}: "
        f"[fabricd: down a11 t4 link_corruption] -> [fabricd: down a{a.id} t{t.id} link_corruption]"
    ]
    assert (t.kind, t.device, t.port, t.status) == ("link_corruption", UPLINK.device, UPLINK.port, "open")
    assert (a.op, a.status, a.ticket_id) == ("disable", "done", t.id)
    assert _held(h) == [(UPLINK.device, UPLINK.port, a.id, t.id)]
    (f,) = h.state.findings.all()
    assert f["kind"] == "link_corruption" and f["evidence"]["adopted"] is True
    # issue 37: the mark names the new records (the shutdown committed again with it, confirmed): they agree again
    assert h.world.marks[UPLINK] == Mark(a.id, t.id, "link_corruption") and h.world.admin[UPLINK] is False
    sent = [c[0] for c in h.world.calls if c[0] in ("set_port_admin", "confirm", "rollback")]
    assert sent == ["set_port_admin", "confirm"]
    assert len(h.world.scans) == len(h.fabric.switches())
    # adopted once: the next pass has nothing to do, and the repair brings it back and removes the mark
    assert run(h.rem.reconciler.reconcile_pass(h.clock() + 60 * NS)) == []
    settled(h, h.rem.requests.resolve(t.id, "tech"))
    assert h.world.marks == {} and _held(h) == []


def test_a_switch_that_cannot_be_read_keeps_the_rest_adopting(make: Callable[..., Harness]) -> None:
    h = make()
    other = Endpoint("leaf-g1-r0", "Ethernet1/1")
    for ep in (UPLINK, other):
        h.world.marks[ep] = Mark(1, None, "link_flap")
        h.world.admin[ep] = False
    h.world.unreadable.add(UPLINK.device)
    run(h.rem.reconciler.reconcile())
    assert _held(h)[0][:2] == (other.device, other.port)
    assert len(_held(h)) == 1


def test_stale_holds_never_count_against_the_budgets(make: Callable[..., Harness]) -> None:
    h = make(limits=SafetyLimits(max_down_fabric=1))
    run(report(h, flap(h.fabric, SERVER_PORT)))
    assert SERVER_PORT in h.rem.holds.held()
    fabric = next(b for b in h.rem.holds.budgets() if b.limit == "fabric_budget")
    assert fabric.used == 1
    h.world.admin[SERVER_PORT] = True  # up again: the hold is stale until the next pass settles it
    assert SERVER_PORT in h.rem.holds.held()  # ... once telemetry has had the time to show its shutdown
    h.clock.advance(60)
    assert SERVER_PORT not in h.rem.holds.held()
    fabric = next(b for b in h.rem.holds.budgets() if b.limit == "fabric_budget")
    assert fabric.used == 0


def test_a_repaired_port_on_the_wrong_cable_goes_down_again_and_its_ticket_reopens(
    make: Callable[..., Harness],
) -> None:
    h = make()
    run(report(h, flap(h.fabric, SERVER_PORT)))
    (t,) = h.tickets()
    # the repair put the cable of gpu-g0-000:nic1 (cabled to leaf-g0-r1:Ethernet1/1) on this port
    h.world.lldp[SERVER_PORT] = Endpoint("gpu-g0-000", "nic1")
    settled(h, h.rem.requests.resolve(t.id, "tech"))
    enable = next(a for a in h.state.actions.all() if a.op == "enable")
    assert enable.status == "rolled_back"
    assert enable.detail.startswith(
        "leaf-g0-r0:Ethernet1/1 came up facing gpu-g0-000:nic1, not gpu-g0-000:nic0 as cabled in the blueprint; "
        "gpu-g0-000:nic1 belongs on leaf-g0-r1:Ethernet1/1; "
    )
    assert _held(h)[0][:2] == (SERVER_PORT.device, SERVER_PORT.port)  # still held down
    ticket = h.state.tickets.get(t.id)
    assert ticket is not None and ticket.status == "open"  # no retry re-enables it: a person moves the cable
    assert ticket.body["status_note"] == enable.detail
    # the cable moved back to its place: resolved again, the port comes back
    h.world.lldp[SERVER_PORT] = Endpoint("gpu-g0-000", "nic0")
    settled(h, h.rem.requests.resolve(t.id, "tech"))
    assert _held(h) == [] and h.world.admin[SERVER_PORT] is True


def test_a_host_that_sends_its_mac_as_port_id_or_no_lldp_is_trusted(make: Callable[..., Harness]) -> None:
    h = make()
    run(report(h, flap(h.fabric, SERVER_PORT)))
    (t,) = h.tickets()
    h.world.lldp[SERVER_PORT] = Endpoint("gpu-g0-000.example.net", "0c:42:a1:00:00:01")
    settled(h, h.rem.requests.resolve(t.id, "tech"))
    assert _held(h) == []


def test_a_repair_lldp_does_not_confirm_keeps_the_port_down(make: Callable[..., Harness]) -> None:
    """Where LLDP is expected on the port, no fresh neighbour after the enable is no confirmation (issue 37: the
    twin kept streaming the old neighbour and fabricd trusted the silence): the enable rolls back, the ticket
    reopens saying so. A port LLDP is not expected on (a host without lldpd) is still trusted."""
    h = make()
    run(report(h, flap(h.fabric, SERVER_PORT)))
    (t,) = h.tickets()
    h.world.lldp_silent.add(SERVER_PORT)
    settled(h, h.rem.requests.resolve(t.id, "tech"))
    enable = next(a for a in h.state.actions.all() if a.op == "enable")
    assert enable.status == "rolled_back"
    assert enable.detail.startswith(
        "no LLDP neighbour heard on leaf-g0-r0:Ethernet1/1 within 5 s of it coming up (expected gpu-g0-000:nic0); "
    )
    assert enable.detail.endswith("stays down until LLDP can confirm the cable (check the far end's LLDP and the "
                                  "cable) (then resolve the ticket again)")  # fmt: skip
    assert _held(h)[0][:2] == (SERVER_PORT.device, SERVER_PORT.port) and h.world.admin[SERVER_PORT] is False
    ticket = h.state.tickets.get(t.id)
    assert ticket is not None and ticket.status == "open"
    h.world.lldp_silent.clear()  # nothing expected (no LLDP streamed there): trusted
    settled(h, h.rem.requests.resolve(t.id, "tech"))
    assert _held(h) == [] and h.world.admin[SERVER_PORT] is True


def test_an_open_miscabled_finding_on_a_held_port_refuses_its_resolve(make: Callable[..., Harness]) -> None:
    """The technician put the held port's cable on another port (LLDP there hears gpu-g0-000:nic0, which belongs on
    the held port): resolving its ticket is refused with the finding and its fix, nothing changes; once the
    finding clears (the cable moved back), the resolve brings the port back."""
    h = make()
    run(report(h, flap(h.fabric, SERVER_PORT)))
    (t,) = h.tickets()
    other = Endpoint("leaf-g0-r1", "Ethernet1/1")
    f = Finding(kind="miscabled", device=other.device, port=other.port, devices=(other.device,), ports=(str(other),),
                start_ts=h.clock(), detected_ts=h.clock(), severity="critical", confidence=0.95,
                summary=f"{other} faces gpu-g0-000:nic0, not gpu-g0-000:nic1",
                evidence={"code": "RAIL_MISMATCH", "fix": "move the cable on leaf-g0-r1:Ethernet1/1 to leaf-g0-r0:"
                          "Ethernet1/1", "lldp": {str(other): "gpu-g0-000:nic0"}})  # fmt: skip
    fid, _ = h.state.findings.record(f, "miscabled:x", h.clock())
    before = (h.state.actions.all(), h.state.tickets.get(t.id))
    with pytest.raises(ActionError) as err:
        settled(h, h.rem.requests.resolve(t.id, "tech"))
    assert str(err.value) == (
        f"ticket {t.id} stays open: {SERVER_PORT} is miscabled (finding {fid}: {f.summary}); move the cable on "
        "leaf-g0-r1:Ethernet1/1 to leaf-g0-r0:Ethernet1/1, then resolve again (the finding clears seconds after LLDP "
        "hears the right cable)"
    )
    assert (h.state.actions.all(), h.state.tickets.get(t.id)) == before and h.world.admin[SERVER_PORT] is False
    assert h.state.audit.entries(1)[0]["what"] == f"refused resolving ticket {t.id}"
    h.clock.advance(60)
    h.state.findings.clear_not_seen_since(h.clock())
    settled(h, h.rem.requests.resolve(t.id, "tech"))
    assert _held(h) == [] and h.world.admin[SERVER_PORT] is True


def test_a_hold_released_in_observe_mode_leaves_the_switch_alone(make: Callable[..., Harness]) -> None:
    h = make()
    run(h.rem.marks.scan())  # as at start: fabricd knows the switches' marks from here on
    run(report(h, flap(h.fabric, SERVER_PORT)))
    (_a,) = h.state.actions.all()
    h.world.admin[SERVER_PORT] = True  # enabled by hand
    h.world.oper[SERVER_PORT] = "UP"
    run(h.rem.requests.set_mode("observe", "alice", "incident"))
    h.clock.advance(60)
    calls = len(h.world.calls)
    run(h.rem.reconciler.reconcile_pass(h.clock()))
    assert _held(h) == [] and SERVER_PORT in h.world.marks  # released; the mark stays: no switch is touched
    assert [c for c in h.world.calls[calls:] if c[0] == "set_port_admin"] == []
    assert (
        h.state.audit.entries(1)[0]["why"]
        == f"its mark stays on {SERVER_PORT} (mode observe: fabricd touches no switch)"
    )
    # back in auto (chaos seed 8128: the mark stayed 60 s on the up port after the observe spell): the next pass
    # removes it, the port's state unchanged
    run(h.rem.requests.set_mode("auto", "alice", "incident over"))
    h.clock.advance(1)
    run(h.rem.reconciler.reconcile_pass(h.clock()))
    assert SERVER_PORT not in h.world.marks and h.world.admin[SERVER_PORT] is True and _held(h) == []
    audit = [(e["what"], e["why"]) for e in h.state.audit.entries(2)]
    assert audit[1][0] == f"stale mark on {SERVER_PORT}" and "fabricd holds it no longer" in audit[1][1]
    assert audit[0] == (f"unmark {SERVER_PORT}", f"removed fabricd's mark from {SERVER_PORT}")
    calls = len(h.world.calls)
    run(h.rem.reconciler.reconcile_pass(h.clock()))  # once: nothing left to do
    assert h.world.calls[calls:] == []


def test_a_port_whose_enable_just_rolled_back_is_not_judged_on_telemetry_from_before(
    make: Callable[..., Harness],
) -> None:
    """Chaos seed 6174: the enable after a repair rolled back (wrong cable); 0.4 s later telemetry still read the port
    up, reconcile re-applied, the rate refused, the hold was released and the port then adopted. A port whose action
    ended within the grace is left alone, as one in flight is."""
    h = make()
    run(report(h, flap(h.fabric, SERVER_PORT)))
    (t,) = h.tickets()
    h.world.lldp[SERVER_PORT] = Endpoint("gpu-g0-000", "nic1")
    h.clock.advance(600)  # the repair took a while: the hold is old
    settled(h, h.rem.requests.resolve(t.id, "tech"))
    enable = next(a for a in h.state.actions.all() if a.op == "enable")
    assert enable.status == "rolled_back" and h.world.admin[SERVER_PORT] is False
    h.world.admin[SERVER_PORT] = True  # telemetry from before the rollback
    h.clock.advance(1)
    assert run(h.rem.reconciler.reconcile_pass(h.clock())) == []
    assert len(h.state.actions.all()) == 2 and len(_held(h)) == 1
    h.world.admin[SERVER_PORT] = False  # the rollback streamed
    h.clock.advance(60)
    assert run(h.rem.reconciler.reconcile_pass(h.clock())) == []  # they agree


@pytest.mark.parametrize("why", ["stale", "unreadable"])
def test_a_switch_not_read_at_takeover_is_read_again_at_a_later_pass(make: Callable[..., Harness], why: str) -> None:
    # chaos seed 3133: a new leader took over in observe mode while a leaf's telemetry was stale; the old leader had
    # released a hold there (observe) and left its mark on the up port. The takeover's scan skipped that switch, and
    # the mark stayed 77 s after the mode was auto again: until the next full scan (mark_scan_s). A switch a scan
    # skipped or could not read is read again at the next pass it is fresh, RESCAN_S at most apart.
    from fabricd.service.remediation.reconciler import RESCAN_S

    h = make()
    h.world.marks[SERVER_PORT] = Mark(3, 2, "link_flap")  # up (admin not named): a hold released in observe
    stale = {SERVER_PORT.device} if why == "stale" else set()
    if why == "unreadable":
        h.world.unreadable.add(SERVER_PORT.device)
    run(h.rem.reconciler.reconcile(stale))
    assert SERVER_PORT in h.world.marks and h.rem.marks.unscanned == {SERVER_PORT.device}
    h.world.unreadable.clear()
    scans = len(h.world.scans)
    run(h.rem.reconciler.reconcile_pass(h.clock()))  # within RESCAN_S of the takeover's try: not yet
    assert SERVER_PORT in h.world.marks and len(h.world.scans) == scans
    h.clock.advance(RESCAN_S)
    settled(h, h.rem.reconciler.reconcile_pass(h.clock(), stale if why == "stale" else ()))
    if why == "stale":  # still stale: neither read nor judged
        assert SERVER_PORT in h.world.marks and len(h.world.scans) == scans
        h.clock.advance(RESCAN_S)
        settled(h, h.rem.reconciler.reconcile_pass(h.clock()))
    assert h.world.scans[scans:] == [SERVER_PORT.device]  # that switch only, not a full scan
    assert SERVER_PORT not in h.world.marks and h.rem.marks.unscanned == set()
    assert h.world.admin.get(SERVER_PORT, True) is True
