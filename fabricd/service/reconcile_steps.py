"""Remediation's records against the fabric, on taking over and every pass (the decision is reconcile.py's, pure):
read the switches' marks, then carry out the steps: re-apply, propose, release, adopt. A part of `Remediator`
(remediation.py), which it is mixed into: it uses the remediator's state, guard, tickets and action spawning."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Collection, Container
from concurrent.futures import Executor
from dataclasses import replace
from typing import TYPE_CHECKING, TypedDict

from drivers.base import PortMark
from drivers.marks import Mark
from fabricd.detectors.finding import Finding
from topology.fabric import Fabric
from topology.jsontypes import JsonDict
from topology.model import Endpoint
from topology.units import NS

from .config import RemediationSettings
from .faults import fault_key
from .guard import Verdict
from .reconcile import Hold, Observed, Reconcile, Refusal, Step, reconcile, refused_reapply
from .remediation_io import Actuator, PortView
from .state import Action, ActionStatus, StateStore, Ticket, fenced
from .state_db import FencedError

log = logging.getLogger("fabricd.remediation")
# How long a held port's re-apply waits for fresh telemetry from the switches its guard verdict rests on (after a
# restart or a resync); then it is judged on what is known, and says what was not.
FRESH_WAIT_S = 30.0
RESCAN_S = 5.0  # how often the marks of switches a scan skipped or could not read are tried again


class ToReapply(TypedDict):
    """A hold whose port is up again, whose re-apply the guard refused: retried every pass."""

    port: str
    ticket_id: int | None
    action_id: int
    rule: str
    reason: str


class ReconcileSteps:
    if TYPE_CHECKING:  # what the remediator provides
        fabric: Fabric
        state: StateStore
        settings: RemediationSettings
        managed: Container[str]
        actuator: Actuator
        view: PortView
        clock: Callable[[], int]
        executor: Executor | None
        marks: dict[Endpoint, PortMark] | None
        unscanned: set[str]
        scanned_ts: int
        _waiting: dict[Endpoint, int]  # holds whose re-apply waits for fresh telemetry: since when
        _lock: asyncio.Lock
        _token: Callable[[], int | None]

        def _spawn(self, action: Action, resumed: bool = False) -> asyncio.Event: ...
        async def idle(self) -> None: ...
        def _guard(self, target: Endpoint) -> Verdict: ...
        def _note(self, ticket_id: int | None, action: Action, text: str) -> Ticket | None: ...
        def _send(self, ticket: Ticket) -> Awaitable[None]: ...
        def _fenced_out(self, why: str) -> None: ...
        async def remark(self, action: Action, old: Mark) -> str: ...
        async def unmark(self, ep: Endpoint, action_id: int, ticket_id: int | None) -> str: ...

    async def reconcile(self, stale: Collection[str] = ()) -> list[str]:
        """On taking over (a start, a new leader): finish what was half done, read the switches' marks, then
        reconcile the records with what the fabric shows, as every pass does after."""
        notes = []
        for a in self.state.actions_in("running"):
            notes.append(f"completing {a.op} of {a.device}:{a.port} (action {a.id}) interrupted by a restart")
            self.state.audit(self.clock(), f"resume action {a.id}", "interrupted by a restart", mode=a.mode,
                             action_id=a.id)  # fmt: skip
            self._spawn(a, resumed=True)
        await self.idle()
        await self.scan_marks(stale)
        # The usual grace: a hold the resumed actions just made is younger than telemetry's word on it.
        notes += await self.reconcile_pass(self.clock(), stale)
        await self.idle()
        for n in notes:
            log.warning("%s", n)
        return notes

    async def scan_marks(
        self, skip: Collection[str] = (), only: Collection[str] | None = None
    ) -> dict[Endpoint, PortMark]:
        """Read fabricd's marks from every managed switch (or those in `only`), skipping `skip`; a switch that cannot
        be read keeps what the last scan saw of it (and is logged), and is read again at the next pass it is not
        stale (`unscanned`): a leader that took over while a switch was stale would otherwise not see that switch's
        marks until the next full scan (`remediation.mark_scan_s`), and a hold it released in observe mode kept its
        mark on an up port that long (chaos seed 3133: 77 s)."""
        managed = [d.name for d in self.fabric.switches() if d.name in self.managed]
        devices = [d for d in managed if d not in skip and (only is None or d in only)]
        self.unscanned |= {d for d in managed if d in skip and (only is None or d in only)}
        self.scanned_ts = self.clock()
        loop = asyncio.get_running_loop()
        results = await asyncio.gather(
            *(loop.run_in_executor(self.executor, self._read_marks, d) for d in devices), return_exceptions=True
        )
        marks = dict(self.marks or {})
        for device, got in zip(devices, results, strict=True):
            if isinstance(got, BaseException):
                log.warning("could not read fabricd's marks from %s: %s", device, got)
                self.unscanned.add(device)
                continue
            self.unscanned.discard(device)
            marks = {ep: m for ep, m in marks.items() if ep.device != device}
            marks.update({Endpoint(device, port): m for port, m in got.items()})
        self.marks = marks
        return marks

    def _read_marks(self, device: str) -> dict[str, PortMark]:
        session = self.actuator.connect(device)
        try:
            marks = session.port_marks()
        except BaseException:
            session.close()
            raise
        self.actuator.release(session)
        return marks

    async def reconcile_pass(self, now: int, stale: Collection[str] = ()) -> list[str]:
        """One pass of reconcile.py: decide on fabricd's records and what the fabric shows, then carry it out
        (audited, noted on tickets). Returns a line per step taken. Switches in `stale` are not judged."""
        again = self.unscanned.difference(stale)
        # not every pass: a switch whose eAPI or SSH hangs costs a connect timeout
        if again and self.marks is not None and now - self.scanned_ts >= RESCAN_S * NS:
            await self.scan_marks(only=again)
        observed = Observed(self.view.admin_up(), self.marks, frozenset(stale))
        try:
            with fenced(self._token()):
                return await self._reconcile_pass(observed, now, self.settings.verify_timeout_s)
        except FencedError as e:
            self._fenced_out(str(e))
            return []

    async def _reconcile_pass(self, observed: Observed, now: int, grace: float) -> list[str]:
        async with self._lock:
            holds = [Hold.of(p) for p in self.state.disabled_ports()]
            in_flight = {Endpoint(a.device, a.port) for a in self.state.actions_in("running", "awaiting_approval")}
            # A port whose action ended moments ago is not judged yet either: telemetry may still show it as it was
            # (an enable rolled back reads up for a moment; chaos seed 6174 re-applied it, was refused by the rate,
            # released the hold and then adopted the port, an 11th disable in the hour).
            grace_ns = int(grace * NS)
            in_flight |= {
                Endpoint(a.device, a.port) for a in self.state.actions(limit=200) if now - a.updated_ts < grace_ns
            }
            decisions = reconcile(
                holds, observed, open_tickets=self.state.open_ticket_ids(),
                in_flight=in_flight, mode=self.settings.mode, now=now, grace_ns=int(grace * NS),
            )  # fmt: skip
            held = {h.endpoint for h in holds}
            for gone in [ep for ep in self._waiting if ep not in held]:
                self._waiting.pop(gone, None)  # resolved, released or re-applied since: no longer waits
            out = []
            for d in decisions:
                line = await self._carry_out_step(d, now, observed.stale)
                if line:
                    out.append(line)
        return out

    def _unknown_for(self, ep: Endpoint, unsure: Collection[str]) -> list[str]:
        """The switches whose telemetry the guard's verdict on `ep` rests on (its own, and those at the far end of its
        links to other switches: their ports and BGP sessions are its capacity) that have no fresh word now (a
        switch restarting, a stream resyncing): what they streamed before does not count."""
        if not unsure:
            return []
        mine = {ep.device}
        for port in self.fabric.ports(ep.device):
            peer = self.fabric.peer(ep.device, port)
            if peer is not None and peer.device in self.managed:
                mine.add(peer.device)
        return sorted(mine.intersection(unsure))

    async def _carry_out_step(self, d: Reconcile, now: int, unsure: Collection[str] = ()) -> str:
        """Carry out one step; returns the line to log ('' when nothing changed: a refusal repeated, a wait)."""
        ep = d.endpoint
        if d.step is Step.ADOPT:
            assert d.mark is not None
            return await self._adopt(ep, d.mark, d.why, now)
        if d.step is Step.UNMARK:
            assert d.mark is not None
            self.state.audit(now, f"stale mark on {ep}", d.why, mode=self.settings.mode,
                             action_id=d.mark.action_id)  # fmt: skip
            return await self.unmark(ep, d.mark.action_id, d.mark.ticket_id)
        h = d.hold
        assert h is not None
        if d.step is Step.RELEASE:
            await self._release(h, d.why, now)
            return d.why
        unknown = self._unknown_for(ep, unsure)
        if unknown:
            # Not judged on what those switches said before they went quiet: wait (bounded) for their fresh word.
            first = self._waiting.setdefault(ep, now)
            if now - first < FRESH_WAIT_S * NS:
                waits = f"{ep}: re-applying its hold waits for fresh telemetry from {', '.join(unknown)}"
                return waits if first == now else ""
        v = self._guard(ep)
        if unknown:
            v = replace(v, reason=f"{v.reason} (judged without fresh telemetry from {', '.join(unknown)} "
                                  f"after {FRESH_WAIT_S:g} s)")  # fmt: skip
        self._waiting.pop(ep, None)
        if not v.allowed:
            return self._refused_reapply(h, Refusal(v.rule, v.reason), now)
        with self.state.tx():
            self.state.drop_hold(ep.device, ep.port)  # the port is up: the action below holds it anew
            status: ActionStatus = "running" if d.step is Step.REAPPLY else "awaiting_approval"
            a = self.state.add_action("disable", ep.device, ep.port, self.settings.mode, status, d.why, now,
                                      ticket_id=h.ticket_id, key=f"reapply:{ep}:after{h.action_id}")  # fmt: skip
            self.state.audit(now, f"re-apply {ep}" if status == "running" else f"proposed re-applying {ep}", d.why,
                             mode=self.settings.mode, action_id=a.id, ticket_id=h.ticket_id)  # fmt: skip
        t = self._note(h.ticket_id, a, d.why)
        if status == "running" and a.status == "running":
            await self._spawn(a).wait()
        if t is not None:
            await self._send(t)
        return d.why

    def _refused_reapply(self, h: Hold, refusal: Refusal, now: int) -> str:
        """The guard refused the re-apply: the hold stays, to re-apply; a change of reason is audited and noted."""
        ep = h.endpoint
        before = next((Refusal(r["rule"], r["reason"]) for r in self.state.refused_reapplies()
                       if (r["device"], r["port"]) == (ep.device, ep.port)), None)  # fmt: skip
        why, news = refused_reapply(h, refusal, before)
        if not news:
            return ""
        with self.state.tx():  # in the shared state: every instance lists it, a new leader does not say it again
            self.state.refuse_reapply(ep.device, ep.port, h.action_id, refusal.rule, refusal.reason, now)
            self.state.audit(now, f"re-apply of {ep} refused", why, mode=self.settings.mode,
                             action_id=h.action_id, ticket_id=h.ticket_id)  # fmt: skip
        self._ticket_note(h.ticket_id, why, now)
        return why

    def to_reapply(self) -> list[ToReapply]:
        """Holds whose port is up again and whose re-apply the guard refused (`fabricd status`, the page,
        /metrics): retried every pass. From the shared state, so a standby answers as the leader would (chaos
        seed 3135: the checker, reading a standby, saw a held port up for 47 s that the leader had declared)."""
        holds = {(p["device"], p["port"]): p for p in self.state.disabled_ports()}
        out: list[ToReapply] = []
        for r in self.state.refused_reapplies():
            p = holds.get((r["device"], r["port"]))
            if p is not None and p["action_id"] == r["action_id"]:
                out.append({"port": f"{r['device']}:{r['port']}", "ticket_id": p["ticket_id"],
                            "action_id": p["action_id"], "rule": r["rule"], "reason": r["reason"]})  # fmt: skip
        return out

    async def _release(self, h: Hold, why: str, now: int, actor: str = "fabricd") -> None:
        """Forget a hold on a port that is up (on probation, as after a repair); audited and noted on its ticket;
        its mark removed from the switch (`unmark`)."""
        ep = h.endpoint
        self._waiting.pop(ep, None)
        self.state.mark_enabled(ep.device, ep.port, now + int(self.settings.probation_s * NS), h.ticket_id)
        self.state.audit(now, f"released hold on {ep}", why, mode=self.settings.mode, actor=actor,
                         action_id=h.action_id, ticket_id=h.ticket_id)  # fmt: skip
        self._ticket_note(h.ticket_id, why, now)
        await self.unmark(ep, h.action_id, h.ticket_id)

    def _ticket_note(self, ticket_id: int | None, why: str, now: int) -> None:
        if ticket_id:
            t = self.state.ticket(ticket_id)
            if t is not None:
                body = {**t.body, "status_note": why, "notes": [*t.body.get("notes", []), why]}
                self.state.update_ticket(t.id, now, body=body)

    async def _adopt(self, ep: Endpoint, mark: Mark, why: str, now: int) -> str:
        """A port down with fabricd's mark and no record: record, finding and ticket again, as if fabricd had just
        taken it down (nothing is sent to the switch; the re-enable after the repair removes the mark)."""
        peer = self.fabric.peer(ep.device, ep.port)
        ends = tuple(sorted({str(ep), *([str(peer)] if peer is not None else [])}))
        devices = tuple(sorted({ep.device, *([peer.device] if peer is not None else [])}))
        summary = f"{ep} is down by fabricd ({mark.kind}) with no record of it: adopted from the switch's mark"
        if self.state.started_empty:  # a deleted state file or --new-state: say so where the operator looks
            why = f"{why}; the state started empty at this start ({self.state.started_empty})"
        evidence: JsonDict = {"mark": mark.text(), "adopted": True, "old_action": mark.action_id,
                              "old_ticket": mark.ticket_id}  # fmt: skip
        f = Finding(kind=mark.kind, device=ep.device, port=ep.port, devices=devices, ports=ends, start_ts=now,
                    detected_ts=now, severity="warning", confidence=1.0, summary=summary,
                    evidence=evidence)  # fmt: skip
        fault = fault_key(f, self.fabric)
        with self.state.tx():
            fid, _ = self.state.upsert_finding(f, fault, now)
            t = self.state.open_ticket(fault)
            if t is None:
                title = f"{mark.kind} on {ep}: held down by fabricd (adopted from the switch)"
                body: JsonDict = {"summary": summary, "why": why, "evidence": {"detector": evidence},
                                  "actions": [], "status_note": why}  # fmt: skip
                t = self.state.create_ticket(fault, mark.kind, ep.device, ep.port, title, body, now)
                self.state.audit(now, f"opened ticket {t.id}", why, mode=self.settings.mode, finding_id=fid,
                                 ticket_id=t.id)  # fmt: skip
            a = self.state.add_action("disable", ep.device, ep.port, self.settings.mode, "done", why, now,
                                      finding_id=fid, ticket_id=t.id)  # fmt: skip
            self.state.mark_disabled(ep.device, ep.port, a.id, t.id, now)
            self.state.audit(now, f"adopted {ep}", why, mode=self.settings.mode, finding_id=fid, action_id=a.id,
                             ticket_id=t.id)  # fmt: skip
        t = self._note(t.id, a, why) or t
        await self._send(t)
        remarked = await self.remark(a, mark)
        return f"{why}; {remarked}" if remarked else why
