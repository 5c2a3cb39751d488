"""Defects found in review (issue 16), each with the test that failed before its fix."""

from __future__ import annotations

from collections.abc import Callable

from topology.units import NS

from .harness import FAULT, SERVER_PORT, T0, UPLINK, Harness, action_of, flap, report, run


def test_an_unexpected_error_in_an_action_fails_it_instead_of_leaving_it_running(
    make: Callable[..., Harness],
) -> None:
    # Not a DriverError: a bug or a library raising something else. The action must not stay `running` for ever
    # (a running disable counts against the budgets and blocks every later action on the port).
    h = make()
    h.world.hooks["set_port_admin"] = lambda: (_ for _ in ()).throw(RuntimeError("driver bug"))
    run(report(h, flap(h.fabric, SERVER_PORT)))
    (a,) = h.state.actions.all()
    assert a.status == "failed"
    assert "internal error" in a.detail and "RuntimeError: driver bug" in a.detail
    assert any(row["what"] == f"disable {SERVER_PORT}: failed" for row in h.state.audit.entries())
    (t,) = h.tickets()
    assert "internal error" in t.body["status_note"]


def test_the_escalation_window_sees_every_action_of_the_hour_not_the_last_500(make: Callable[..., Harness]) -> None:
    h = make()
    # one refused disable on the uplink, then 600 actions elsewhere in the same hour
    h.state.actions.add("disable", UPLINK.device, UPLINK.port, "auto", "refused", "budget", T0 - 60 * NS)
    for i in range(600):
        h.state.actions.add("disable", "leaf-g1-r1", f"Ethernet{i}/1", "observe", "observed", "x", T0 - 30 * NS)
    assert UPLINK.port in h.rem.incidents._faulty_ports(UPLINK.device, T0, h.state.holds.all())


def test_a_port_in_flight_counts_as_held_past_500_actions(make: Callable[..., Harness]) -> None:
    h = make()
    first = h.state.actions.add("disable", UPLINK.device, UPLINK.port, "auto", "running", "flap", T0)
    for i in range(600):
        h.state.actions.add("disable", "leaf-g1-r1", f"Ethernet{i}/1", "auto", "running", "x", T0)
    assert action_of(h, first.id).status == "running"
    assert UPLINK in h.rem.holds.held()


def test_a_port_found_up_after_a_restart_goes_on_probation(make: Callable[..., Harness]) -> None:
    h = make(probation_s=3600)
    t = h.state.tickets.create(FAULT, "link_flap", SERVER_PORT.device, SERVER_PORT.port, "t", {}, T0)
    h.state.holds.hold(SERVER_PORT.device, SERVER_PORT.port, 1, t.id, T0 - 60 * NS)  # held, but the port is up
    h.state.tickets.resolve(t.id, T0, "tech")  # repaired, and its enable not recorded (fabricd died)
    run(h.restart(probation_s=3600).reconciler.reconcile())
    assert h.state.holds.all() == []
    # someone enabled it (a repair done by hand): a new flap within the probation reopens its ticket
    assert h.state.holds.probation(SERVER_PORT.device, SERVER_PORT.port, h.clock() + NS) == t.id
