"""Fakes and a harness for the remediator: a fake actuator/session that records every call and a port view whose
oper state follows what the fake switches were told (unless a test says a port ignores it). Real SQLite state,
real guard, real drain-hook subprocess; no sockets, no twin."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine, Iterator, Mapping
from concurrent.futures import Executor, Future
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import yaml

from drivers.base import DriverError, PortMark
from drivers.marks import Mark
from fabricd.detectors.finding import Finding
from fabricd.service.config import RemediationSettings, SafetyLimits
from fabricd.service.remediation.incidents import Outcome
from fabricd.service.remediation.wiring import Remediation, build_remediation
from fabricd.service.state import Action, StateStore, Ticket
from tests.conftest import EXAMPLES
from topology.fabric import Fabric
from topology.load import load_fabric
from topology.model import Endpoint
from topology.units import NS

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
    hooks: dict[str, Callable[[], None]] = field(default_factory=dict)  # session method -> run as it is called
    # What the switches know of keyed transactions (as an EOS config session): key -> pending | confirmed
    keyed: dict[str, str] = field(default_factory=dict)
    # fabricd's marks as the switches carry them (drivers/marks.py), and admin states (a port not named is up)
    marks: dict[Endpoint, Mark] = field(default_factory=dict)
    admin: dict[Endpoint, bool] = field(default_factory=dict)
    unreadable: set[str] = field(default_factory=set)  # switches whose marks cannot be read
    scans: list[str] = field(default_factory=list)  # switches whose marks were read, in order
    lldp: dict[Endpoint, Endpoint] = field(default_factory=dict)  # what LLDP hears on a port once it is up
    lldp_silent: set[Endpoint] = field(default_factory=set)  # ports LLDP is expected on that hear nothing now
    # when LLDP last heard the neighbour (unset: a sample newer than any asked for); LLDP streams on change only
    lldp_heard_ts: dict[Endpoint, int] = field(default_factory=dict)
    routed_down: set[Endpoint] = field(default_factory=set)  # ports whose BGP session is down (link up)
    descriptions: dict[Endpoint, str] = field(default_factory=dict)  # what telemetry streams of ports' descriptions
    described: list[str | None] = field(default_factory=list)  # the description each set_port_admin was handed
    rates: dict[Endpoint, float] = field(default_factory=dict)  # what ports send, bits/s (a port not named: 0)
    # a port's in-errors counter, raised by `errors_per_read` at every read (a dirty optic while it is watched)
    errors: dict[Endpoint, int] = field(default_factory=dict)
    errors_per_read: dict[Endpoint, int] = field(default_factory=dict)

    def state(self, ep: Endpoint) -> str:
        return self.oper.get(ep, "UP")

    def touched(self) -> list[tuple[Any, ...]]:
        return [c for c in self.calls if c[0] != "connect"]


class FakeSession:
    def __init__(self, world: World, device: str) -> None:
        self.world, self.device = world, device
        self._before: dict[Endpoint, str] = {}
        self._key: str | None = None

    def _call(self, name: str, *args: Any) -> None:
        self.world.calls.append((name, self.device, *args))
        if name in self.world.hooks:
            self.world.hooks.pop(name)()
        if name in self.world.fail:
            raise self.world.fail[name]

    def shift_traffic(self, away: bool, revert_in_s: int, *, key: str | None = None) -> None:
        self._call("shift_traffic", away)

    def shift_session(
        self, peer_address: str, asn: int, away: bool, revert_in_s: int, *, key: str | None = None
    ) -> None:
        self._call("shift_session", peer_address, away)

    def set_port_admin(
        self,
        port: str,
        up: bool,
        revert_in_s: int,
        *,
        key: str | None = None,
        mark: Mark | None = None,
        description: str | None = None,
    ) -> None:
        self._call("set_port_admin", port, up, revert_in_s)
        self.world.described.append(description)
        ep = Endpoint(self.device, port)
        self._before[ep] = self.world.state(ep)
        if up:
            self.world.marks.pop(ep, None)
        elif mark is not None:
            self.world.marks[ep] = mark
        self._admin_before = dict(self.world.admin)
        self.world.admin[ep] = up
        if ep not in self.world.stuck:
            self.world.oper[ep] = "UP" if up else "DOWN"
        self._key = key
        if key is not None:
            self.world.keyed[key] = "pending"

    def resume(self, key: str) -> str:
        self._call("resume", key)
        found = self.world.keyed.get(key, "none")
        if found == "pending":
            self._key = key
        return found

    def confirm(self) -> None:
        self._call("confirm")
        self._before.clear()
        if self._key is not None:
            self.world.keyed[self._key] = "confirmed"

    def port_marks(self) -> dict[str, PortMark]:
        # A scan of the marks is kept apart from the calls that change switches (tests compare those exactly).
        calls = self.world.calls
        del calls[len(calls) - 1 - calls[::-1].index(("connect", self.device))]
        self.world.scans.append(self.device)
        self._scan = True
        if self.device in self.world.unreadable:
            raise DriverError(self.device, "cannot read the interface descriptions")
        return {
            ep.port: PortMark(m, self.world.admin.get(ep, True))
            for ep, m in self.world.marks.items()
            if ep.device == self.device
        }

    def rollback(self) -> None:
        self._call("rollback")
        self.world.oper.update(self._before)
        self.world.admin = getattr(self, "_admin_before", self.world.admin)
        self._before.clear()
        if self._key is not None:
            self.world.keyed.pop(self._key, None)

    def abort_stale(self, below: int, keep: Any) -> list[str]:
        self._call("abort_stale", below, tuple(sorted(keep)))
        ended = [k for k, v in self.world.keyed.items() if _token_of(k) < below and k not in keep and v == "pending"]
        for k in ended:
            self.world.keyed.pop(k)
        return ended

    def abandon(self) -> None:
        self._call("abandon")

    def close(self) -> None:
        if not getattr(self, "_scan", False):
            self._call("close")


def _token_of(key: str) -> int:
    """The leader token in a transaction's name (fabricd_t<token>_...; 0 without one)."""
    head = key.removeprefix("fabricd_t")
    return int(head.split("_", 1)[0]) if head != key else 0


