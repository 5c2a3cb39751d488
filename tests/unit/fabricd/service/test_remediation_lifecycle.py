"""The remediator with fake switches (see harness.py): repair and probation, drain hooks, restart reconciliation."""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Callable
from pathlib import Path

import pytest

from fabricd.detectors.finding import Finding
from fabricd.service.state import Ticket
from topology.model import Endpoint
from topology.units import NS

from .harness import (
    FAULT,
    SERVER_PORT,
    SESSION_DISABLE,
    T0,
    UPLINK,
    Harness,
    action_of,
    flap,
    report,
    run,
    ticket_of,
)


# --- repair, probation ---------------------------------------------------------------------------------------
def test_a_second_resolve_while_the_enable_runs_starts_no_second_enable(make: Callable[..., Harness]) -> None:
    # two people (or the ticket system and a person) resolve the same ticket at once: the port is enabled once,
    # and the enable carries its idempotency key
    h = make()
    run(report(h, flap(h.fabric, SERVER_PORT)))
    (t,) = h.tickets()
    disable = h.state.actions.all()[0]
    h.world.calls.clear()

    async def resolve_twice() -> None:
        await h.rem.requests.resolve(t.id, "alice")
        await h.rem.requests.resolve(t.id, "bob")  # alice's enable is still running
        await h.rem.idle()

    run(resolve_twice())
    assert [c for c in h.world.calls if c[0] == "set_port_admin"] == [
        ("set_port_admin", "leaf-g0-r0", "Ethernet1/1", True, 120)
    ]
    enables = [a for a in h.state.actions.all() if a.op == "enable"]
    assert [(a.status, a.key) for a in enables] == [("done", f"enable:leaf-g0-r0:Ethernet1/1:after{disable.id}:try1")]


def test_resolve_brings_the_port_back_on_probation_and_a_new_flap_reopens(make: Callable[..., Harness]) -> None:
    h = make(probation_s=3600)
    run(report(h, flap(h.fabric, SERVER_PORT)))
    (t,) = h.tickets()
    h.world.calls.clear()

    h.clock.advance(1800)  # the optic was replaced

    async def resolve() -> Ticket:
        t = await h.rem.requests.resolve(t_id, "alice")
        await h.rem.idle()
        return t

    t_id = t.id
    resolved = run(resolve())
    assert (resolved.status, resolved.resolved_by) == ("resolved", "alice")
    assert h.world.calls == [
        ("connect", "leaf-g0-r0"),
        ("set_port_admin", "leaf-g0-r0", "Ethernet1/1", True, 120),
        ("confirm", "leaf-g0-r0"),
        ("close", "leaf-g0-r0"),
    ]
    enable = h.state.actions.all()[0]
    assert (enable.op, enable.status, enable.ticket_id, enable.reason) == (
        "enable", "done", t.id, f"ticket {t.id} resolved by alice",
    )  # fmt: skip
    assert h.state.holds.all() == []
    assert h.state.holds.probation("leaf-g0-r0", "Ethernet1/1", h.clock()) == t.id
    t = ticket_of(h, t.id)
    assert t.status == "resolved" and t.body["status_note"] == "enabled leaf-g0-r0:Ethernet1/1"

    # It flaps again within the hour: the same ticket reopens and the port goes down again.
    h.clock.advance(600)
    h.world.calls.clear()
    (out,) = run(report(h, flap(h.fabric, SERVER_PORT, start_ts=h.clock.now)))
    assert out.ticket is not None and out.ticket.id == t.id
    (t,) = h.tickets()
    assert (t.status, t.recurrences, t.resolved_by) == ("open", 1, None)
    assert t.body["actions"][-2]["note"].startswith("disabling leaf-g0-r0:Ethernet1/1")
    assert t.body["status_note"] == "disabled leaf-g0-r0:Ethernet1/1"
    assert h.world.calls == SESSION_DISABLE
    assert [(p["port"], p["ticket_id"]) for p in h.state.holds.all()] == [("Ethernet1/1", t.id)]
    assert h.state.holds.probation("leaf-g0-r0", "Ethernet1/1", h.clock()) is None
    assert any(e["what"] == f"reopened ticket {t.id}" for e in h.state.audit.entries())

    # Repaired for good; a flap long after probation is a new fault with a new ticket.
    run(resolve())
    h.clock.advance(7200)
    run(report(h, flap(h.fabric, SERVER_PORT, start_ts=h.clock.now)))
    assert [x.status for x in h.tickets()] == ["open", "resolved"]


