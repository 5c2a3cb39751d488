"""The remediator with fake switches: a fake actuator/session that records every call and a port view whose oper
state follows what the fake switches were told (unless a test says a port ignores it). Real SQLite state, real
guard, real drain-hook subprocess; no sockets, no twin."""

from __future__ import annotations

import asyncio
import os
from collections.abc import Callable, Coroutine, Iterator
from concurrent.futures import Executor, Future
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import pytest
import yaml

from drivers.base import DriverError, UnreachableError
from fabricd.cli.inputs import load_fabric
from fabricd.detectors.finding import Finding
from fabricd.service.config import RemediationSettings, SafetyLimits
from fabricd.service.faults import common_cause
from fabricd.service.remediation import NS, ActionError, Outcome, Remediator
from fabricd.service.state import StateStore, Ticket
from tests.conftest import EXAMPLES
from topology.fabric import Fabric
from topology.model import Endpoint

T0 = 1_700_000_000 * NS
SERVER_PORT = Endpoint("leaf-g0-r0", "Ethernet1/1")  # faces gpu-g0-000:nic0
UPLINK = Endpoint("leaf-g0-r0", "Ethernet5/1")  # to spine-r0-0:Ethernet1/1, one of 4 uplinks
FAULT = "link_flap:gpu-g0-000:nic0--leaf-g0-r0:Ethernet1/1"
R = TypeVar("R")


# --- fakes ---------------------------------------------------------------------------------------------------
@dataclass
class World:
    """The switches as the fakes see them, and what the test scripts."""

    oper: dict[Endpoint, str] = field(default_factory=dict)  # default UP
    stuck: set[Endpoint] = field(default_factory=set)  # ports whose oper state ignores admin changes
    fail: dict[str, DriverError] = field(default_factory=dict)  # session method (or "connect") -> error
    calls: list[tuple[Any, ...]] = field(default_factory=list)
    waits: list[tuple[Any, ...]] = field(default_factory=list)

    def state(self, ep: Endpoint) -> str:
        return self.oper.get(ep, "UP")

    def touched(self) -> list[tuple[Any, ...]]:
        return [c for c in self.calls if c[0] != "connect"]


class FakeSession:
    def __init__(self, world: World, device: str) -> None:
        self.world, self.device = world, device
        self._before: dict[Endpoint, str] = {}

    def _call(self, name: str, *args: Any) -> None:
        self.world.calls.append((name, self.device, *args))
        if name in self.world.fail:
            raise self.world.fail[name]

    def set_port_admin(self, port: str, up: bool, revert_in_s: int) -> None:
        self._call("set_port_admin", port, up, revert_in_s)
        ep = Endpoint(self.device, port)
        self._before[ep] = self.world.state(ep)
        if ep not in self.world.stuck:
            self.world.oper[ep] = "UP" if up else "DOWN"

    def confirm(self) -> None:
        self._call("confirm")
        self._before.clear()

    def rollback(self) -> None:
        self._call("rollback")
        self.world.oper.update(self._before)
        self._before.clear()

    def close(self) -> None:
        self._call("close")


class FakeActuator:
    def __init__(self, world: World) -> None:
        self.world = world

    def connect(self, device: str) -> Any:  # a FakeSession: the part of drivers.base.Session remediation uses
        self.world.calls.append(("connect", device))
        if "connect" in self.world.fail:
            raise self.world.fail["connect"]
        return FakeSession(self.world, device)


class FakeView:
    def __init__(self, world: World) -> None:
        self.world = world

    def oper_down(self) -> frozenset[Endpoint]:
        return frozenset(ep for ep, s in self.world.oper.items() if s != "UP")

    def evidence(self, device: str, port: str) -> dict[str, Any]:
        return {"oper-status": self.world.state(Endpoint(device, port)), "if.carrier-transitions": 16}

    async def wait_oper(self, device: str, port: str, up: bool, timeout_s: float) -> bool:
        self.world.waits.append((device, port, up, timeout_s))
        return (self.world.state(Endpoint(device, port)) == "UP") == up


class InlineExecutor(Executor):
    """Runs the 'blocking' driver calls at once, in the event loop's thread: deterministic, no threads."""

    def submit(self, fn: Callable[..., R], /, *args: Any, **kwargs: Any) -> Future[R]:
        f: Future[R] = Future()
        try:
            f.set_result(fn(*args, **kwargs))
        except BaseException as e:  # noqa: BLE001 - handed to the awaiting coroutine
            f.set_exception(e)
        return f


