"""/api/v1/maintenance on the service (small pod: 2 spines per rail, so a whole spine is half of a leaf's uplinks):
operators drain, viewers read, every refusal one line; /metrics counts drains by state and the capacity they hold
out of service."""

from __future__ import annotations

from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from fabricd.service.config import load_config
from fabricd.service.daemon import Service
from fabricd.service.surface.api import create_app
from tests.conftest import EXAMPLES

from .test_access import make, write
from .test_web import login


def test_drain_through_the_api(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FABRICD_TEST_PW", "pw")
    svc = Service(load_config(write(tmp_path, f"jobs: {{path: {EXAMPLES / 'small-pod-jobs.yaml'}}}\n"), {}))
    try:
        assert svc.job_source.refresh() is not None  # the job map (the service refreshes it on its own)
        c = TestClient(create_app(svc))
        op = {"Authorization": f"Bearer {make(c, 'olga', 'operator')}"}
        viewer = {"Authorization": f"Bearer {make(c, 'vic', 'viewer')}"}
        spine = {"kind": "switch", "target": "spine-r0-0", "reason": "NOS upgrade"}
        r = c.post("/api/v1/maintenance", json=spine, headers=viewer)
        assert r.status_code == 403 and "needs operator" in r.json()["error"]
        r = c.post("/api/v1/maintenance", json=spine, headers=op)
        assert r.status_code == 409 and r.json()["error"] == (
            "drain of switch spine-r0-0 refused by the guard (capacity): leaf-g0-r0 would keep 800 of 1600 Gb/s "
            "uplink capacity (50%), below the 75% limit"
        )
        r = c.post("/api/v1/maintenance", json={**spine, "force": True}, headers=op)
        assert r.status_code == 403 and r.json()["error"] == (
            "user:olga is operator; forcing a drain past the guard needs admin"
        )
        r = c.post("/api/v1/maintenance", json={**spine, "target": "spine-9"}, headers=op)
        assert r.status_code == 404 and r.json()["error"].startswith("switch spine-9: not a switch of the blueprint")
        link = {"kind": "link", "target": "leaf-g0-r0:Ethernet5/1", "reason": "optic swap", "dry_run": True}
        r = c.post("/api/v1/maintenance", json=link, headers=op)
        assert r.status_code == 200 and r.json()["drain"] is None and r.json()["dry_run"] is True
        assert r.json()["jobs"] == ["llama-70b-pretrain"]  # spans both groups: its traffic crosses the spines
        assert c.get("/api/v1/maintenance", headers=viewer).json() == {"maintenance": [], "overran": []}
        r = c.post("/api/v1/maintenance", json={**link, "dry_run": False}, headers=op)
        assert r.status_code == 200, r.text
        d = r.json()["drain"]
        assert (d["state"], d["actor"], d["ports"]) == (
            "draining", "user:olga", ["leaf-g0-r0:Ethernet5/1", "spine-r0-0:Ethernet1/1"])  # fmt: skip
        listed = c.get("/api/v1/maintenance", headers=viewer).json()
        assert [x["id"] for x in listed["maintenance"]] == [d["id"]] and listed["overran"] == []
        r = c.post("/api/v1/maintenance/undrain", json={"target": "spine-r0-1"}, headers=op)
        assert r.status_code == 404 and r.json()["error"] == "spine-r0-1 is not drained; see `fabricd maintenance`"
        metrics = c.get("/metrics").text
        # no switch answers here: its first shift step may have failed already (stopped, still active)
        state = c.get("/api/v1/maintenance", headers=viewer).json()["maintenance"][0]["state"]
        assert state in ("draining", "stopped")
        assert f'fabricd_drains{{state="{state}"}} 1.0' in metrics and "fabricd_drains_overran 0.0" in metrics
        # the link is out of service from both switches: the leaf's uplink, the spine's downlink (Gb/s as cabled)
        assert 'fabricd_drained_links{device="leaf-g0-r0",direction="uplink"} 1.0' in metrics
        assert 'fabricd_drained_capacity_gbps{device="leaf-g0-r0",direction="uplink"} 400.0' in metrics
        assert 'fabricd_drained_capacity_gbps{device="spine-r0-0",direction="downlink"} 400.0' in metrics
        (m,) = c.get("/api/v1/health").json()["maintenance"]
        assert (m["target"], m["state"], m["overran"], m["actor"]) == ("leaf-g0-r0:Ethernet5/1", state, False,
                                                                       "user:olga")  # fmt: skip
        # past its --until: overran, listed as such, never ended by fabricd
        svc.state._db.execute("UPDATE maintenance SET until_ts = 1")
        assert c.get("/api/v1/maintenance", headers=viewer).json()["overran"] == [d["id"]]
        assert c.get("/api/v1/health").json()["maintenance"][0]["overran"] is True
        assert "fabricd_drains_overran 1.0" in c.get("/metrics").text
        # the page says so too (who, why, state, OVERRAN)
        login(c, make(c, "vera", "viewer"))
        section = c.get("/ui/live").json()["maintenance"]
        assert "link leaf-g0-r0:Ethernet5/1" in section and "user:olga" in section and "optic swap" in section
        assert "<strong>OVERRAN</strong>" in section
    finally:
        svc.state.close()
