"""The remediator with fake switches (see harness.py): modes, the guard, failures of switches and escalation."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import replace
from typing import Any

import pytest

from drivers.base import DriverError, UnreachableError
from fabricd.service.config import SafetyLimits
from fabricd.service.faults import common_cause
from fabricd.service.remediation.errors import ActionError
from fabricd.service.remediation.incidents import Outcome
from fabricd.service.state import Ticket
from topology.fabric import Fabric
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
)


# --- auto mode -------------------------------------------------------------------------------------------------
def test_auto_disables_the_port_and_files_one_ticket(make: Callable[..., Harness]) -> None:
    h = make()
    f = flap(h.fabric, SERVER_PORT)
    (out,) = run(report(h, f))
    assert out.verdict is not None and out.verdict.allowed
    assert out.action is not None and out.action.status == "running"  # as decided; done after idle()

    assert h.world.calls == SESSION_DISABLE
    assert h.world.waits == [("leaf-g0-r0", "Ethernet1/1", False, 10.0)]
    (action,) = h.state.actions.all()
    assert (action.op, action.mode, action.status) == ("disable", "auto", "done")
    assert action.detail == "disabled leaf-g0-r0:Ethernet1/1"
    assert action.reason == f"link_flap on leaf-g0-r0:Ethernet1/1: {f.summary}"
    (t,) = h.tickets()
    assert out.ticket is not None and out.ticket.id == t.id == action.ticket_id
    assert h.state.holds.all() == [
        {"device": "leaf-g0-r0", "port": "Ethernet1/1", "action_id": action.id, "ticket_id": t.id, "since_ts": T0}
    ]
    assert (t.fault, t.kind, t.status, t.escalation, t.recurrences) == (FAULT, "link_flap", "open", False, 0)
    assert t.title == "link flap on leaf-g0-r0:Ethernet1/1"
    body = t.body
    assert body["evidence"]["detector"] == {"flaps": 8, "penalty": 3200.0}
    assert body["evidence"]["this_end"] == {
        "port": "leaf-g0-r0:Ethernet1/1", "oper-status": "UP", "if.carrier-transitions": 16,
    }  # fmt: skip
    assert body["evidence"]["other_end"]["port"] == "gpu-g0-000:nic0"
    assert body["finding"] == f.to_dict()
    assert body["occurrence_count"] == 1
    assert [(a["op"], a["status"], a["note"]) for a in body["actions"]] == [
        ("disable", "running", f"disabling leaf-g0-r0:Ethernet1/1 (action {action.id})"),
        ("disable", "done", "disabled leaf-g0-r0:Ethernet1/1"),
    ]
    assert body["status_note"] == "disabled leaf-g0-r0:Ethernet1/1"
    # Published when opened and again with the outcome, the latest version last.
    assert [p.id for p in h.published] == [t.id, t.id]
    assert h.published[-1] == t
    assert h.published[-1].updated_ts > h.published[0].updated_ts  # two versions, two idempotency keys
    assert [(e["what"], e["action_id"], e["ticket_id"]) for e in reversed(h.state.audit.entries())] == [
        ("disable leaf-g0-r0:Ethernet1/1: running", action.id, None),  # decided before the ticket exists
        (f"opened ticket {t.id}", None, t.id),
        ("disable leaf-g0-r0:Ethernet1/1: done", action.id, t.id),
    ]

    # The detector reports the same incident on its next ticks: nothing new.
    assert run(report(h, f, f)) == []
    assert h.world.calls == SESSION_DISABLE
    assert len(h.state.actions.all()) == 1 and h.tickets() == [t]


def test_flap_reported_on_a_port_fabricd_holds_down_is_ignored(make: Callable[..., Harness]) -> None:
    h = make()
    run(report(h, flap(h.fabric, SERVER_PORT)))
    (t,) = h.tickets()
    h.clock.advance(60)
    (out,) = run(report(h, flap(h.fabric, SERVER_PORT, start_ts=T0 + 60 * NS)))  # our own shutdown's echo
    assert out == Outcome(None, None, None)
    assert h.tickets() == [t] and len(h.state.actions.all()) == 1


def test_a_new_incident_on_the_same_link_updates_its_ticket(make: Callable[..., Harness]) -> None:
    h = make(mode="observe")
    first = flap(h.fabric, SERVER_PORT)
    run(report(h, first))
    h.clock.advance(300)
    # The next incident is reported from the server's end of the same link: the same fault, the same ticket.
    again = flap(h.fabric, Endpoint("gpu-g0-000", "nic0"), start_ts=T0 + 300 * NS, flaps=5)
    (out,) = run(report(h, again))
    (t,) = h.tickets()
    assert out.ticket is not None and out.ticket.id == t.id
    assert (t.recurrences, t.status) == (1, "open")
    assert t.body["occurrence_count"] == 2
    assert [o["summary"] for o in t.body["occurrences"]] == [first.summary, again.summary]
    assert t.body["finding"] == again.to_dict()
    # The action is still on the switch end of the link.
    assert [(a.device, a.port, a.status) for a in h.state.actions.all()] == [
        ("leaf-g0-r0", "Ethernet1/1", "observed")
    ] * 2
    assert len(t.body["actions"]) == 2
    assert len(h.state.findings.all()) == 2


# --- observe and approve ---------------------------------------------------------------------------------------
def test_observe_mode_never_touches_a_switch(make: Callable[..., Harness]) -> None:
    h = make(mode="observe")
    (out,) = run(report(h, flap(h.fabric, SERVER_PORT)))
    assert h.world.calls == [] and h.world.waits == []
    (a,) = h.state.actions.all()
    assert (a.status, a.mode) == ("observed", "observe")
    assert out.action == a  # as stored: linked to its ticket
    assert not h.state.holds.is_held("leaf-g0-r0", "Ethernet1/1")
    (t,) = h.tickets()
    assert t.body["status_note"] == (
        "observe mode: fabricd would disable leaf-g0-r0:Ethernet1/1 (guard allows: capacity and budgets allow it);"
        " nothing was changed"
    )
    assert t.body["actions"][0]["status"] == "observed"
    assert h.state.audit.entries()[-1]["what"] == "would disable leaf-g0-r0:Ethernet1/1"


def test_approve_mode_waits_for_a_person(make: Callable[..., Harness]) -> None:
    h = make(mode="approve")
    (out,) = run(report(h, flap(h.fabric, SERVER_PORT)))
    assert out.action is not None
    aid = out.action.id
    assert action_of(h, aid).status == "awaiting_approval"
    assert h.world.calls == []
    (t,) = h.tickets()
    note = f"waiting for approval: run `fabricd approve {aid}` to disable leaf-g0-r0:Ethernet1/1"
    assert t.body["status_note"] == note

    # The same port flaps again while the action waits: the ticket notes the pending action, no second one.
    h.clock.advance(30)
    run(report(h, flap(h.fabric, SERVER_PORT, start_ts=T0 + 30 * NS)))
    assert [a.id for a in h.state.actions.all()] == [aid]
    t = h.tickets()[0]
    assert t.body["status_note"] == f"action {aid} on leaf-g0-r0:Ethernet1/1 is already awaiting_approval"
    assert h.world.calls == []

    async def approve() -> None:
        a = await h.rem.requests.approve(aid, "alice")
        assert a.status == "running" and a.detail == "approved by alice"
        await h.rem.idle()

    run(approve())
    assert h.world.calls == SESSION_DISABLE
    assert action_of(h, aid).status == "done"
    assert h.state.holds.all()[0]["ticket_id"] == t.id
    assert any(e["actor"] == "alice" and e["what"] == f"approved action {aid}" for e in h.state.audit.entries())
    assert h.tickets()[0].body["status_note"] == "disabled leaf-g0-r0:Ethernet1/1"

    with pytest.raises(ActionError, match=f"action {aid} is done, not awaiting approval"):
        run(h.rem.requests.approve(aid, "alice"))
    with pytest.raises(ActionError, match="no action 999"):
        run(h.rem.requests.approve(999, "alice"))
    assert h.world.calls == SESSION_DISABLE  # nothing more


def test_approval_rechecks_the_guard(make: Callable[..., Harness]) -> None:
    h = make(mode="approve")
    (out,) = run(report(h, flap(h.fabric, UPLINK)))
    assert out.action is not None and out.action.status == "awaiting_approval"
    h.world.oper[Endpoint("leaf-g0-r0", "Ethernet7/1")] = "DOWN"  # meanwhile another uplink died
    a = run(h.rem.requests.approve(out.action.id, "alice"))
    assert a.status == "refused"
    assert a.detail == (
        "guard (capacity) at approval: leaf-g0-r0 would keep 800 of 1600 Gb/s uplink capacity (50%), below the 75%"
        " limit"
    )
    assert h.world.calls == []
    assert h.tickets()[0].body["status_note"].startswith("approved by alice but the guard refused: leaf-g0-r0 would")


def test_resolving_cancels_a_pending_approval(make: Callable[..., Harness]) -> None:
    h = make(mode="approve")
    (out,) = run(report(h, flap(h.fabric, SERVER_PORT)))
    assert out.ticket is not None and out.action is not None
    t = run(h.rem.requests.resolve(out.ticket.id, "bob"))
    assert (t.status, t.resolved_by) == ("resolved", "bob")
    assert action_of(h, out.action.id).status == "cancelled"
    with pytest.raises(ActionError, match="is cancelled, not awaiting approval"):
        run(h.rem.requests.approve(out.action.id, "alice"))
    assert h.world.calls == []
    with pytest.raises(ActionError, match="no ticket 999"):
        run(h.rem.requests.resolve(999, "bob"))


# --- when acting goes wrong ------------------------------------------------------------------------------------
def test_port_never_seen_down_is_rolled_back(make: Callable[..., Harness]) -> None:
    h = make()
    h.world.stuck.add(SERVER_PORT)
    run(report(h, flap(h.fabric, SERVER_PORT)))
    assert h.world.calls == [
        ("connect", "leaf-g0-r0"),
        ("set_port_admin", "leaf-g0-r0", "Ethernet1/1", False, 120),
        ("rollback", "leaf-g0-r0"),
        ("close", "leaf-g0-r0"),
    ]
    (a,) = h.state.actions.all()
    text = "telemetry did not show leaf-g0-r0:Ethernet1/1 down within 10 s; rolled back"
    assert (a.status, a.detail) == ("rolled_back", text)
    assert h.state.holds.all() == []
    (t,) = h.tickets()
    assert t.body["status_note"] == text
    assert t.body["actions"][-1]["status"] == "rolled_back"


def test_driver_error_fails_the_action_and_rolls_back(make: Callable[..., Harness]) -> None:
    h = make()
    h.world.fail["set_port_admin"] = DriverError("leaf-g0-r0", "commit refused (session locked); retry later")
    run(report(h, flap(h.fabric, SERVER_PORT)))
    assert [c[0] for c in h.world.calls] == ["connect", "set_port_admin", "rollback", "close"]
    (a,) = h.state.actions.all()
    text = "could not disable leaf-g0-r0:Ethernet1/1: leaf-g0-r0: commit refused (session locked); retry later"
    assert (a.status, a.detail) == ("failed", text)
    assert h.state.holds.all() == []
    assert h.tickets()[0].body["status_note"] == text


def test_driver_error_in_rollback_too(make: Callable[..., Harness]) -> None:
    h = make()
    h.world.fail["confirm"] = DriverError("leaf-g0-r0", "connection lost")
    h.world.fail["rollback"] = DriverError("leaf-g0-r0", "connection lost")
    run(report(h, flap(h.fabric, SERVER_PORT)))
    assert [c[0] for c in h.world.calls] == ["connect", "set_port_admin", "confirm", "rollback", "close"]
    (a,) = h.state.actions.all()
    assert (a.status, a.detail) == ("failed", "could not disable leaf-g0-r0:Ethernet1/1: leaf-g0-r0: connection lost")
    assert h.state.holds.all() == []


def test_unreachable_switch(make: Callable[..., Harness]) -> None:
    h = make()
    h.world.fail["connect"] = UnreachableError("leaf-g0-r0", "connection refused on port 443; check the inventory")
    run(report(h, flap(h.fabric, SERVER_PORT)))
    assert h.world.calls == [("connect", "leaf-g0-r0")]  # nothing to roll back or close
    (a,) = h.state.actions.all()
    assert a.status == "failed" and "connection refused on port 443" in a.detail


def test_guard_refusal_is_explained_in_the_ticket(make: Callable[..., Harness]) -> None:
    h = make()
    h.world.oper[Endpoint("leaf-g0-r0", "Ethernet7/1")] = "DOWN"  # 1 of 4 uplinks already down
    (out,) = run(report(h, flap(h.fabric, UPLINK)))
    assert out.verdict is not None and (out.verdict.allowed, out.verdict.rule) == (False, "capacity")
    assert h.world.calls == []
    (a,) = h.state.actions.all()
    why = "leaf-g0-r0 would keep 800 of 1600 Gb/s uplink capacity (50%), below the 75% limit"
    assert (a.status, a.reason, a.port) == ("refused", why, "Ethernet5/1")
    (t,) = h.tickets()
    assert (t.kind, t.escalation) == ("link_flap", False)
    assert t.body["status_note"] == (
        f"no action: the safety guard refused to disable leaf-g0-r0:Ethernet5/1: {why}; escalated to people"
    )
    assert any(e["why"] == f"guard (capacity): {why}" for e in h.state.audit.entries())


def test_kinds_not_enabled_are_only_ticketed(make: Callable[..., Harness]) -> None:
    h = make(kinds=["link_corruption"])
    (out,) = run(report(h, flap(h.fabric, SERVER_PORT)))
    assert out.action is None and h.world.calls == []
    assert h.tickets()[0].body["status_note"] == "no automatic action for this kind of fault; see the evidence"


def test_a_flap_fabricd_did_not_watch_is_ticketed_with_its_evidence_and_not_acted_on(
    make: Callable[..., Harness],
) -> None:
    # A flap train counted after a restart (link_flap_unwatched): over, the link up and stable now. In auto mode a
    # streamed flap takes the port down; this one only opens the repair ticket, saying why nothing was done.
    h = make()
    unwatched = {"from_ts": T0 - 120 * NS, "to_ts": T0 - 5 * NS, "transitions": 16}
    f = replace(
        flap(h.fabric, SERVER_PORT),
        evidence={"unwatched": unwatched, "flaps": 8},
        summary="link gpu-g0-000:nic0--leaf-g0-r0:Ethernet1/1 went down 8 times while fabricd was not watching",
    )
    (out,) = run(report(h, f))
    assert out.action is None and h.world.calls == [] and h.state.actions.all() == []
    assert h.state.holds.all() == []
    (t,) = h.tickets()
    assert (t.fault, t.status) == (FAULT, "open")
    assert t.body["status_note"] == "flapped while fabricd was not watching; it is stable now: not taken down; watch it"
    assert t.body["evidence"]["detector"]["unwatched"] == unwatched
    assert t.body["finding"]["summary"] == f.summary
    assert h.published == [t]
    # A flap that goes on, found by link_flap as it streams: the same fault's ticket, and acted on as usual.
    h.clock.advance(30)
    (again,) = run(report(h, flap(h.fabric, SERVER_PORT, start_ts=T0 + 30 * NS)))
    assert again.ticket is not None and again.ticket.id == t.id
    assert [(a.op, a.status) for a in h.state.actions.all()] == [("disable", "done")]


def test_unmanaged_switch_is_not_touched(make: Callable[..., Harness], small: Fabric) -> None:
    h = make()
    h.rem.ctx.managed = {"spine-r0-0"}  # only part of the fabric is in the inventory
    (out,) = run(report(h, flap(small, SERVER_PORT)))
    assert out.action is None and h.world.calls == []
    assert h.tickets()[0].body["status_note"].startswith("no action: neither end of the link is a switch fabricd")


# --- many faults on one switch ---------------------------------------------------------------------------------
def test_many_flaps_on_one_leaf_stop_at_the_budget_and_escalate_once(
    make: Callable[..., Harness], wide: Fabric
) -> None:
    h = make(wide)
    ports = [Endpoint("leaf-g0-r0", f"Ethernet{i}/1") for i in range(1, 9)]  # all 8 server ports
    assert all(str(wide.peer(p.device, p.port)).startswith("gpu-g0-") for p in ports)
    outs = run(report(h, *(flap(wide, p, start_ts=T0 + i * NS) for i, p in enumerate(ports[:5]))))
    h.clock.advance(10)
    outs += run(report(h, *(flap(wide, p, start_ts=T0 + 10 * NS) for p in ports[5:])))
    assert len(outs) == 8

    disabled = [(p["device"], p["port"]) for p in h.state.holds.all()]
    assert disabled == [("leaf-g0-r0", "Ethernet1/1"), ("leaf-g0-r0", "Ethernet2/1")]  # the switch budget: 2
    assert [c for c in h.world.calls if c[0] == "set_port_admin"] == [
        ("set_port_admin", "leaf-g0-r0", "Ethernet1/1", False, 120),
        ("set_port_admin", "leaf-g0-r0", "Ethernet2/1", False, 120),
    ]
    statuses = sorted((a.port, a.status) for a in h.state.actions.all())
    assert [s for _, s in statuses] == ["done", "done"] + ["refused"] * 6
    assert all(o.verdict is not None and o.verdict.rule == "switch_budget" for o in outs[2:])

    (esc,) = h.tickets("escalation")
    assert (esc.escalation, esc.fault, esc.device, esc.port, esc.status) == (
        True, "escalation:leaf-g0-r0", "leaf-g0-r0", None, "open",
    )  # fmt: skip
    cause = "leaf-g0-r0 itself (8 faulty ports at once): check its power, ASIC, software and recent changes"
    assert esc.body["likely_common_cause"] == cause
    assert esc.title == "8 faulty ports on leaf-g0-r0: likely leaf-g0-r0 itself (8 faulty ports at once)"
    assert esc.body["faulty_ports"] == sorted(p.port for p in ports)
    assert esc.body["held_down_by_fabricd"] == ["Ethernet1/1", "Ethernet2/1"]
    assert "leaf-g0-r0 already has 2 ports held down (limit 2)" in esc.body["why_no_more_actions"]
    assert esc.recurrences == 5  # opened by the 3rd refusal, updated by the other 5
    # The refused actions point at the escalation; only the two ports taken down have their own tickets.
    assert {a.ticket_id for a in h.state.actions.all("refused")} == {esc.id}
    assert sorted(t.port or "" for t in h.tickets("link_flap")) == ["Ethernet1/1", "Ethernet2/1"]
    assert all(o.ticket is not None and o.ticket.id == esc.id for o in outs[2:])


def test_resolving_the_escalation_brings_back_the_ports_it_names(make: Callable[..., Harness], wide: Fabric) -> None:
    h = make(wide)
    ports = [Endpoint("leaf-g0-r0", f"Ethernet{i}/1") for i in range(1, 5)]
    run(report(h, *(flap(wide, p) for p in ports)))
    (esc,) = h.tickets("escalation")
    held = {p["port"]: p["ticket_id"] for p in h.state.holds.all()}
    assert sorted(held) == ["Ethernet1/1", "Ethernet2/1"]
    assert esc.body["held_down_by_fabricd"] == ["Ethernet1/1", "Ethernet2/1"]  # in flight when it was written
    # An unrelated port of another switch, held down under its own ticket, stays down.
    other = Endpoint("leaf-g1-r0", "Ethernet1/1")
    run(report(h, flap(wide, other)))
    h.world.calls.clear()

    async def resolve() -> Ticket:
        t = await h.rem.requests.resolve(esc.id, "alice")
        await h.rem.idle()
        return t

    t = run(resolve())
    assert t.status == "resolved" and t.resolved_by == "alice"
    assert sorted((c[2], c[3]) for c in h.world.calls if c[0] == "set_port_admin") == [
        ("Ethernet1/1", True), ("Ethernet2/1", True),
    ]  # fmt: skip
    assert [(p["device"], p["port"]) for p in h.state.holds.all()] == [("leaf-g1-r0", "Ethernet1/1")]
    for tid in held.values():
        assert tid is not None  # a port disabled by fabricd has its repair ticket
        pt = h.state.tickets.get(tid)
        assert pt is not None and (pt.status, pt.resolved_by) == ("resolved", f"alice (escalation {esc.id})")
        assert pt.body["status_note"].startswith("enabled leaf-g0-r0:Ethernet")
    assert any(r["what"] == f"resolved ticket {held['Ethernet1/1']}" for r in h.state.audit.entries())


def test_budget_of_one_on_the_small_pod(make: Callable[..., Harness]) -> None:
    h = make(limits=SafetyLimits(max_down_per_switch=1))
    ports = [Endpoint("leaf-g0-r0", f"Ethernet{i}/1") for i in range(1, 5)]
    run(report(h, *(flap(h.fabric, p) for p in ports)))
    assert [p["port"] for p in h.state.holds.all()] == ["Ethernet1/1"]
    (esc,) = h.tickets("escalation")
    assert esc.body["faulty_ports"] == ["Ethernet1/1", "Ethernet2/1", "Ethernet3/1", "Ethernet4/1"]
    assert len(h.tickets()) == 2


def test_a_finding_while_a_finished_disable_closes_its_session_still_counts_that_port(
    make: Callable[..., Harness],
) -> None:
    """The first disable is confirmed and its session is closing when the next flap arrives: the first port must
    already count as held down (status and held-down record are one step), so the budget of one refuses."""
    h = make(limits=SafetyLimits(max_down_per_switch=1))
    first, second = Endpoint("leaf-g0-r0", "Ethernet1/1"), Endpoint("leaf-g0-r0", "Ethernet2/1")
    late: list[Outcome] = []

    async def scenario() -> None:
        loop = asyncio.get_running_loop()

        async def second_flap() -> None:
            late.extend(await h.rem.incidents.on_findings([flap(h.fabric, second)]))

        def on_close() -> None:  # the fake session's close runs on the loop's thread: schedule the next flap
            late_task.append(loop.create_task(second_flap()))

        late_task: list[asyncio.Task[None]] = []
        h.world.hooks["close"] = on_close
        await report(h, flap(h.fabric, first))
        await asyncio.gather(*late_task)
        await h.rem.idle()

    run(scenario())
    (out,) = late
    assert out.verdict is not None and (out.verdict.allowed, out.verdict.rule) == (False, "switch_budget")
    assert [p["port"] for p in h.state.holds.all()] == ["Ethernet1/1"]
    assert [c for c in h.world.calls if c[0] == "set_port_admin"] == [
        ("set_port_admin", "leaf-g0-r0", "Ethernet1/1", False, 120)
    ]


def test_common_cause_names_a_line_card() -> None:
    assert common_cause("leaf-1", ["Ethernet3/1/1", "Ethernet3/2/1", "Ethernet3/7/1"]) == (
        "line card 3 of leaf-1 (all 3 ports are on module 3): check the card and its power"
    )
    assert common_cause("leaf-1", ["Ethernet3/1/1", "Ethernet4/1/1"]).startswith("leaf-1 itself (2 faulty ports")


def test_the_switch_first_then_the_ticket_even_with_a_real_driver_thread(make: Callable[..., Harness]) -> None:
    # the decision, its action and its ticket are one state transaction; the ticket goes to the backend (a webhook,
    # Jira: slow) only once connect-and-commit has started in the driver thread, and a second fault on the same
    # switch, queued behind the first action, still gets its ticket handed over at once
    import threading
    from concurrent.futures import ThreadPoolExecutor

    h = make()
    release = threading.Event()
    seen: list[tuple[str, int, int]] = []  # (driver step handed to the thread, tickets recorded, tickets published)
    connect = h.rem.switch.actuator.connect

    def slow_connect(device: str) -> object:
        release.wait(10)  # the switch is slow to answer
        return connect(device)

    class Recording(ThreadPoolExecutor):
        def submit(self, fn: Any, /, *args: Any, **kwargs: Any) -> Any:
            name = getattr(getattr(fn, "func", fn), "__name__", "?")  # a partial names its function
            seen.append((name, len(h.state.tickets.all()), len(h.published)))
            return super().submit(fn, *args, **kwargs)

    h.rem.switch.actuator.connect = slow_connect  # type: ignore[method-assign,assignment]
    h.rem.switch.executor = Recording(max_workers=4)

    async def scenario() -> tuple[int, int]:
        first = await h.rem.incidents.on_findings([flap(h.fabric, SERVER_PORT)])
        published_while_first_blocks = len(h.published)
        second = await h.rem.incidents.on_findings([flap(h.fabric, Endpoint("leaf-g0-r0", "Ethernet2/1"))])
        published_while_queued = len(h.published)
        assert len(first) == 1 and len(second) == 1
        release.set()
        await h.rem.idle()
        return published_while_first_blocks, published_while_queued

    assert run(scenario()) == (1, 2)
    # connect began with the ticket recorded (same transaction as the action) but not yet handed to the backend
    assert seen[0] == ("_open_and_set", 1, 0)
    assert [a.status for a in h.state.actions.all()] == ["done", "done"]


def test_a_batch_starts_every_switch_change_before_any_ticket_goes_out(make: Callable[..., Harness]) -> None:
    # Links crossing together: the last one's commit must not wait for the first ones' tickets to reach the backend.
    h = make()
    ports = [Endpoint("leaf-g0-r0", "Ethernet1/1"), Endpoint("leaf-g0-r1", "Ethernet1/1")]
    seen_at_publish: list[list[tuple[Any, ...]]] = []

    async def publish(t: Ticket) -> None:
        seen_at_publish.append([c for c in h.world.calls if c[0] == "set_port_admin"])

    h.rem.paper.publish = publish
    outcomes = run(report(h, *(flap(h.fabric, ep) for ep in ports)))
    assert [o.action.status for o in outcomes if o.action is not None] == ["running", "running"]
    # the two new tickets (then each action's note on its ticket): both ports were committed before the first went
    for commits in seen_at_publish[:2]:
        assert sorted(c[1:3] for c in commits) == sorted((ep.device, ep.port) for ep in ports)


# --- fresh telemetry -------------------------------------------------------------------------------------------
async def settled(h: Harness, f: Any, unsure: set[str]) -> list[Outcome]:
    out = await h.rem.incidents.on_findings([f], unsure=unsure)
    await h.rem.idle()
    return out


def test_a_new_incident_waits_for_fresh_telemetry_from_the_switches_its_verdict_rests_on(
    make: Callable[..., Harness],
) -> None:
    """After a restart or a resync, what a switch streamed before does not count: an uplink flap whose far end (a
    spine) is resyncing is not judged, nor recorded, until the spine has said something fresh; a switch that has
    nothing to do with the port does not hold it up."""
    h = make()
    spine = h.fabric.peer(UPLINK.device, UPLINK.port)
    assert spine is not None
    f = flap(h.fabric, UPLINK)
    assert run(h.rem.incidents.on_findings([f], unsure={spine.device})) == []
    assert h.state.findings.all() == [] and h.state.actions.all() == [] and h.world.calls == []
    h.clock.advance(5)
    assert run(h.rem.incidents.on_findings([f], unsure={spine.device, "leaf-g1-r0"})) == []
    assert h.world.calls == []
    h.clock.advance(1)
    (out,) = run(settled(h, f, unsure={"leaf-g1-r0"}))  # the spine is back; leaf-g1-r0 is not its concern
    assert out.action is not None and [a.status for a in h.state.actions.all()] == ["done"]
    assert h.world.state(UPLINK) == "DOWN"
    # the incident is known now: the detector's next reports refresh it while the spine resyncs again, nothing new
    h.clock.advance(2)
    assert run(h.rem.incidents.on_findings([f], unsure={spine.device})) == []
    (stored,) = h.state.findings.all()
    assert stored["last_seen_ts"] == h.clock.now and len(h.state.actions.all()) == 1


def test_a_switch_that_stays_quiet_holds_a_new_incident_for_the_bounded_wait_only(
    make: Callable[..., Harness], caplog: pytest.LogCaptureFixture
) -> None:
    h = make()
    spine = h.fabric.peer(UPLINK.device, UPLINK.port)
    assert spine is not None
    f = flap(h.fabric, UPLINK)
    assert run(h.rem.incidents.on_findings([f], unsure={spine.device})) == []
    h.clock.advance(29.9)
    assert run(h.rem.incidents.on_findings([f], unsure={spine.device})) == []
    h.clock.advance(0.1)
    (out,) = run(report(h, f))  # report() passes no unsure switch: nothing to wait for
    assert out.action is not None
    h2 = make()
    assert run(h2.rem.incidents.on_findings([f], unsure={spine.device})) == []
    h2.clock.advance(30)
    caplog.clear()
    (out2,) = run(settled(h2, f, unsure={spine.device}))
    assert out2.action is not None and h2.world.state(UPLINK) == "DOWN"
    assert f"judged without fresh telemetry from {spine.device} after 30 s" in caplog.text
