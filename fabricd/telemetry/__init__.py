"""Telemetry: gNMI notifications -> counter store -> snapshots for detectors; traces recorded and replayed.

`Ingestor.ingest(bytes, channel)` is the one way data gets in (the gRPC client and trace replay both use it);
`CounterStore.snapshot()` (or `Ingestor.snapshot()`, which flushes first) is what detectors read.
`TelemetryClient` streams in this process; `TelemetryWorkers` spreads the streams over worker processes that ship
what they decoded into the same store.
"""

from .client import TelemetryClient
from .ingest import Ingestor, UpdateSink
from .metrics import TelemetryMetrics
from .paths import Kind, PathInfo, Subscription, eos_profile, parse, render, subscribe_request
from .series import NEVER, Stat, StateEvent
from .snapshot import Snapshot
from .store import CounterStore
from .trace import TraceError, TraceRecord, TraceWriter, read_trace, replay
from .workers import TelemetrySource, TelemetryWorkers

__all__ = [
    "NEVER",
    "CounterStore",
    "Ingestor",
    "Kind",
    "PathInfo",
    "Snapshot",
    "Stat",
    "StateEvent",
    "Subscription",
    "TelemetryClient",
    "TelemetryMetrics",
    "TelemetrySource",
    "TelemetryWorkers",
    "TraceError",
    "TraceRecord",
    "TraceWriter",
    "UpdateSink",
    "eos_profile",
    "parse",
    "read_trace",
    "render",
    "replay",
    "subscribe_request",
]
