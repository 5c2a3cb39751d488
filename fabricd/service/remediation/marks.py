"""fabricd's marks on the switches (drivers/marks.py): what a port fabricd shuts carries in its description, as the
last scan read them (reconciler.py decides on them), and the two changes of a mark alone: re-marked with new record
numbers after an adoption, removed from a released port. Through switch.py, like every switch request."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Collection

from drivers.base import DriverError, PortMark
from drivers.marks import Mark
from topology.model import Endpoint

from ..state import FENCE, Action, ActionStatus
from .context import Context, FencedOff
from .switch import Switch

log = logging.getLogger("fabricd.remediation")
MAINTENANCE_KEY = "maintenance:"  # a drain's shut and enable actions: `maintenance:<drain>:<down|upN>:<port>`


class Marks:
    def __init__(self, ctx: Context, switch: Switch) -> None:
        self.ctx, self.switch = ctx, switch
        self.state = ctx.state
        # fabricd's marks as the switches showed them at the last scan (None: not scanned yet); see reconcile.py
        self.marks: dict[Endpoint, PortMark] | None = None
        self.unscanned: set[str] = set()  # switches the last scans skipped (stale) or could not read: read again soon
        self.scanned_ts = 0  # when marks were last read (those too)

    def mark_for(self, action: Action) -> Mark:
        """What the switch carries on a port fabricd shuts: this action, its ticket and the fault's kind."""
        t = self.state.tickets.get(action.ticket_id) if action.ticket_id else None
        planned = (action.key or "").startswith(MAINTENANCE_KEY)  # a drain's shut (maintenance/drains.py)
        return Mark(action.id, action.ticket_id, t.kind if t is not None else "maintenance" if planned else "fault")

    def finished(self, action: Action, status: ActionStatus) -> None:
        """An action ended: a done enable removed the port's mark, a done disable wrote one."""
        if status != "done" or self.marks is None:
            return
        if action.op == "enable":
            self.marks.pop(Endpoint(action.device, action.port), None)
        elif action.op == "disable":
            self.marks[Endpoint(action.device, action.port)] = PortMark(self.mark_for(action), False)

    async def scan(self, skip: Collection[str] = (), only: Collection[str] | None = None) -> dict[Endpoint, PortMark]:
        """Read fabricd's marks from every managed switch (or those in `only`), skipping `skip`; a switch that cannot
        be read keeps what the last scan saw of it (and is logged), and is read again at the next pass it is not
        stale (`unscanned`): a leader that took over while a switch was stale would otherwise not see that switch's
        marks until the next full scan (`remediation.mark_scan_s`), and a hold it released in observe mode kept its
        mark on an up port that long (chaos seed 3133: 77 s)."""
        ctx = self.ctx
        managed = [d.name for d in ctx.fabric.switches() if d.name in ctx.managed]
        devices = [d for d in managed if d not in skip and (only is None or d in only)]
        self.unscanned |= {d for d in managed if d in skip and (only is None or d in only)}
        self.scanned_ts = ctx.clock()
        reads = (self.switch.submit(self.switch.read_marks, d) for d in devices)
        results = await asyncio.gather(*reads, return_exceptions=True)
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

    async def remark(self, action: Action, old: Mark) -> str:
        """An adopted port's mark names the records it had before they were lost; the records are new: the switch
        is told the new numbers (the port's `shutdown` committed again with the new mark, under the revert timer and
        confirmed; nothing changes in its state), so the mark and the records agree again. Returns what happened."""
        ep = Endpoint(action.device, action.port)
        new = self.mark_for(action)
        if new == old:
            return ""
        text = await self._rewrite(ep, action.switch_key, False, new)
        done = text is None
        text = text or f"re-marked {ep}: {old.text()} -> {new.text()}"
        if self.marks is not None and done:
            self.marks[ep] = PortMark(new, False)
        self.state.audit.record(self.ctx.clock(), f"re-mark {ep}", text, mode=action.mode, action_id=action.id,
                             ticket_id=action.ticket_id)  # fmt: skip
        return text

    async def unmark(self, ep: Endpoint, action_id: int, ticket_id: int | None) -> str:
        """A released hold's port is up (a person enabled it, or the switch came back without fabricd's change): its
        mark would say fabricd holds it down, and a later hand shutdown would be adopted as fabricd's. The mark is
        removed (`no shutdown` committed again with the description without it, under the revert timer and
        confirmed; the port's state does not change). Not in observe mode: fabricd touches no switch then."""
        ctx = self.ctx
        if self.marks is not None and ep not in self.marks:
            return ""  # the switch showed no mark there (fabricd's own disables are added as they are done)
        if ctx.settings.mode == "observe":
            text = f"its mark stays on {ep} (mode observe: fabricd touches no switch)"
        else:
            a = self.state.actions.get(action_id)
            key = f"{a.switch_key}_u" if a is not None else f"fabricd_u{ctx.clock() & 0xFFFFFFFF:08x}"
            failed = await self._rewrite(ep, key, True, None)
            if failed is None and self.marks is not None:
                self.marks.pop(ep, None)
            text = failed or f"removed fabricd's mark from {ep}"
        self.state.audit.record(ctx.clock(), f"unmark {ep}", text, mode=ctx.settings.mode, action_id=action_id,
                        ticket_id=ticket_id)  # fmt: skip
        return text

    async def _rewrite(self, ep: Endpoint, key: str, up: bool, mark: Mark | None) -> str | None:
        """Commit the port's present admin state again with its description's mark set (`mark`) or removed (None),
        under the revert timer, and confirm it. None when done, else why not."""
        token = FENCE.get()
        async with self.switch.device_lock(ep.device):
            try:
                await self.ctx.fence.wait()
                await self.switch.blocking(self.switch.rewrite_mark, ep, key, up, mark, token)
            except (DriverError, FencedOff) as e:
                return f"could not rewrite fabricd's mark on {ep} ({e}); the switch keeps the one it has"
        return None
