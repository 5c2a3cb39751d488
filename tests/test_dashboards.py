"""The Grafana dashboards in examples/grafana: the JSON is what the code generates, and every metric a panel
queries is one the service exports."""

from __future__ import annotations

import importlib.util
import json
import re
import sys
from pathlib import Path
from types import ModuleType

import pytest
from prometheus_client import CollectorRegistry

from fabricd.detectors.dci_ports import DciPortsState
from fabricd.service import metrics
from fabricd.service.port_metrics import PortCollector
from fabricd.service.state import StateStore
from fabricd.telemetry import CounterStore, TelemetryMetrics
from tests.conftest import EXAMPLES, REPO
from topology.load import load_fabric

GRAFANA = REPO / "examples" / "grafana"


def _load() -> ModuleType:
    spec = importlib.util.spec_from_file_location("fabricd_dashboards", GRAFANA / "dashboards.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


DASH = _load()


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
    metrics.register(registry, StateStore(tmp_path / "s.db"), DciPortsState(), lambda: [], ports, lambda: [])
    # the families themselves, so that one with no sample yet (an empty store) still counts as exported
    return {m.name + sfx for m in registry.collect() for sfx in SUFFIXES.get(m.type, ("",))}


@pytest.mark.parametrize("name", sorted(DASH.DASHBOARDS))
def test_committed_json_is_what_the_code_generates(name: str) -> None:
    assert (GRAFANA / name).read_text() == DASH.render(name), "run examples/grafana/dashboards.py"


@pytest.mark.parametrize("name", sorted(DASH.DASHBOARDS))
def test_every_queried_metric_is_exported(name: str, tmp_path: Path) -> None:
    doc = json.loads((GRAFANA / name).read_text())
    exprs = [t["expr"] for p in doc["panels"] for t in p.get("targets", [])]
    exprs += [v["query"] for v in doc["templating"]["list"] if v["type"] == "query"]
    used = {m for e in exprs for m in re.findall(r"\b(fabricd_[a-z_0-9]+)", e)}
    assert used and used <= exported(tmp_path), used - exported(tmp_path)
