"""`fabricd run`: telemetry in, detectors every tick, remediation and tickets out, API and metrics beside.

One asyncio loop: gNMI streams (grpc.aio), the detector tick, the API server (uvicorn) and apscheduler's
periodic jobs (ticket sync, re-enable retries, config drift, pruning). Blocking driver calls go to a bounded
thread pool. On start it reconciles with the switches before it acts on anything new.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import logging
import signal
import ssl
import time
from collections import Counter
from collections.abc import Awaitable, Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, replace
from functools import partial
from pathlib import Path
from typing import Any

import uvicorn
from apscheduler.schedulers.asyncio import AsyncIOScheduler
from prometheus_client import CollectorRegistry
from pydantic import SecretStr

from drivers.inventory import load_inventory
from fabricd import __version__
from fabricd.bus import connect as connect_bus
from fabricd.detectors import bgp_session, dci_ports, link_flap
from fabricd.detectors.coverage import Coverage, Late, coverage_json, switch_coverage
from fabricd.detectors.finding import Finding
from fabricd.detectors.runner import Runner
from fabricd.jobs.annotate import annotate
from fabricd.jobs.report import JobReport
from fabricd.jobs.report import report as job_report
from fabricd.jobs.source import JobSource, SlurmRest
from fabricd.telemetry import (
    CounterStore,
    Ingestor,
    Snapshot,
    TelemetrySource,
    TraceWriter,
)
from fabricd.telemetry.bus_source import BusTelemetry
from fabricd.telemetry.platforms import plans, profiles
from policies.policy import load_policy
from topology.load import load_fabric
from topology.model import Endpoint
from topology.units import NS

from .actuator import DriverActuator
from .bgp_ssh import BgpOverSsh
from .carrier_watch import CarrierWatch
from .config import ServiceConfig, read_secret
from .decide import ignored
from .leader import Leadership, default_instance
from .maintenance.plan import ACTIVE, overran
from .passes import configured_detectors, guarded, run_passes, telemetry_source
from .port_view import TelemetryPortView
from .remediation.wiring import build_remediation
from .shard import SUBJECT as SHARD_SUBJECT
from .shard import read_findings_message
from .state import Ticket, fenced, open_state
from .state_db import FencedError
from .surface import metrics as service_metrics
from .surface.access import Principal, principal_for, proxy_principal
from .surface.api import create_app
from .surface.port_metrics import PortCollector, UnderlayCollector
from .tickets import TicketBackend, TicketError, make_backend

log = logging.getLogger("fabricd.service")
COVERAGE_EVERY_S = 10.0  # telemetry coverage changes when a switch reconnects or is upgraded, not per sample
ACTION_THREADS = 16  # switch sessions in flight at once; the safety budgets keep real actions far fewer


class Service:
    def __init__(
        self, cfg: ServiceConfig, *, clock: Any = time.time_ns, new_state: bool = False, force: bool = False
    ) -> None:
        self.cfg = cfg
        self.clock = clock
        self.started = time.monotonic()
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
        self._coverage: tuple[float, tuple[frozenset[str], frozenset[str]], dict[str, Coverage]] | None = None
        self.shards_heard: dict[int, int] = {}  # detector shard -> time of its last report (detectors.source: shards)
        self.registry = CollectorRegistry()
        self.telemetry: TelemetrySource = telemetry_source(
            cfg, accesses, self.ingestor, profile, name=f"fabricd {self.instance}", clock=clock, registry=self.registry
        )
        self.runner = Runner(self.fabric, configured_detectors(cfg), keep=False)
        self._flap_state: link_flap.LinkFlapState = self.runner.state_of("link_flap")
        self.carrier = CarrierWatch(self.state, self.fabric, self._flap_state.config)
        jc = cfg.jobs
        rest = None
        if jc.slurmrestd is not None:
            sr = jc.slurmrestd
            token = read_secret(sr.token, "jobs.slurmrestd.token", cfg.source)
            verify = str(sr.verify) if isinstance(sr.verify, Path) else sr.verify
            rest = SlurmRest(sr.url, sr.user, token, sr.api_version, verify)
        self.job_source = JobSource(self.fabric, jc.path, jc.command, jc.job_label, jc.timeout_s, rest)
        self.job_source.refresh()  # a bad read is logged; fabricd watches the fabric without jobs until a good one
        self.dci_state: dci_ports.DciPortsState = self.runner.state_of("dci_ports")
        first = lossless[0] if lossless else 3
        self.lossless = first  # the priority whose PFC and queue counters the page and /metrics show
        ports = PortCollector(self.ingestor.snapshot, self.fabric, first) if cfg.api.port_metrics else None
        service_metrics.register(
            self.registry,
            self.state,
            self.dci_state,
            self.job_reports,
            ports,
            lambda: self.remediation.holds.budgets(),
            self.ha_status if cfg.ha.enabled else None,
            self.coverage,
            self.shard_ages if cfg.detectors.source == "shards" else None,
            UnderlayCollector(self.ingestor.snapshot, self.fabric),
            lambda: len(self.remediation.reconciler.to_reapply()),
            fabric=self.fabric,
        )
        self.view = TelemetryPortView(self.ingestor, time.monotonic, fabric=self.fabric)
        self.pool = ThreadPoolExecutor(max_workers=8, thread_name_prefix="fabricd-io")
        # Port actions get their own threads: a slow ticket backend or drift check must not queue them.
        self.action_pool = ThreadPoolExecutor(max_workers=ACTION_THREADS, thread_name_prefix="fabricd-action")
        self.backend: TicketBackend = make_backend(cfg.tickets, cfg.source)
        self._handing: dict[int, tuple[asyncio.Lock, list[int]]] = {}  # ticket id -> its hand-off lock, callers
        # Hot standby: every instance watches; the one holding the lease acts (leader.py).
        self.leadership: Leadership | None = None
        if cfg.ha.enabled:
            ha = cfg.ha
            self.leadership = Leadership(ha, lambda: connect_bus(cfg.bus, cfg.source, f"fabricd {self.instance}"),
                                         self._elected, claim=self._claim, instance=ha.instance)  # fmt: skip
        self.actuator = DriverActuator(self.inventory)
        # SONiC switches whose STATE_DB has no BGP neighbour rows are read over SSH (bgp_ssh.py), with sessions of
        # their own (an action never waits on a read) in the I/O pool
        self.bgp_ssh = BgpOverSsh(
            [a.name for a in accesses if a.platform == "sonic"], self.fabric, DriverActuator(self.inventory),
            self.pool, self.ingestor.ingest, clock, tcfg.bgp_ssh_after_s, tcfg.bgp_ssh_interval_s,
        )  # fmt: skip
        self.remediation = build_remediation(
            self.fabric,
            self.state,
            cfg.remediation,
            cfg.safety,
            managed=set(self.inventory.names),
            actuator=self.actuator,
            view=self.view,
            clock=clock,
            executor=self.action_pool,
            publish=self.publish,
            fence=self.fence if self.leadership is not None else None,
            token=(lambda: self.leadership.token if self.leadership is not None else None),
            on_fenced=self._fenced_out,
        )
        override = self.state.mode_override()
        if override is not None and override[0] != cfg.remediation.mode:
            mode, actor, ts = override
            log.warning("remediation mode %s (set by %s at %s) overrides fabricd.yaml's %s; change it with "
                        "`fabricd mode`", mode, actor, time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime(ts / 1e9)),
                        cfg.remediation.mode)  # fmt: skip
            self.remediation.ctx.settings = cfg.remediation.model_copy(update={"mode": mode})
        self.api_port: int | None = None
        self._synced = asyncio.Event()
        self.ready = asyncio.Event()
        self._stop = asyncio.Event()
        self._server: uvicorn.Server | None = None

    # --- lifecycle -------------------------------------------------------------------------------------------
    async def run(self) -> None:
        # The fabric, inventory and indexes live as long as the service: keep the cyclic GC from rescanning them
        # (a full collection over a pod-16k fabric's ~400k objects stalls the loop 150-400 ms; docs/benchmarks.md).
        gc.freeze()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            with contextlib.suppress(NotImplementedError, RuntimeError, ValueError):
                loop.add_signal_handler(sig, self._stop.set)
        app = create_app(self)
        api = self.cfg.api
        tls: dict[str, Any] = {}
        if api.tls is not None:
            tls = {"ssl_certfile": str(api.tls.cert), "ssl_keyfile": str(api.tls.key)}
            if api.tls.client_ca is not None:  # mutual TLS: no client certificate, no connection
                tls |= {"ssl_ca_certs": str(api.tls.client_ca), "ssl_cert_reqs": ssl.CERT_REQUIRED}
        config = uvicorn.Config(
            app, host=api.host, port=api.port, log_level="warning", lifespan="off", access_log=False, **tls
        )
        self._server = uvicorn.Server(config)
        # uvicorn takes SIGINT/SIGTERM while it serves and re-raises them to our handlers when it stops.
        tasks = [
            asyncio.create_task(self.telemetry.run(), name="telemetry"),
            asyncio.create_task(self._server.serve(), name="api"),
        ]
        if self.leadership is not None:
            tasks.append(asyncio.create_task(self.leadership.run(self._stop), name="leader-lease"))
        scheduler = AsyncIOScheduler(event_loop=loop)
        try:
            await self._api_started()
            log.info(
                "fabricd %s: %d switches, mode %s, API on http://%s:%s",
                __version__, len(self.inventory.names), self.remediation.requests.mode, self.cfg.api.host,
                self.api_port,
            )  # fmt: skip
            # Reconcile only on fresh data: wait for the first full sync (bounded, a dead switch must not block us).
            await self.telemetry.wait_synced(3 * self.cfg.telemetry.interval_s + 2)
            self._synced.set()
            if self.leadership is None:  # with a standby, the instance that takes the lease reconciles (_elected)
                await guarded("reconcile at start", self._take_over())  # what fails is retried by every pass
            tick = self.cfg.detectors.tick_s
            lead = self._leader_job
            scheduler.add_job(lead(self._sync_tickets), "interval", seconds=self.cfg.tickets.sync_interval_s,
                              id="tickets")  # fmt: skip
            scheduler.add_job(lead(self._retry_enables), "interval", seconds=max(30.0, tick), id="reenable")
            scheduler.add_job(lead(self._drift), "interval", seconds=self.cfg.drift_interval_s, id="drift")
            scheduler.add_job(lead(self._prune), "interval", hours=6, id="prune")
            scheduler.add_job(lead(self._scan_marks), "interval", seconds=self.cfg.remediation.mark_scan_s,
                              id="marks")  # fmt: skip
            if self.job_source.configured:
                scheduler.add_job(self._refresh_jobs, "interval", seconds=self.cfg.jobs.refresh_s, id="jobs")
            scheduler.start()
            if self.cfg.detectors.source == "shards":
                tasks.append(asyncio.create_task(self._shard_findings(), name="detectors"))
            else:
                tasks.append(asyncio.create_task(self._tick_loop(tick), name="detectors"))
            if self.bgp_ssh.candidates:
                tasks.append(asyncio.create_task(self.bgp_ssh.run(lambda: self.telemetry.synced, self._streams_bgp),
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

    def acting(self) -> bool:
        """This instance acts: it runs alone, or it holds the leader lease."""
        return self.leadership is None or self.leadership.acting()

    def fence(self) -> str | None:
        """Why this instance may not act now, or None: asked before every switch call and request of people."""
        lead = self.leadership
        if lead is None:
            return None
        if not lead.acting():
            return f"this instance ({lead.instance}) is a standby; the leader is {lead.holder or 'being elected'}"
        margin = self.cfg.ha.switch_call_margin_s
        if lead.valid_for() < margin:  # a call must end while the lease is certainly ours
            return f"the leader lease of {lead.instance} ends in {lead.valid_for():.2f} s (< {margin:g} s for a call)"
        held = self.state.leader()
        if held is None or held[1] != lead.token:
            who = "nobody" if held is None else f"{held[0]} (token {held[1]})"
            return f"fenced: the state names {who} as leader, not this instance (token {lead.token})"
        return None

    def _fenced_out(self, why: str) -> None:
        """The state names a newer leader: this instance was paused or cut off and is no longer it."""
        if self.leadership is not None:
            self.leadership.step_down(why)

    async def _claim(self, token: int) -> bool:
        """This instance took the lease: record its fencing token, off the event loop (it keeps renewing the lease
        and answering the API meanwhile; the claim ends an old leader's stuck write, StateStore.claim_leader)."""
        return await asyncio.to_thread(self.state.claim_leader, self.instance, token, self.clock())

    async def _elected(self, token: int) -> None:
        """This instance's token is recorded: finish what the old leader left."""
        await self._synced.wait()  # reconcile on fresh telemetry (a standby has it already)
        await self._take_over()

    async def _take_over(self) -> None:
        for note in await self.remediation.reconciler.reconcile(self.telemetry.stale_devices()):
            self.state.audit(self.clock(), "reconcile", note)
        for drain_id in self.remediation.maintenance.resume_drains():  # planned maintenance left between its steps
            self.state.audit(self.clock(), "reconcile", f"drain {drain_id} resumed at its next step")
        await self._sync_tickets()

    async def _scan_marks(self) -> None:
        """Read fabricd's marks from the switches again; the next pass adopts a marked port fabricd has no record
        of."""
        await self.remediation.marks.scan(self.telemetry.stale_devices())

    def _leader_job(self, job: Callable[[], Awaitable[None]]) -> Callable[[], Awaitable[None]]:
        async def run() -> None:
            if self.acting():
                await job()

        run.__name__ = job.__name__
        return run

    async def _api_started(self) -> None:
        server = self._server
        assert server is not None
        while not server.started:
            if server.should_exit:
                raise RuntimeError("the API server did not start")
            await asyncio.sleep(0.02)
        sock = server.servers[0].sockets[0]
        self.api_port = int(sock.getsockname()[1])

    # --- the detector tick -----------------------------------------------------------------------------------
    async def _tick_loop(self, tick_s: float) -> None:
        """Detector passes on the service's clock (fabricd/service/passes.py)."""
        await run_passes(self.ingestor, self.clock, self._stop, tick_s=tick_s,
                         pass_gap_s=self.cfg.detectors.pass_gap_s, full=self.tick, flap=self.flap_pass)  # fmt: skip

    async def _shard_findings(self) -> None:
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
            while not self._stop.is_set():
                data = await queue.get()
                try:
                    shard, ts, findings = read_findings_message(data)
                except (ValueError, KeyError, TypeError) as e:
                    log.warning("a detector shard's message could not be read (%s); dropped", e)
                    continue
                self.shards_heard[shard] = ts
                await self._act(findings, ts)
                # An incident no shard reported for 3 ticks is over; while a shard is silent its part of the fabric
                # is unwatched, and its incidents are not over (health says which shard).
                if self.acting() and not self.silent_shards(ts):
                    self.state.clear_findings_not_seen_since(ts - int(3 * self.cfg.detectors.tick_s * NS))
        finally:
            await sub.unsubscribe()
            await nc.close()

    def shard_ages(self, now: int | None = None) -> dict[int, float | None]:
        """Per detector shard, seconds since its last report (None: never)."""
        t = self.clock() if now is None else now
        return {k: None if k not in self.shards_heard else (t - self.shards_heard[k]) / NS
                for k in range(self.cfg.detectors.shards)}  # fmt: skip

    def silent_shards(self, now: int | None = None) -> list[int]:
        """Detector shards (detectors.source: shards) that have not reported for 3 ticks, or ever."""
        if self.cfg.detectors.source != "shards":
            return []
        limit = 3 * self.cfg.detectors.tick_s
        return [k for k, age in self.shard_ages(now).items() if age is None or age > limit]

    async def tick(self, now: int) -> list[Finding]:
        snap = self.ingestor.snapshot()
        found = self.runner.tick(snap, now)
        if self.acting():  # flaps that ended while fabricd was not watching (carrier_watch.py)
            found += self.carrier.check(snap, now, self._unsure(now), self._flap_tracked)
        else:
            self.carrier.disarm()  # what it remembers when it leads again is what the leader wrote
        usable = await self._act(found, now)
        if self.acting():  # An incident not reported for 3 ticks is over.
            self.remediation.maintenance.report_overruns(now)  # planned maintenance past its --until
            try:  # under the fence like every write: a woken old leader does not clear the new one's findings
                with fenced(self.leadership.token if self.leadership is not None else None):
                    self.state.clear_findings_not_seen_since(now - int(3 * self.cfg.detectors.tick_s * NS))
            except FencedError as e:
                self._fenced_out(str(e))
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
        due = self.carrier.to_save(snap, now, self._unsure(now))
        if due is None:
            return
        rows, unsure = due
        try:
            with fenced(self.leadership.token if self.leadership is not None else None):
                self.state.save_carrier_seen(rows, now, unsure)
        except FencedError as e:
            self._fenced_out(str(e))
            return
        self.carrier.saved(snap, rows, now)

    async def _reconcile(self, now: int) -> None:
        """Every pass: fabricd's records against what the fabric shows (reconcile.py); never before the first sync,
        never on a stale switch."""
        if not self._synced.is_set():
            return
        for note in await self.remediation.reconciler.reconcile_pass(now, self._unsure(now)):
            log.warning("reconcile: %s", note)

    async def flap_pass(self, now: int) -> list[Finding]:
        """link_flap on the oper-status events that landed since the last such pass, on its tick state (the next full
        pass sees the same incidents, already known)."""
        found = link_flap.on_store_events(self.store, self.fabric, self._flap_state, now)
        return await self._act(found, now) if found else []

    async def _act(self, findings: list[Finding], now: int) -> list[Finding]:
        stale = set(self.telemetry.stale_devices(now))
        rows = self.state.disabled_ports()
        held = {Endpoint(p["device"], p["port"]) for p in rows}
        up_again = self.remediation.holds.up_again(rows)
        usable = annotate([f for f in findings if not ignored(f, self.fabric, stale, held, up_again)],
                          self.job_source.map)  # fmt: skip
        if self.acting():  # a standby's detectors run too (warm for a takeover); the leader records and acts
            await self.remediation.incidents.on_findings(usable, self._unsure(now))
        return usable

    def _unsure(self, now: int) -> set[str]:
        """The switches with no fresh word now: stale, or not synced (restarting, resyncing): the guard does not
        judge on what they streamed before."""
        return {*self.telemetry.stale_devices(now), *(d for d, ok in self.telemetry.synced.items() if not ok)}

    # --- tickets ---------------------------------------------------------------------------------------------
    async def publish(self, ticket: Ticket) -> None:
        """Hand the ticket's current version to the backend; on failure the sync job retries it. As a leader, under
        its fence: asked before every request the backend sends (tickets/base.py), and the hand-off recorded only
        while the state still names this leader's token; a woken old leader sends and records nothing more.
        One hand-off of a ticket at a time: a second caller (a takeover's sync beside the scheduled one, both
        having read the ticket unsynced) waits and sends nothing if the first one delivered that version."""
        held = self._handing.setdefault(ticket.id, (asyncio.Lock(), [0]))
        held[1][0] += 1
        try:
            async with held[0]:
                done = self.state.ticket(ticket.id)
                if done is not None and done.synced_ts is not None and done.synced_ts >= ticket.updated_ts:
                    return
                await self._hand_off(ticket)
        finally:
            held[1][0] -= 1
            if held[1][0] == 0:
                del self._handing[ticket.id]

    async def _hand_off(self, ticket: Ticket) -> None:
        token = self.leadership.token if self.leadership is not None else None
        try:
            if self.backend.name != "sqlite":
                guard = partial(self._ticket_guard, token)
                guard()
                ref = await asyncio.get_running_loop().run_in_executor(
                    self.pool, partial(self.backend.publish, ticket, guard)
                )
            else:
                ref = None
            with fenced(token):
                self.state.mark_synced(ticket.id, ticket.updated_ts, ref)
        except TicketError as e:
            log.warning("%s", e)
        except FencedError as e:
            self._fenced_out(str(e))

    def _ticket_guard(self, token: int | None) -> None:
        """Before a ticket backend's request: TicketError if this instance may no longer act under `token`."""
        why = self.fence()
        if why is None and self.leadership is not None and self.leadership.token != token:
            why = f"the lease changed hands since this hand-off began (token {token})"
        if why is not None:
            raise TicketError(f"ticket hand-off stopped: {why}")

    async def _sync_tickets(self) -> None:
        for t in self.state.unsynced():
            await self.publish(t)
        if self.fence() is not None:
            return  # a leader woken from a pause asks the backend nothing more (not even what was resolved)
        loop = asyncio.get_running_loop()
        try:
            done = await loop.run_in_executor(self.pool, self.backend.resolved, self.state.tickets("open"))
        except TicketError as e:
            log.warning("%s", e)
            return
        for tid in done:
            t = await self.remediation.requests.resolve(tid, self.backend.name)
            await self.publish(t)

    async def _retry_enables(self) -> None:
        """A port whose ticket is resolved but that is still held down (its enable failed): try again."""
        for p in self.state.disabled_ports():
            t = self.state.ticket(p["ticket_id"]) if p["ticket_id"] else None
            if t is not None and t.status == "resolved" and self.state.open_action(p["device"], p["port"]) is None:
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
            self.state.audit(self.clock(), "config drift", f"{len(drifted)} switches differ: {', '.join(drifted[:20])}")
            log.warning("config drift on %d switches: %s (run fabricd plan)", len(drifted), ", ".join(drifted[:20]))

    async def _refresh_jobs(self) -> None:
        await asyncio.get_running_loop().run_in_executor(self.pool, self.job_source.refresh)

    async def _prune(self) -> None:
        self.state.prune(self.clock() - int(self.cfg.detectors.retention_days * 86400 * NS))

    # --- views for the API -----------------------------------------------------------------------------------
    def principal(self, token: str) -> Principal | None:
        """Who a bearer token (or the page's login) is, or None."""
        service_token = None if self.api_token is None else self.api_token.get_secret_value()

        def lookup(h: str) -> tuple[str, str] | None:
            row = self.state.token_by_hash(h)
            return None if row is None else (row.user, row.role)

        return principal_for(token, service_token, lookup)

    def proxied(self, client: str | None, headers: Mapping[str, str]) -> Principal | None:
        """Who a trusted SSO proxy says the request is from (api.trusted_proxy), or None."""
        tp = self.cfg.api.trusted_proxy
        if tp is None:
            return None
        return proxy_principal(client, headers.get(tp.user_header), tp.addresses, dict(tp.roles), tp.default_role)

    def in_flight(self) -> list[dict[str, Any]]:
        """Actions under way (a port going down or coming back, one resumed after a restart waiting for telemetry or
        LLDP): while one runs its port may read up with its hold still recorded, or down without one."""
        now = time.time_ns()
        return [
            {"action_id": a.id, "op": a.op, "port": f"{a.device}:{a.port}", "mode": a.mode,
             "for_s": round(max(0, now - a.created_ts) / NS, 1), "detail": a.detail}
            for a in self.state.actions_in("running")
        ]  # fmt: skip

    def maintenance_status(self) -> list[dict[str, Any]]:
        """The active drains (planned maintenance), as `fabricd status` shows them."""
        now = time.time_ns()
        return [
            {"id": d.id, "kind": d.kind, "target": d.target, "state": d.state, "step": f"{d.done}/{len(d.steps)}",
             "actor": d.actor, "reason": d.reason, "detail": d.detail, "overran": overran(d.until_ts, d.state, now)}
            for d in self.state.drains(ACTIVE)
        ]  # fmt: skip

    def health(self) -> dict[str, Any]:
        stale = self.telemetry.stale_devices()
        synced = sum(self.telemetry.synced.values())
        silent = self.silent_shards()
        writes = self.state.writes
        # degraded while a switch is stale or not synced (a source that never synced is not watching it)
        whole = not stale and not silent and synced == len(self.telemetry.devices)
        quarantined = self.state.quarantine.entries()  # rows that cannot be decoded: fabricd works without them
        status = "failing" if writes.failing else "ok" if whole and not quarantined else "degraded"
        return {
            "status": status,
            "state": {
                "writable": not writes.failing,
                "write_failures": writes.failures,
                "last_error": writes.last_error if writes.failing else None,
                "quarantined": [asdict(q) for q in quarantined],
            },
            "version": __version__,
            "mode": self.remediation.requests.mode,
            "ha": self.ha_status(),
            "uptime_s": round(time.monotonic() - self.started, 1),
            "telemetry": {
                "devices": len(self.telemetry.devices),
                "synced": synced,
                "stale": stale,
                # bus mode: switches no collector holds (stale because nobody streams them, not because they are
                # silent); empty when the service streams itself
                "unheld": self.telemetry.unheld_devices() if isinstance(self.telemetry, BusTelemetry) else [],
                "coverage": [coverage_json(name, self.os_versions.get(name), c) for name, c in self.coverage().items()],
                "bgp_over_ssh": self.bgp_ssh.status(),
            },
            "detectors": {
                "source": self.cfg.detectors.source,
                "shards": self.cfg.detectors.shards,
                "silent_shards": silent,
            },
            "open_tickets": len(self.state.tickets("open")),
            "disabled_ports": len(self.state.disabled_ports()),
            "stale_holds": len(self.remediation.holds.stale_holds()),
            "to_reapply": self.remediation.reconciler.to_reapply(),
            "in_flight": self.in_flight(),
            "maintenance": self.maintenance_status(),
            "ticket_backend": self.backend.name,
            "jobs": asdict(self.job_source.status) | {"configured": self.job_source.configured},
        }

    def _streams_bgp(self) -> set[str]:
        return {d for d, leaves in self.ingestor.snapshot().leaves_by_device().items() if bgp_session.STATE in leaves}

    def coverage(self) -> dict[str, Coverage]:
        """Synced switches whose telemetry falls short of their profile: paths left out for their release or refused
        by them, the leaves detectors read that they do not stream, and the detectors that leaves them blind or
        degraded on. Worked out at most every COVERAGE_EVERY_S (a pass over every series), for health and /metrics."""
        mono = time.monotonic()
        synced = frozenset(name for name, ok in self.telemetry.synced.items() if ok)
        key = (synced, frozenset(self.bgp_ssh.devices))  # a switch moving to SSH reads changes its coverage at once
        cached = self._coverage
        if cached is None or cached[1] != key or mono - cached[0] >= COVERAGE_EVERY_S:
            cached = self._coverage = (mono, key, self._work_out_coverage(synced))
        return cached[2]

    def _work_out_coverage(self, synced: frozenset[str]) -> dict[str, Coverage]:
        seen = self.ingestor.snapshot().leaves_by_device()
        out = {}
        for name in sorted(synced):
            if name not in self.plans:
                continue
            cov = switch_coverage(self.plans[name], self.telemetry.state(name).rejected, seen.get(name, ()))
            if name in self.bgp_ssh.devices:  # its BGP state comes over SSH, late by the read interval
                late = Late("bgp_session", bgp_session.STATE, self.bgp_ssh.late_reason)
                cov = replace(cov, late=(*(x for x in cov.late if x.leaf != bgp_session.STATE), late))
            if not cov.complete:
                out[name] = cov
        return out

    def ha_status(self) -> dict[str, Any]:
        lead = self.leadership
        if lead is None:
            return {"enabled": False, "role": "leader"}
        return {"enabled": True, "role": lead.role(), "instance": lead.instance, "leader": lead.holder,
                "token": lead.token}  # fmt: skip

    def jobs_through(self, ports: list[str]) -> list[str]:
        """The training jobs whose traffic uses these ports (the job map; none without one): what a drain touches."""
        jobs = self.job_source.map
        return [] if jobs is None else [j.name or j.id for j in jobs.hit(ports)]

    def job_reports(self) -> list[JobReport]:
        jobs = self.job_source.map
        if jobs is None:
            return []
        snap = self.ingestor.snapshot()
        return [job_report(fp, snap) for fp in jobs.footprints.values()]

    def topology_summary(self) -> dict[str, Any]:
        roles = Counter(d.role.value for d in self.fabric.devices())
        return {
            "devices": dict(sorted(roles.items())),
            "links": len(self.fabric.links),
            "switches": len(self.fabric.switches()),
            "managed": len(self.inventory.names),
        }
