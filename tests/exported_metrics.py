"""The metric sample names the service exports, for tests of what dashboards and alert rules query."""

from __future__ import annotations

from pathlib import Path

from prometheus_client import CollectorRegistry

from fabricd.detectors.dci_ports import DciPortsState
from fabricd.service.state import StateStore
from fabricd.service.surface import metrics
from fabricd.service.surface.port_metrics import PortCollector, UnderlayCollector
from fabricd.telemetry import CounterStore, TelemetryMetrics
from tests.conftest import EXAMPLES
from topology.load import load_fabric

SUFFIXES = {"counter": ("_total",), "histogram": ("_bucket", "_sum", "_count"), "gauge": ("",)}


def exported(tmp_path: Path) -> set[str]:
    """Sample names the service exports (a counter's `_total`, a histogram's `_bucket`...): the same registration
    the service makes."""
    registry = CollectorRegistry()
    store = CounterStore()
    telemetry = TelemetryMetrics(registry)
    telemetry.bind(store, ["leaf-g0-r0"], lambda: ())
    telemetry.bind_workers(2)  # with telemetry.workers > 1
    fabric = load_fabric(EXAMPLES / "small-pod.yaml", None)[1]
    ports = PortCollector(store.snapshot, fabric)
    ha = {"enabled": True, "role": "leader", "instance": "ctl-a"}  # with ha.enabled
    metrics.register(registry, StateStore(tmp_path / "s.db"), DciPortsState(), lambda: [], ports, lambda: [],
                     lambda: ha, lambda: {}, lambda: {0: 1.0}, UnderlayCollector(store.snapshot, fabric),
                     fabric=fabric, loop_stalls=lambda: (0, 0.0))  # fmt: skip
    # the families themselves, so that one with no sample yet (an empty store) still counts as exported
    return {m.name + sfx for m in registry.collect() for sfx in SUFFIXES.get(m.type, ("",))}
