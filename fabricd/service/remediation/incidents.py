"""From findings to records and tickets: every new incident recorded, decided (decide.py, pure), its decision, its
action and its ticket written in one state transaction, then its switch work started (port_actions.py) before the
tickets go to the backend. One ticket per fault (a recurrence updates it); several faulty ports on one switch
escalate to the switch. What happens next depends on the mode: `observe` records what it would do, `approve` waits
for a person (requests.py), `auto` acts."""

from __future__ import annotations

import logging
from collections.abc import Collection, Sequence
from dataclasses import dataclass

from fabricd.detectors.finding import Finding
from topology.jsontypes import JsonDict
from topology.model import Endpoint
from topology.units import NS

from ..decide import Decision, PortFacts, decide, escalation, new_ticket, recurrence
from ..faults import LINK_KINDS, fault_key, target_port
from ..guard import Verdict
from ..maintenance.plan import ACTIVE
from ..state import Action, DisabledPort, Ticket, fenced
from ..state.db import FencedError
from .context import Context
from .holds import FRESH_WAIT_S, Holds
from .paperwork import Paperwork
from .port_actions import PortActions

log = logging.getLogger("fabricd.remediation")


@dataclass
class Outcome:
    ticket: Ticket | None
    action: Action | None
    verdict: Verdict | None


