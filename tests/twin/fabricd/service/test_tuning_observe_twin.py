"""The tuning loop in observe mode against the small-pod twin (issue 51): an incast at a leaf's server port runs the
twin's congestion model; the service samples its counters over gNMI, judges the window and records in the audit
what it would change; nothing changes on the switches or the twin's NICs."""

from __future__ import annotations

import json
import re
from pathlib import Path

import httpx
import pytest

from fabricd.cli import main
from fabricd.service.daemon import Service
from fabricd.service.tuning import WHAT
from fabricd.tuning.round import Round
from lab.control_client import call
from tests.twin.lab.twin_thread import TwinThread
from tests.twin.processes import twin_fixture

from .service_thread import TOKEN, ServiceThread, wait_for, write_config

PORT = "leaf-g0-r0:Ethernet1/1"

twin = twin_fixture(scope="module")


def _last_round(s: Service) -> Round | None:
    return None if s.tuning is None else s.tuning.last


def test_observe_records_a_proposal_and_changes_nothing(
    twin: TwinThread, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FABRICD_API_TOKEN", TOKEN)
    cfg = write_config(tmp_path, twin.inventory, remediation={"mode": "observe"},
                       tuning={"enabled": True, "window_s": 4, "sample_s": 0.5})  # fmt: skip
    svc = ServiceThread(cfg).start()
    try:
        before = call(twin.state_dir, "GET", "/congestion")
        call(twin.state_dir, "POST", "/workloads", {"kind": "incast", "params": {"port": PORT, "fan_in": 7}})

        def recorded() -> list[dict[str, object]]:
            return [e for e in svc.get("/api/v1/audit")["audit"] if e["what"] == WHAT]

        entries = wait_for(recorded, 30, every_s=0.5)
        assert all(e["mode"] == "observe" and "would change" in str(e["why"]) for e in entries)
        # the incast's port was judged from the twin's counters (with the static intent its rules may stay clear:
        # bench_tuning finds nothing to change there); what was proposed is a group's flowlet gap or a port's ECN
        last: Round = svc.on_loop(_last_round)
        judged = {j.subject: j for j in last.judged}
        assert PORT in judged and {str(v.rule) for v in judged[PORT].verdicts} >= {"pfc_before_ecn", "marks_underused"}
        assert all(" -> " in str(e["why"]) for e in entries)
        metrics = httpx.get(svc.url + "/metrics", timeout=10).text
        assert re.search(r"^fabricd_tuning_recorded [1-9]", metrics, re.M), metrics[-2000:]
        # `fabricd tune --api`: the same last window, live
        capsys.readouterr()
        code = main(["tune", "--api", svc.url, "--format", "json"])
        live = json.loads(capsys.readouterr().out)
        assert code == (1 if live["proposals"] or live["recommendations"] else 0)
        assert live["subjects"] > 0 and {"verdicts", "proposals", "notes"} <= live.keys()
        after = call(twin.state_dir, "GET", "/congestion")
        assert after["nic"] == before["nic"] and after.get("flowlet_gap_us") == before.get("flowlet_gap_us")
        assert not [e for e in svc.get("/api/v1/audit")["audit"] if "commit" in str(e["what"])]
    finally:
        call(twin.state_dir, "DELETE", "/workloads")
        svc.stop()
