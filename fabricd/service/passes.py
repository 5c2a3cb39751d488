"""The live detector-pass loop: the PassSchedule (fabricd/detectors/schedule.py) driven by a clock and a store.
The service runs it, and so does each `fabricd shard` process (fabricd/service/shard.py)."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable

from fabricd.detectors import dci_ports, optics_trend
from fabricd.detectors.runner import SETTLE_S, Detector, default_detectors
from fabricd.detectors.schedule import PassKind, PassSchedule
from fabricd.telemetry import CounterStore, Ingestor
from topology.units import NS

from .config import ServiceConfig

log = logging.getLogger("fabricd.service")
EVENT_POLL_S = SETTLE_S  # how often new data is looked for between ticks (`fabricd detect` mirrors it)
FLAP_PASS_GAP_S = 0.1  # at most this often an event-driven link_flap pass
PASS_SHARE = 0.1  # sample-driven detector passes space out to take at most this share of a core


def pass_gap(base_ns: int, cost_s: float) -> int:
    """The gap before the next sample-driven pass: at least `base_ns`, and long enough that these passes take at
    most ~PASS_SHARE of a core. On 832 switches a pass costs ~23 ms and the store copy its snapshot causes at the
    next write ~17 ms (~30 ms before the store copied only the columns it writes; docs/benchmarks.md): hence twice
    the pass's own time."""
    return max(base_ns, round(2 * cost_s / PASS_SHARE * NS))


async def guarded(what: str, work: Awaitable[object]) -> None:
    try:
        await work
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
    counter samples land (at most every pass gap, which widens with the pass's cost) and link_flap alone (`flap`)
    soon after oper-status events (ON_CHANGE), so neither a crossed dampening threshold nor a storm's stuck sample
    waits for the next tick. Each pass takes a snapshot (a copy of the store on its next write), hence the gaps."""
    store: CounterStore = ingestor.store
    flap_gap, base_gap = int(FLAP_PASS_GAP_S * NS), int(pass_gap_s * NS)
    schedule = PassSchedule(int(tick_s * NS), base_gap, flap_gap_ns=flap_gap, guard_ns=flap_gap)
    schedule.start(clock())
    events, samples = store.ev_total, store.sample_batches
    while not stop.is_set():
        assert schedule.tick_end is not None
        left = schedule.tick_end - clock()
        if left > 0:
            await asyncio.sleep(min(EVENT_POLL_S, left / NS))
        ingestor.flush()  # events and samples wait in the ingestor's batch otherwise
        now = clock()
        if store.sample_batches != samples:
            samples = store.sample_batches
            schedule.arrived(now, samples=True)
        if store.ev_total != events:
            events = store.ev_total
            schedule.arrived(now, events=True)
        while (p := schedule.due(now)) is not None and not stop.is_set():
            started = time.perf_counter()
            if p.kind is PassKind.FLAP:
                await guarded("link_flap pass", flap(now))
            else:
                await guarded(f"detector {p.kind.value}", full(now))
            if p.kind is PassKind.FULL:
                schedule.gap_ns = pass_gap(base_gap, time.perf_counter() - started)
            schedule.ran(p, now, now)


def configured_detectors(cfg: ServiceConfig) -> list[Detector]:
    """The detectors as the service config sets them (sample intervals, DCI and optics thresholds)."""
    t = cfg.telemetry
    return default_detectors(
        t.interval_s,
        pfc_interval_s=t.intervals.get("pfc"),
        fec_interval_s=t.intervals.get("fec"),
        dci=dci_ports.DciPortsConfig(**cfg.detectors.dci.model_dump()),
        optics=optics_trend.OpticsTrendConfig(**cfg.detectors.optics_trend.model_dump()),
    )