class Clock:
    def __init__(self) -> None:
        self.now = T0

    def __call__(self) -> int:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += int(seconds * NS)


@dataclass
class Harness:
    fabric: Fabric
    state: StateStore
    world: World
    clock: Clock
    rem: Remediator
    published: list[Ticket]

    def tickets(self, kind: str | None = None) -> list[Ticket]:
        return [t for t in self.state.tickets() if kind is None or t.kind == kind]

    def restart(self, **settings: Any) -> Remediator:
        """A new remediator on the same state (the service restarted)."""
        self.rem = make_remediator(self.fabric, self.state, self.world, self.clock, self.published, **settings)
        return self.rem


def make_remediator(
    fabric: Fabric, state: StateStore, world: World, clock: Clock, published: list[Ticket],
    limits: SafetyLimits | None = None, **settings: Any,
) -> Remediator:  # fmt: skip
    async def publish(t: Ticket) -> None:
        published.append(t)

    return Remediator(
        fabric,
        state,
        RemediationSettings(**{"mode": "auto", "verify_timeout_s": 10.0, **settings}),
        limits or SafetyLimits(),
        managed={d.name for d in fabric.switches()},
        actuator=FakeActuator(world),
        view=FakeView(world),
        clock=clock,
        executor=InlineExecutor(),
        publish=publish,
    )


def run(coro: Coroutine[Any, Any, R]) -> R:
    return asyncio.run(coro)


def _fabric(tmp: Path, **overrides: object) -> Fabric:
    data = yaml.safe_load((EXAMPLES / "small-pod.yaml").read_text())
    data.update(overrides)
    path = tmp / "spec.yaml"
    path.write_text(yaml.safe_dump(data))
    return load_fabric(path, None)[1]


@pytest.fixture(scope="module")
def small() -> Fabric:
    return load_fabric(EXAMPLES / "small-pod.yaml", None)[1]


@pytest.fixture(scope="module")
def wide(tmp_path_factory: pytest.TempPathFactory) -> Fabric:
    """8 servers per group: 8 server ports per leaf."""
    return _fabric(tmp_path_factory.mktemp("wide"), servers_per_group=8)


@pytest.fixture
def make(tmp_path: Path, small: Fabric) -> Iterator[Callable[..., Harness]]:
    stores: list[StateStore] = []

    def factory(fabric: Fabric | None = None, limits: SafetyLimits | None = None, **settings: Any) -> Harness:
        fab = fabric or small
        state = StateStore(tmp_path / f"state-{len(stores)}.db")
        stores.append(state)
        world, clock, published = World(), Clock(), []  # type: ignore[var-annotated]
        rem = make_remediator(fab, state, world, clock, published, limits, **settings)
        return Harness(fab, state, world, clock, rem, published)

    yield factory
    for s in stores:
        s.close()


def flap(fabric: Fabric, ep: Endpoint, start_ts: int = T0, flaps: int = 8) -> Finding:
    peer = fabric.peer(ep.device, ep.port)
    assert peer is not None
    ends = tuple(sorted((str(ep), str(peer))))
    return Finding(
        kind="link_flap",
        device=ep.device,
        port=ep.port,
        devices=tuple(sorted({ep.device, peer.device})),
        ports=ends,
        start_ts=start_ts,
        detected_ts=start_ts + 3 * NS,
        severity="warning",
        confidence=1.0,
        summary=f"link {ends[0]}--{ends[1]} flapped {flaps} times in 2.4 s",
        evidence={"flaps": flaps, "penalty": 3200.0},
    )


async def report(h: Harness, *findings: Finding) -> list[Outcome]:
    """One detector tick: hand the findings over and let every action it starts finish."""
    out = await h.rem.on_findings(list(findings))
    await h.rem.idle()
    return out


SESSION_DISABLE = [
    ("connect", "leaf-g0-r0"),
    ("set_port_admin", "leaf-g0-r0", "Ethernet1/1", False, 120),
    ("confirm", "leaf-g0-r0"),
    ("close", "leaf-g0-r0"),
]


