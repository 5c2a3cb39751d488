"""Per-port metrics: what a trace puts in the store is what /metrics says, with the lossless priority only, the
weakest lane, oper state as 0/1, and the rail and group labels from the cabling."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from fabricd.detectors import Detector, Finding, run_trace
from fabricd.service.surface.port_metrics import PORT_SERIES, PortCollector, families
from fabricd.telemetry import Snapshot, render
from tests.conftest import EXAMPLES
from topology.fabric import Fabric
from topology.load import load_fabric

FABRIC = load_fabric(EXAMPLES / "small-pod.yaml", None)[1]
NS = 1_000_000_000
T0 = 1_700_000_000 * NS


def snapshot_of(lines: list[tuple[int, str, str, str, str | None, object]], tmp_path: Path) -> Snapshot:
    """The store's snapshot after replaying (second, device, port, leaf, index, value) records."""
    trace = tmp_path / "t.jsonl"
    trace.write_text(
        "".join(
            json.dumps({"ts": T0 + s * NS, "device": d, "path": render(p, leaf, ix), "value": v}) + "\n"
            for s, d, p, leaf, ix, v in lines
        )
    )
    last: list[Snapshot] = []

    def keep(snap: Snapshot, fab: Fabric, st: object, now: int) -> list[Finding]:
        last.append(snap)
        return []

    run_trace(trace, FABRIC, tick_s=1, pass_gap_s=0, detectors=[Detector("keep", keep, lambda: None)])
    return last[-1]


def samples(snap: Snapshot) -> dict[tuple[str, str, str], tuple[float, dict[str, str]]]:
    registry = CollectorRegistry()
    registry.register(PortCollector(lambda: snap, FABRIC, 3))
    out = {}
    for fam in text_string_to_metric_families(generate_latest(registry).decode()):
        for s in fam.samples:
            out[(s.name, s.labels["device"], s.labels["port"])] = (s.value, s.labels)
    return out


def test_counters_gauges_and_state(tmp_path: Path) -> None:
    a, b = ("leaf-g1-r2", "Ethernet3/1"), ("spine-r0-0", "Ethernet1/1")
    lines: list[tuple[int, str, str, str, str | None, object]] = []
    for s in (0, 1):
        lines += [
            (s, *a, "if.in-octets", None, 1000 + s * 500),
            (s, *a, "pfc.in-frames", "3", 40 + s),
            (s, *a, "pfc.in-frames", "0", 999),  # a lossy priority: not exported
            (s, *a, "pfc.pfc-on-total-rx-time", "3", 2_500_000_000),
            (s, *a, "pfc.pfc-on-total-tx-time", "3", 1_500_000_000),
            (s, *a, "queue.max-queue-len", "3", 65536 + s),
            (s, *a, "queue.max-queue-len", "0", 999_999),  # a lossy queue: not exported
            (s, *a, "pg.shared-watermark", "3", 30_000 + s),
            (s, *a, "pg.headroom-watermark", "3", 9_000),
            (s, *a, "pg.shared-watermark", "0", 777),  # a lossy PG: not exported
            (s, *a, "optics.input-power", "0", -2.0),
            (s, *a, "optics.input-power", "1", -4.5),
            (s, *a, "optics.temperature", None, 41.5),
            (s, *a, "oper-status", None, "UP"),
            (s, *b, "oper-status", None, "DOWN"),
            (s, *b, "fec.pre-fec-ber", "1", 3e-7),
        ]
    snap = snapshot_of(lines, tmp_path)
    got = samples(snap)
    value, labels = got[("fabricd_port_receive_bytes_total", *a)]
    assert value == 1500 and labels == {"device": a[0], "port": a[1], "role": "leaf", "rail": "2", "group": "1"}
    assert got[("fabricd_port_pfc_receive_frames_total", *a)][0] == 41
    assert got[("fabricd_port_pfc_paused_seconds_total", *a)][0] == 2.5
    assert got[("fabricd_port_pfc_pause_sent_seconds_total", *a)][0] == 1.5
    assert got[("fabricd_port_queue_watermark_bytes", *a)][0] == 65537
    assert got[("fabricd_port_pg_watermark_bytes", *a)][0] == 30_001
    assert got[("fabricd_port_pg_headroom_watermark_bytes", *a)][0] == 9_000
    assert got[("fabricd_port_receive_power_dbm", *a)][0] == -4.5
    assert got[("fabricd_port_module_temperature_celsius", *a)][0] == 41.5
    assert got[("fabricd_port_up", *a)][0] == 1 and got[("fabricd_port_up", *b)][0] == 0
    assert got[("fabricd_port_pre_fec_ber", *b)][0] == 3e-7
    assert got[("fabricd_port_up", *b)][1]["role"] == "spine" and got[("fabricd_port_up", *b)][1]["group"] == ""
    # one sample per (metric, port): the lossy priority and the second lane made none of their own
    names = [f.name for f in families(snap, FABRIC) for x in f.samples if x.labels["port"] == a[1]]
    assert sorted(names) == sorted(set(names)) and len(names) == 10


def test_an_empty_store_still_names_every_family(tmp_path: Path) -> None:
    snap = snapshot_of([(0, "leaf-g0-r0", "Ethernet1/1", "oper-status", None, "UP")], tmp_path)
    fams = list(families(snap, FABRIC))
    assert len(fams) == PORT_SERIES and all(f.name.startswith("fabricd_port_") for f in fams)


def test_api_port_metrics_false_leaves_them_out(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from fastapi.testclient import TestClient

    from fabricd.service.config import load_config
    from fabricd.service.daemon import Service
    from fabricd.service.surface.api import create_app

    from .test_access import write

    monkeypatch.setenv("FABRICD_TEST_PW", "pw")
    for on in (True, False):
        d = tmp_path / str(on)
        d.mkdir()
        svc = Service(load_config(write(d, f"  port_metrics: {str(on).lower()}\n"), {}))
        try:
            text = TestClient(create_app(svc)).get("/metrics").text
        finally:
            svc.state.close()
        assert ("# TYPE fabricd_port_up gauge" in text) is on
        assert "fabricd_remediation_budget_used" in text  # the rest stays
