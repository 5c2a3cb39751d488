"""What people ask of planned maintenance: drain a switch, link or port, undrain it, list the drains. A part of
`Remediator` (remediation.py), mixed in like people_requests.py: every request is refused on a standby, runs under
the remediator's lock with the leader's fencing token (a superseded leader writes nothing), and is audited with its
user. The decisions are maintenance.py's and the guard's; this is their I/O.

A drain is written (state `draining`, its guard step done) before anything else happens, so a restart or a new
leader sees it and the guard counts its ports from that moment on."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from functools import partial
from typing import TYPE_CHECKING, TypeVar, TypeVarTuple

from fabricd.detectors.finding import Finding
from topology.errors import FabricdError
from topology.fabric import Fabric
from topology.model import Endpoint
from topology.units import NS

from . import maintenance as m
from .config import RemediationSettings, SafetyLimits
from .guard import GuardInput, check_drain
from .people_requests import ActionError
from .remediation_io import Actuator, PortView
from .state import Action, DisabledPort, DrainRecord, StateStore, fenced
from .state_db import FencedError

log = logging.getLogger("fabricd.maintenance")
R = TypeVar("R")
Ts = TypeVarTuple("Ts")
MAINTENANCE_KEY = "maintenance:"  # a drain's shut and enable actions: `maintenance:<drain>:<down|upN>:<port>`
# the error counters an undrain watches (port_view.EVIDENCE_LEAVES's): they must not rise before traffic returns
ERROR_LEAVES = ("if.in-errors", "if.in-fcs-errors", "eth.in-crc-errors", "eth.in-symbol-error")


class DrainRefusedError(ActionError):
    """The guard refuses the drain (its capacity counted with everything else that is gone)."""


@dataclass(frozen=True)
class DrainPlan:
    """A drain as planned: its steps and, unless a dry run, its record."""

    steps: list[str]
    dry_run: bool
    drain: DrainRecord | None
    ports: list[str]  # device:port, what it takes out of service


def parse_until(text: str | None) -> int | None:
    """`--until` as unix ns: ISO 8601, UTC unless it names its zone (2026-11-28T08:00Z, 2026-11-28 08:00)."""
    if text is None or not text.strip():
        return None
    try:
        when = datetime.fromisoformat(text.strip().replace("Z", "+00:00"))
    except ValueError:
        raise m.MaintenanceInputError(
            f"--until {text!r}: not a time; give it as ISO 8601 UTC, e.g. 2026-11-28T08:00Z"
        ) from None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    ns = int(when.timestamp()) * NS
    if ns >= 2**63:  # unix ns in 64 bits end in 2262: the state stores them as such
        raise m.MaintenanceInputError(f"--until {text!r}: too far ahead; give a time before 2262")
    return ns


def _step_text(s: m.Step) -> str:
    return f"{s.name}: {s.text}"


class MaintenanceRequests:
    if TYPE_CHECKING:  # what the remediator provides
        fabric: Fabric
        state: StateStore
        settings: RemediationSettings
        limits: SafetyLimits
        view: PortView
        clock: Callable[[], int]
        _lock: asyncio.Lock
        _token: Callable[[], int | None]

        actuator: Actuator
        _tasks: set[asyncio.Task[None]]

        def _leader_only(self) -> None: ...
        def _fenced_out(self, why: str) -> None: ...

        def _fenced(self) -> str | None: ...
        def _spawn(self, action: Action, resumed: bool = False) -> asyncio.Event: ...
        async def _blocking(self, fn: Callable[[*Ts], R], *args: *Ts) -> R: ...
        def _known(self, disabled: list[DisabledPort] | None = None) -> GuardInput: ...

    def drained_ports(self) -> frozenset[Endpoint]:
        """The ports of every active drain: out of service as surely as a fault's (the guard counts them)."""
        out = set()
        for d in self.state.drains(m.ACTIVE):
            for p in d.ports:
                device, _, port = p.partition(":")
                out.add(Endpoint(device, port))
        return frozenset(out)

    def _under_maintenance(self, f: Finding) -> bool:
        """A finding on drained ports only (the drained switch, its links): the work the drain is for, not a fault
        to ticket twice. A finding that also names ports outside the drain is judged as any other."""
        drained = self.drained_ports()
        if not drained:
            return False
        names = [p for p in f.ports if ":" in p] or ([f"{f.device}:{f.port}"] if f.port else [])
        if names:
            return all(Endpoint(*p.split(":", 1)) in drained for p in names)
        return any(d.kind == "switch" and d.target == f.device for d in self.state.drains(m.ACTIVE))

    def report_overruns(self, now: int) -> list[Finding]:
        """Every active drain past its --until as a finding ("maintenance overran"), refreshed each tick while it
        lasts (cleared like any finding once the drain ends); audited when it first overruns. Never a return."""
        out = []
        try:
            with fenced(self._token()):
                for d in self.state.drains(m.ACTIVE):
                    if not m.overran(d.until_ts, d.state, now):
                        continue
                    f = m.overran_finding(d, now)
                    with self.state.tx():
                        fid, new = self.state.upsert_finding(f, f"{m.OVERRAN}:{d.id}", now)
                        if new:
                            self.state.audit(now, f"drain {d.id} of {d.kind} {d.target} overran", f.summary,
                                             finding_id=fid)  # fmt: skip
                    out.append(f)
        except FencedError as e:
            self._fenced_out(str(e))
        return out

    def maintenance(self, limit: int = 500) -> list[DrainRecord]:
        return self.state.drains(None, limit)

    async def drain(
        self, kind: m.TargetKind, name: str, actor: str, reason: str, *, until: str | None = None,
        shut: bool = False, dry_run: bool = False, force: bool = False,
    ) -> DrainPlan:  # fmt: skip
        """Plan a drain; unless `dry_run`, check it with the guard and record it (its guard step done).
        MaintenanceInputError for bad input, DrainRefusedError when the guard refuses: nothing written but the
        refusal's audit entry."""
        t = m.target(self.fabric, kind, name)
        until_ts = parse_until(until)
        why = reason.strip()
        if not why:
            raise m.MaintenanceInputError("--reason is empty: say why (it goes in the audit log)")
        steps = [_step_text(s) for s in self._plan(t, shut)]
        if dry_run:
            m.check_new(t, self.drained_ports(), until_ts, self.clock())
            return DrainPlan(steps, True, None, [str(p) for p in t.ports])
        self._leader_only()
        with fenced(self._token()):
            async with self._lock:
                now = self.clock()
                m.check_new(t, self.drained_ports(), until_ts, now)
                known = self._known()
                v = check_drain(self.fabric, self.limits, t.ports, known, t.spared)
                if not v.allowed and not force:
                    self.state.audit(now, f"drain of {kind} {name} refused", f"guard ({v.rule}): {v.reason}",
                                     actor=actor)  # fmt: skip
                    raise DrainRefusedError(f"drain of {kind} {name} refused by the guard ({v.rule}): {v.reason}")
                if not v.allowed:  # an admin's override (the API lets only admins force): said in the audit log
                    over = f"guard ({v.rule}): {v.reason}; forced by {actor}: {why}"
                    self.state.audit(now, f"drain of {kind} {name} forced past the guard", over, actor=actor)
                with self.state.tx():
                    d = self.state.add_drain(kind, name, [str(p) for p in t.ports], why, actor, shut, until_ts,
                                             steps, 1, now)  # fmt: skip
                    until_note = f", until {_iso(until_ts)}" if until_ts is not None else ""
                    self.state.audit(now, f"drain {d.id} of {kind} {name} begun", f"{why}{until_note}", actor=actor)
            self.resume_drain(d.id)
            return DrainPlan(steps, False, d, d.ports)

    def resume_drain(self, drain_id: int) -> None:
        """Carry out a recorded drain's remaining steps in the background (a new drain, or one a restart or a new
        leader finds half done: `resume_drains`); `idle()` waits for it."""
        task: asyncio.Task[None] = asyncio.ensure_future(self._carry_out_drain(drain_id, self._token()))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    def resume_drains(self) -> list[int]:
        """Every drain a fabricd before this one left between its steps, carried on (the leader's start)."""
        ids = [d.id for d in self.state.drains(("draining",)) if d.done < len(d.steps)]
        for i in ids:
            self.resume_drain(i)
        return ids

    async def _carry_out_drain(self, drain_id: int, token: int | None) -> None:
        try:
            with fenced(token):
                await self._drain_steps(drain_id)
        except Exception:
            log.exception("drain %d failed unexpectedly", drain_id)
            with contextlib.suppress(Exception), fenced(token):
                self.state.set_drain(drain_id, self.clock(), detail="internal error carrying it out; see the log")

    async def _drain_steps(self, drain_id: int) -> None:
        """Each remaining step taken, then recorded (`done`) before the next: a restart resumes at the first one not
        recorded (a shift taken twice is harmless: maintenance mode and TSA are states, not toggles)."""
        d = self.state.drain(drain_id)
        if d is None or d.state != "draining":
            return
        t = m.target(self.fabric, d.kind, d.target)
        steps = self._plan(t, d.shut)
        for i in range(d.done, len(steps)):
            if self._fenced() is not None:
                return  # the leader carries it on
            step = steps[i]
            if step.name in ("shift", "shift_session"):  # the n-th shift step shifts the n-th switch or session
                nth, key = [s.name for s in steps[: i + 1]].count(step.name) - 1, f"fabricd_m{d.id}_{i}"
                if step.name == "shift":
                    shift = partial(self._shift, t.shifted[nth], True, key)
                else:
                    shift = partial(self._shift_session, t.sessions[nth], True, key)
                try:
                    await self._blocking(shift)
                except FabricdError as e:
                    self._stop(d, f"step {i + 1} ({step.text}) failed: {e}")
                    return
            elif step.name == "verify":
                loud = await self._wait_quiet(t.ports)
                if loud:
                    timeout = self.settings.maintenance.shift_timeout_s
                    self._stop(d, f"traffic did not move away within {timeout:g} s: {'; '.join(loud)}")
                    return
            elif step.name == "shut":
                failed = await self._shut(d, t.ports)
                if failed:
                    self._stop(d, f"step {i + 1} ({step.text}) failed: {'; '.join(failed)}")
                    return
            elif step.name == "hold":
                loose = [str(p) for p in self._switch_ports(t.ports) if not self.state.is_disabled(p.device, p.port)]
                if loose:
                    self._stop(d, f"step {i + 1}: not held after the shut: {', '.join(loose)}")
                    return
            done = i + 1
            state = "drained" if step.name == "drained" else None
            d = self.state.set_drain(d.id, self.clock(), done=done, state=state, detail=f"{step.name}: done")

    def _plan(self, t: m.DrainTarget, shut: bool) -> list[m.Step]:
        ms = self.settings.maintenance
        return m.plan(self.fabric, t, shut=shut, threshold_bps=ms.quiet_bps, timeout_s=ms.shift_timeout_s)

    def _switch_ports(self, ports: tuple[Endpoint, ...]) -> list[Endpoint]:
        return [p for p in ports if (dev := self.fabric.get(p.device)) is not None and dev.is_switch]

    async def _shut(self, d: DrainRecord, ports: tuple[Endpoint, ...], again: bool = False) -> list[str]:
        """The drained ports shut as fabricd shuts a faulty one (the revert timer, telemetry, confirmed; the mark
        says `maintenance`, no ticket), and held: the remediator's own disable, keyed by the drain so a resumed step
        finds its actions instead of adding new ones (`again`: shut anew after an undrain that failed its checks,
        keyed by how many times the port was shut). What failed, per port."""
        actions = []
        begun = {a.id for a in self.state.actions_in("running", op="disable")}  # a resumed step's: already going
        for p in self._switch_ports(ports):
            n = self.state.count_actions(p.device, p.port, "disable", after_id=0) if again else ""
            a = self.state.add_action("disable", p.device, p.port, "maintenance", "running",
                                      f"maintenance: drain {d.id} ({d.reason})", self.clock(),
                                      key=f"{MAINTENANCE_KEY}{d.id}:down{n}:{p}")  # fmt: skip
            if a.status == "running" and a.id not in begun:
                self._spawn(a)
            actions.append(a)
        return await self._wait_actions(actions)

    async def _wait_actions(self, actions: list[Action]) -> list[str]:
        """Wait for the actions to end; what did not end `done`, with why."""
        out = []
        for a in actions:
            while (now := self.state.action(a.id)) is not None and now.status == "running":
                await asyncio.sleep(0.05)
            if now is None or now.status != "done":
                out.append(f"{a.device}:{a.port}: {now.detail if now is not None else 'lost'}")
        return out

    def _shift(self, device: str, away: bool, key: str) -> None:
        """In a worker thread: the switch's traffic shifted away (or back), confirmed."""
        session = self.actuator.connect(device)
        try:
            session.shift_traffic(away, self.settings.revert_in_s, key=key)
        finally:
            self.actuator.release(session)

    def _shift_session(self, se: m.SessionEnd, away: bool, key: str) -> None:
        """In a worker thread: one end of a drained link's BGP session de-preferred (or back), confirmed."""
        session = self.actuator.connect(se.local.device)
        try:
            session.shift_session(se.peer_address, se.asn, away, self.settings.revert_in_s, key=key)
        finally:
            self.actuator.release(session)

    async def _wait_quiet(self, ports: tuple[Endpoint, ...]) -> list[str]:
        """Wait for the drained ports' rates to fall below the threshold; what still carries at the timeout."""
        ms = self.settings.maintenance
        deadline = time.monotonic() + ms.shift_timeout_s
        while True:
            loud = m.still_carrying({p: self.view.out_rate_bps(p.device, p.port) for p in ports}, ms.quiet_bps)
            if not loud or time.monotonic() >= deadline:
                return loud
            await asyncio.sleep(0.5)

    def _stop(self, d: DrainRecord, why: str) -> None:
        """A step failed: the drain stays recorded, active (its ports counted), and says why; a person decides
        (undrain to bring the traffic back)."""
        now = self.clock()
        self.state.set_drain(d.id, now, detail=f"stopped: {why}")
        self.state.audit(now, f"drain {d.id} of {d.kind} {d.target} stopped", why)

    async def undrain(self, name: str, actor: str) -> DrainRecord:
        """End the active drain of `name` once its ports came back as the blueprint has them and stayed clean while
        watched; otherwise the drain stays and ActionError says what is wrong (audited). The ports' return and the
        watch run outside the remediator's lock (a fault elsewhere is judged meanwhile); the verdict and the traffic's
        return under it, on the drain as it is then (a second undrain of the same drain finds it ended)."""
        self._leader_only()
        with fenced(self._token()):
            d = self._active_drain(name)
            up, back = await self._bring_ports_back(d)
            readings = {} if back else await self._readings(d)
            refused = ""
            async with self._lock:
                now = self.clock()
                d = self._active_drain(name)
                problems = back or m.undrain_problems(self.fabric, readings, self.settings.maintenance.undrain_watch_s)
                if problems:
                    refused = "; ".join(problems)
                    self.state.set_drain(d.id, now, detail=f"undrain refused: {refused}")
                    self.state.audit(now, f"undrain of drain {d.id} ({d.kind} {d.target}) refused", refused,
                                     actor=actor)  # fmt: skip
                if not refused:
                    return await self._return_traffic(d, actor, now)
            # the drain stays: the ports this undrain brought up go out of service again, as the drain had them
            failed = await self._shut(d, tuple(up), again=True) if up else []
            if failed:
                refused += f"; and shutting them again failed: {'; '.join(failed)}"
            raise ActionError(f"{d.kind} {d.target} stays drained: {refused}")

    async def _return_traffic(self, d: DrainRecord, actor: str, now: int) -> DrainRecord:
        """The checks passed: traffic back (maintenance mode off, TSB), then the drain ends. Under the lock."""
        t = m.target(self.fabric, d.kind, d.target)
        back: list[tuple[str, Callable[[], None]]] = [
            (device, partial(self._shift, device, False, f"fabricd_m{d.id}_back")) for device in t.shifted
        ]
        back += [(f"{se.local}'s BGP session", partial(self._shift_session, se, False, f"fabricd_m{d.id}_back{n}"))
                 for n, se in enumerate(t.sessions)]  # fmt: skip
        for what, undo in back:  # one never shifted (a drain stopped before): bringing it back is harmless
            try:
                await self._blocking(undo)
            except FabricdError as e:
                why = f"could not bring the traffic back to {what}: {e}"
                self.state.set_drain(d.id, now, detail=f"undrain failed: {why}")
                self.state.audit(now, f"undrain of drain {d.id} failed", why, actor=actor)
                raise ActionError(f"{d.kind} {d.target} stays drained: {why}") from None
        with self.state.tx():
            d = self.state.set_drain(d.id, now, state="undrained", detail=f"undrained by {actor}")
            self.state.audit(now, f"drain {d.id} of {d.kind} {d.target} ended", "checks passed", actor=actor)
        return d

    def _active_drain(self, name: str) -> DrainRecord:
        d = next((x for x in self.state.drains(m.ACTIVE) if x.target == name), None)
        if d is None:
            raise m.UnknownTargetError(f"{name} is not drained; see `fabricd maintenance`")
        return d

    async def _bring_ports_back(self, d: DrainRecord) -> tuple[list[Endpoint], list[str]]:
        """The ports the drain shut and holds, enabled as fabricd re-enables a repaired port (its LLDP checked: on the
        wrong cable it stays down, and says where); the ports brought back, and what did not come back."""
        held = {(p["device"], p["port"]) for p in self.state.disabled_ports()}
        actions = []
        for p in self._switch_ports(tuple(Endpoint(*x.split(":", 1)) for x in d.ports)):
            if (p.device, p.port) not in held:
                continue
            tries = self.state.count_actions(p.device, p.port, "enable", after_id=0)
            a = self.state.add_action("enable", p.device, p.port, "maintenance", "running",
                                      f"maintenance: undrain of drain {d.id}", self.clock(),
                                      key=f"{MAINTENANCE_KEY}{d.id}:up{tries}:{p}")  # fmt: skip
            self._spawn(a)
            actions.append(a)
        failed = await self._wait_actions(actions)
        up = [Endpoint(a.device, a.port) for a in actions if not self.state.is_disabled(a.device, a.port)]
        # the enable's own words are a ticket's ("resolve the ticket again"); here it is the undrain that is repeated
        return up, [w.replace("resolve the ticket again", "undrain again") for w in failed]

    async def _readings(self, d: DrainRecord) -> dict[Endpoint, m.PortReading]:
        """What the undrain checks read for each drained port, from telemetry: its LLDP neighbour, its BGP session,
        and how much its error counters rose while watched for `undrain_watch_s` (the LLDP waits run meanwhile)."""
        ms = self.settings.maintenance
        eps = [Endpoint(*p.split(":", 1)) for p in d.ports]
        before = {ep: self._error_counters(ep) for ep in eps}

        async def neighbour(ep: Endpoint) -> Endpoint | None:
            heard = await self.view.lldp_neighbour(ep.device, ep.port, 0, ms.lldp_wait_s)
            if heard is None and not self.view.expects_lldp(ep.device, ep.port):
                heard = self.fabric.peer(ep.device, ep.port)  # nothing there speaks LLDP: nothing to check it by
            return heard

        heard, _ = await asyncio.gather(
            asyncio.gather(*(neighbour(ep) for ep in eps)), asyncio.sleep(ms.undrain_watch_s)
        )
        down, routed = self.view.oper_down(), self.view.routed_down()
        out = {}
        for ep, lldp in zip(eps, heard, strict=True):
            rose = m.errors_rose(before[ep], self._error_counters(ep))
            bgp = None if not self.fabric.get(ep.device) else ep not in routed
            out[ep] = m.PortReading(ep not in down, lldp, bgp, rose)
        return out

    def _error_counters(self, ep: Endpoint) -> dict[str, float]:
        ev = self.view.evidence(ep.device, ep.port)
        return {k: float(v) for k in ERROR_LEAVES if isinstance(v := ev.get(k), int | float)}


def _iso(ns: int) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(ns / NS))
