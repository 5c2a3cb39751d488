"""The detector passes of the running service and what follows each one (passes.py schedules them): the detectors
on the telemetry snapshot, the findings filtered and annotated with the jobs they hit, then handed to remediation's
incidents (the leader only: a standby's detectors run too, warm for a takeover); on every full pass the leader also
clears incidents over, reports overrunning drains, reconciles its records against the fabric and saves what the
carrier watch must remember."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable

from fabricd.detectors import link_flap
from fabricd.detectors.finding import Finding
from fabricd.detectors.runner import Runner
from fabricd.jobs.annotate import annotate
from fabricd.jobs.source import JobSource
from fabricd.telemetry import CounterStore, Ingestor, Snapshot, TelemetrySource
from topology.fabric import Fabric
from topology.model import Endpoint
from topology.units import NS

from .carrier_watch import CarrierWatch
from .config import ServiceConfig
from .decide import ignored
from .ha import HaRole
from .passes import run_passes
from .remediation.wiring import Remediation
from .state import StateStore, fenced
from .state.db import FencedError

log = logging.getLogger("fabricd.service")


class DetectorPasses:
    def __init__(
        self, cfg: ServiceConfig, clock: Callable[[], int], fabric: Fabric, state: StateStore, ingestor: Ingestor,
        store: CounterStore, runner: Runner, carrier: CarrierWatch, telemetry: TelemetrySource,
        job_source: JobSource, remediation: Remediation, ha: HaRole, synced: asyncio.Event,
    ) -> None:  # fmt: skip
        self.cfg, self.clock, self.fabric, self.state = cfg, clock, fabric, state
        self.ingestor, self.store, self.runner, self.carrier = ingestor, store, runner, carrier
        self.telemetry, self.job_source, self.remediation, self.ha = telemetry, job_source, remediation, ha
        self.synced = synced  # set once telemetry first synced: reconcile never runs before
        self._flap_state: link_flap.LinkFlapState = runner.state_of("link_flap")

    async def run(self, stop: asyncio.Event) -> None:
        """Detector passes on the service's clock (fabricd/service/passes.py)."""
        det = self.cfg.detectors
        await run_passes(self.ingestor, self.clock, stop, tick_s=det.tick_s, pass_gap_s=det.pass_gap_s,
                         full=self.tick, flap=self.flap_pass)  # fmt: skip

    async def tick(self, now: int) -> list[Finding]:
        snap = self.ingestor.snapshot()
        found = self.runner.tick(snap, now)
        if self.ha.acting():  # flaps that ended while fabricd was not watching (carrier_watch.py)
            found += self.carrier.check(snap, now, self.unsure(now), self._flap_tracked)
        else:
            self.carrier.disarm()  # what it remembers when it leads again is what the leader wrote
        usable = await self.act(found, now)
        if self.ha.acting():  # An incident not reported for 3 ticks is over.
            self.remediation.maintenance.report_overruns(now)  # planned maintenance past its --until
            try:  # under the fence like every write: a woken old leader does not clear the new one's findings
                with fenced(self.ha.token()):
                    self.state.findings.clear_not_seen_since(now - int(3 * self.cfg.detectors.tick_s * NS))
            except FencedError as e:
                self.ha.fenced_out(str(e))
                return usable
            await self._reconcile(now)
            self._save_carrier(snap, now)
        return usable

    def _flap_tracked(self, ends: tuple[str, ...]) -> bool:
        """link_flap is tracking this link as it streams (over its threshold): it reports the link itself."""
        link = self._flap_state.links.get(ends)
        return link is not None and link.suppressed

    def _save_carrier(self, snap: Snapshot, now: int) -> None:
        """The leader writes the carrier-transitions values that changed, every SAVE_EVERY_S (carrier_watch.py)."""
        due = self.carrier.to_save(snap, now, self.unsure(now))
        if due is None:
            return
        rows, unsure = due
        try:
            with fenced(self.ha.token()):
                self.state.carrier.save(rows, now, unsure)
        except FencedError as e:
            self.ha.fenced_out(str(e))
            return
        self.carrier.saved(snap, rows, now)

    async def _reconcile(self, now: int) -> None:
        """Every pass: fabricd's records against what the fabric shows (reconcile.py); never before the first sync,
        never on a stale switch."""
        if not self.synced.is_set():
            return
        for note in await self.remediation.reconciler.reconcile_pass(now, self.unsure(now)):
            log.warning("reconcile: %s", note)
        for note in await self.remediation.floor.keep(now, self.unsure(now)):
            log.warning("floor: %s", note)

    async def flap_pass(self, now: int) -> list[Finding]:
        """link_flap on the oper-status events that landed since the last such pass, on its tick state (the next full
        pass sees the same incidents, already known)."""
        found = link_flap.on_store_events(self.store, self.fabric, self._flap_state, now)
        return await self.act(found, now) if found else []

    async def act(self, findings: list[Finding], now: int) -> list[Finding]:
        """The findings remediation should see (not on a stale switch, not a held port's own), annotated with the jobs
        they hit, handed to its incidents by the leader; returns them."""
        stale = set(self.telemetry.stale_devices(now))
        rows = self.state.holds.all()
        held = {Endpoint(p["device"], p["port"]) for p in rows}
        up_again = self.remediation.holds.up_again(rows)
        usable = annotate([f for f in findings if not ignored(f, self.fabric, stale, held, up_again)],
                          self.job_source.map)  # fmt: skip
        if self.ha.acting():  # a standby's detectors run too (warm for a takeover); the leader records and acts
            await self.remediation.incidents.on_findings(usable, self.unsure(now))
        return usable

    def unsure(self, now: int) -> set[str]:
        """The switches with no fresh word now: stale, or not synced (restarting, resyncing): the guard does not
        judge on what they streamed before."""
        return {*self.telemetry.stale_devices(now), *(d for d, ok in self.telemetry.synced.items() if not ok)}
