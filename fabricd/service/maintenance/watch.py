"""What a drain reads from telemetry: its ports' traffic falling away after the shift, and, before an undrain lets
the traffic back, each port's LLDP neighbour, BGP session and error counters while watched."""

from __future__ import annotations

import asyncio
import time

from topology.model import Endpoint

from ..remediation.context import Context
from ..state import DrainRecord
from . import plan as m

# the error counters an undrain watches (port_view.EVIDENCE_LEAVES's): they must not rise before traffic returns
ERROR_LEAVES = ("if.in-errors", "if.in-fcs-errors", "eth.in-crc-errors", "eth.in-symbol-error")


class DrainWatch:
    def __init__(self, ctx: Context) -> None:
        self.ctx = ctx

    async def wait_quiet(self, ports: tuple[Endpoint, ...]) -> list[str]:
        """Wait for the drained ports' rates to fall below the threshold; what still carries at the timeout."""
        ms, view = self.ctx.settings.maintenance, self.ctx.view
        deadline = time.monotonic() + ms.shift_timeout_s
        while True:
            loud = m.still_carrying({p: view.out_rate_bps(p.device, p.port) for p in ports}, ms.quiet_bps)
            if not loud or time.monotonic() >= deadline:
                return loud
            await asyncio.sleep(0.5)

    async def readings(self, d: DrainRecord) -> dict[Endpoint, m.PortReading]:
        """What the undrain checks read for each drained port, from telemetry: its LLDP neighbour, its BGP session,
        and how much its error counters rose while watched for `undrain_watch_s` (the LLDP waits run meanwhile)."""
        ms, view, fabric = self.ctx.settings.maintenance, self.ctx.view, self.ctx.fabric
        eps = [Endpoint(*p.split(":", 1)) for p in d.ports]
        before = {ep: self._error_counters(ep) for ep in eps}

        async def neighbour(ep: Endpoint) -> Endpoint | None:
            heard = await view.lldp_neighbour(ep.device, ep.port, 0, ms.lldp_wait_s)
            if heard is None and not view.expects_lldp(ep.device, ep.port):
                heard = fabric.peer(ep.device, ep.port)  # nothing there speaks LLDP: nothing to check it by
            return heard

        heard, _ = await asyncio.gather(
            asyncio.gather(*(neighbour(ep) for ep in eps)), asyncio.sleep(ms.undrain_watch_s)
        )
        down, routed = view.oper_down(), view.routed_down()
        out = {}
        for ep, lldp in zip(eps, heard, strict=True):
            rose = m.errors_rose(before[ep], self._error_counters(ep))
            bgp = None if not fabric.get(ep.device) else ep not in routed
            out[ep] = m.PortReading(ep not in down, lldp, bgp, rose)
        return out

    def _error_counters(self, ep: Endpoint) -> dict[str, float]:
        ev = self.ctx.view.evidence(ep.device, ep.port)
        return {k: float(v) for k in ERROR_LEAVES if isinstance(v := ev.get(k), int | float)}
