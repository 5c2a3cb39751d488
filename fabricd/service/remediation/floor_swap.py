"""Choose the set, not the order of arrival (issue 49 item 3): CorrOpt's optimizer (`capacity_floor.choose`) over
fabricd's holds and the faulty newcomers the guard refused (their finding still active), run every pass like CorrOpt
re-runs it when capacity changes (shared/reference/congestion-tuning.md §6.1, §7 rule 10).

When two faulty links compete for one switch's floor (room to disable one), the worse one should be down: a held port
whose fault costs less than a refused newcomer's by `capacity_floor.SWAP_MARGIN` is given back (through the repair's
enable, its ticket open with the reason), and the newcomer is taken down on a later pass, once the guard allows it
(the returned port is up), under its own ticket. A refused newcomer whose switch has room again (capacity came back)
is taken down the same way. Every step is a keyed action (exactly once), audited, done in `auto`; `approve` waits
for `fabricd approve` on the take; `observe` says what it would do.
"""

from __future__ import annotations

from fabricd.service.capacity_floor import Floor, Held, choose
from topology.model import Endpoint

from ..faults import LINK_KINDS
from ..state import Action, ActionStatus, DisabledPort, StoredFinding
from .context import Context
from .floor_facts import CHANGED, harm_of
from .holds import Holds
from .paperwork import Paperwork

SWAP = "swap:"  # key prefix of the enables that give a held port back for a worse newcomer
TAKE = "take:"  # key prefix of the disables of a refused newcomer the floor now has room for
GIVEN = ("return:", SWAP)  # a port the floor gave back (floor.RETURN, or a swap)


class Swaps:
    def __init__(self, ctx: Context, holds: Holds, paper: Paperwork) -> None:
        self.ctx, self.holds, self.paper = ctx, holds, paper
        self.state = ctx.state
        self._observed: set[str] = set()

    def newcomers(self, active: list[StoredFinding]) -> dict[Endpoint, tuple[Action, StoredFinding]]:
        """Ports whose disable the guard refused, their fault still active, nothing done to them since (read through
        the active findings: a handful, not the history of refusals)."""
        links = {int(f["id"]): f for f in active if f.get("kind") in LINK_KINDS}
        out: dict[Endpoint, tuple[Action, StoredFinding]] = {}
        for a in self.state.actions.of_findings(sorted(links), "refused", "disable"):
            latest = self.state.actions.latest_on(a.device, a.port, *CHANGED)
            if (latest is not None and latest.id > a.id) or self.state.holds.is_held(a.device, a.port):
                continue
            if latest is not None and (latest.key or "").startswith(GIVEN):
                continue  # given back by the floor: taken again only as floor.py's re-take says (min_up_s)
            out[Endpoint(a.device, a.port)] = (a, links[int(a.finding_id or 0)])  # the newest refusal of a port wins
        return out

    def decide(
        self, now: int, floor: Floor, held: list[Held], rows: dict[Endpoint, DisabledPort], active: list[StoredFinding]
    ) -> list[Action]:
        """The swaps and takes of this pass: actions to spawn (running), others recorded (approve, observe)."""
        fresh = self.newcomers(active)
        if not fresh:
            return []
        settings = self.ctx.settings
        cands = [*held, *(Held(ep, harm_of(f, now, settings)[0]) for ep, (_, f) in fresh.items())]
        choice = choose(self.ctx.fabric, floor, cands, frozenset(h.port for h in held))
        harm = {c.port: c.harm for c in cands}
        out: list[Action] = []
        if choice.give:  # the takes follow once these are up (a later pass: the guard counts them then)
            worse = ", ".join(f"{p} ({harm[p]:.1e})" for p in choice.take)
            for p in choice.give:
                why = (f"returned to make room for {worse}, whose fault costs more than this one's ({harm[p]:.1e}; "
                       "CorrOpt: the worse link goes down)")  # fmt: skip
                a = self._act("enable", p, f"{SWAP}{p}:after{rows[p]['action_id']}", why, now, rows[p]["ticket_id"])
                if a is not None:
                    out.append(a)
            return out
        for p in choice.take:
            if not self.holds.guard(p).allowed:
                continue
            refused, found = fresh[p]
            why = f"the floor has room for it now ({found.get('summary')})"
            a = self._act("disable", p, f"{TAKE}{p}:finding{found.get('id')}", why, now, refused.ticket_id,
                          finding_id=refused.finding_id)  # fmt: skip
            if a is not None:
                out.append(a)
        return out

    def _act(
        self, op: str, ep: Endpoint, key: str, why: str, now: int, ticket_id: int | None, finding_id: int | None = None
    ) -> Action | None:
        state, mode = self.state, self.ctx.settings.mode
        what = f"{'return' if op == 'enable' else 'disable'} {ep}"
        if mode == "observe":
            if key not in self._observed:
                self._observed.add(key)
                state.audit.record(now, f"would {what}", f"observe mode: {why}", mode=mode, ticket_id=ticket_id)
            return None
        status: ActionStatus = "awaiting_approval" if op == "disable" and mode == "approve" else "running"
        with state.transaction():
            if state.actions.with_key(key) is not None or state.actions.open_on(ep.device, ep.port):
                return None
            a = state.actions.add(op, ep.device, ep.port, mode, status, why, now, ticket_id=ticket_id,
                                  finding_id=finding_id, key=key)  # fmt: skip
            state.audit.record(now, f"{what}: {status}", why, mode=mode, action_id=a.id, ticket_id=ticket_id)
            self.paper.note(ticket_id, f"{ep}: {why}", now)
        return a
