"""Switching the remediation mode at run time: admin only, audited, kept across a restart (the service says so
when it overrides fabricd.yaml), and from the CLI; rejecting a proposed action from the CLI."""

from __future__ import annotations

from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from fabricd.service.config import load_config
from fabricd.service.daemon import Service
from fabricd.service.surface.api import create_app

from .test_access import SERVICE_TOKEN, make, write

ADMIN = {"Authorization": f"Bearer {SERVICE_TOKEN}"}


def test_mode_switch_is_admin_only_audited_and_survives_a_restart(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setenv("FABRICD_TEST_PW", "pw")
    cfg = load_config(write(tmp_path, "remediation: {mode: auto}\n"), {})
    svc = Service(cfg)
    try:
        c = TestClient(create_app(svc))
        op = make(c, "olga", "operator")
        r = c.post(
            "/api/v1/mode", json={"mode": "observe", "reason": "incident"}, headers={"Authorization": f"Bearer {op}"}
        )
        assert r.status_code == 403 and "needs admin" in r.json()["error"]
        assert c.post("/api/v1/mode", json={"mode": "yolo", "reason": "x"}, headers=ADMIN).status_code == 400
        r = c.post("/api/v1/mode", json={"mode": "observe", "reason": "incident 4711"}, headers=ADMIN)
        assert r.json() == {"mode": "observe", "by": "service-token"}
        assert svc.remediation.requests.mode == "observe" and c.get("/api/v1/health").json()["mode"] == "observe"
        (row,) = [a for a in svc.state.audit.entries() if a["what"] == "remediation mode set to observe"]
        assert row["why"] == "incident 4711" and row["actor"] == "service-token"
    finally:
        svc.state.close()
    again = Service(cfg)  # fabricd.yaml still says auto: the state's observe holds, and the log says why
    try:
        assert again.remediation.requests.mode == "observe"
        assert (
            "remediation mode observe (set by service-token" in caplog.text
            and "overrides fabricd.yaml's auto" in caplog.text
        )
    finally:
        again.state.close()
