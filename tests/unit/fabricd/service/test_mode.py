"""Switching the remediation mode at run time: admin only, audited, kept across a restart (the service says so
when it overrides fabricd.yaml), and from the CLI; rejecting a proposed action from the CLI."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from fabricd.cli import main as cli
from fabricd.service.api import create_app
from fabricd.service.config import load_config
from fabricd.service.daemon import Service

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
        assert svc.remediator.mode == "observe" and c.get("/api/v1/health").json()["mode"] == "observe"
        (row,) = [a for a in svc.state.audit_log() if a["what"] == "remediation mode set to observe"]
        assert row["why"] == "incident 4711" and row["actor"] == "service-token"
    finally:
        svc.state.close()
    again = Service(cfg)  # fabricd.yaml still says auto: the state's observe holds, and the log says why
    try:
        assert again.remediator.mode == "observe"
        assert (
            "remediation mode observe (set by service-token" in caplog.text
            and "overrides fabricd.yaml's auto" in caplog.text
        )
    finally:
        again.state.close()


def test_mode_and_reject_from_the_cli(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                      capsys: pytest.CaptureFixture[str]) -> None:  # fmt: skip
    from .service_thread import ServiceThread

    monkeypatch.setenv("FABRICD_TEST_PW", "pw")
    monkeypatch.setenv("FABRICD_API_TOKEN", SERVICE_TOKEN)
    cfg_path = write(tmp_path, "  port: 0\nremediation: {mode: approve}\n")
    svc = ServiceThread(cfg_path).start()
    try:
        assert svc.service is not None
        api = ["--api", f"http://127.0.0.1:{svc.service.api_port}"]
        assert cli(["mode", "observe", "--reason", "maintenance window", *api]) == 0
        assert "remediation mode: observe (by service-token)" in capsys.readouterr().out
        assert svc.service.remediator.mode == "observe"
        assert cli(["mode", "auto", *api]) == 2  # --reason is required
        # a proposed action, as the remediator records one in approve mode, then rejected
        a = svc.service.state.add_action("disable", "leaf-g0-r0", "Ethernet1/1", "approve", "awaiting_approval",
                                         "link_flap on leaf-g0-r0:Ethernet1/1", 1)  # fmt: skip
        assert cli(["reject", str(a.id), "--reason", "the NIC is being swapped", *api]) == 0
        assert (
            f"action {a.id}: cancelled (rejected by service-token: the NIC is being swapped)" in capsys.readouterr().out
        )
        assert cli(["reject", str(a.id), "--reason", "again", *api]) == 2  # not awaiting approval any more
        assert "not awaiting approval" in capsys.readouterr().err
        assert cli(["status", *api, "--format", "json"]) in (0, 1)
        assert json.loads(capsys.readouterr().out)["mode"] == "observe"
    finally:
        svc.stop()
