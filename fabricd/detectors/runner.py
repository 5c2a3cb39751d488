"""Run detectors tick by tick over a recorded trace, exactly as the service runs them over live telemetry.

The trace goes through `replay` (the service's ingestion path). Time is cut into ticks of `tick_s` of trace time
(aligned to multiples of it); when a record of a later tick arrives, the store is flushed, a snapshot taken and
every detector called with `now_ns` = the end of the finished tick. Between boundaries a pass also runs soon after
new records arrive (at most every `pass_gap_s`), as the service does when samples arrive. A detector returns the
incidents active at that pass; the same incident (same `Finding.key`) reported again is merged, so each appears
once in the result. The trace is read in file order (time order per device, as the service records it).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from fabricd.telemetry import CounterStore, Ingestor, Snapshot, replay
from topology.fabric import Fabric
from topology.spec import FabricSpec
from topology.units import NS

from . import (
    bgp_session,
    dci_ports,
    link_corruption,
    link_flap,
    miscabled,
    optics_trend,
    pfc_deadlock,
    pfc_storm,
    silent_corruption,
    stuck_queues,
)
from .finding import Finding
from .probes import Probe
from .schedule import PassSchedule

DetectFn = Callable[[Snapshot, Fabric, Any, int], list[Finding]]


@dataclass(frozen=True)
class Detector:
    name: str
    detect: DetectFn
    new_state: Callable[[], Any]


def default_detectors(
    sample_interval_s: float = 1.0,
    *,
    pfc_interval_s: float | None = None,
    fec_interval_s: float | None = None,
    dci: dci_ports.DciPortsConfig | None = None,
    optics: optics_trend.OpticsTrendConfig | None = None,
    spec: FabricSpec | None = None,
) -> list[Detector]:
    """The built detectors; the PFC/queue and FEC counters may be sampled apart from the rest (telemetry.intervals);
    `dci` sets the DR port monitoring (its sample interval is taken from `sample_interval_s`), `optics` the failure
    prediction; with the fabric's `spec`, miscabled judges the live LLDP by the layout rules."""
    trend = optics or optics_trend.OpticsTrendConfig()
    storm = pfc_storm.PfcStormConfig(sample_interval_s=pfc_interval_s or sample_interval_s)
    deadlock = pfc_deadlock.PfcDeadlockConfig(stuck=storm)
    corrupt = link_corruption.LinkCorruptionConfig(sample_interval_s=sample_interval_s, fec_interval_s=fec_interval_s)
    dci = replace(dci or dci_ports.DciPortsConfig(), sample_interval_s=sample_interval_s)
    out = [
        Detector("link_flap", link_flap.detect, link_flap.LinkFlapState),
        Detector("pfc_storm", pfc_storm.detect, lambda: pfc_storm.PfcStormState(storm)),
        Detector("pfc_deadlock", pfc_deadlock.detect, lambda: pfc_deadlock.PfcDeadlockState(deadlock)),
        Detector("link_corruption", link_corruption.detect, lambda: link_corruption.LinkCorruptionState(corrupt)),
        Detector("dci_ports", dci_ports.detect, lambda: dci_ports.DciPortsState(dci)),
        Detector("optics_trend", optics_trend.detect, lambda: optics_trend.OpticsTrendState(trend)),
        Detector("bgp_session", bgp_session.detect, bgp_session.BgpSessionState),
    ]
    if spec is not None:
        out.append(Detector("miscabled", miscabled.detect, lambda: miscabled.MiscabledState(spec)))
    return out