# --- auto mode -------------------------------------------------------------------------------------------------
def test_auto_disables_the_port_and_files_one_ticket(make: Callable[..., Harness]) -> None:
    h = make()
    f = flap(h.fabric, SERVER_PORT)
    (out,) = run(report(h, f))
    assert out.verdict is not None and out.verdict.allowed
    assert out.action is not None and out.action.status == "running"  # as decided; done after idle()

    assert h.world.calls == SESSION_DISABLE
    assert h.world.waits == [("leaf-g0-r0", "Ethernet1/1", False, 10.0)]
    (action,) = h.state.actions()
    assert (action.op, action.mode, action.status) == ("disable", "auto", "done")
    assert action.detail == "disabled leaf-g0-r0:Ethernet1/1"
    assert action.reason == f"link_flap on leaf-g0-r0:Ethernet1/1: {f.summary}"
    (t,) = h.tickets()
    assert out.ticket is not None and out.ticket.id == t.id == action.ticket_id
    assert h.state.disabled_ports() == [
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
    assert [(e["what"], e["action_id"], e["ticket_id"]) for e in reversed(h.state.audit_log())] == [
        ("disable leaf-g0-r0:Ethernet1/1: running", action.id, None),  # decided before the ticket exists
        (f"opened ticket {t.id}", None, t.id),
        ("disable leaf-g0-r0:Ethernet1/1: done", action.id, t.id),
    ]

    # The detector reports the same incident on its next ticks: nothing new.
    assert run(report(h, f, f)) == []
    assert h.world.calls == SESSION_DISABLE
    assert len(h.state.actions()) == 1 and h.tickets() == [t]


def test_flap_reported_on_a_port_fabricd_holds_down_is_ignored(make: Callable[..., Harness]) -> None:
    h = make()
    run(report(h, flap(h.fabric, SERVER_PORT)))
    (t,) = h.tickets()
    h.clock.advance(60)
    (out,) = run(report(h, flap(h.fabric, SERVER_PORT, start_ts=T0 + 60 * NS)))  # our own shutdown's echo
    assert out == Outcome(None, None, None)
    assert h.tickets() == [t] and len(h.state.actions()) == 1


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
    assert [(a.device, a.port, a.status) for a in h.state.actions()] == [("leaf-g0-r0", "Ethernet1/1", "observed")] * 2
    assert len(t.body["actions"]) == 2
    assert len(h.state.findings()) == 2


# --- observe and approve ---------------------------------------------------------------------------------------
def test_observe_mode_never_touches_a_switch(make: Callable[..., Harness]) -> None:
    h = make(mode="observe")
    (out,) = run(report(h, flap(h.fabric, SERVER_PORT)))
    assert h.world.calls == [] and h.world.waits == []
    (a,) = h.state.actions()
    assert (a.status, a.mode) == ("observed", "observe")
    assert out.action == a  # as stored: linked to its ticket
    assert not h.state.is_disabled("leaf-g0-r0", "Ethernet1/1")
    (t,) = h.tickets()
    assert t.body["status_note"] == (
        "observe mode: fabricd would disable leaf-g0-r0:Ethernet1/1 (guard allows: capacity and budgets allow it);"
        " nothing was changed"
    )
    assert t.body["actions"][0]["status"] == "observed"
    assert h.state.audit_log()[-1]["what"] == "would disable leaf-g0-r0:Ethernet1/1"


def test_approve_mode_waits_for_a_person(make: Callable[..., Harness]) -> None:
    h = make(mode="approve")
    (out,) = run(report(h, flap(h.fabric, SERVER_PORT)))
    assert out.action is not None
    aid = out.action.id
    assert h.state.action(aid).status == "awaiting_approval"  # type: ignore[union-attr]
    assert h.world.calls == []
    (t,) = h.tickets()
    note = f"waiting for approval: run `fabricd approve {aid}` to disable leaf-g0-r0:Ethernet1/1"
    assert t.body["status_note"] == note

    # The same port flaps again while the action waits: the ticket notes the pending action, no second one.
    h.clock.advance(30)
    run(report(h, flap(h.fabric, SERVER_PORT, start_ts=T0 + 30 * NS)))
    assert [a.id for a in h.state.actions()] == [aid]
    t = h.tickets()[0]
    assert t.body["status_note"] == f"action {aid} on leaf-g0-r0:Ethernet1/1 is already awaiting_approval"
    assert h.world.calls == []

    async def approve() -> None:
        a = await h.rem.approve(aid, "alice")
        assert a.status == "running" and a.detail == "approved by alice"
        await h.rem.idle()

    run(approve())
    assert h.world.calls == SESSION_DISABLE
    assert h.state.action(aid).status == "done"  # type: ignore[union-attr]
    assert h.state.disabled_ports()[0]["ticket_id"] == t.id
    assert any(e["actor"] == "alice" and e["what"] == f"approved action {aid}" for e in h.state.audit_log())
    assert h.tickets()[0].body["status_note"] == "disabled leaf-g0-r0:Ethernet1/1"

    with pytest.raises(ActionError, match=f"action {aid} is done, not awaiting approval"):
        run(h.rem.approve(aid, "alice"))
    with pytest.raises(ActionError, match="no action 999"):
        run(h.rem.approve(999, "alice"))
    assert h.world.calls == SESSION_DISABLE  # nothing more


def test_approval_rechecks_the_guard(make: Callable[..., Harness]) -> None:
    h = make(mode="approve")
    (out,) = run(report(h, flap(h.fabric, UPLINK)))
    assert out.action is not None and out.action.status == "awaiting_approval"
    h.world.oper[Endpoint("leaf-g0-r0", "Ethernet7/1")] = "DOWN"  # meanwhile another uplink died
    a = run(h.rem.approve(out.action.id, "alice"))
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
    t = run(h.rem.resolve(out.ticket.id, "bob"))
    assert (t.status, t.resolved_by) == ("resolved", "bob")
    assert h.state.action(out.action.id).status == "cancelled"  # type: ignore[union-attr]
    with pytest.raises(ActionError, match="is cancelled, not awaiting approval"):
        run(h.rem.approve(out.action.id, "alice"))
    assert h.world.calls == []
    with pytest.raises(ActionError, match="no ticket 999"):
        run(h.rem.resolve(999, "bob"))


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
    (a,) = h.state.actions()
    text = "telemetry did not show leaf-g0-r0:Ethernet1/1 down within 10 s; rolled back"
    assert (a.status, a.detail) == ("rolled_back", text)
    assert h.state.disabled_ports() == []
    (t,) = h.tickets()
    assert t.body["status_note"] == text
    assert t.body["actions"][-1]["status"] == "rolled_back"


def test_driver_error_fails_the_action_and_rolls_back(make: Callable[..., Harness]) -> None:
    h = make()
    h.world.fail["set_port_admin"] = DriverError("leaf-g0-r0", "commit refused (session locked); retry later")
    run(report(h, flap(h.fabric, SERVER_PORT)))
    assert [c[0] for c in h.world.calls] == ["connect", "set_port_admin", "rollback", "close"]
    (a,) = h.state.actions()
    text = "could not disable leaf-g0-r0:Ethernet1/1: leaf-g0-r0: commit refused (session locked); retry later"
    assert (a.status, a.detail) == ("failed", text)
    assert h.state.disabled_ports() == []
    assert h.tickets()[0].body["status_note"] == text


def test_driver_error_in_rollback_too(make: Callable[..., Harness]) -> None:
    h = make()
    h.world.fail["confirm"] = DriverError("leaf-g0-r0", "connection lost")
    h.world.fail["rollback"] = DriverError("leaf-g0-r0", "connection lost")
    run(report(h, flap(h.fabric, SERVER_PORT)))
    assert [c[0] for c in h.world.calls] == ["connect", "set_port_admin", "confirm", "rollback", "close"]
    (a,) = h.state.actions()
    assert (a.status, a.detail) == ("failed", "could not disable leaf-g0-r0:Ethernet1/1: leaf-g0-r0: connection lost")
    assert h.state.disabled_ports() == []


def test_unreachable_switch(make: Callable[..., Harness]) -> None:
    h = make()
    h.world.fail["connect"] = UnreachableError("leaf-g0-r0", "connection refused on port 443; check the inventory")
    run(report(h, flap(h.fabric, SERVER_PORT)))
    assert h.world.calls == [("connect", "leaf-g0-r0")]  # nothing to roll back or close
    (a,) = h.state.actions()
    assert a.status == "failed" and "connection refused on port 443" in a.detail


def test_guard_refusal_is_explained_in_the_ticket(make: Callable[..., Harness]) -> None:
    h = make()
    h.world.oper[Endpoint("leaf-g0-r0", "Ethernet7/1")] = "DOWN"  # 1 of 4 uplinks already down
    (out,) = run(report(h, flap(h.fabric, UPLINK)))
    assert out.verdict is not None and (out.verdict.allowed, out.verdict.rule) == (False, "capacity")
    assert h.world.calls == []
    (a,) = h.state.actions()
    why = "leaf-g0-r0 would keep 800 of 1600 Gb/s uplink capacity (50%), below the 75% limit"
    assert (a.status, a.reason, a.port) == ("refused", why, "Ethernet5/1")
    (t,) = h.tickets()
    assert (t.kind, t.escalation) == ("link_flap", False)
    assert t.body["status_note"] == (
        f"no action: the safety guard refused to disable leaf-g0-r0:Ethernet5/1: {why}; escalated to people"
    )
    assert any(e["why"] == f"guard (capacity): {why}" for e in h.state.audit_log())


def test_kinds_not_enabled_are_only_ticketed(make: Callable[..., Harness]) -> None:
    h = make(kinds=["link_corruption"])
    (out,) = run(report(h, flap(h.fabric, SERVER_PORT)))
    assert out.action is None and h.world.calls == []
    assert h.tickets()[0].body["status_note"] == "no automatic action for this kind of fault; see the evidence"


def test_unmanaged_switch_is_not_touched(make: Callable[..., Harness], small: Fabric) -> None:
    h = make()
    h.rem.managed = {"spine-r0-0"}  # only part of the fabric is in the inventory
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

    disabled = [(p["device"], p["port"]) for p in h.state.disabled_ports()]
    assert disabled == [("leaf-g0-r0", "Ethernet1/1"), ("leaf-g0-r0", "Ethernet2/1")]  # the switch budget: 2
    assert [c for c in h.world.calls if c[0] == "set_port_admin"] == [
        ("set_port_admin", "leaf-g0-r0", "Ethernet1/1", False, 120),
        ("set_port_admin", "leaf-g0-r0", "Ethernet2/1", False, 120),
    ]
    statuses = sorted((a.port, a.status) for a in h.state.actions())
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
    assert {a.ticket_id for a in h.state.actions("refused")} == {esc.id}
    assert sorted(t.port or "" for t in h.tickets("link_flap")) == ["Ethernet1/1", "Ethernet2/1"]
    assert all(o.ticket is not None and o.ticket.id == esc.id for o in outs[2:])


def test_budget_of_one_on_the_small_pod(make: Callable[..., Harness]) -> None:
    h = make(limits=SafetyLimits(max_down_per_switch=1))
    ports = [Endpoint("leaf-g0-r0", f"Ethernet{i}/1") for i in range(1, 5)]
    run(report(h, *(flap(h.fabric, p) for p in ports)))
    assert [p["port"] for p in h.state.disabled_ports()] == ["Ethernet1/1"]
    (esc,) = h.tickets("escalation")
    assert esc.body["faulty_ports"] == ["Ethernet1/1", "Ethernet2/1", "Ethernet3/1", "Ethernet4/1"]
    assert len(h.tickets()) == 2


def test_common_cause_names_a_line_card() -> None:
    assert common_cause("leaf-1", ["Ethernet3/1/1", "Ethernet3/2/1", "Ethernet3/7/1"]) == (
        "line card 3 of leaf-1 (all 3 ports are on module 3): check the card and its power"
    )
    assert common_cause("leaf-1", ["Ethernet3/1/1", "Ethernet4/1/1"]).startswith("leaf-1 itself (2 faulty ports")


# --- repair, probation ---------------------------------------------------------------------------------------
def test_resolve_brings_the_port_back_on_probation_and_a_new_flap_reopens(make: Callable[..., Harness]) -> None:
    h = make(probation_s=3600)
    run(report(h, flap(h.fabric, SERVER_PORT)))
    (t,) = h.tickets()
    h.world.calls.clear()

    h.clock.advance(1800)  # the optic was replaced

    async def resolve() -> Ticket:
        t = await h.rem.resolve(t_id, "alice")
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
    enable = h.state.actions()[0]
    assert (enable.op, enable.status, enable.ticket_id, enable.reason) == (
        "enable", "done", t.id, f"ticket {t.id} resolved by alice",
    )  # fmt: skip
    assert h.state.disabled_ports() == []
    assert h.state.probation("leaf-g0-r0", "Ethernet1/1", h.clock()) == t.id
    t = h.state.ticket(t.id)  # type: ignore[assignment]
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
    assert [(p["port"], p["ticket_id"]) for p in h.state.disabled_ports()] == [("Ethernet1/1", t.id)]
    assert h.state.probation("leaf-g0-r0", "Ethernet1/1", h.clock()) is None
    assert any(e["what"] == f"reopened ticket {t.id}" for e in h.state.audit_log())

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
        await h.rem.resolve(t.id, "alice")
        await h.rem.idle()

    run(resolve())
    enable = h.state.actions()[0]
    assert (enable.op, enable.status) == ("enable", "done")
    assert enable.detail == "enabled leaf-g0-r0:Ethernet1/1 (it did not come up within 10 s)"
    assert h.state.disabled_ports() == []


# --- drain hook ----------------------------------------------------------------------------------------------
def test_drain_hook_runs_for_a_server_port(make: Callable[..., Harness], tmp_path: Path) -> None:
    drained = tmp_path / "drained.txt"
    h = make(drain_hook=f"sh -c 'echo {{node}} {{device}}:{{port}} >> {drained}'")
    run(report(h, flap(h.fabric, SERVER_PORT)))
    assert drained.read_text() == "gpu-g0-000 leaf-g0-r0:Ethernet1/1\n"
    (t,) = h.tickets()
    assert t.body["status_note"] == "drained gpu-g0-000; disabled leaf-g0-r0:Ethernet1/1"
    assert h.state.is_disabled("leaf-g0-r0", "Ethernet1/1")

    # An uplink has no server behind it: no hook.
    h.clock.advance(10)
    run(report(h, flap(h.fabric, UPLINK, start_ts=h.clock.now)))
    assert drained.read_text() == "gpu-g0-000 leaf-g0-r0:Ethernet1/1\n"
    assert h.state.is_disabled("leaf-g0-r0", "Ethernet5/1")


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
    t = h.state.create_ticket(FAULT, "link_flap", "leaf-g0-r0", "Ethernet1/1", "link flap", {"actions": []}, T0)
    a = h.state.add_action("disable", "leaf-g0-r0", "Ethernet1/1", "auto", "running", "flap", T0, ticket_id=t.id)
    # And a port fabricd held down that someone brought back up while fabricd was down.
    h.state.mark_disabled("leaf-g0-r1", "Ethernet2/1", 99, None, T0 - NS)

    rem = h.restart()
    notes = run(rem.reconcile())
    assert notes == [
        f"completing disable of leaf-g0-r0:Ethernet1/1 (action {a.id}) interrupted by a restart",
        "leaf-g0-r1:Ethernet2/1 is up although fabricd holds it down: someone enabled it; no longer held",
    ]
    assert h.world.calls == SESSION_DISABLE
    assert h.state.action(a.id).status == "done"  # type: ignore[union-attr]
    assert [(p["device"], p["port"], p["ticket_id"]) for p in h.state.disabled_ports()] == [
        ("leaf-g0-r0", "Ethernet1/1", t.id)
    ]
    assert h.state.ticket(t.id).body["status_note"] == "disabled leaf-g0-r0:Ethernet1/1"  # type: ignore[union-attr]
    # A second reconcile has nothing to do.
    assert run(rem.reconcile()) == []
    assert h.world.calls == SESSION_DISABLE


def test_reconcile_completes_an_interrupted_enable(make: Callable[..., Harness]) -> None:
    h = make()
    h.world.oper[SERVER_PORT] = "DOWN"
    t = h.state.create_ticket(FAULT, "link_flap", "leaf-g0-r0", "Ethernet1/1", "t", {}, T0)
    h.state.mark_disabled("leaf-g0-r0", "Ethernet1/1", 1, t.id, T0)
    a = h.state.add_action("enable", "leaf-g0-r0", "Ethernet1/1", "auto", "running", "resolved", T0, ticket_id=t.id)
    notes = run(h.restart().reconcile())
    assert notes == [f"completing enable of leaf-g0-r0:Ethernet1/1 (action {a.id}) interrupted by a restart"]
    assert h.state.action(a.id).status == "done"  # type: ignore[union-attr]
    assert h.state.disabled_ports() == []
    assert h.state.probation("leaf-g0-r0", "Ethernet1/1", T0) == t.id


def test_two_findings_on_one_port_in_one_tick_act_once(make: Callable[..., Harness]) -> None:
    """A flapping link that also corrupts: two findings, two faults, one action on the switch."""
    h = make()
    f = flap(h.fabric, SERVER_PORT)
    corrupt = Finding(**{**f.__dict__, "kind": "link_corruption", "summary": "FCS errors 1e-6"})
    outs = run(report(h, f, corrupt))
    assert [c[0] for c in h.world.calls] == ["connect", "set_port_admin", "confirm", "close"]
    (a,) = h.state.actions()
    assert a.status == "done"
    assert outs[1].action is not None and outs[1].action.id == a.id
    assert outs[1].ticket is not None
    assert outs[1].ticket.body["status_note"] == f"action {a.id} on leaf-g0-r0:Ethernet1/1 is already running"
    assert sorted(t.kind for t in h.tickets()) == ["link_corruption", "link_flap"]
