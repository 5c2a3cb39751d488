"""The fabricd mode and reject commands against a running service (a real socket)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from fabricd.cli import main as cli
from tests.unit.fabricd.service.test_access import SERVICE_TOKEN, write

from .service_thread import ServiceThread


def test_mode_and_reject_from_the_cli(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                      capsys: pytest.CaptureFixture[str]) -> None:  # fmt: skip
    monkeypatch.setenv("FABRICD_TEST_PW", "pw")
    monkeypatch.setenv("FABRICD_API_TOKEN", SERVICE_TOKEN)
    cfg_path = write(tmp_path, "  port: 0\nremediation: {mode: approve}\n")
    svc = ServiceThread(cfg_path).start()
    try:
        assert svc.service is not None
        api = ["--api", f"http://127.0.0.1:{svc.service.api_port}"]
        assert cli(["mode", "observe", "--reason", "maintenance window", *api]) == 0
        assert "remediation mode: observe (by service-token)" in capsys.readouterr().out
        assert svc.service.remediation.requests.mode == "observe"
        assert cli(["mode", "auto", *api]) == 2  # --reason is required
        # a proposed action, as the remediator records one in approve mode, then rejected
        a = svc.service.state.actions.add("disable", "leaf-g0-r0", "Ethernet1/1", "approve", "awaiting_approval",
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