class Incidents:
    def __init__(self, ctx: Context, holds: Holds, actions: PortActions, paper: Paperwork) -> None:
        self.ctx, self.holds, self.actions, self.paper = ctx, holds, actions, paper
        self.state = ctx.state
        self._fresh: dict[Endpoint, int] = {}  # ports whose new incident waits for fresh telemetry, since when

    async def on_findings(self, findings: list[Finding], unsure: Collection[str] = ()) -> list[Outcome]:
        """Every finding decided and its switch work started first, then the tickets to the backend: when links
        cross together, the last one's commit does not wait for the earlier ones' paperwork. `unsure`: the switches
        with no fresh word now (stale, or resyncing after a restart); a new incident whose guard verdict rests on
        one of them waits for it (bounded), like a re-apply does."""
        ctx = self.ctx
        out = []
        try:
            with fenced(ctx.fence.token()):  # every write conditional on this leader's token (state.FENCE)
                async with ctx.lock:
                    now = ctx.clock()
                    for f in findings:
                        if self._waits_for_fresh(f, now, unsure):
                            continue
                        outcome = await self._incident(f, now)
                        if outcome is not None:
                            out.append(outcome)
        except FencedError as e:
            ctx.fence.fenced_out(str(e))
        for o in out:
            await self.paper.send_if(o.ticket)
        return out

    def _waits_for_fresh(self, f: Finding, now: int, unsure: Collection[str]) -> bool:
        """A new incident that could disable a port is not judged on what its switch or its neighbours streamed
        before they went quiet: it is left unrecorded (the detector reports it again next tick) until they have
        said something fresh, or FRESH_WAIT_S has passed (then judged, and the log says on what)."""
        ctx = self.ctx
        target = target_port(f, ctx.fabric, ctx.managed) if f.kind in LINK_KINDS else None
        if target is None:
            return False
        unknown = self.holds.unknown_for(target, unsure)
        if not unknown:
            self._fresh.pop(target, None)
            return False
        if self.state.findings.has(f, fault_key(f, ctx.fabric)):
            return False  # a known incident is only refreshed: nothing is judged
        first = self._fresh.setdefault(target, now)
        if now - first < FRESH_WAIT_S * NS:
            if first == now:
                log.info("%s on %s waits for fresh telemetry from %s", f.kind, target, ", ".join(unknown))
            return True
        log.warning("%s on %s judged without fresh telemetry from %s after %g s", f.kind, target,
                    ", ".join(unknown), FRESH_WAIT_S)  # fmt: skip
        return False

    async def _incident(self, f: Finding, now: int) -> Outcome | None:
        """Record the finding; if it is a new incident, decide (decide.py) and write the decision, its action and
        its ticket in one transaction, then start the switch work (on_findings hands the ticket to the backend
        once the batch is decided). A crash
        before the commit leaves nothing (the detector reports the finding again); after it, the action is
        `running` in the state and `reconcile()` completes it, and the ticket backend takes what it has not."""
        ctx = self.ctx
        fault = fault_key(f, ctx.fabric)
        target = target_port(f, ctx.fabric, ctx.managed) if f.kind in LINK_KINDS else None
        with self.state.transaction():
            fid, new = self.state.findings.record(f, fault, now)
            if not new:
                return None
            if self._under_maintenance(f):  # planned work, not a fault: recorded, no ticket, no action
                self.state.audit.record(now, f"finding {fid} during maintenance", f.summary, finding_id=fid)
                return Outcome(None, None, None)
            disabled = self.state.holds.all()  # read once for the port's facts and the guard
            facts = self._facts(target, now, disabled)
            d = decide(f, fid, facts, fabric=ctx.fabric, limits=ctx.limits, settings=ctx.settings,
                       known=self.holds.known(disabled))  # fmt: skip
            if d.outcome == "ignore":
                return Outcome(None, None, None)
            action = facts.pending if d.outcome == "pending" else self._record(d, fid, target, now)
            if d.escalate and target is not None:
                ticket = self._escalate(target.device, d.escalate, f, fid, d.note, now)
            else:
                evidence = self._evidence(f)  # as the fault left the ports, before our action changes them
                ticket = self._ticket_for(f, fid, fault, target, d, action, evidence, now)
            if action is not None and d.action is not None:
                self.state.actions.link_ticket(action.id, ticket.id)
                action = self.state.actions.get(action.id) or action
        if action is not None and d.action is not None and action.status == "running":
            # The switch first, the paperwork outside after: wait until the action has handed its first step to a
            # thread or process (the drain hook, or connect-and-commit in the driver thread), or is queued behind
            # another action on the switch. (A pending action is already running or waiting: not started twice.)
            await self.actions.spawn(action).wait()
        return Outcome(ticket, action, d.verdict)  # on_findings hands the ticket to the backend

    def _under_maintenance(self, f: Finding) -> bool:
        """A finding on drained ports only (the drained switch, its links): the work the drain is for, not a fault
        to ticket twice. A finding that also names ports outside the drain is judged as any other."""
        drained = self.holds.drained_ports()
        if not drained:
            return False
        names = [p for p in f.ports if ":" in p] or ([f"{f.device}:{f.port}"] if f.port else [])
        if names:
            return all(Endpoint(*p.split(":", 1)) in drained for p in names)
        return any(d.kind == "switch" and d.target == f.device for d in self.state.drains.all(ACTIVE))

    def _facts(self, target: Endpoint | None, now: int, disabled: list[DisabledPort]) -> PortFacts:
        if target is None:
            return PortFacts(None)
        held = any(p["device"] == target.device and p["port"] == target.port for p in disabled)
        return PortFacts(
            target,
            held=held,
            up_again=held and target in self.holds.up_again(disabled),
            pending=self.state.actions.open_on(target.device, target.port),
            faulty_on_switch=tuple(self._faulty_ports(target.device, now, disabled)),
        )

    def _record(self, d: Decision, fid: int, target: Endpoint | None, now: int) -> Action | None:
        """The decision's new action, audited (None when it decided none)."""
        if d.action is None or target is None:
            return None
        n = d.action
        a = self.state.actions.add("disable", target.device, target.port, n.mode, n.status, n.reason, now,
                             finding_id=fid, key=n.key)  # fmt: skip
        self.state.audit.record(now, n.audit_what, n.audit_why, mode=n.mode, finding_id=fid, action_id=a.id)
        return a

    def _faulty_ports(self, device: str, now: int, disabled: list[DisabledPort]) -> list[str]:
        """Ports of `device` fabricd wanted down in the last hour (acted, proposed or refused), plus those it holds
        down. Re-enables after a repair are not faults."""
        ports = {p["port"] for p in disabled if p["device"] == device}
        since = now - 3600 * NS
        ports |= {a.port for a in self.state.actions.on(device, since, op="disable")}
        return sorted(ports)

    # --- tickets ---------------------------------------------------------------------------------------------
    def _ticket_for(
        self,
        f: Finding,
        fid: int,
        fault: str,
        target: Endpoint | None,
        d: Decision,
        action: Action | None,
        evidence: JsonDict,
        now: int,
    ) -> Ticket:
        mode = self.ctx.settings.mode
        note = d.note.replace("{action_id}", str(action.id) if action is not None else "?")
        t = self.state.tickets.open_for(fault)
        reopened = False
        if t is None and target is not None:
            tid = self.state.holds.probation(target.device, target.port, now)
            if tid:
                t = self.state.tickets.get(tid)
                reopened = t is not None
        if t is None:
            title, body = new_ticket(f, fid, fault, note, action, evidence)
            t = self.state.tickets.create(fault, f.kind, f.device, f.port, title, body, now)
            self.state.audit.record(now, f"opened ticket {t.id}", f.summary, mode=mode, finding_id=fid, ticket_id=t.id)
            return t
        body = recurrence(t, f, fid, note, action, evidence, reopened)
        t = self.state.tickets.update(t.id, now, body=body, recurrence=True, reopen=reopened)
        what = "reopened" if reopened else "updated"
        self.state.audit.record(now, f"{what} ticket {t.id}", f.summary, mode=mode, finding_id=fid, ticket_id=t.id)
        return t

    def _escalate(self, device: str, ports: Sequence[str], f: Finding, fid: int, note: str, now: int) -> Ticket:
        held = [ep.port for ep in self.holds.held() if ep.device == device]
        title, body = escalation(device, ports, held, f, note)
        fault = f"escalation:{device}"
        t = self.state.tickets.open_for(fault)
        if t is None:
            t = self.state.tickets.create(fault, "escalation", device, None, title, body, now, escalation=True)
            self.state.audit.record(
                now,
                f"escalated {device}",
                str(body["likely_common_cause"]),
                mode=self.ctx.settings.mode,
                finding_id=fid,
                ticket_id=t.id,
            )
        else:
            t = self.state.tickets.update(t.id, now, body=body, title=title, recurrence=True)
        return t

    def _evidence(self, f: Finding) -> JsonDict:
        view = self.ctx.view
        out: JsonDict = {"detector": f.evidence}
        if f.port is not None:
            out["this_end"] = {"port": f"{f.device}:{f.port}", **view.evidence(f.device, f.port)}
            peer = self.ctx.fabric.peer(f.device, f.port)
            if peer is not None:
                out["other_end"] = {"port": str(peer), **view.evidence(peer.device, peer.port)}
        return out
