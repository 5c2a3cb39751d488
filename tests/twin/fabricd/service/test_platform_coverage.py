"""The service against a fabric of EOS 4.31.2F switches: health and `fabricd status` name what each switch does not
stream and which detectors that degrades, from the platform profile and what really arrived."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from fabricd.cli import main
from tests.conftest import EXAMPLES
from tests.twin.lab.twin_thread import TwinThread
from topology.spec import load_spec

from .service_thread import ServiceThread, wait_for, write_config

FEC = "/interfaces/interface[name=*]/ethernet/phys/phy[index=*]/ingress/fec/state"
PAUSE_WHY = "not in EOS 4.31.2F (from 4.35.0; reference/platforms.md)"


@pytest.fixture(scope="module")
def old_twin(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TwinThread]:
    t = TwinThread(load_spec(EXAMPLES / "small-pod.yaml"), tmp_path_factory.mktemp("old-eos"), "4.31.2F").start()
    yield t
    t.stop()


def test_health_and_status_name_the_degraded_detectors(
    old_twin: TwinThread, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    svc = ServiceThread(write_config(tmp_path, old_twin.inventory)).start()
    try:
        switches = sorted(old_twin.process.twin.switches)
        tel = wait_for(lambda: (t := svc.get("/api/v1/health")["telemetry"])["synced"] == len(switches) and t, 20)
        cov = {e["device"]: e for e in tel["coverage"]}
        assert sorted(cov) == switches  # every switch runs the old release
        for e in cov.values():
            assert e["os_version"] == "4.31.2F"
            assert [s["path"] for s in e["skipped"]] == [FEC] and e["rejected"] == []
            missing = {m["leaf"]: m["reason"] for m in e["missing"]}
            assert missing["pfc.pfc-on-total-rx-time"] == PAUSE_WHY
            assert {"fec.corrected-codewords", "fec.pre-fec-ber", "eth.in-symbol-error"} <= set(missing)
            degraded = {d["detector"]: (d["blind"], set(d["leaves"])) for d in e["degraded"]}
            assert degraded["pfc_storm"] == degraded["pfc_deadlock"] == (False, {"pfc.pfc-on-total-rx-time"})
            assert degraded["link_corruption"][0] is False and "fec.pre-fec-ber" in degraded["link_corruption"][1]
            assert degraded["optics_trend"] == (False, {"fec.pre-fec-ber", "fec.corrected-codewords"})
            assert not any(blind for blind, _ in degraded.values())  # everything still runs, on less evidence
        assert svc.get("/api/v1/health")["status"] == "ok"  # an old release is a fact, not an outage
        metrics = httpx.get(svc.url + "/metrics").text
        for name in switches:
            for detector in ("pfc_storm", "pfc_deadlock", "link_corruption", "optics_trend"):
                line = f'fabricd_detector_degraded{{detector="{detector}",device="{name}",state="degraded"}} 1.0'
                assert line in metrics
        assert 'state="blind"' not in metrics

        assert main(["status", "--api", svc.url]) == 0
        out = capsys.readouterr().out
        assert f"telemetry coverage: {len(switches)} switch(es) stream less than their profile" in out
        line = next(ln for ln in out.splitlines() if ln.strip().startswith("pfc_storm degraded on"))
        assert f"no pfc.pfc-on-total-rx-time: {PAUSE_WHY}" in line and "and " in line  # grouped, not per switch
        assert sum(ln.strip().startswith("pfc_storm degraded") for ln in out.splitlines()) == 1
    finally:
        svc.stop()
