"""A storm injected in the lab twin's state model (no sockets), sampled into a trace, found by `fabricd detect`."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from fabricd.cli import main
from fabricd.telemetry import render
from lab.faults import FaultInjector
from lab.model import PortConfig, Twin
from tests.conftest import EXAMPLES
from tests.unit.fabricd.detectors.tracegen import COLUMNS, NS, T0
from topology.fabric import Fabric


def twin_trace(fabric: Fabric, path: Path, seconds: int = 6) -> Path:
    twin = Twin(fabric, clock=lambda: T0)
    for name, sw in twin.switches.items():
        for port in sw.ports:
            twin.set_port_config(name, port, PortConfig(pfc_enabled=True, no_drop=frozenset({3})))
    FaultInjector(twin).inject("pfc_storm", {"nic": "gpu-g0-000:nic0"}, T0 + int(1.5 * NS))
    lines = []
    for name, sw in twin.switches.items():
        for row, port in enumerate(sw.ports):
            up = "UP" if sw.oper_up[row] else "DOWN"
            lines.append({"ts": T0, "device": name, "path": render(port, "oper-status"), "value": up})
    for k in range(1, seconds + 1):
        ts = T0 + k * NS
        twin.advance(ts)
        for name, sw in twin.switches.items():
            for port in sw.ports:
                for (leaf, index), col in COLUMNS.items():
                    value = sw.value(port, col, ts)
                    lines.append({"ts": ts, "device": name, "path": render(port, leaf, index), "value": value})
    path.write_text("".join(json.dumps(r) + "\n" for r in lines))
    return path


def test_twin_storm_is_found_at_its_origin(
    small_fabric: Fabric, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    trace = twin_trace(small_fabric, tmp_path / "twin.jsonl")
    rc = main(["detect", "--spec", str(EXAMPLES / "small-pod.yaml"), "--trace", str(trace), "--format", "json"])
    findings = json.loads(capsys.readouterr().out)["findings"]
    assert rc == 1
    assert [(f["kind"], f["device"], f["port"], f["priority"]) for f in findings] == [
        ("pfc_storm", "leaf-g0-r0", "Ethernet1/1", 3)
    ]
    (f,) = findings
    assert f["evidence"]["peer"] == "gpu-g0-000:nic0"
    # the twin spreads the storm one hop: both spines of rail 0 are stuck toward leaf-g0-r0
    assert {"spine-r0-0:Ethernet1/1", "spine-r0-1:Ethernet2/1"} <= set(f["ports"])
    assert T0 + NS <= f["start_ts"] <= T0 + 2 * NS
