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

from tests.conftest import REPO
from tests.exported_metrics import exported

GRAFANA = REPO / "examples" / "grafana"


def _load() -> ModuleType:
    spec = importlib.util.spec_from_file_location("fabricd_dashboards", GRAFANA / "dashboards.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


DASH = _load()


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
