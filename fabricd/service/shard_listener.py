"""The service's side of detector shards (detectors.source: shards; shard.py is the shard's): their findings heard
on the bus and handed to the detector passes' `act` as this process's own would be, and which shards went silent."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from typing import Any

from fabricd.bus import connect as connect_bus
from fabricd.detectors.finding import Finding
from topology.units import NS

from .config import ServiceConfig
from .shard import SUBJECT as SHARD_SUBJECT
from .shard import read_findings_message
from .state import StateStore

log = logging.getLogger("fabricd.service")


class ShardListener:
    def __init__(
        self, cfg: ServiceConfig, state: StateStore, clock: Callable[[], int], instance: str,
        act: Callable[[list[Finding], int], Awaitable[list[Finding]]], acting: Callable[[], bool],
    ) -> None:  # fmt: skip
        self.cfg, self.state, self.clock, self.instance = cfg, state, clock, instance
        self.act, self.acting = act, acting
        self.heard: dict[int, int] = {}  # detector shard -> time of its last report (detectors.source: shards)

    async def run(self, stop: asyncio.Event) -> None:
        """Detector shards report on the bus (fabricd/service/shard.py): their findings, merged (each finding has one
        owning shard), go where this process's own would; an incident no shard reported for 3 ticks is over."""
        nc = await connect_bus(self.cfg.bus, self.cfg.source, f"fabricd {self.instance} findings")
        queue: asyncio.Queue[bytes] = asyncio.Queue(maxsize=1024)

        async def on_message(msg: Any) -> None:
            if queue.full():  # a stalled consumer drops the oldest: every shard sends its findings again each pass
                queue.get_nowait()
            queue.put_nowait(msg.data)

        sub = await nc.subscribe(f"{SHARD_SUBJECT}.*", cb=on_message)
        try:
            while not stop.is_set():
                data = await queue.get()
                try:
                    shard, ts, findings = read_findings_message(data)
                except (ValueError, KeyError, TypeError) as e:
                    log.warning("a detector shard's message could not be read (%s); dropped", e)
                    continue
                self.heard[shard] = ts
                await self.act(findings, ts)
                # An incident no shard reported for 3 ticks is over; while a shard is silent its part of the fabric
                # is unwatched, and its incidents are not over (health says which shard).
                if self.acting() and not self.silent_shards(ts):
                    self.state.findings.clear_not_seen_since(ts - int(3 * self.cfg.detectors.tick_s * NS))
        finally:
            await sub.unsubscribe()
            await nc.close()

    def shard_ages(self, now: int | None = None) -> dict[int, float | None]:
        """Per detector shard, seconds since its last report (None: never)."""
        t = self.clock() if now is None else now
        return {k: None if k not in self.heard else (t - self.heard[k]) / NS
                for k in range(self.cfg.detectors.shards)}  # fmt: skip

    def silent_shards(self, now: int | None = None) -> list[int]:
        """Detector shards (detectors.source: shards) that have not reported for 3 ticks, or ever."""
        if self.cfg.detectors.source != "shards":
            return []
        limit = 3 * self.cfg.detectors.tick_s
        return [k for k, age in self.shard_ages(now).items() if age is None or age > limit]