def test_enable_that_does_not_come_up_is_still_confirmed(make: Callable[..., Harness]) -> None:
    """Bringing a port back is undoing our own change: confirmed even if the link stays down (bad optic)."""
    h = make()
    run(report(h, flap(h.fabric, SERVER_PORT)))
    (t,) = h.tickets()
    h.world.stuck.add(SERVER_PORT)  # stays DOWN

    async def resolve() -> None:
        await h.rem.requests.resolve(t.id, "alice")
        await h.rem.idle()

    run(resolve())
    enable = h.state.actions.all()[0]
    assert (enable.op, enable.status) == ("enable", "done")
    assert enable.detail == "enabled leaf-g0-r0:Ethernet1/1 (it did not come up within 10 s)"
    assert h.state.holds.all() == []


# --- drain hook ----------------------------------------------------------------------------------------------
def test_drain_hook_runs_for_a_server_port(make: Callable[..., Harness], tmp_path: Path) -> None:
    drained = tmp_path / "drained.txt"
    h = make(drain_hook=f"sh -c 'echo {{node}} {{device}}:{{port}} >> {drained}'")
    run(report(h, flap(h.fabric, SERVER_PORT)))
    assert drained.read_text() == "gpu-g0-000 leaf-g0-r0:Ethernet1/1\n"
    (t,) = h.tickets()
    assert t.body["status_note"] == "drained gpu-g0-000; disabled leaf-g0-r0:Ethernet1/1"
    assert h.state.holds.is_held("leaf-g0-r0", "Ethernet1/1")

    # An uplink has no server behind it: no hook.
    h.clock.advance(10)
    run(report(h, flap(h.fabric, UPLINK, start_ts=h.clock.now)))
    assert drained.read_text() == "gpu-g0-000 leaf-g0-r0:Ethernet1/1\n"
    assert h.state.holds.is_held("leaf-g0-r0", "Ethernet5/1")


def test_drain_hook_values_cannot_reach_the_shell(make: Callable[..., Harness], tmp_path: Path) -> None:
    """The reason (the finding's summary: `a <-> b`, `penalty 4200 > suppress 4100`) goes into a shell script
    verbatim when the template is `sh -c`; it must arrive as plain text, not as redirections or subshells."""
    out = tmp_path / "reason.txt"
    h = make(drain_hook=f"sh -c 'echo \"{{reason}}\" > {out}'")
    f = flap(h.fabric, SERVER_PORT)
    evil = tmp_path / "pwned"
    summary = f"link {f.ports[0]} <-> {f.ports[1]} flapped (penalty 4200 > suppress 4100); $(touch {evil}) `id`"
    run(report(h, dataclasses.replace(f, summary=summary)))
    reason = out.read_text().strip()
    assert "gpu-g0-000:nic0 -- leaf-g0-r0:Ethernet1/1" in reason and " gt suppress " in reason
    assert not set(reason) & set("<>$`()\"'\\;|&")
    assert not evil.exists() and not (tmp_path / "suppress").exists()
    h.state.close()


def test_failing_drain_hook_is_noted(make: Callable[..., Harness]) -> None:
    h = make(drain_hook="sh -c 'echo {node} is busy; exit 3'")
    run(report(h, flap(h.fabric, SERVER_PORT)))
    (t,) = h.tickets()
    assert t.body["status_note"] == (
        "drain hook for gpu-g0-000 exited 3: gpu-g0-000 is busy; disabled leaf-g0-r0:Ethernet1/1"
    )
    h2 = make(drain_hook="/nonexistent/drain {node}")
    run(report(h2, flap(h2.fabric, SERVER_PORT)))
    note = h2.tickets()[0].body["status_note"]
    assert note.startswith("drain hook for gpu-g0-000 failed (FileNotFoundError")
    assert note.endswith("; disabled leaf-g0-r0:Ethernet1/1")


def test_hanging_drain_hook_is_killed(make: Callable[..., Harness], tmp_path: Path) -> None:
    pidfile = tmp_path / "hook.pid"
    h = make(drain_hook=f"sh -c 'echo $$ > {pidfile}; exec sleep 30'", drain_timeout_s=0.3)
    run(report(h, flap(h.fabric, SERVER_PORT)))
    assert h.tickets()[0].body["status_note"] == (
        "drain hook for gpu-g0-000 did not finish within 0.3 s; killed it; disabled leaf-g0-r0:Ethernet1/1"
    )
    pid = int(pidfile.read_text())
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)  # killed and reaped, not left running


