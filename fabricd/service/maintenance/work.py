"""What a drain's steps and its undrain share: one piece of work per drain at a time (a second request joins it),
the drained ports shut and held through remediation's own port actions, a drained link's BGP session shifted."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine
from functools import partial
from typing import Any

from topology.model import Endpoint

from ..remediation.context import Context
from ..remediation.marks import MAINTENANCE_KEY
from ..remediation.port_actions import PortActions
from ..remediation.switch import Switch
from ..state import Action, DrainRecord
from . import plan as m


class DrainWork:
    def __init__(self, ctx: Context, actions: PortActions, switch: Switch) -> None:
        self.ctx, self.actions, self.switch = ctx, actions, switch
        self.state = ctx.state
        # One piece of work per drain at a time (its steps, or its undrain): a second request joins it
        self.work: dict[int, asyncio.Task[None]] = {}

    def busy(self, drain_id: int) -> bool:
        """A step or an undrain of this drain is under way in this fabricd."""
        task = self.work.get(drain_id)
        if task is None or task.done():
            return False
        try:
            return task.get_loop() is asyncio.get_running_loop()  # a task of a loop gone (tests) does nothing more
        except RuntimeError:
            return True

    def start(self, drain_id: int, work: Coroutine[Any, Any, None]) -> asyncio.Task[None]:
        task = self.ctx.tasks.start(work)
        self.work[drain_id] = task
        task.add_done_callback(lambda t: self.work.pop(drain_id, None) if self.work.get(drain_id) is t else None)
        return task

    def shift_session(self, se: m.SessionEnd, away: bool, key: str) -> Callable[[], None]:
        """One end of a drained link's BGP session de-preferred (or back), for a worker thread."""
        return partial(self.switch.shift_session, se.local.device, se.peer_address, se.asn, away, key)

    def switch_ports(self, ports: tuple[Endpoint, ...]) -> list[Endpoint]:
        return [p for p in ports if (dev := self.ctx.fabric.get(p.device)) is not None and dev.is_switch]

    async def shut(self, d: DrainRecord, ports: tuple[Endpoint, ...], again: bool = False) -> list[str]:
        """The drained ports shut as fabricd shuts a faulty one (the revert timer, telemetry, confirmed; the mark
        says `maintenance`, no ticket), and held: remediation's own disable, keyed by the drain so a resumed step
        finds its actions instead of adding new ones (`again`: shut anew after an undrain that failed its checks,
        keyed by how many times the port was shut). What failed, per port."""
        actions = []
        begun = {
            a.id for a in self.state.actions.with_status("running", op="disable")
        }  # a resumed step's: already going
        for p in self.switch_ports(ports):
            n = self.state.actions.count(p.device, p.port, "disable", after_id=0) if again else ""
            a = self.state.actions.add("disable", p.device, p.port, "maintenance", "running",
                                       f"maintenance: drain {d.id} ({d.reason})", self.ctx.clock(),
                                       key=f"{MAINTENANCE_KEY}{d.id}:down{n}:{p}")  # fmt: skip
            if a.status == "running" and a.id not in begun:
                self.actions.spawn(a)
            actions.append(a)
        return await self.wait_actions(actions)

    async def wait_actions(self, actions: list[Action]) -> list[str]:
        """Wait for the actions to end; what did not end `done`, with why."""
        out = []
        for a in actions:
            while (now := self.state.actions.get(a.id)) is not None and now.status == "running":
                await asyncio.sleep(0.05)
            if now is None or now.status != "done":
                out.append(f"{a.device}:{a.port}: {now.detail if now is not None else 'lost'}")
        return out


def endpoints(d: DrainRecord) -> tuple[Endpoint, ...]:
    return tuple(Endpoint(*x.split(":", 1)) for x in d.ports)


def after_refusal(d: DrainRecord) -> str:
    """What a drain is again once its undrain is refused: drained if all its steps were taken, else stopped."""
    return "drained" if d.done >= len(d.steps) else "stopped"
