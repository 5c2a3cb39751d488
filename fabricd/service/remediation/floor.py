"""fabricd's own holds never keep a switch under its capacity floor (issue 49; CorrOpt's re-decision over the held
set, shared/reference/congestion-tuning.md §6.1 and §7 rule 11).

The guard is asked only when fabricd acts. Every reconcile pass the leader asks again: a switch under
`safety.min_uplink_fraction` (ports down, BGP-down uplinks, drains and holds counted as the guard counts them) with a
fabricd hold among its missing uplinks gets held ports back, the fewest and least harmful first (`capacity_floor.
restore`, pure): through the same enable as a repair (revert timer, verify, LLDP, marks, probation), its ticket left
open with the reason. A returned port that is still faulty once the floor allows again is taken down again through
the guard (no sooner than `min_up_s` after its return: no flapping between the two); one that stays clean for its
probation stays up and its ticket says so. When nothing returnable restores a floor, it is said once (audit, the
candidates' tickets, health). Each return and re-take is an action with its own idempotency key: exactly once across
restarts and failovers. In observe mode it says what it would return and changes nothing.
"""

from __future__ import annotations

import logging
from collections.abc import Collection
from dataclasses import dataclass

from fabricd.service.capacity_floor import Floor, Held, Lost, Stuck, restore
from topology.model import Endpoint
from topology.units import NS

from ..cabling_check import miscabled_on
from ..faults import LINK_KINDS
from ..state import Action, ActionStatus, DisabledPort, StoredFinding, Ticket, fenced
from .context import Context
from .floor_facts import CHANGED, harm_of
from .floor_swap import Swaps
from .holds import Holds
from .paperwork import Paperwork
from .port_actions import PortActions

log = logging.getLogger("fabricd.floor")
RETURN = "return:"  # key prefix of the enables that give a hold back to keep a floor
RETAKE = "retake:"  # key prefix of the disables that take a returned port down again
# A switch's shortfall is said once until it has been at its floor this long (fabricd's choice, not a published
# figure: longer than a flap train's phases and a BGP flap's period, so one incident is one escalation).
STUCK_QUIET_S = 60.0


@dataclass(frozen=True)
class Returned:
    port: str
    action_id: int
    ticket_id: int | None
    why: str


