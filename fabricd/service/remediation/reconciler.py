"""Remediation's records against the fabric, on taking over and every pass (the decision is reconcile.py's, pure):
finish the actions a fabricd before this one left running, read the switches' marks (marks.py), then carry out the
steps: re-apply (through port_actions.py), propose, release, adopt, unmark."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Collection
from dataclasses import replace
from typing import TypedDict

from drivers.marks import Mark
from fabricd.detectors.finding import Finding
from topology.jsontypes import JsonDict
from topology.model import Endpoint
from topology.units import NS

from ..faults import fault_key
from ..reconcile import Hold, Observed, Reconcile, Refusal, Step, reconcile, refused_reapply
from ..state import PORT_OPS, ActionStatus, fenced
from ..state.db import FencedError
from .context import Context, FencedOff
from .holds import FRESH_WAIT_S, Holds
from .marks import Marks
from .paperwork import Paperwork
from .port_actions import PortActions

log = logging.getLogger("fabricd.remediation")
RESCAN_S = 5.0  # how often the marks of switches a scan skipped or could not read are tried again
# How often a leader ends older leaders' transactions on the switches where an older leader had an action under way
# when this one took over (one request per switch): a paused old leader's request already past its fence check goes
# out when it wakes, whenever that is; what it left there stays at most this long plus a pass when no commit of this
# leader meets it first (switch.py, `_commit`). An action is recorded running before its switch is touched, so those
# switches are the ones a late request of an old leader can reach (a drain's shift or a mark's rewrite elsewhere is
# met by this leader's next commit there).
STALE_SWEEP_S = 5.0
# An action left `running` that no task of this leader carries out this long is resumed by its pass: one this very
# leader left while it could not act for a moment (its lease renewal late under load: "left to the leader") and
# then led on under the same token, with no takeover to resume it (a chaos run, seed 4940: a hold's re-apply and a
# flap's disable stranded 100 s and 136 s, until the bus restart made a takeover). Longer than an action takes from
# its record to its task (a pass, the lock).
STRANDED_S = 5.0
SWEEP_PARALLEL = 2  # switches swept at once: the action threads stay free for actions (a flap's disable waits for none)


class ToReapply(TypedDict):
    """A hold whose port is up again, whose re-apply the guard refused: retried every pass."""

    port: str
    ticket_id: int | None
    action_id: int
    rule: str
    reason: str


class Reconciler:
    def __init__(self, ctx: Context, holds: Holds, actions: PortActions, marks: Marks, paper: Paperwork) -> None:
        self.ctx, self.holds, self.actions, self.marks, self.paper = ctx, holds, actions, marks, paper
        self.state = ctx.state
        self._waiting: dict[Endpoint, int] = {}  # holds whose re-apply waits for fresh telemetry, since when
        self._swept: tuple[int | None, int] = (None, 0)  # (token, when) of the last sweep of older transactions
        self._suspect: set[str] = set()  # switches where an older leader had an action under way at the takeover

    async def reconcile(self, stale: Collection[str] = ()) -> list[str]:
        """On taking over (a start, a new leader): finish what was half done, read the switches' marks, then
        reconcile the records with what the fabric shows, as every pass does after."""
        ctx = self.ctx
        notes = []
        token = ctx.fence.token()
        self._suspect = {a.device for a in self.state.actions.with_status("running") if token is not None
                         and a.token != token}  # fmt: skip
        for a in self.state.actions.with_status("running"):
            if a.op not in PORT_OPS:  # not a port action: its own loop finishes it (a tuning change: service/tuning/)
                continue
            # A leader's token differs from the one the action was begun under: taken over from the instance that
            # led before (paused, cut off or dead), not a restart of this one.
            how = ("taken over from the previous leader" + (f" (token {a.token})" if a.token is not None else "")
                   if token is not None and a.token != token else "interrupted by a restart")  # fmt: skip
            notes.append(f"completing {a.op} of {a.device}:{a.port} (action {a.id}) {how}")
            self.state.audit.record(ctx.clock(), f"resume action {a.id}", how, mode=a.mode,
                                    action_id=a.id)  # fmt: skip
            self.actions.spawn(a, resumed=True)
        await ctx.tasks.idle()
        await self.marks.scan(stale)
        # The usual grace: a hold the resumed actions just made is younger than telemetry's word on it.
        notes += await self.reconcile_pass(ctx.clock(), stale)
        await ctx.tasks.idle()
        for n in notes:
            log.warning("%s", n)
        return notes

    async def reconcile_pass(self, now: int, stale: Collection[str] = ()) -> list[str]:
        """One pass of reconcile.py: decide on fabricd's records and what the fabric shows, then carry it out
        (audited, noted on tickets). Returns a line per step taken. Switches in `stale` are not judged."""
        ctx, marks = self.ctx, self.marks
        again = marks.unscanned.difference(stale)
        # not every pass: a switch whose eAPI or SSH hangs costs a connect timeout
        if again and marks.marks is not None and now - marks.scanned_ts >= RESCAN_S * NS:
            await marks.scan(only=again)
        observed = Observed(ctx.view.admin_up(), marks.marks, frozenset(stale))
        self._sweep(now, stale)
        try:
            with fenced(ctx.fence.token()):
                resumed = self._resume_stranded(now)
                return resumed + await self._reconcile_pass(observed, now, ctx.settings.verify_timeout_s)
        except FencedError as e:
            ctx.fence.fenced_out(str(e))
            return []

    def _resume_stranded(self, now: int) -> list[str]:
        """Running actions no task of this leader carries out for `STRANDED_S`: resumed as a takeover resumes them
        (the switch's transaction of the action is looked for first)."""
        if self.ctx.fence.why() is not None:
            return []
        out = []
        for a in self.state.actions.with_status("running"):
            if a.op not in PORT_OPS or a.id in self.actions.live or now - a.updated_ts < STRANDED_S * NS:
                continue  # a tuning change runs for its verify window, owned by the tuning loop (service/tuning/)
            why = "left running while this instance could not act, no task carrying it out"
            out.append(f"completing {a.op} of {a.device}:{a.port} (action {a.id}): {why}")
            self.state.audit.record(now, f"resume action {a.id}", why, mode=a.mode, action_id=a.id)
            self.actions.spawn(a, resumed=True)
        return out

    def _sweep(self, now: int, stale: Collection[str]) -> None:
        """A leader ends every older leader's transaction on the switches an older leader had an action under way
        on (`_suspect`), at its first pass and every `STALE_SWEEP_S` after (in the background: a pass does not wait
        on switches). Not in observe mode (fabricd touches no switch), not alone (no token: no older leader)."""
        ctx = self.ctx
        token = ctx.fence.token()
        last_token, last = self._swept
        if token is None or ctx.settings.mode == "observe" or ctx.fence.why() is not None:
            return
        if last_token == token and now - last < STALE_SWEEP_S * NS:
            return
        self._swept = (token, now)
        devices = [d.name for d in ctx.fabric.switches() if d.name in self._suspect and d.name not in stale]
        if not devices:
            return
        ctx.tasks.start(self._end_stale(devices, token))

    async def _end_stale(self, devices: list[str], token: int) -> None:
        switch = self.actions.switch

        slots = asyncio.Semaphore(SWEEP_PARALLEL)

        async def one(device: str) -> None:
            lock = switch.device_lock(device)
            async with slots:
                if lock.locked():
                    return  # a transaction of ours is under way there: its commit ends them first
                async with lock:
                    ended = await switch.blocking(switch.end_stale, device, token)
            if ended:
                text = f"ended {', '.join(ended)}: a paused older leader's late request, which nobody owns"
                with fenced(token):
                    self.state.audit.record(self.ctx.clock(), f"older leader's transactions on {device}", text)

        results = await asyncio.gather(*(one(d) for d in devices), return_exceptions=True)
        for device, r in zip(devices, results, strict=True):
            if isinstance(r, FencedError | FencedOff):
                return  # no longer the leader: the next one sweeps
            if isinstance(r, BaseException):
                log.warning("could not end older leaders' transactions on %s: %s", device, r)

    async def _reconcile_pass(self, observed: Observed, now: int, grace: float) -> list[str]:
        async with self.ctx.lock:
            holds = [Hold.of(p) for p in self.state.holds.all()]
            in_flight = {
                Endpoint(a.device, a.port) for a in self.state.actions.with_status("running", "awaiting_approval")
            }
            # A port whose action ended moments ago is not judged yet either: telemetry may still show it as it was
            # (an enable rolled back reads up for a moment; chaos seed 6174 re-applied it, was refused by the rate,
            # released the hold and then adopted the port, an 11th disable in the hour).
            grace_ns = int(grace * NS)
            in_flight |= {
                Endpoint(a.device, a.port) for a in self.state.actions.all(limit=200) if now - a.updated_ts < grace_ns
            }
            decisions = reconcile(
                holds, observed, open_tickets=self.state.tickets.open_ids(),
                in_flight=in_flight, mode=self.ctx.settings.mode, now=now, grace_ns=int(grace * NS),
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

    async def _carry_out_step(self, d: Reconcile, now: int, unsure: Collection[str] = ()) -> str:
        """Carry out one step; returns the line to log ('' when nothing changed: a refusal repeated, a wait)."""
        mode = self.ctx.settings.mode
        ep = d.endpoint
        if d.step is Step.ADOPT:
            assert d.mark is not None
            return await self._adopt(ep, d.mark, d.why, now)
        if d.step is Step.UNMARK:
            assert d.mark is not None
            self.state.audit.record(now, f"stale mark on {ep}", d.why, mode=mode, action_id=d.mark.action_id)
            return await self.marks.unmark(ep, d.mark.action_id, d.mark.ticket_id)
        h = d.hold
        assert h is not None
        if d.step is Step.RELEASE:
            await self.release(h, d.why, now)
            return d.why
        unknown = self.holds.unknown_for(ep, unsure)
        if unknown:
            # Not judged on what those switches said before they went quiet: wait (bounded) for their fresh word.
            first = self._waiting.setdefault(ep, now)
            if now - first < FRESH_WAIT_S * NS:
                waits = f"{ep}: re-applying its hold waits for fresh telemetry from {', '.join(unknown)}"
                return waits if first == now else ""
        v = self.holds.guard(ep)
        if unknown:
            v = replace(v, reason=f"{v.reason} (judged without fresh telemetry from {', '.join(unknown)} "
                                  f"after {FRESH_WAIT_S:g} s)")  # fmt: skip
        self._waiting.pop(ep, None)
        if not v.allowed:
            return self._refused_reapply(h, Refusal(v.rule, v.reason), now)
        with self.state.transaction():
            self.state.holds.drop(ep.device, ep.port)  # the port is up: the action below holds it anew
            status: ActionStatus = "running" if d.step is Step.REAPPLY else "awaiting_approval"
            a = self.state.actions.add("disable", ep.device, ep.port, mode, status, d.why, now,
                                       ticket_id=h.ticket_id, key=f"reapply:{ep}:after{h.action_id}")  # fmt: skip
            self.state.audit.record(
                now,
                f"re-apply {ep}" if status == "running" else f"proposed re-applying {ep}",
                d.why,
                mode=mode,
                action_id=a.id,
                ticket_id=h.ticket_id,
            )
        t = self.paper.note_action(h.ticket_id, a, d.why)
        if status == "running" and a.status == "running":
            await self.actions.spawn(a).wait()
        await self.paper.send_if(t)
        return d.why

    def _refused_reapply(self, h: Hold, refusal: Refusal, now: int) -> str:
        """The guard refused the re-apply: the hold stays, to re-apply; a change of reason is audited and noted."""
        ep = h.endpoint
        before = next((Refusal(r["rule"], r["reason"]) for r in self.state.holds.refused_reapplies()
                       if (r["device"], r["port"]) == (ep.device, ep.port)), None)  # fmt: skip
        why, news = refused_reapply(h, refusal, before)
        if not news:
            return ""
        with (
            self.state.transaction()
        ):  # in the shared state: every instance lists it, a new leader does not say it again
            self.state.holds.refuse_reapply(ep.device, ep.port, h.action_id, refusal.rule, refusal.reason, now)
            self.state.audit.record(now, f"re-apply of {ep} refused", why, mode=self.ctx.settings.mode,
                                    action_id=h.action_id, ticket_id=h.ticket_id)  # fmt: skip
        self.paper.note(h.ticket_id, why, now)
        return why

    def to_reapply(self) -> list[ToReapply]:
        """Holds whose port is up again and whose re-apply the guard refused (`fabricd status`, the page,
        /metrics): retried every pass. From the shared state, so a standby answers as the leader would (chaos
        seed 3135: the checker, reading a standby, saw a held port up for 47 s that the leader had declared)."""
        holds = {(p["device"], p["port"]): p for p in self.state.holds.all()}
        out: list[ToReapply] = []
        for r in self.state.holds.refused_reapplies():
            p = holds.get((r["device"], r["port"]))
            if p is not None and p["action_id"] == r["action_id"]:
                out.append({"port": f"{r['device']}:{r['port']}", "ticket_id": p["ticket_id"],
                            "action_id": p["action_id"], "rule": r["rule"], "reason": r["reason"]})  # fmt: skip
        return out

    async def release(self, h: Hold, why: str, now: int, actor: str = "fabricd") -> None:
        """Forget a hold on a port that is up (on probation, as after a repair); audited and noted on its ticket;
        its mark removed from the switch (`Marks.unmark`)."""
        ep, settings = h.endpoint, self.ctx.settings
        self._waiting.pop(ep, None)
        self.state.holds.release(ep.device, ep.port, now + int(settings.probation_s * NS), h.ticket_id)
        self.state.audit.record(now, f"released hold on {ep}", why, mode=settings.mode, actor=actor,
                                action_id=h.action_id, ticket_id=h.ticket_id)  # fmt: skip
        self.paper.note(h.ticket_id, why, now)
        await self.marks.unmark(ep, h.action_id, h.ticket_id)

    async def _adopt(self, ep: Endpoint, mark: Mark, why: str, now: int) -> str:
        """A port down with fabricd's mark and no record: record, finding and ticket again, as if fabricd had just
        taken it down (nothing is sent to the switch; the re-enable after the repair removes the mark)."""
        fabric, mode = self.ctx.fabric, self.ctx.settings.mode
        peer = fabric.peer(ep.device, ep.port)
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
        fault = fault_key(f, fabric)
        with self.state.transaction():
            fid, _ = self.state.findings.record(f, fault, now)
            t = self.state.tickets.open_for(fault)
            if t is None:
                title = f"{mark.kind} on {ep}: held down by fabricd (adopted from the switch)"
                body: JsonDict = {"summary": summary, "why": why, "evidence": {"detector": evidence},
                                  "actions": [], "status_note": why}  # fmt: skip
                t = self.state.tickets.create(fault, mark.kind, ep.device, ep.port, title, body, now)
                self.state.audit.record(now, f"opened ticket {t.id}", why, mode=mode, finding_id=fid, ticket_id=t.id)
            a = self.state.actions.add("disable", ep.device, ep.port, mode, "done", why, now, finding_id=fid,
                                       ticket_id=t.id)  # fmt: skip
            self.state.holds.hold(ep.device, ep.port, a.id, t.id, now)
            self.state.audit.record(
                now, f"adopted {ep}", why, mode=mode, finding_id=fid, action_id=a.id, ticket_id=t.id
            )
        t = self.paper.note_action(t.id, a, why) or t
        await self.paper.send(t)
        remarked = await self.marks.remark(a, mark)
        return f"{why}; {remarked}" if remarked else why