class Runner:
    """Detectors with their states over one fabric; `tick(snapshot, now)` runs them all once."""

    def __init__(self, fabric: Fabric, detectors: list[Detector] | None = None, *, keep: bool = True) -> None:
        """`keep`: merge every finding into `findings()` (a replay reports them at the end). A service reads what
        each tick returns and runs for months: it passes False, so nothing grows with every incident."""
        self.fabric = fabric
        self.detectors = default_detectors() if detectors is None else detectors
        self.states = [d.new_state() for d in self.detectors]
        stuck_queues.share(self.states)  # pfc_storm and pfc_deadlock judge stuck queues once a tick, on one state
        self.keep = keep
        self.found: dict[tuple[Any, ...], Finding] = {}
        self.ticks = 0

    def tick(self, snapshot: Snapshot, now_ns: int) -> list[Finding]:
        self.ticks += 1
        out: list[Finding] = []
        for det, state in zip(self.detectors, self.states, strict=True):
            out.extend(det.detect(snapshot, self.fabric, state, now_ns))
        for f in out if self.keep else ():
            old = self.found.get(f.key)
            self.found[f.key] = f if old is None else old.merged(f)
        return out

    def state_of(self, name: str) -> Any:
        """The state of the detector called `name` (ValueError if there is none)."""
        return self.states[[d.name for d in self.detectors].index(name)]

    def findings(self) -> list[Finding]:
        return sorted(self.found.values(), key=lambda f: (f.detected_ts, f.kind, f.device, f.port or ""))


SETTLE_S = 0.025  # a sample-driven pass waits this long after the first new record: the rest of a burst arrives
PASS_GAP_S = 0.2  # default: at most this often a sample-driven pass (each takes a snapshot and runs every detector)


class _TickingIngestor(Ingestor):
    """An Ingestor that runs the detectors on trace time as the service does on its clock (schedule.PassSchedule):
    once per tick, on the tick's boundaries, and in between SETTLE_S after new records arrive (at least `gap_ns`
    after the previous such pass). The second keeps detection delay at the sample's arrival instead of the next tick
    boundary: a storm's first whole paused sample arrives ~0.1 s after a whole second on the twin, the boundary
    0.9 s later. A trace does not tell samples from events, so there are no link_flap-only passes."""

    def __init__(self, store: CounterStore, runner: Runner, tick_ns: int, gap_ns: int = 0) -> None:
        super().__init__(store)
        self.runner = runner
        self.schedule = PassSchedule(tick_ns, gap_ns, settle_ns=int(SETTLE_S * NS))

    def ingest(self, data: bytes | Any, channel: str, now: int | None = None) -> None:
        # `replay` passes each notification's trace timestamp as `now`.
        if now is not None:
            self._run_due(now)
            self.schedule.arrived(now)
        super().ingest(data, channel, now)

    def _run_due(self, now: int) -> None:
        while (p := self.schedule.due(now)) is not None:
            self.runner.tick(self.snapshot(), p.at)
            self.schedule.ran(p, p.at, now)

    def close_tick(self) -> None:
        """The passes due by the end of the last tick (the trace ended)."""
        if self.schedule.tick_end is not None:
            self._run_due(self.schedule.tick_end)


def run_trace(
    path: str | Path,
    fabric: Fabric,
    *,
    tick_s: float = 1.0,
    pass_gap_s: float = PASS_GAP_S,
    detectors: list[Detector] | None = None,
    probes: Sequence[Probe] | None = None,
    spec: FabricSpec | None = None,
) -> list[Finding]:
    """Findings of `detectors` (default: all built ones) over a trace; raises TraceError on a malformed line.

    With `probes`, silent_corruption localizes their corruption too, leaving out elements whose port error counters
    moved in the trace (those are link corruption). With the fabric's `spec`, miscabled runs too (it judges the
    trace's LLDP by the layout rules)."""
    dets = default_detectors(tick_s, spec=spec) if detectors is None else list(detectors)
    watch = silent_corruption.CounterErrors()
    if probes is not None:
        dets.append(Detector("counter_errors", silent_corruption.watch_counters, lambda: watch))
    runner = Runner(fabric, dets)
    ingestor = _TickingIngestor(CounterStore(), runner, int(tick_s * NS), int(pass_gap_s * NS))
    replay(path, ingestor, known={d.name for d in fabric.devices()})
    ingestor.close_tick()
    if probes is None:
        return runner.findings()
    found = runner.findings() + silent_corruption.localize(probes, fabric, counter_errors=watch)
    return sorted(found, key=lambda f: (f.detected_ts, f.kind, f.device, f.port or ""))
