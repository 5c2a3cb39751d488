"""Fencing (docs/ha.md): a leader's every state write is conditional on its token still being the one the state
names, and its every switch call is preceded by a check that it still leads. A leader paused mid-action (SIGSTOP, a
frozen VM) that wakes after a new leader took over writes nothing and sends nothing more to the switch."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from fabricd.service.config import RemediationSettings, SafetyLimits
from fabricd.service.remediation import context
from fabricd.service.remediation.wiring import build_remediation
from fabricd.service.state import StateStore, fenced
from fabricd.service.state.db import FencedError

from .harness import SERVER_PORT, T0, Clock, FakeActuator, FakeView, Harness, InlineExecutor, World, flap, run


def test_a_write_under_a_superseded_token_writes_nothing(tmp_path: Path) -> None:
    s = StateStore(tmp_path / "state.db")
    assert s.leadership.claim("a", 5, T0)
    with fenced(5):
        t = s.tickets.create("f", "link_flap", "d", "p", "t", {}, T0)  # still the leader's
        a = s.actions.add("disable", "d", "p", "auto", "running", "flap", T0)
    assert a.token == 5 and a.switch_key.startswith(f"fabricd_t5_a{a.id}_")
    assert s.leadership.claim("b", 6, T0)  # a new leader
    with fenced(5), pytest.raises(FencedError, match=r"names b \(token 6\) as leader, not this instance's token 5"):
        s.tickets.update(t.id, T0 + 1, body={"x": 1})
    assert s.tickets.get(t.id).body == {}  # type: ignore[union-attr]
    assert not s.writes.failing  # being fenced is not a broken state store
    with fenced(6):
        s.tickets.update(t.id, T0 + 1, body={"x": 1})  # the new leader's write goes through
    s.tickets.update(t.id, T0 + 2, body={"y": 1})  # unfenced (a single instance, a tool): unconditional
    s.close()


def _leader_a(h: Harness, world: World, on_fenced: Callable[[str], None] | None = None) -> Any:
    """Remediation of instance a, leading under token 5 until the state names another token."""
    assert h.state.leadership.claim("a", 5, T0)

    def fence() -> str | None:
        held = h.state.leadership.current()
        return None if held is not None and held[1] == 5 else f"fenced: the state names {held}"

    return build_remediation(
        h.fabric, h.state, RemediationSettings(mode="auto", verify_timeout_s=1.0), SafetyLimits(),
        managed={d.name for d in h.fabric.switches()}, actuator=FakeActuator(world), view=FakeView(world),
        clock=Clock(), executor=InlineExecutor(), fence=fence, token=lambda: 5, on_fenced=on_fenced,
    )  # fmt: skip


def test_a_leader_fenced_off_mid_action_touches_neither_switch_nor_state(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, make: Callable[..., Harness]
) -> None:
    monkeypatch.setattr(context, "FENCE_WAIT_S", 0.05)
    h = make()
    state, world = h.state, World()
    fenced_out: list[str] = []
    rem = _leader_a(h, world, fenced_out.append)

    # the leader commits the shutdown, then is paused; meanwhile a new leader takes over (token 6)
    def new_leader() -> None:
        assert state.leadership.claim("b", 6, T0 + 1)

    world.hooks["set_port_admin"] = new_leader

    async def go() -> None:
        await rem.incidents.on_findings([flap(h.fabric, SERVER_PORT)])
        await rem.idle()

    run(go())
    assert [c[0] for c in world.touched()] == ["abort_stale", "set_port_admin", "abandon"]  # no confirm, no rollback
    (a,) = state.actions.all()
    assert a.status == "running" and a.token == 5  # left for the new leader to resume, as it was
    assert state.holds.all() == []
    # what the leader wrote before it was fenced off, and the new leader's claim: nothing after
    assert sorted(r["what"] for r in state.audit.entries()) == sorted(
        ["a leads", "opened ticket 1", "disable leaf-g0-r0:Ethernet1/1: running", "b leads"]
    )
    assert fenced_out == []  # refused by the switch-call check first: nothing tried to write


def test_a_new_leader_ends_an_old_leaders_open_transaction_and_commits_under_its_own_token(
    make: Callable[..., Harness],
) -> None:
    h = make()
    state, world = h.state, h.world
    assert state.leadership.claim("a", 5, T0)
    with fenced(5):
        t = state.tickets.create("f", "link_flap", SERVER_PORT.device, SERVER_PORT.port, "t", {"actions": []}, T0)
        a = state.actions.add("disable", SERVER_PORT.device, SERVER_PORT.port, "auto", "running", "flap", T0,
                              ticket_id=t.id)  # fmt: skip
        other = state.actions.add("disable", SERVER_PORT.device, "Ethernet9/1", "auto", "done", "x", T0)
    world.keyed[other.switch_key] = "pending"  # an old leader's commit nobody will resume: ended
    world.keyed[a.switch_key] = "pending"  # the old leader committed this one and was paused before its confirm
    assert state.leadership.claim("b", 6, T0 + 1)
    rem = build_remediation(
        h.fabric, state, RemediationSettings(mode="auto", verify_timeout_s=1.0), SafetyLimits(),
        managed={d.name for d in h.fabric.switches()}, actuator=FakeActuator(world), view=FakeView(world),
        clock=Clock(), executor=InlineExecutor(), fence=lambda: None, token=lambda: 6,
    )  # fmt: skip
    run(rem.reconciler.reconcile())
    done = state.actions.get(a.id)
    assert done is not None and done.status == "done" and done.token == 6
    calls = [c for c in world.touched() if c[0] in ("abort_stale", "resume", "set_port_admin")]
    # Not resumed (a late confirm of the old leader would still find it): ended with the rest of token 5's, and the
    # step done again under the new leader's name; then the reconcile pass's sweep asks the switch the old leader
    # had actions under way on (a late request of it can reach no other).
    assert calls[0] == ("abort_stale", SERVER_PORT.device, 6, ())
    assert calls[1][0] == "set_port_admin" and "resume" not in [c[0] for c in calls]
    assert {c[1] for c in calls[2:] if c[0] == "abort_stale"} == {SERVER_PORT.device}
    assert other.switch_key not in world.keyed and a.switch_key not in world.keyed  # ended
    assert world.keyed[done.switch_key] == "confirmed" and done.switch_key.startswith("fabricd_t6_")
    # audited as what happened: taken over from the leader before, not a restart
    resumed = [(e["what"], e["why"]) for e in state.audit.entries() if e["what"] == f"resume action {a.id}"]
    assert resumed == [(f"resume action {a.id}", "taken over from the previous leader (token 5)")], resumed


def test_a_new_leader_that_ended_an_old_leaders_shut_marks_the_port_from_the_switchs_own_description(
    make: Callable[..., Harness],
) -> None:
    """The old leader's pending shut carried fabricd's mark, and telemetry streamed it; ending that transaction
    reverted the mark on the switch. Handed the streamed text, the driver would find the mark already there and
    write no description: the port shut unmarked (found by the drain failover test on the twin)."""
    h = make()
    state, world = h.state, h.world
    assert state.leadership.claim("a", 5, T0)
    with fenced(5):
        a = state.actions.add("disable", SERVER_PORT.device, SERVER_PORT.port, "maintenance", "running", "drain", T0,
                              key="maintenance:1:down:leaf-g0-r0:Ethernet1/1")  # fmt: skip
    world.keyed[a.switch_key] = "pending"
    world.descriptions[SERVER_PORT] = f"gpu-g0-000 nic0 [fabricd: down a{a.id} t- maintenance]"  # as streamed
    assert state.leadership.claim("b", 6, T0 + 1)
    rem = build_remediation(
        h.fabric, state, RemediationSettings(mode="auto", verify_timeout_s=1.0), SafetyLimits(),
        managed={d.name for d in h.fabric.switches()}, actuator=FakeActuator(world), view=FakeView(world),
        clock=Clock(), executor=InlineExecutor(), fence=lambda: None, token=lambda: 6,
    )  # fmt: skip
    run(rem.reconciler.reconcile())
    assert state.actions.get(a.id).status == "done"  # type: ignore[union-attr]
    assert a.switch_key not in world.keyed  # ended
    assert world.described == [None]  # the driver reads the description after the abort, on the switch


def test_a_new_leader_with_nothing_to_end_keeps_the_streamed_description(make: Callable[..., Harness]) -> None:
    """No old transaction on the switch: the streamed description stands (no extra read on the action's path)."""
    h = make()
    state, world = h.state, h.world
    assert state.leadership.claim("a", 5, T0)
    with fenced(5):
        a = state.actions.add("disable", SERVER_PORT.device, SERVER_PORT.port, "maintenance", "running", "drain", T0)
    world.descriptions[SERVER_PORT] = "gpu-g0-000 nic0"
    assert state.leadership.claim("b", 6, T0 + 1)
    rem = build_remediation(
        h.fabric, state, RemediationSettings(mode="auto", verify_timeout_s=1.0), SafetyLimits(),
        managed={d.name for d in h.fabric.switches()}, actuator=FakeActuator(world), view=FakeView(world),
        clock=Clock(), executor=InlineExecutor(), fence=lambda: None, token=lambda: 6,
    )  # fmt: skip
    run(rem.reconciler.reconcile())
    assert state.actions.get(a.id).status == "done"  # type: ignore[union-attr]
    assert world.described == ["gpu-g0-000 nic0"]


def test_a_superseded_leader_neither_clears_findings_nor_reports_an_overrun(
    tmp_path: Path, make: Callable[..., Harness]
) -> None:
    """The tick's own writes are fenced too: a woken old leader does not clear the findings the new leader keeps
    refreshing, nor write a 'maintenance overran' finding (the daemon's tick runs both under its token)."""
    h = make()
    s = h.state
    assert s.leadership.claim("a", 5, T0)
    with fenced(5):
        s.findings.record(flap(h.fabric, SERVER_PORT), "f", T0)
        d = s.drains.add("port", str(SERVER_PORT), [str(SERVER_PORT)], "optic", "alice", True, T0 + 1, ["guard: x"], 1,
                         T0)  # fmt: skip
    assert s.leadership.claim("b", 6, T0)
    with fenced(5), pytest.raises(FencedError):
        s.findings.clear_not_seen_since(T0 + 10)
    assert [f["status"] for f in s.findings.all()] == ["active"]
    fenced_out: list[str] = []
    h.rem.ctx.fence.token = lambda: 5
    h.rem.ctx.fence.on_fenced = fenced_out.append
    assert h.rem.maintenance.report_overruns(T0 + 60 * 10**9) == []
    assert [f["kind"] for f in s.findings.all()] == ["link_flap"] and len(fenced_out) == 1
    h.rem.ctx.fence.token = lambda: 6  # the new leader: its overrun is written
    (f,) = h.rem.maintenance.report_overruns(T0 + 60 * 10**9)
    assert f.evidence["drain_id"] == d.id and {x["kind"] for x in s.findings.all()} == {
        "link_flap",
        "maintenance_overran",
    }


LATE = "fabricd_t5_a9_0000abcd"  # a paused old leader's session, committed under its timer by its late request


@pytest.mark.parametrize(
    ("refusal", "blocked"),
    [
        (f"rejected the change: % Cannot commit: session {LATE} has a pending commit timer", True),
        ("rejected the change: % Cannot commit: session fabricd_t6_a3_00000001 has a pending commit timer", False),
        ("rejected the change: % Cannot commit: session fabricd_m2_1 has a pending commit timer", False),
        ("rejected the change: % Invalid input", False),
    ],
)
def test_a_refusal_is_an_older_leaders_only_when_it_names_an_older_token(refusal: str, blocked: bool) -> None:
    from fabricd.service.remediation.older_leaders import blocked_by_older

    assert blocked_by_older(refusal, 6) is blocked


def test_a_commit_refused_for_an_older_leaders_late_session_ends_it_and_is_retried_once(
    make: Callable[..., Harness],
) -> None:
    """The old leader's late request lands between the new leader's check of the switch and its commit: EOS refuses
    the commit naming that session. The new leader ends it and commits again: the action is done, nothing of the old
    token is left (before, the action failed and the port stayed up)."""
    from drivers.base import ConfigRejectedError

    h = make()
    state, world = h.state, h.world
    assert state.leadership.claim("b", 6, T0)
    refusal = ConfigRejectedError(
        SERVER_PORT.device, f"rejected the change: % Cannot commit: session {LATE} has a pending commit timer"
    )

    def late_request() -> None:  # just after the check before the commit
        world.keyed[LATE] = "pending"
        world.fail["set_port_admin"] = refusal
        world.hooks["abort_stale"] = lambda: world.fail.clear()  # the timer ended: commits go again

    world.hooks["abort_stale"] = late_request
    rem = build_remediation(
        h.fabric, state, RemediationSettings(mode="auto", verify_timeout_s=1.0), SafetyLimits(),
        managed={SERVER_PORT.device}, actuator=FakeActuator(world), view=FakeView(world),
        clock=Clock(), executor=InlineExecutor(), fence=lambda: None, token=lambda: 6,
    )  # fmt: skip

    async def go() -> None:
        with fenced(6):
            await rem.incidents.on_findings([flap(h.fabric, SERVER_PORT)])
        await rem.idle()

    run(go())
    (a,) = state.actions.all()
    assert (a.status, a.token) == ("done", 6), a.detail
    touched = [c[0] for c in world.touched()]
    assert touched[:4] == ["abort_stale", "set_port_admin", "abort_stale", "set_port_admin"], touched
    assert LATE not in world.keyed and world.keyed[a.switch_key] == "confirmed"
    assert world.admin[SERVER_PORT] is False


def test_a_leader_fenced_off_inside_an_action_logs_one_warning_and_no_traceback(
    make: Callable[..., Harness], caplog: pytest.LogCaptureFixture
) -> None:
    """Woken after a takeover inside its action, the old leader's next state write fails (its PostgreSQL session
    was ended by the new leader's claim). The work is the new leader's: one WARNING that it was fenced off; before,
    ERROR "action N ... failed unexpectedly" with a traceback, then "Task exception was never retrieved" for the
    FencedError of recording it failed."""
    from fabricd.service.state.db import StateError

    h = make()
    state, world = h.state, World()
    rem = _leader_a(h, world)

    def paused_and_taken_over() -> None:
        assert state.leadership.claim("b", 6, T0 + 1)
        raise StateError("terminating connection due to administrator command")

    world.hooks["set_port_admin"] = paused_and_taken_over

    async def go() -> None:
        await rem.incidents.on_findings([flap(h.fabric, SERVER_PORT)])
        await rem.idle()
        await asyncio.sleep(0)

    with caplog.at_level("DEBUG"):
        run(go())
    loud = [(r.levelname, r.getMessage()) for r in caplog.records if r.levelno >= logging.ERROR]
    assert loud == [], loud
    said = [r.getMessage() for r in caplog.records if "left to the leader" in r.getMessage()]
    assert len(said) == 1 and "fenced off" in said[0] and not any(r.exc_info for r in caplog.records), said
    (a,) = state.actions.all()
    assert a.status == "running"  # the new leader's to finish


@pytest.mark.parametrize(
    ("token", "claimed", "holder", "said"),
    [
        (None, None, "b", "this instance (a) is a standby; the leader is b"),
        (None, None, "a", "this instance (a) is a standby; the leader is being elected"),  # its own stale name
        (None, None, None, "this instance (a) is a standby; the leader is being elected"),
        (
            7,
            None,
            "a",
            "this instance (a) holds the leader lease (token 7) but does not act until its token is"
            " recorded in the state",
        ),
        (7, 7, "a", "the leader lease of this instance (a) was not renewed in time: it does not act"),
    ],
)
def test_why_an_instance_does_not_act_names_another_leader_only(
    token: int | None, claimed: int | None, holder: str | None, said: str
) -> None:
    from fabricd.service.config import HaSettings
    from fabricd.service.leader import Leadership

    async def never() -> Any:
        raise AssertionError("no bus here")

    async def claim(t: int) -> bool:
        return True

    async def elected(t: int) -> None:
        return None

    lead = Leadership(HaSettings(), never, elected, claim=claim, instance="a", clock=lambda: 100.0)
    lead.token, lead._claimed, lead.holder = token, claimed, holder
    assert not lead.acting()
    assert lead.why_not_acting() == said


def test_an_action_its_own_leader_left_while_it_could_not_act_is_resumed_by_its_next_pass(
    make: Callable[..., Harness], caplog: pytest.LogCaptureFixture
) -> None:
    """The leader's lease renewal came late under load just as an action began: the action was "left to the
    leader" (still `running` in the state) and the lease renewed, the same token leading on, so no takeover resumed
    it (chaos seed 4940: a re-apply and a disable stranded 100 s and 136 s). The leader's pass resumes an action no
    task of its carries out once it is STRANDED_S old, and not before; in a moment it cannot act, nothing."""
    from fabricd.service.remediation.reconciler import STRANDED_S

    h = make()
    state, world = h.state, World()
    lagging = [True]
    assert state.leadership.claim("a", 5, T0)
    clock = Clock()
    rem = build_remediation(
        h.fabric, state, RemediationSettings(mode="auto", verify_timeout_s=1.0), SafetyLimits(),
        managed={d.name for d in h.fabric.switches()}, actuator=FakeActuator(world), view=FakeView(world),
        clock=clock, executor=InlineExecutor(),
        fence=lambda: "the leader lease of this instance (a) was not renewed in time" if lagging[0] else None,
        token=lambda: 5,
    )  # fmt: skip

    async def go() -> None:
        with fenced(5):
            a = state.actions.add("disable", SERVER_PORT.device, SERVER_PORT.port, "auto", "running", "flap",
                                  clock())  # fmt: skip
            # a tuning change in its verify window: running for minutes, no remediation task, the tuning loop's own
            tune = state.actions.add("tune", SERVER_PORT.device, "tuning x", "auto", "running", "Kmin down", clock(),
                                     key="tune:k")  # fmt: skip
            with caplog.at_level("WARNING"):
                rem.actions.spawn(a)
                await rem.idle()
        assert any("left to the leader" in r.getMessage() for r in caplog.records)
        assert state.actions.get(a.id).status == "running"  # type: ignore[union-attr]
        clock.advance(STRANDED_S + 1)
        assert await rem.reconciler.reconcile_pass(clock()) == []  # still cannot act: nothing
        lagging[0] = False  # the lease renewed: the same token leads on
        clock.now = a.updated_ts + int((STRANDED_S - 1) * 1e9)
        await rem.reconciler.reconcile_pass(clock())
        await rem.idle()
        assert state.actions.get(a.id).status == "running"  # type: ignore[union-attr]  # too young yet
        clock.advance(2)
        notes = await rem.reconciler.reconcile_pass(clock())
        await rem.idle()
        assert any(f"(action {a.id}): left running while this instance could not act" in n for n in notes), notes
        assert state.actions.get(a.id).status == "done"  # type: ignore[union-attr]
        assert world.admin[SERVER_PORT] is False
        assert [e["what"] for e in state.audit.entries()].count(f"resume action {a.id}") == 1
        assert not any(f"(action {tune.id})" in n for n in notes), notes  # left to the tuning loop
        assert state.actions.get(tune.id).status == "running"  # type: ignore[union-attr]

    run(go())