# --- restart -------------------------------------------------------------------------------------------------
def test_reconcile_completes_an_interrupted_action(make: Callable[..., Harness]) -> None:
    h = make()
    # What a crash between "running" and the driver call leaves behind.
    t = h.state.tickets.create(FAULT, "link_flap", "leaf-g0-r0", "Ethernet1/1", "link flap", {"actions": []}, T0)
    a = h.state.actions.add("disable", "leaf-g0-r0", "Ethernet1/1", "auto", "running", "flap", T0, ticket_id=t.id)
    # And a port fabricd held down (a minute ago) that someone brought back up while fabricd was down.
    h.state.holds.hold("leaf-g0-r1", "Ethernet2/1", 99, None, T0 - 60 * NS)

    rem = h.restart()
    notes = run(rem.reconciler.reconcile())
    assert notes == [
        f"completing disable of leaf-g0-r0:Ethernet1/1 (action {a.id}) interrupted by a restart",
        "leaf-g0-r1:Ethernet2/1 is up again and it has no ticket: the hold is released",
    ]
    # it looks on the switch for what the dead fabricd left under the action's key: nothing, so it commits
    resumed = [SESSION_DISABLE[0], ("resume", "leaf-g0-r0", a.switch_key), *SESSION_DISABLE[1:]]
    assert h.world.calls == resumed
    assert h.world.keyed == {a.switch_key: "confirmed"}
    assert a.switch_key == f"fabricd_a{a.id}_{T0 & 0xFFFFFFFF:08x}"
    assert action_of(h, a.id).status == "done"
    assert [(p["device"], p["port"], p["ticket_id"]) for p in h.state.holds.all()] == [
        ("leaf-g0-r0", "Ethernet1/1", t.id)
    ]
    assert ticket_of(h, t.id).body["status_note"] == "disabled leaf-g0-r0:Ethernet1/1"
    # A second reconcile has nothing to do.
    assert run(rem.reconciler.reconcile()) == []
    assert h.world.calls == resumed


@pytest.mark.parametrize(
    ("left_on_switch", "calls", "note"),
    [
        ("pending", ["connect", "resume", "confirm", "close"], "disabled leaf-g0-r0:Ethernet1/1"),
        ("confirmed", ["connect", "resume", "close"],
         "disabled leaf-g0-r0:Ethernet1/1 (confirmed on the switch before a restart)"),
    ],
)  # fmt: skip
def test_reconcile_takes_over_what_the_dead_fabricd_left_on_the_switch(
    make: Callable[..., Harness], left_on_switch: str, calls: list[str], note: str
) -> None:
    # fabricd died after the commit (pending under its revert timer) or after the confirm, before recording it:
    # the next one never commits a second time; it confirms the pending commit, or records the confirmed one
    h = make()
    t = h.state.tickets.create(FAULT, "link_flap", "leaf-g0-r0", "Ethernet1/1", "link flap", {"actions": []}, T0)
    a = h.state.actions.add("disable", "leaf-g0-r0", "Ethernet1/1", "auto", "running", "flap", T0, ticket_id=t.id)
    h.world.oper[SERVER_PORT] = "DOWN"
    h.world.admin[SERVER_PORT] = False  # the dead fabricd's commit shut it
    h.world.keyed[a.switch_key] = left_on_switch
    run(h.restart().reconciler.reconcile())
    assert [c[0] for c in h.world.calls] == calls
    assert h.world.keyed == {a.switch_key: "confirmed"}
    assert action_of(h, a.id).status == "done"
    assert [(p["device"], p["port"]) for p in h.state.holds.all()] == [("leaf-g0-r0", "Ethernet1/1")]
    assert ticket_of(h, t.id).body["status_note"] == note


def test_reconcile_completes_an_interrupted_enable(make: Callable[..., Harness]) -> None:
    h = make()
    h.world.oper[SERVER_PORT] = "DOWN"
    t = h.state.tickets.create(FAULT, "link_flap", "leaf-g0-r0", "Ethernet1/1", "t", {}, T0)
    h.state.holds.hold("leaf-g0-r0", "Ethernet1/1", 1, t.id, T0)
    a = h.state.actions.add("enable", "leaf-g0-r0", "Ethernet1/1", "auto", "running", "resolved", T0, ticket_id=t.id)
    notes = run(h.restart().reconciler.reconcile())
    assert notes == [f"completing enable of leaf-g0-r0:Ethernet1/1 (action {a.id}) interrupted by a restart"]
    assert action_of(h, a.id).status == "done"
    assert h.state.holds.all() == []
    assert h.state.holds.probation("leaf-g0-r0", "Ethernet1/1", T0) == t.id


