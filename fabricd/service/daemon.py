"""`fabricd run`: the service's parts built and wired, then run on one asyncio loop until SIGTERM.

The parts live with what they do: telemetry in (fabricd/telemetry/), the detector passes and what follows them
(detector_passes.py, or shard_listener.py when detector shards report), remediation (remediation/) and maintenance
(maintenance/), the leader lease (ha.py, leader.py) and the leader's jobs (leader_jobs.py), tickets out
(tickets/), the API, page and metrics (surface/). Blocking driver calls go to bounded thread pools. On start it
reconciles with the switches before it acts on anything new.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import logging
import signal
import time
from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import uvicorn
from apscheduler.schedulers.asyncio import AsyncIOScheduler
from prometheus_client import CollectorRegistry
from pydantic import SecretStr

from drivers.inventory import load_inventory
from fabricd import __version__
from fabricd.detectors import dci_ports
from fabricd.detectors.runner import Runner
from fabricd.jobs.report import JobReport
from fabricd.jobs.source import JobSource, SlurmRest
from fabricd.telemetry import CounterStore, Ingestor, TelemetrySource, TraceWriter
from fabricd.telemetry.platforms import plans, profiles
from policies.policy import load_policy
from topology.load import load_fabric

from .actuator import DriverActuator
from .bgp_ssh import BgpOverSsh
from .carrier_watch import CarrierWatch
from .config import ServiceConfig, read_secret
from .detector_passes import DetectorPasses
from .ha import HaRole
from .leader import Leadership, default_instance
from .leader_jobs import LeaderJobs
from .loop_watch import LoopWatch
from .passes import configured_detectors, guarded, telemetry_source
from .port_view import TelemetryPortView
from .remediation.wiring import build_remediation
from .shard_listener import ShardListener
from .state import Ticket, open_state
from .surface import metrics as service_metrics
from .surface.access import Principal, principal_for, proxy_principal
from .surface.api import create_app
from .surface.port_metrics import PortCollector, UnderlayCollector
from .surface.server import api_server, started_port
from .surface.status import ServiceStatus
from .tickets import make_backend
from .tickets.hand_off import TicketHandOff
from .tuning import TuningCollector, TuningJob
from .tuning.push import Pusher

log = logging.getLogger("fabricd.service")
ACTION_THREADS = 16  # switch sessions in flight at once; the safety budgets keep real actions far fewer


class Service:
    def __init__(
        self, cfg: ServiceConfig, *, clock: Any = time.time_ns, new_state: bool = False, force: bool = False
    ) -> None:
        self.cfg = cfg
        self.clock = clock
        started = time.monotonic()
        _, self.fabric = load_fabric(cfg.spec, cfg.cabling)
        self.inventory = load_inventory(cfg.inventory)
        accesses = [self.inventory.access(n) for n in self.inventory.names]  # a missing secret stops us here
        self.secrets = [a.password.get_secret_value() for a in accesses]
        self.api_token: SecretStr | None = None
        if cfg.api.token is not None:
            self.api_token = read_secret(cfg.api.token, "api.token", cfg.source)
            self.secrets.append(self.api_token.get_secret_value())
        self.state = open_state(cfg, owner=True, new_state=new_state, force=force)  # checked, locked, 0600
        self.store = CounterStore()
        self._trace = cfg.telemetry.record.open("a", encoding="utf-8") if cfg.telemetry.record else None
        self.ingestor = Ingestor(self.store, recorder=TraceWriter(self._trace) if self._trace else None)
        tcfg = cfg.telemetry
        # PFC counters for the priorities the policy makes lossless (a storm on another one cannot happen).
        lossless = load_policy(cfg.policy).lossless_priorities
        profile = profiles(tcfg.interval_s, lossless, tcfg.intervals)
        # Per switch, what its platform profile subscribes on its release (the telemetry source plans the same).
        self.plans = plans(((a.name, a.platform, a.os_version) for a in accesses), profile)
        self.os_versions = {a.name: a.os_version for a in accesses}
        self.registry = CollectorRegistry()
        self.telemetry: TelemetrySource = telemetry_source(
            cfg, accesses, self.ingestor, profile, name=f"fabricd {self.instance}", clock=clock, registry=self.registry
        )
        self.runner = Runner(self.fabric, configured_detectors(cfg), keep=False)
        self.carrier = CarrierWatch(self.state, self.fabric, self.runner.state_of("link_flap").config)
        self.job_source = self._job_source()
        self.dci_state: dci_ports.DciPortsState = self.runner.state_of("dci_ports")
        first = lossless[0] if lossless else 3
        self.lossless = first  # the priority whose PFC and queue counters the page and /metrics show
        self.view = TelemetryPortView(self.ingestor, time.monotonic, fabric=self.fabric)
        self.pool = ThreadPoolExecutor(max_workers=8, thread_name_prefix="fabricd-io")
        # Port actions get their own threads: a slow ticket backend or drift check must not queue them.
        self.action_pool = ThreadPoolExecutor(max_workers=ACTION_THREADS, thread_name_prefix="fabricd-action")
        self.ha = HaRole(cfg, self.state, clock, self.instance, self._elected)
        self.tickets = TicketHandOff(self.state, make_backend(cfg.tickets, cfg.source), self.pool, self.ha)
        self.actuator = DriverActuator(self.inventory)
        # SONiC switches whose STATE_DB has no BGP neighbour rows are read over SSH (bgp_ssh.py), with sessions of
        # their own (an action never waits on a read) in the I/O pool
        self.bgp_ssh = BgpOverSsh(
            [a.name for a in accesses if a.platform == "sonic"], self.fabric, DriverActuator(self.inventory),
            self.pool, self.ingestor.ingest, clock, tcfg.bgp_ssh_after_s, tcfg.bgp_ssh_interval_s,
        )  # fmt: skip
        self.remediation = build_remediation(
            self.fabric, self.state, cfg.remediation, cfg.safety, managed=set(self.inventory.names),
            actuator=self.actuator, view=self.view, clock=clock, executor=self.action_pool,
            publish=self.tickets.publish, fence=self.ha.fence if self.ha.leadership is not None else None,
            token=self.ha.token, on_fenced=self.ha.fenced_out,
        )  # fmt: skip
        self._mode_override()
        self._synced = asyncio.Event()
        self.passes = DetectorPasses(
            cfg, clock, self.fabric, self.state, self.ingestor, self.store, self.runner, self.carrier,
            self.telemetry, self.job_source, self.remediation, self.ha, self._synced,
        )  # fmt: skip
        self.shards = ShardListener(cfg, self.state, clock, self.instance, self.passes.act, self.ha.acting)
        self.jobs = LeaderJobs(
            cfg, clock, self.fabric, self.inventory, self.state, self.pool, self.remediation, self.tickets, self.ha,
            self.telemetry, self.job_source,
        )  # fmt: skip
        self.tuning = None
        if cfg.tuning.enabled:
            # a tuning change goes to the switch like remediation's: its sessions, its fence, its per-switch lock
            push = Pusher(self.actuator, self.remediation.ctx.fence, self.remediation.switch.device_lock,
                          cfg.tuning.revert_in_s, self.action_pool)  # fmt: skip
            self.tuning = TuningJob(cfg, clock, self.fabric, self.state, self.ingestor.snapshot, self.ha.acting, push)
            self.remediation.requests.spawners["tune"] = self.tuning.changes.spawn  # `fabricd approve` of a change
        self.status = ServiceStatus(
            cfg, self.fabric, self.inventory, self.state, self.ingestor, self.telemetry, self.plans, self.os_versions,
            self.bgp_ssh, self.remediation, self.tickets, self.job_source, self.shards, self.ha, started,
        )  # fmt: skip
        self.loop_watch = LoopWatch()
        ports = PortCollector(self.ingestor.snapshot, self.fabric, first) if cfg.api.port_metrics else None
        service_metrics.register(
            self.registry,
            self.state,
            self.dci_state,
            self.status.job_reports,
            ports,
            self.remediation.holds.budgets,
            self.ha.status if cfg.ha.enabled else None,
            self.status.coverage,
            self.shards.shard_ages if cfg.detectors.source == "shards" else None,
            UnderlayCollector(self.ingestor.snapshot, self.fabric),
            lambda: len(self.remediation.reconciler.to_reapply()),
            fabric=self.fabric,
            floor=lambda: (len(self.remediation.floor.returned()), len(self.remediation.floor.stuck)),
            loop_stalls=lambda: (self.loop_watch.stalls, self.loop_watch.longest),
        )
        if self.tuning is not None:
            self.registry.register(TuningCollector(self.tuning))
        self.api_port: int | None = None
        self.ready = asyncio.Event()
        self._stop = asyncio.Event()
        self._server: uvicorn.Server | None = None

    def _job_source(self) -> JobSource:
        jc = self.cfg.jobs
        rest = None
        if jc.slurmrestd is not None:
            sr = jc.slurmrestd
            token = read_secret(sr.token, "jobs.slurmrestd.token", self.cfg.source)
            verify = str(sr.verify) if isinstance(sr.verify, Path) else sr.verify
            rest = SlurmRest(sr.url, sr.user, token, sr.api_version, verify)
        source = JobSource(self.fabric, jc.path, jc.command, jc.job_label, jc.timeout_s, rest)
        source.refresh()  # a bad read is logged; fabricd watches the fabric without jobs until a good one
        return source

    def _mode_override(self) -> None:
        """The mode `fabricd mode` last set (kept in the state) wins over fabricd.yaml's, and the log says so."""
        configured = self.cfg.remediation
        override = self.state.mode.override()
        if override is not None and override[0] != configured.mode:
            mode, actor, ts = override
            log.warning("remediation mode %s (set by %s at %s) overrides fabricd.yaml's %s; change it with "
                        "`fabricd mode`", mode, actor, time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime(ts / 1e9)),
                        configured.mode)  # fmt: skip
            self.remediation.ctx.settings = configured.model_copy(update={"mode": mode})

    # --- lifecycle -------------------------------------------------------------------------------------------
    async def run(self) -> None:
        # The fabric, inventory and indexes live as long as the service: keep the cyclic GC from rescanning them
        # (a full collection over a pod-16k fabric's ~400k objects stalls the loop 150-400 ms; docs/benchmarks.md).
        gc.freeze()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            with contextlib.suppress(NotImplementedError, RuntimeError, ValueError):
                loop.add_signal_handler(sig, self._stop.set)
        self._server = api_server(create_app(self), self.cfg.api)
        # uvicorn takes SIGINT/SIGTERM while it serves and re-raises them to our handlers when it stops.
        tasks = [
            asyncio.create_task(self.telemetry.run(), name="telemetry"),
            asyncio.create_task(self._server.serve(), name="api"),
            asyncio.create_task(self.loop_watch.run(self._stop), name="loop-watch"),
        ]
        if self.leadership is not None:
            tasks.append(asyncio.create_task(self.leadership.run(self._stop), name="leader-lease"))
        scheduler = AsyncIOScheduler(event_loop=loop)
        try:
            self.api_port = await started_port(self._server)
            log.info(
                "fabricd %s: %d switches, mode %s, API on http://%s:%s",
                __version__, len(self.inventory.names), self.remediation.requests.mode, self.cfg.api.host,
                self.api_port,
            )  # fmt: skip
            # Reconcile only on fresh data: wait for the first full sync (bounded, a dead switch must not block us).
            await self.telemetry.wait_synced(3 * self.cfg.telemetry.interval_s + 2)
            self._synced.set()
            if self.leadership is None:  # with a standby, the instance that takes the lease reconciles (_elected)
                await guarded("reconcile at start", self.jobs.take_over())  # what fails is retried by every pass
            self.jobs.schedule(scheduler)
            if self.tuning is not None:
                self.tuning.schedule(scheduler)
            scheduler.start()
            if self.cfg.detectors.source == "shards":
                tasks.append(asyncio.create_task(self.shards.run(self._stop), name="detectors"))
            else:
                tasks.append(asyncio.create_task(self.passes.run(self._stop), name="detectors"))
            if self.bgp_ssh.candidates:
                tasks.append(asyncio.create_task(self.bgp_ssh.run(lambda: self.telemetry.synced,
                                                                  self.status.streams_bgp),
                                                 name="bgp-over-ssh"))  # fmt: skip
            # Again once synced and taken over: the first sync's series index, the switches' warm sessions and the
            # scheduler live as long (a full collection over them held an action 20-60 ms in bench_remediation).
            gc.freeze()
            self.ready.set()
            stop = asyncio.create_task(self._stop.wait())
            done, _ = await asyncio.wait([stop, *tasks], return_when=asyncio.FIRST_COMPLETED)
            for t in done:
                exc = None if t is stop else t.exception()
                if exc is not None:
                    raise exc
        finally:
            if scheduler.running:
                scheduler.shutdown(wait=False)
            await self.remediation.idle()
            await self.telemetry.stop()
            if self._server is not None:
                self._server.should_exit = True
            for t in tasks:
                if t.get_name() == "api":
                    with contextlib.suppress(Exception):
                        await asyncio.wait_for(t, 5)
                t.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            if self._trace is not None:
                self._trace.close()
            self.pool.shutdown(wait=True)
            self.action_pool.shutdown(wait=True)
            self.actuator.close()
            self.bgp_ssh.close()
            self.state.close()
            log.info("fabricd stopped")

    def stop(self) -> None:
        self._stop.set()

    # --- hot standby -----------------------------------------------------------------------------------------
    @property
    def instance(self) -> str:
        return self.cfg.ha.instance or default_instance()

    @property
    def leadership(self) -> Leadership | None:
        return self.ha.leadership

    def acting(self) -> bool:
        """This instance acts: it runs alone, or it holds the leader lease."""
        return self.ha.acting()

    async def _elected(self, token: int) -> None:
        """This instance's token is recorded: finish what the old leader left."""
        await self._synced.wait()  # reconcile on fresh telemetry (a standby has it already)
        await self.jobs.take_over()

    # --- what the API and the page see (surface/surface.py) ---------------------------------------------------
    async def publish(self, ticket: Ticket) -> None:
        await self.tickets.publish(ticket)

    def principal(self, token: str) -> Principal | None:
        """Who a bearer token (or the page's login) is, or None."""
        service_token = None if self.api_token is None else self.api_token.get_secret_value()

        def lookup(h: str) -> tuple[str, str] | None:
            row = self.state.access.token_by_hash(h)
            return None if row is None else (row.user, row.role)

        return principal_for(token, service_token, lookup)

    def proxied(self, client: str | None, headers: Mapping[str, str]) -> Principal | None:
        """Who a trusted SSO proxy says the request is from (api.trusted_proxy), or None."""
        tp = self.cfg.api.trusted_proxy
        if tp is None:
            return None
        return proxy_principal(client, headers.get(tp.user_header), tp.addresses, dict(tp.roles), tp.default_role)

    def health(self) -> dict[str, Any]:
        return self.status.health()

    def in_flight(self) -> list[dict[str, Any]]:
        return self.status.in_flight()

    def jobs_through(self, ports: list[str]) -> list[str]:
        return self.status.jobs_through(ports)

    def job_reports(self) -> list[JobReport]:
        return self.status.job_reports()

    def topology_summary(self) -> dict[str, Any]:
        return self.status.topology_summary()

    def tuning_report(self) -> dict[str, Any]:
        """The tuning loop's settings and its last judged window (GET /api/v1/tuning, `fabricd tune --config`)."""
        t = self.cfg.tuning
        last = self.tuning.last if self.tuning is not None else None
        return {"enabled": t.enabled, "mode": t.mode, "window_s": t.window_s, "verify_s": t.verify_window_s,
                "last": None if last is None else last.to_dict()}  # fmt: skip

    def tuning_history(self, limit: int = 200, changes_only: bool = False) -> list[dict[str, Any]]:
        """The tuning ledger, newest first (GET /api/v1/tuning/history, `fabricd tune history`): read from the state,
        so a standby and an instance with the loop off answer too."""
        return [r.to_dict() for r in self.state.tuning.history(limit, applied_only=changes_only)]
