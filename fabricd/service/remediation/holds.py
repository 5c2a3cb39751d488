"""What fabricd holds down, what is drained, and what the guard (guard.py) knows when it judges a port: read from
the state and telemetry, for incidents, reconcile, people's requests and drains alike. Reads only."""

from __future__ import annotations

from collections.abc import Collection

from topology.model import Endpoint
from topology.units import NS

from ..guard import Budget, GuardInput, Verdict, budgets, check_disable
from ..maintenance.plan import ACTIVE
from ..reconcile import Hold, stale_holds
from ..state import DisabledPort
from .context import Context

# How long a new incident's verdict, or a held port's re-apply, waits for fresh telemetry from the switches the guard
# rests on (after a restart or a resync); then it is judged on what is known, and says what was not.
FRESH_WAIT_S = 30.0


class Holds:
    def __init__(self, ctx: Context) -> None:
        self.ctx = ctx
        self.state = ctx.state

    def known(self, disabled: list[DisabledPort] | None = None) -> GuardInput:
        ctx = self.ctx
        hour_ago = ctx.clock() - 3600 * NS
        drained = self.drained_ports()  # counted as drained, not against fabricd's own budgets
        held = frozenset(self.held(disabled)) - drained
        return GuardInput(held, ctx.view.oper_down(), self.state.actions.count_since(hour_ago), ctx.view.routed_down(),
                          drained)  # fmt: skip

    def guard(self, target: Endpoint) -> Verdict:
        return check_disable(self.ctx.fabric, self.ctx.limits, target, self.known())

    def budgets(self) -> list[Budget]:
        """What is used of each rate and budget limit now (the /metrics remediation gauges)."""
        return budgets(self.ctx.fabric, self.ctx.limits, self.known())

    def held(self, disabled: list[DisabledPort] | None = None) -> set[Endpoint]:
        """Ports fabricd holds down, or is taking down now (a disable in flight already counts against budgets)."""
        rows = self.state.holds.all() if disabled is None else disabled
        held = {Endpoint(p["device"], p["port"]) for p in rows} - self.stale_holds(rows)  # up again: nothing down
        held |= {Endpoint(a.device, a.port) for a in self.state.actions.with_status("running", op="disable")}
        return held

    def stale_holds(self, disabled: list[DisabledPort] | None = None) -> set[Endpoint]:
        """Holds whose port telemetry shows up again (the next pass re-applies or releases them), once telemetry
        had the time to show their shutdown."""
        ctx = self.ctx
        rows = self.state.holds.all() if disabled is None else disabled
        grace = int(ctx.settings.verify_timeout_s * NS)
        return stale_holds((Hold.of(p) for p in rows), ctx.view.admin_up(), now=ctx.clock(), grace_ns=grace)

    def up_again(self, disabled: list[DisabledPort] | None = None) -> set[Endpoint]:
        """Holds whose port is up again without fabricd (a reboot, a hand-typed `no shutdown`): stale holds, less
        those fabricd is enabling itself (a repair's enable verifying the port: its flaps decide that enable, and
        the port's next incident, once the hold is gone)."""
        enabling = {Endpoint(a.device, a.port) for a in self.state.actions.with_status("running", op="enable")}
        return self.stale_holds(disabled) - enabling

    def drained_ports(self) -> frozenset[Endpoint]:
        """The ports of every active drain: out of service as surely as a fault's (the guard counts them)."""
        out = set()
        for d in self.state.drains.all(ACTIVE):
            for p in d.ports:
                device, _, port = p.partition(":")
                out.add(Endpoint(device, port))
        return frozenset(out)

    def unknown_for(self, ep: Endpoint, unsure: Collection[str]) -> list[str]:
        """The switches whose telemetry the guard's verdict on `ep` rests on (its own, and those at the far end of its
        links to other switches: their ports and BGP sessions are its capacity) that have no fresh word now (a
        switch restarting, a stream resyncing): what they streamed before does not count."""
        if not unsure:
            return []
        fabric = self.ctx.fabric
        mine = {ep.device}
        for port in fabric.ports(ep.device):
            peer = fabric.peer(ep.device, port)
            if peer is not None and peer.device in self.ctx.managed:
                mine.add(peer.device)
        return sorted(mine.intersection(unsure))