def test_an_enable_killed_after_its_commit_is_judged_by_what_the_switch_shows(make: Callable[..., Harness]) -> None:
    """Issue 54 (16 of 16 after kill -9 mid-enable): the repaired port came up before the restart and LLDP, which
    streams on change, heard its neighbour then; the resumed enable wanted a sample newer than the restart ("no
    LLDP neighbour heard ... within 5 s of it coming up"), rolled back and reopened the ticket. A port that is up
    and whose LLDP since the enable began names the blueprint's neighbour is a completed repair."""
    h = make()
    t = h.state.tickets.create(FAULT, "link_flap", "leaf-g0-r0", "Ethernet1/1", "t", {}, T0)
    h.state.holds.hold("leaf-g0-r0", "Ethernet1/1", 1, t.id, T0)
    a = h.state.actions.add("enable", "leaf-g0-r0", "Ethernet1/1", "auto", "running", "resolved", T0, ticket_id=t.id)
    # what the dead fabricd left: the port committed up under its revert timer, LLDP heard the server then
    h.world.keyed[a.switch_key] = "pending"
    h.world.admin[SERVER_PORT], h.world.oper[SERVER_PORT] = True, "UP"
    h.world.lldp[SERVER_PORT] = Endpoint("gpu-g0-000", "nic0")
    h.world.lldp_heard_ts[SERVER_PORT] = T0 + NS
    h.clock.advance(60)  # the restart, a minute later: nothing changed on the port since
    run(h.restart().reconciler.reconcile())
    done = action_of(h, a.id)
    assert done.status == "done", done.detail
    assert h.world.admin[SERVER_PORT] is True and h.world.keyed[a.switch_key] == "confirmed"
    assert h.state.holds.all() == [] and h.state.holds.probation("leaf-g0-r0", "Ethernet1/1", T0) == t.id


def test_two_findings_on_one_port_in_one_tick_act_once(make: Callable[..., Harness]) -> None:
    """A flapping link that also corrupts: two findings, two faults, one action on the switch."""
    h = make()
    f = flap(h.fabric, SERVER_PORT)
    corrupt = Finding(**{**f.__dict__, "kind": "link_corruption", "summary": "FCS errors 1e-6"})
    outs = run(report(h, f, corrupt))
    assert [c[0] for c in h.world.calls] == ["connect", "set_port_admin", "confirm", "close"]
    (a,) = h.state.actions.all()
    assert a.status == "done"
    assert outs[1].action is not None and outs[1].action.id == a.id
    assert outs[1].ticket is not None
    assert outs[1].ticket.body["status_note"] == f"action {a.id} on leaf-g0-r0:Ethernet1/1 is already running"
    assert sorted(t.kind for t in h.tickets()) == ["link_corruption", "link_flap"]


def test_a_port_on_probation_that_flaps_again_is_disabled_again_while_its_finding_is_still_reported(
    make: Callable[..., Harness],
) -> None:
    """Resolved a minute after its flaps, while the dampened finding is still reported (the same flap train, the
    same start), the port comes back; the detector goes on reporting that train: nothing happens. Then it flaps again
    (a flap after the resolve in the train's timeline): a new incident, the port disabled again and its ticket
    reopened. Before, the re-flap refreshed the still-active finding: no decision, the port stayed up."""
    h = make(probation_s=3600)
    first = flap(h.fabric, SERVER_PORT)
    timeline = [T0 + i * NS // 2 for i in range(8)]
    run(report(h, dataclasses.replace(first, evidence={**first.evidence, "timeline": timeline})))
    (t,) = h.tickets()
    h.clock.advance(60)

    async def resolve() -> None:
        await h.rem.requests.resolve(t.id, "alice")
        await h.rem.idle()

    run(resolve())
    resolved_at = h.clock()
    assert h.state.holds.probation(SERVER_PORT.device, SERVER_PORT.port, resolved_at) == t.id

    # the same train, still reported (no flap since the resolve): the closed incident, nothing decided
    h.clock.advance(5)
    assert run(report(h, dataclasses.replace(first, evidence={**first.evidence, "timeline": timeline}))) == []
    assert h.state.holds.all() == [] and len(h.state.findings.all()) == 1

    # the port coming back up from the resolve's enable is one transition in the train's timeline, not a flap
    came_up = [*timeline, resolved_at + NS]
    assert run(report(h, dataclasses.replace(first, evidence={**first.evidence, "timeline": came_up}))) == []
    assert h.state.holds.all() == []

    # it flaps again: the train's timeline has a flap (down, up) after the port came back
    h.clock.advance(5)
    again = [*came_up, resolved_at + 2 * NS, resolved_at + 3 * NS]
    (out,) = run(report(h, dataclasses.replace(first, evidence={**first.evidence, "flaps": 10, "timeline": again})))
    assert out is not None and out.ticket is not None and out.ticket.id == t.id
    (t,) = h.tickets()
    assert (t.status, t.recurrences) == ("open", 1)
    assert [(p["port"], p["ticket_id"]) for p in h.state.holds.all()] == [(SERVER_PORT.port, t.id)]
    assert [f["status"] for f in h.state.findings.all()] == ["active", "cleared"]
    assert any(e["what"] == f"reopened ticket {t.id}" for e in h.state.audit.entries())
