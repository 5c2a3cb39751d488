"""Remediation's parts, wired: the daemon and the tests build them here (`build_remediation`), with what each part
receives visible in its constructor. The parts, by job:

- `incidents` (incidents.py): findings -> the pure decision (decide.py) -> records and tickets, then the action;
- `actions` (port_actions.py): the transaction on the switch, through `switch` (switch.py: the only remediation code
  that sends a request to a switch) and `marks` (marks.py);
- `reconciler` (reconciler.py): the records against the switches, every pass and on taking over;
- `requests` (requests.py): what people ask: approve, reject, resolve, release, the mode;
- `maintenance` (maintenance/drains.py): drains as plans of steps, through the port actions;
- `floor` (floor.py): held ports given back (and taken again) so no switch stays under its capacity floor;
- `holds` (holds.py): what is held and drained, and what the guard knows; `paper` (paperwork.py): tickets' notes.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Container
from concurrent.futures import Executor
from dataclasses import dataclass

from topology.fabric import Fabric

from ..config import RemediationSettings, SafetyLimits
from ..maintenance.drains import Maintenance
from ..maintenance.undrain import Undrains
from ..maintenance.watch import DrainWatch
from ..maintenance.work import DrainWork
from ..remediation_io import Actuator, PortView
from ..state import StateStore, Ticket
from .context import Context, Fence
from .floor import FloorKeeper
from .floor_swap import Swaps
from .holds import Holds
from .incidents import Incidents
from .marks import Marks
from .paperwork import Paperwork
from .port_actions import PortActions
from .reconciler import Reconciler
from .requests import Requests
from .switch import Switch


@dataclass
class Remediation:
    ctx: Context
    switch: Switch
    marks: Marks
    paper: Paperwork
    holds: Holds
    actions: PortActions
    incidents: Incidents
    reconciler: Reconciler
    requests: Requests
    maintenance: Maintenance
    floor: FloorKeeper  # fabricd's holds never keep a switch under its floor (floor.py)

    async def idle(self) -> None:
        """Wait until every action and drain in flight has finished (tests, shutdown)."""
        await self.ctx.tasks.idle()


def build_remediation(
    fabric: Fabric,
    state: StateStore,
    settings: RemediationSettings,
    limits: SafetyLimits,
    *,
    managed: Container[str],
    actuator: Actuator,
    view: PortView,
    clock: Callable[[], int],
    executor: Executor | None = None,
    publish: Callable[[Ticket], Awaitable[None]] | None = None,
    fence: Callable[[], str | None] | None = None,
    token: Callable[[], int | None] | None = None,
    on_fenced: Callable[[str], None] | None = None,
) -> Remediation:
    """`fence()` says why this instance may not act now (a standby, or a leader whose token was superseded), or
    None; it is asked before each action starts, before every switch commit, and by every request of people.
    `token()`: the leader's fencing token now (None: acting alone); `on_fenced(why)`: the state says it is not ours."""
    ctx = Context(fabric, state, settings, limits, managed, view, clock, Fence(fence, token, on_fenced))
    switch = Switch(ctx, actuator, executor)
    marks = Marks(ctx, switch)
    paper = Paperwork(ctx, publish)
    holds = Holds(ctx)
    actions = PortActions(ctx, switch, marks, paper)
    reconciler = Reconciler(ctx, holds, actions, marks, paper)
    return Remediation(
        ctx, switch, marks, paper, holds, actions,
        incidents=Incidents(ctx, holds, actions, paper),
        reconciler=reconciler,
        requests=Requests(ctx, holds, actions, reconciler, paper),
        maintenance=Maintenance(ctx, holds, work := DrainWork(ctx, actions, switch), watch := DrainWatch(ctx),
                                Undrains(ctx, work, watch)),
        floor=FloorKeeper(ctx, holds, actions, paper, Swaps(ctx, holds, paper)),
    )  # fmt: skip
