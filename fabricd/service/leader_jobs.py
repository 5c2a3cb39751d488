"""The leader's work beside the detector passes: taking over (finish what the old leader left, resume its drains,
hand off its tickets), and the periodic jobs apscheduler runs (ticket sync, re-enable retries, config drift, the
switches' marks, pruning; the job map's refresh runs on every instance)."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from concurrent.futures import Executor

from apscheduler.schedulers.asyncio import AsyncIOScheduler

from drivers.inventory import Inventory
from fabricd.jobs.source import JobSource
from fabricd.telemetry import TelemetrySource
from policies.policy import load_policy
from topology.fabric import Fabric
from topology.units import NS

from .config import ServiceConfig
from .ha import HaRole
from .remediation.wiring import Remediation
from .state import StateStore
from .tickets import TicketError
from .tickets.hand_off import TicketHandOff

log = logging.getLogger("fabricd.service")


class LeaderJobs:
    def __init__(
        self, cfg: ServiceConfig, clock: Callable[[], int], fabric: Fabric, inventory: Inventory, state: StateStore,
        pool: Executor, remediation: Remediation, hand_off: TicketHandOff, ha: HaRole, telemetry: TelemetrySource,
        job_source: JobSource,
    ) -> None:  # fmt: skip
        self.cfg, self.clock, self.fabric, self.inventory, self.state = cfg, clock, fabric, inventory, state
        self.pool, self.remediation, self.hand_off, self.ha = pool, remediation, hand_off, ha
        self.telemetry, self.job_source = telemetry, job_source

    def schedule(self, scheduler: AsyncIOScheduler) -> None:
        tick = self.cfg.detectors.tick_s
        lead = self._leader_job
        scheduler.add_job(lead(self.sync_tickets), "interval", seconds=self.cfg.tickets.sync_interval_s,
                          id="tickets")  # fmt: skip
        scheduler.add_job(lead(self._retry_enables), "interval", seconds=max(30.0, tick), id="reenable")
        scheduler.add_job(lead(self._drift), "interval", seconds=self.cfg.drift_interval_s, id="drift")
        scheduler.add_job(lead(self._prune), "interval", hours=6, id="prune")
        scheduler.add_job(lead(self._scan_marks), "interval", seconds=self.cfg.remediation.mark_scan_s,
                          id="marks")  # fmt: skip
        if self.job_source.configured:
            scheduler.add_job(self._refresh_jobs, "interval", seconds=self.cfg.jobs.refresh_s, id="jobs")

    def _leader_job(self, job: Callable[[], Awaitable[None]]) -> Callable[[], Awaitable[None]]:
        async def run() -> None:
            if self.ha.acting():
                await job()

        run.__name__ = job.__name__
        return run

    async def take_over(self) -> None:
        """This instance leads now (a start alone, or the lease won): finish what the old leader left."""
        for note in await self.remediation.reconciler.reconcile(self.telemetry.stale_devices()):
            self.state.audit.record(self.clock(), "reconcile", note)
        for drain_id in self.remediation.maintenance.resume_drains():  # planned maintenance left between its steps
            self.state.audit.record(self.clock(), "reconcile", f"drain {drain_id} resumed at its next step")
        await self.sync_tickets()

    async def _scan_marks(self) -> None:
        """Read fabricd's marks from the switches again; the next pass adopts a marked port fabricd has no record
        of."""
        await self.remediation.marks.scan(self.telemetry.stale_devices())

    async def sync_tickets(self) -> None:
        for t in self.state.tickets.unsynced():
            await self.hand_off.publish(t)
        if self.ha.fence() is not None:
            return  # a leader woken from a pause asks the backend nothing more (not even what was resolved)
        backend = self.hand_off.backend
        loop = asyncio.get_running_loop()
        try:
            done = await loop.run_in_executor(self.pool, backend.resolved, self.state.tickets.all("open"))
        except TicketError as e:
            log.warning("%s", e)
            return
        for tid in done:
            t = await self.remediation.requests.resolve(tid, backend.name)
            await self.hand_off.publish(t)

    async def _retry_enables(self) -> None:
        """A port whose ticket is resolved but that is still held down (its enable failed): try again."""
        for p in self.state.holds.all():
            t = self.state.tickets.get(p["ticket_id"]) if p["ticket_id"] else None
            if t is not None and t.status == "resolved" and self.state.actions.open_on(p["device"], p["port"]) is None:
                await self.remediation.requests.resolve(t.id, "fabricd (retry)")

    async def _drift(self) -> None:
        """Config drift: plan every switch against its running config; drift is logged and counted, not pushed."""
        from fabricd.rollout import plan_all, targets
        from policies.intent import derive_intent
        from topology.spec import load_spec

        def plan() -> list[str]:
            spec = load_spec(self.cfg.spec)
            intent = derive_intent(self.fabric, spec, load_policy(self.cfg.policy), None)
            items = targets(intent.devices, self.inventory)
            return [p.device for p in plan_all(items, workers=4) if p.changed or p.error]

        try:
            drifted = await asyncio.get_running_loop().run_in_executor(self.pool, plan)
        except Exception as e:  # noqa: BLE001  # drift is advisory: no failure of it may stop the service
            log.warning("config drift check failed: %s", e)
            return
        if drifted:
            self.state.audit.record(
                self.clock(), "config drift", f"{len(drifted)} switches differ: {', '.join(drifted[:20])}"
            )
            log.warning("config drift on %d switches: %s (run fabricd plan)", len(drifted), ", ".join(drifted[:20]))

    async def _refresh_jobs(self) -> None:
        await asyncio.get_running_loop().run_in_executor(self.pool, self.job_source.refresh)

    async def _prune(self) -> None:
        self.state.prune(self.clock() - int(self.cfg.detectors.retention_days * 86400 * NS))