class FloorKeeper:
    def __init__(self, ctx: Context, holds: Holds, actions: PortActions, paper: Paperwork, swaps: Swaps) -> None:
        self.ctx, self.holds, self.actions, self.paper, self.swaps = ctx, holds, actions, paper, swaps
        self.state = ctx.state
        self.stuck: dict[str, str] = {}  # switch -> why it stays under its floor now
        self._spell: dict[str, int] = {}  # switch -> the last pass it was under its floor, while its spell lasts
        self._observed: set[str] = set()  # observe mode: returns already said

    # --- the picture ---------------------------------------------------------------------------------------------
    def picture(self, now: int, active: list[StoredFinding]) -> tuple[Floor, list[Held], dict[Endpoint, DisabledPort]]:
        """The capacity lost for other reasons and fabricd's holds as candidates (drains are an operator's: lost)."""
        ctx = self.ctx
        rows = self.state.holds.all()
        drained = self.holds.drained_ports()
        up_again = self.holds.stale_holds(rows)
        mine = {Endpoint(p["device"], p["port"]): p for p in rows}
        mine = {ep: p for ep, p in mine.items() if ep not in drained and ep not in up_again}
        under_way = self.state.actions.with_status("running", "awaiting_approval")
        # a port being enabled (a return, a swap's, a repair's) is coming back: up for the floor, no candidate (the
        # twin: two holds, room for one back, both returned: the second pass counted the first, still down, lost)
        coming = {Endpoint(a.device, a.port) for a in under_way if a.op == "enable"}
        flight = {Endpoint(a.device, a.port) for a in under_way} - coming
        mine = {ep: p for ep, p in mine.items() if ep not in coming}
        ours = set(mine) | coming | {ep for ep in flight if ep not in drained}
        ends = ours | {peer for ep in ours if (peer := ctx.fabric.peer(ep.device, ep.port)) is not None}
        # a link down takes its BGP session with it: the link is named, not the session
        lost: dict[Endpoint, Lost] = {ep: Lost.BGP_DOWN for ep in ctx.view.routed_down() if ep not in ends}
        lost.update({ep: Lost.LINK_DOWN for ep in ctx.view.oper_down() if ep not in ends})
        lost.update({ep: Lost.DRAINED for ep in drained})
        miscabled = [f for f in active if f.get("kind") == "miscabled"]
        held = [self._candidate(ep, p, now, ep in flight, miscabled) for ep, p in sorted(mine.items(), key=str)]
        return Floor(lost, ctx.limits.min_uplink_fraction), held, mine

    def _candidate(
        self, ep: Endpoint, row: DisabledPort, now: int, in_flight: bool, miscabled: list[StoredFinding]
    ) -> Held:
        s = self.ctx.settings
        if in_flight:
            return Held(ep, 0.0, pinned="an action on it is under way")
        if (f := miscabled_on(self.ctx.fabric, ep, miscabled)) is not None:
            return Held(ep, 0.0, pinned=f"miscabled (finding {f.get('id')})")
        last = self.state.actions.latest_on(ep.device, ep.port)
        if last is not None and last.op == "enable" and "came up facing" in last.detail:
            return Held(ep, 0.0, pinned="its last enable found the wrong cable")
        action = self.state.actions.get(row["action_id"])
        found = self.state.findings.get(action.finding_id) if action and action.finding_id else None
        harm, faulty = harm_of(found, now, s)
        return Held(ep, harm, faulty=faulty)

    # --- the pass ------------------------------------------------------------------------------------------------
    async def keep(self, now: int, unsure: Collection[str] = ()) -> list[str]:
        """Re-decide the held set against every floor; returns what it did, one line each (the pass logs them).
        A return touching a switch with no fresh word (`unsure`: stale, resyncing) waits: what it streamed before
        (ports down during a resync) is not a shortfall."""
        ctx = self.ctx
        if not ctx.settings.keep_floor or ctx.fence.why() is not None:
            return []
        done: list[str] = []
        spawn: list[Action] = []
        tickets: list[Ticket] = []
        with fenced(ctx.fence.token()):
            async with ctx.lock:
                active = self.state.findings.all("active", limit=100_000)  # read once a pass
                floor, held, rows = self.picture(now, active)
                decision = restore(ctx.fabric, floor, held)
                for r in decision.returns:
                    peer = ctx.fabric.peer(r.port.device, r.port.port)
                    if r.port.device in unsure or (peer is not None and peer.device in unsure):
                        continue
                    a = self._give_back(rows[r.port], r.why, now)
                    if a is not None:
                        spawn.append(a)
                        done.append(f"{r.port}: {r.why}")
                done += self._say_stuck(decision.stuck, now)
                if not decision.returns:  # one change at a time: swaps and takes once the floors hold
                    for a in self.swaps.decide(now, floor, held, rows, active):
                        spawn.append(a)
                        done.append(f"{a.device}:{a.port}: {a.op} ({a.status}): {a.reason}")
                for a, t in self._retake(now, active):
                    spawn.append(a)
                    done.append(f"{a.device}:{a.port}: {a.reason}")
                    if t is not None:
                        tickets.append(t)
        for a in spawn:
            if a.status == "running":
                self.actions.spawn(a)
        for t in tickets:
            await self.paper.send(t)
        return done

    def _give_back(self, row: DisabledPort, why: str, now: int) -> Action | None:
        ctx, state = self.ctx, self.state
        ep = f"{row['device']}:{row['port']}"
        key = f"{RETURN}{ep}:after{row['action_id']}"
        mode = ctx.settings.mode
        if mode == "observe":
            if key not in self._observed:
                self._observed.add(key)
                state.audit.record(now, f"would return {ep}", f"observe mode: {why}", mode=mode,
                                   ticket_id=row["ticket_id"])  # fmt: skip
            return None
        with state.transaction():
            if state.actions.with_key(key) is not None or state.actions.open_on(row["device"], row["port"]) is not None:
                return None  # returned before (a restart, another leader), or something is under way on it
            a = state.actions.add("enable", row["device"], row["port"], mode, "running", why, now,
                                  ticket_id=row["ticket_id"], key=key)  # fmt: skip
            state.audit.record(now, f"returned {ep}", why, mode=mode, action_id=a.id, ticket_id=row["ticket_id"])
            self.paper.note(row["ticket_id"], f"{ep} {why}; the ticket stays open: the repair is still to do", now)
        return a

    def _say_stuck(self, stuck: tuple[Stuck, ...], now: int) -> list[str]:
        """Each switch's shortfall said once a spell (audit, its holds' tickets); `stuck` is what holds now (health).
        A spell ends once the switch has been at its floor STUCK_QUIET_S: a flapping uplink moves a floor across its
        line every phase (seed 1 of the twin-restart replays: the same line audited every second)."""
        out = []
        for device, last in list(self._spell.items()):
            if now - last > STUCK_QUIET_S * NS:
                del self._spell[device]
        for s in stuck:
            said = s.device in self._spell
            self._spell[s.device] = now
            self.stuck[s.device] = s.why
            if said:
                continue
            self.state.audit.record(now, f"{s.device} under its floor", s.why)
            for p in self.state.holds.all():
                if p["device"] == s.device or (
                    (peer := self.ctx.fabric.peer(p["device"], p["port"])) is not None and peer.device == s.device
                ):
                    self.paper.note(p["ticket_id"], s.why, now)
            out.append(s.why)
        for device in set(self.stuck) - {s.device for s in stuck}:
            del self.stuck[device]
        return out

    def _retake(self, now: int, active: list[StoredFinding]) -> list[tuple[Action, Ticket | None]]:
        """Returned ports still (or again) faulty, once the floor allows and they have been up `min_up_s`."""
        ctx, state = self.ctx, self.state
        out: list[tuple[Action, Ticket | None]] = []
        active = [f for f in active if f.get("kind") in LINK_KINDS]
        for r in self._recent_returns(now):
            ep = Endpoint(r.device, r.port)
            latest = state.actions.latest_on(r.device, r.port, *CHANGED)
            if latest is None or latest.id != r.id or state.holds.is_held(r.device, r.port):
                continue  # something happened to it since (a disable, a resolve's enable)
            fault = self._fault_on(ep, active, since=r.updated_ts)
            up_for = now - r.updated_ts
            if fault is None:
                self._clean(r, now)
                continue
            if up_for < ctx.settings.min_up_s * NS or not self.holds.guard(ep).allowed:
                continue
            mode = ctx.settings.mode
            status: ActionStatus = (
                "running" if mode == "auto" else "awaiting_approval" if mode == "approve" else "observed"
            )
            why = f"returned to keep its switch's floor, still faulty ({fault.get('summary')}); the floor allows it now"
            with state.transaction():
                key = f"{RETAKE}{ep}:after{r.id}"
                if state.actions.with_key(key) is not None:
                    continue
                a = state.actions.add("disable", r.device, r.port, mode, status, why, now,
                                      finding_id=fault.get("id"), ticket_id=r.ticket_id, key=key)  # fmt: skip
                state.audit.record(now, f"disable {ep}: {status}", why, mode=mode, action_id=a.id,
                                   ticket_id=r.ticket_id)  # fmt: skip
                t = self.paper.note_action(r.ticket_id, a, why)
            out.append((a, t))
        return out

    def _fault_on(self, ep: Endpoint, active: list[StoredFinding], since: int) -> StoredFinding | None:
        """An active link fault on the port's link seen since it came back."""
        peer = self.ctx.fabric.peer(ep.device, ep.port)
        ends = {str(ep)} | ({str(peer)} if peer is not None else set())
        for f in active:
            at = f"{f.get('device')}:{f.get('port')}"
            if not (at in ends or ends & set(f.get("ports") or [])) or int(f.get("last_seen_ts") or 0) <= since:
                continue
            # a flap finding goes on being reported while its dampening decays: only a flap since counts
            evidence = f.get("evidence")
            flaps = evidence.get("timeline") if isinstance(evidence, dict) else None
            if (
                f.get("kind") == "link_flap"
                and isinstance(flaps, list)
                and not any(isinstance(t, int | float) and t > since for t in flaps)
            ):
                continue
            return f
        return None

    def _clean(self, r: Action, now: int) -> None:
        """A returned port clean for its probation stays up; its ticket says so, once."""
        if now - r.updated_ts < self.ctx.settings.probation_s * NS or not r.ticket_id:
            return
        t = self.state.tickets.get(r.ticket_id)
        if t is None or r.id in (t.body.get("returned_clean") or []):
            return
        why = f"{r.device}:{r.port} stayed clean for its probation after its return: it stays up"
        body = {**t.body, "returned_clean": [*(t.body.get("returned_clean") or []), r.id], "status_note": why}
        self.state.tickets.update(t.id, now, body=body)
        self.state.audit.record(now, f"{r.device}:{r.port} clean after its return", why, ticket_id=t.id)

    def _recent_returns(self, now: int) -> list[Action]:
        """The returns done within two probations: older ones are ports like any other (a re-flap is a new incident,
        their clean probation already noted), not read every pass as the history grows."""
        since = now - int(2 * self.ctx.settings.probation_s * NS)
        return self.state.actions.keyed(RETURN, "done", since_ts=since)

    def returned(self) -> list[Returned]:
        """Returned ports still up on their return (health, status, the page, /metrics)."""
        out = []
        for r in self._recent_returns(self.ctx.clock()):
            latest = self.state.actions.latest_on(r.device, r.port, *CHANGED)
            if latest is not None and latest.id == r.id:
                out.append(Returned(f"{r.device}:{r.port}", r.id, r.ticket_id, r.reason))
        return out
