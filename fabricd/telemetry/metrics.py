"""Prometheus metrics of the live telemetry pipeline (one set per TelemetryClient, in the registry the service owns).

What the store already counts (updates, dropped updates, last-seen, sync) is read from it at scrape time by a
custom collector, so the hot path pays nothing and nothing is counted twice. What only the client knows
(connection state, reconnects, lag) is kept in ordinary prometheus_client metrics.

Cardinality: per-device series for counters and gauges (832 devices at 16k GPUs is fine); the lag histogram is
global (per-device histograms would be ~15 series each), with a per-device gauge of the last sampled lag.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterator, Sequence
from dataclasses import dataclass

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.registry import Collector

from .series import Stat
from .store import CounterStore

LAG_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0)
# Store stats exported as fabricd_telemetry_dropped_updates_total{reason}: updates ingestion received but did not
# store (unknown path, undecodable or wrongly typed, same timestamp again, older than the stored sample).
DROP_REASONS = (
    ("unknown_path", Stat.UNKNOWN),
    ("malformed", Stat.MALFORMED),
    ("duplicate", Stat.DUPLICATES),
    ("out_of_order", Stat.OUT_OF_ORDER),
)


@dataclass(frozen=True)
class _Source:
    store: CounterStore
    devices: tuple[str, ...]
    stale: Callable[[], Collection[str]]


class _StoreCollector(Collector):
    """Reads the store at scrape time. A scrape from another thread (prometheus' HTTP server) sees a slightly old
    but consistent-enough view: it only reads ints that the loop thread replaces, never half-written rows."""

    def __init__(self) -> None:
        self.source: _Source | None = None

    def describe(self) -> Iterator[CounterMetricFamily | GaugeMetricFamily]:
        yield from self._families()

    def _families(self) -> tuple[CounterMetricFamily, CounterMetricFamily, GaugeMetricFamily, GaugeMetricFamily]:
        return (
            CounterMetricFamily(
                "fabricd_telemetry_updates", "Updates received from a device (stored or not).", labels=["device"]
            ),
            CounterMetricFamily(
                "fabricd_telemetry_dropped_updates",
                "Updates received but not stored, by reason (unknown_path, malformed, duplicate, out_of_order).",
                labels=["device", "reason"],
            ),
            GaugeMetricFamily(
                "fabricd_telemetry_stale", "1 when nothing arrived from the device for 3 intervals.", labels=["device"]
            ),
            GaugeMetricFamily(
                "fabricd_telemetry_synced",
                "1 once the device's current stream sent its initial sync_response.",
                labels=["device"],
            ),
        )

    def collect(self) -> Iterator[CounterMetricFamily | GaugeMetricFamily]:
        src = self.source
        if src is None:
            return
        updates, dropped, stale_g, synced_g = self._families()
        store = src.store
        names, cols, synced = store.device_stats()  # one copy: rows are read together even if the loop writes
        n = len(names)
        stale = set(src.stale())
        exported = set()
        for d in range(n):
            name = names[d]
            exported.add(name)
            row = cols[d]
            updates.add_metric([name], row[Stat.UPDATES])
            for reason, stat in DROP_REASONS:
                dropped.add_metric([name, reason], row[stat])
            stale_g.add_metric([name], 1.0 if name in stale else 0.0)
            synced_g.add_metric([name], 1.0 if synced[d] else 0.0)
        for name in src.devices:  # inventory devices the store has not interned yet: never heard from
            if name not in exported:
                updates.add_metric([name], 0)
                stale_g.add_metric([name], 1.0)
                synced_g.add_metric([name], 0.0)
        yield from (updates, dropped, stale_g, synced_g)


class TelemetryMetrics:
    """The telemetry metrics, registered in `registry` (never the global default one: the service passes its own)."""

    def __init__(self, registry: CollectorRegistry) -> None:
        self.registry = registry
        self.reconnects = Counter(
            "fabricd_telemetry_reconnects",
            "Subscribe streams re-opened after one ended or failed.",
            ["device"],
            registry=registry,
        )
        self.connected = Gauge(
            "fabricd_telemetry_connected",
            "1 while the device's Subscribe stream is delivering.",
            ["device"],
            registry=registry,
        )
        self.lag = Histogram(
            "fabricd_telemetry_lag_seconds",
            "Receive time minus notification timestamp, sampled about once per message burst (all devices).",
            buckets=LAG_BUCKETS,
            registry=registry,
        )
        self.last_lag = Gauge(
            "fabricd_telemetry_last_lag_seconds",
            "The device's last sampled lag (negative: its clock is ahead of ours).",
            ["device"],
            registry=registry,
        )
        self._collector = _StoreCollector()
        registry.register(self._collector)

    def bind(self, store: CounterStore, devices: Sequence[str], stale: Callable[[], Collection[str]]) -> None:
        """Export the store's counters for `devices` (and any other device it holds); `stale()` names stale ones."""
        self._collector.source = _Source(store, tuple(devices), stale)
        for name in devices:  # every device appears from the first scrape, not only after its first event
            self.reconnects.labels(name)
            self.connected.labels(name).set(0)

    def bind_workers(self, workers: int) -> tuple[Gauge, Counter]:
        """The worker-process metrics (only with telemetry workers): up gauge and restart counter per worker."""
        up = Gauge(
            "fabricd_telemetry_worker_up",
            "1 while the telemetry worker process is running and connected to the service.",
            ["worker"],
            registry=self.registry,
        )
        restarts = Counter(
            "fabricd_telemetry_worker_restarts",
            "Telemetry worker processes restarted after they died.",
            ["worker"],
            registry=self.registry,
        )
        for k in range(workers):
            up.labels(str(k)).set(0)
            restarts.labels(str(k))
        return up, restarts