class FakeActuator:
    def __init__(self, world: World) -> None:
        self.world = world

    def connect(self, device: str) -> Any:  # a FakeSession: the part of drivers.base.Session remediation uses
        self.world.calls.append(("connect", device))
        if "connect" in self.world.fail:
            raise self.world.fail["connect"]
        return FakeSession(self.world, device)

    def release(self, session: Any) -> None:  # the driver decides whether to keep it: the fake never does
        session.close()


class FakeView:
    def __init__(self, world: World) -> None:
        self.world = world

    def oper_down(self) -> frozenset[Endpoint]:
        return frozenset(ep for ep, s in self.world.oper.items() if s != "UP")

    def routed_down(self) -> frozenset[Endpoint]:
        return frozenset(self.world.routed_down)

    def admin_up(self) -> Mapping[Endpoint, bool]:
        return _AdminStates(self.world.admin)

    def evidence(self, device: str, port: str) -> dict[str, Any]:
        ep = Endpoint(device, port)
        out: dict[str, Any] = {"oper-status": self.world.state(ep), "if.carrier-transitions": 16}
        if ep in self.world.errors:
            self.world.errors[ep] += self.world.errors_per_read.get(ep, 0)
            out["if.in-errors"] = self.world.errors[ep]
        return out

    def description(self, device: str, port: str) -> str | None:
        return self.world.descriptions.get(Endpoint(device, port))

    def out_rate_bps(self, device: str, port: str) -> float | None:
        return self.world.rates.get(Endpoint(device, port), 0.0)

    def expects_lldp(self, device: str, port: str) -> bool:
        return Endpoint(device, port) in self.world.lldp or Endpoint(device, port) in self.world.lldp_silent

    async def lldp_neighbour(self, device: str, port: str, since_ns: int, timeout_s: float) -> Endpoint | None:
        ep = Endpoint(device, port)
        if self.world.lldp_heard_ts.get(ep, since_ns + 1) <= since_ns:
            return None  # what was heard is older than asked for, and nothing changed since
        return self.world.lldp.get(ep)

    async def wait_oper(self, device: str, port: str, up: bool, timeout_s: float) -> bool:
        self.world.waits.append((device, port, up, timeout_s))
        return (self.world.state(Endpoint(device, port)) == "UP") == up


class _AdminStates(Mapping[Endpoint, bool]):
    """Every port's admin state as telemetry would stream it: up unless the world says otherwise."""

    def __init__(self, admin: dict[Endpoint, bool]) -> None:
        self._admin = admin

    def __getitem__(self, ep: Endpoint) -> bool:
        return self._admin.get(ep, True)

    def __iter__(self) -> Iterator[Endpoint]:
        return iter(self._admin)

    def __len__(self) -> int:
        return len(self._admin)


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
    rem: Remediation
    published: list[Ticket]

    def tickets(self, kind: str | None = None) -> list[Ticket]:
        return [t for t in self.state.tickets.all() if kind is None or t.kind == kind]

    def restart(self, **settings: Any) -> Remediation:
        """A new remediator on the same state (the service restarted)."""
        self.rem = make_remediator(self.fabric, self.state, self.world, self.clock, self.published, **settings)
        return self.rem


def make_remediator(
    fabric: Fabric, state: StateStore, world: World, clock: Clock, published: list[Ticket],
    limits: SafetyLimits | None = None, **settings: Any,
) -> Remediation:  # fmt: skip
    async def publish(t: Ticket) -> None:
        published.append(t)

    return build_remediation(
        fabric,
        state,
        # an undrain watches the counters only briefly here (each test that needs longer says so)
        RemediationSettings(
            **{"mode": "auto", "verify_timeout_s": 10.0, "maintenance": {"undrain_watch_s": 0.01}, **settings}
        ),
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


def pod_variant(tmp: Path, **overrides: object) -> Fabric:
    data = yaml.safe_load((EXAMPLES / "small-pod.yaml").read_text())
    data.update(overrides)
    path = tmp / "spec.yaml"
    path.write_text(yaml.safe_dump(data))
    return load_fabric(path, None)[1]


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
    out = await h.rem.incidents.on_findings(list(findings))
    await h.rem.idle()
    return out


SESSION_DISABLE = [
    ("connect", "leaf-g0-r0"),
    ("set_port_admin", "leaf-g0-r0", "Ethernet1/1", False, 120),
    ("confirm", "leaf-g0-r0"),
    ("close", "leaf-g0-r0"),
]


def action_of(h: Harness, action_id: int) -> Action:
    a = h.state.actions.get(action_id)
    assert a is not None, f"no action {action_id}"
    return a


def ticket_of(h: Harness, ticket_id: int) -> Ticket:
    t = h.state.tickets.get(ticket_id)
    assert t is not None, f"no ticket {ticket_id}"
    return t
