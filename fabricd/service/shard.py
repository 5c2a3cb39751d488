"""A detector shard (`fabricd shard --index K --count N`): telemetry and detectors for one range of aggregation groups
(fabricd/detectors/shards.py), its findings published on the bus for the service to act on.

Past one store, no process reads every series: each shard reads the switches of its view (directly, or from the
collectors' stream with `telemetry.source: bus`), runs the same detectors on the same pass loop as the service
(fabricd/service/passes.py), keeps the findings it owns, and publishes them after every pass on
`fabricd.findings.<K>` (an empty list too: the service then knows the shard is alive and its incidents are over).
The service (`detectors.source: shards`) runs no detectors of its own: it merges the shards' findings and acts on
them alone (the leader, with a hot standby). A finding lost on the way is sent again at the next pass.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections.abc import Callable
from typing import Any

from drivers.inventory import load_inventory
from fabricd.bus import connect as connect_bus
from fabricd.detectors import link_flap
from fabricd.detectors.finding import Finding, JobRef
from fabricd.detectors.runner import Runner
from fabricd.detectors.shards import ShardView, shard_view
from fabricd.telemetry import CounterStore, Ingestor
from fabricd.telemetry.platforms import profiles
from policies.policy import load_policy
from topology.load import load_fabric

from .config import ServiceConfig
from .passes import configured_detectors, run_passes, telemetry_source

log = logging.getLogger("fabricd.shard")
SUBJECT = "fabricd.findings"  # a shard publishes on SUBJECT.<index>; the service reads SUBJECT.*


def findings_message(index: int, now: int, findings: list[Finding]) -> bytes:
    return json.dumps({"shard": index, "ts": now, "findings": [f.to_dict() for f in findings]}).encode()


def read_findings_message(data: bytes) -> tuple[int, int, list[Finding]]:
    """(shard, ts, findings) of a message a shard published; ValueError if it is not one."""
    doc = json.loads(data)
    if not isinstance(doc, dict) or not isinstance(doc.get("findings"), list):
        raise ValueError("not a findings message")
    out = []
    for f in doc["findings"]:
        jobs = tuple(JobRef(**j) for j in f.get("jobs", ()))
        fields = {k: v for k, v in f.items() if k not in ("jobs", "devices", "ports")}
        out.append(Finding(devices=tuple(f["devices"]), ports=tuple(f["ports"]), jobs=jobs, **fields))
    return int(doc["shard"]), int(doc["ts"]), out


class ShardProcess:
    def __init__(self, cfg: ServiceConfig, index: int, count: int, *, clock: Callable[[], int] = time.time_ns):
        self.cfg, self.clock = cfg, clock
        _, self.fabric = load_fabric(cfg.spec, cfg.cabling)
        self.view: ShardView = shard_view(self.fabric, index, count)
        inventory = load_inventory(cfg.inventory)
        accesses = [inventory.access(n) for n in inventory.names if n in self.view.switches]
        self.ingestor = Ingestor(CounterStore())
        t = cfg.telemetry
        profile = profiles(t.interval_s, load_policy(cfg.policy).lossless_priorities, t.intervals)
        self.telemetry = telemetry_source(cfg, accesses, self.ingestor, profile, name=f"fabricd shard {index}",
                                          clock=clock)  # fmt: skip
        self.runner = Runner(self.fabric, configured_detectors(cfg), keep=False)
        self._flap_state: link_flap.LinkFlapState = self.runner.state_of("link_flap")
        self._stop = asyncio.Event()
        self._nc: Any = None
        self.published = 0

    async def run(self) -> None:
        self._nc = await connect_bus(self.cfg.bus, self.cfg.source, f"fabricd shard {self.view.index}")
        log.info("shard %d of %d: groups %s, %d switches", self.view.index, self.view.count,
                 list(self.view.groups), len(self.view.switches))  # fmt: skip
        telemetry = asyncio.create_task(self.telemetry.run(), name="telemetry")
        try:
            d = self.cfg.detectors
            await run_passes(self.ingestor, self.clock, self._stop, tick_s=d.tick_s, pass_gap_s=d.pass_gap_s,
                             full=self._full, flap=self._flap)  # fmt: skip
        finally:
            await self.telemetry.stop()
            telemetry.cancel()
            await asyncio.gather(telemetry, return_exceptions=True)
            await self._nc.close()

    def stop(self) -> None:
        self._stop.set()

    async def _full(self, now: int) -> None:
        await self._publish(self.runner.tick(self.ingestor.snapshot(), now), now)

    async def _flap(self, now: int) -> None:
        found = link_flap.on_store_events(self.ingestor.store, self.fabric, self._flap_state, now)
        if found:
            await self._publish(found, now)

    async def _publish(self, findings: list[Finding], now: int) -> None:
        """The findings this shard owns, on fresh data only (a stale switch's are never sent)."""
        stale = set(self.telemetry.stale_devices(now))
        mine = [f for f in findings if self.view.owns(f) and f.device not in stale]
        await self._nc.publish(f"{SUBJECT}.{self.view.index}", findings_message(self.view.index, now, mine))
        self.published += 1
