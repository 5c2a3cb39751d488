"""The live detector-pass loop: the PassSchedule (fabricd/detectors/schedule.py) driven by a clock and a store.
The service runs it, and so does each `fabricd shard` process (fabricd/service/shard.py)."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence

from prometheus_client import CollectorRegistry

from drivers.inventory import DeviceAccess
from fabricd.bus import connect as connect_bus
from fabricd.detectors import dci_ports, optics_trend
from fabricd.detectors.runner import SETTLE_S, Detector, default_detectors
from fabricd.detectors.schedule import PassKind, PassSchedule
from fabricd.telemetry import CounterStore, Ingestor, TelemetryClient, TelemetryMetrics
from fabricd.telemetry.bus_source import BusTelemetry
from fabricd.telemetry.paths import Subscription
from fabricd.telemetry.workers import TelemetrySource, TelemetryWorkers
from topology.spec import load_spec
from topology.units import NS

from .config import ServiceConfig
from .state.db import ConflictError, StateError

log = logging.getLogger("fabricd.service")
EVENT_POLL_S = SETTLE_S  # how often new data is looked for between ticks (`fabricd detect` mirrors it)
GUARD_S = 0.1  # no sample-driven pass this close to the tick boundary, whose pass is about to come
PASS_SHARE = 0.1  # sample-driven detector passes space out to take at most this share of a core


def pass_gap(base_ns: int, cost_s: float) -> int:
    """The gap before the next sample-driven pass: at least `base_ns`, and long enough that these passes take at
    most ~PASS_SHARE of a core. On 832 switches a pass costs ~23 ms and the store copy its snapshot causes at the
    next write ~17 ms (~30 ms before the store copied only the columns it writes; docs/benchmarks.md): hence twice
    the pass's own time."""
    return max(base_ns, round(2 * cost_s / PASS_SHARE * NS))


_conflicts_logged: set[str] = set()  # ConflictError messages already logged (bounded below)


async def guarded(what: str, work: Awaitable[object]) -> None:
    try:
        await work
    except ConflictError as e:
        # A uniqueness rule a pass keeps running into (an open ticket whose row is quarantined, say): logged once,
        # not once a pass; the pass after the row is repaired goes through.
        if str(e) not in _conflicts_logged and len(_conflicts_logged) < 1000:
            _conflicts_logged.add(str(e))
            log.error("%s: %s; continuing (this conflict is not logged again)", what, e)
    except StateError:
        return  # the state store logs a write failure once a minute and health says `failing` (state.WriteHealth)
    except Exception:
        log.exception("%s failed; continuing with the next one", what)


async def run_passes(
    ingestor: Ingestor,
    clock: Callable[[], int],
    stop: asyncio.Event,
    *,
    tick_s: float,
    pass_gap_s: float,
    full: Callable[[int], Awaitable[object]],
    flap: Callable[[int], Awaitable[object]],
) -> None:
    """Detector passes on `clock`: every detector on the tick boundaries (`full`); in between, all of them soon after
    counter samples land (at most every pass gap, which widens with the pass's cost); and link_flap (`flap`) as soon
    as oper-status events land (ON_CHANGE: the store wakes this loop), so a crossed dampening threshold is judged on
    the event that crossed it, and a storm's stuck sample does not wait for the next tick. A full pass takes a
    snapshot (a copy of the store on its next write), hence its gaps; the flap pass reads only the new events."""
    store: CounterStore = ingestor.store
    base_gap = int(pass_gap_s * NS)
    schedule = PassSchedule(int(tick_s * NS), base_gap, guard_ns=int(GUARD_S * NS))
    schedule.start(clock())
    wake = asyncio.Event()
    store.on_event.append(wake.set)
    events, samples = store.ev_total, store.sample_batches
    try:
        while not stop.is_set():
            assert schedule.tick_end is not None
            left = schedule.tick_end - clock()
            if left > 0 and not wake.is_set():
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(wake.wait(), min(EVENT_POLL_S, left / NS))
            ingestor.flush()  # events and samples wait in the ingestor's batch otherwise
            wake.clear()
            now = clock()
            if store.ev_total != events:
                events = store.ev_total
                await guarded("link_flap pass", flap(now))
            if store.sample_batches != samples:
                samples = store.sample_batches
                schedule.arrived(now)
            while (p := schedule.due(now)) is not None and not stop.is_set():
                started = time.perf_counter()
                await guarded(f"detector {p.kind.value}", full(now))
                if p.kind is PassKind.FULL:
                    schedule.gap_ns = pass_gap(base_gap, time.perf_counter() - started)
                schedule.ran(p, now, now)
    finally:
        store.on_event.remove(wake.set)


def configured_detectors(cfg: ServiceConfig) -> list[Detector]:
    """The detectors as the service config sets them (sample intervals, DCI and optics thresholds)."""
    t = cfg.telemetry
    return default_detectors(
        t.interval_s,
        pfc_interval_s=t.intervals.get("pfc"),
        fec_interval_s=t.intervals.get("fec"),
        dci=dci_ports.DciPortsConfig(**cfg.detectors.dci.model_dump()),
        optics=optics_trend.OpticsTrendConfig(**cfg.detectors.optics_trend.model_dump()),
        spec=load_spec(cfg.spec),
    )


def telemetry_source(
    cfg: ServiceConfig,
    accesses: Sequence[DeviceAccess],
    ingestor: Ingestor,
    profile: Mapping[str, Sequence[Subscription]],
    *,
    name: str,
    clock: Callable[[], int],
    registry: CollectorRegistry | None = None,
) -> TelemetrySource:
    """Telemetry for `accesses` as `telemetry:` says: read from the collectors' stream (source: bus), streamed by
    worker processes (workers > 1), or streamed in this process; `name` names the bus connection."""
    t = cfg.telemetry
    metrics = TelemetryMetrics(registry) if registry is not None else None
    if t.source == "bus":  # `fabricd collector` processes subscribe; this one reads their stream
        return BusTelemetry(
            [a.name for a in accesses], ingestor, lambda: connect_bus(cfg.bus, cfg.source, f"{name} telemetry"),
            interval_s=t.interval_s, max_age_s=t.stream_max_age_s, max_bytes=t.stream_max_bytes, registry=registry,
            metrics=metrics, clock=clock,
        )  # fmt: skip
    if t.workers > 1:  # worker processes stream and decode; their batches land in the ingestor's store
        return TelemetryWorkers(accesses, ingestor, profile=profile, workers=t.workers, interval_s=t.interval_s,
                                metrics=metrics, clock=clock, spread_samples=t.spread_samples)  # fmt: skip
    return TelemetryClient(accesses, ingestor, profile=profile, interval_s=t.interval_s, metrics=metrics, clock=clock,
                           spread_samples=t.spread_samples)  # fmt: skip
