"""`fabricd status` tells the truth from the health document: a state that cannot be written is `failing` with its
error, and held ports that are up again are counted apart (the next pass settles them)."""

from __future__ import annotations

from typing import Any

import pytest

from fabricd.cli import main
from fabricd.cli.service_cmd import ApiClient

HEALTH: dict[str, Any] = {
    "status": "ok", "version": "0.1.0", "mode": "auto", "uptime_s": 12.0, "ha": {"enabled": False},
    "telemetry": {"devices": 18, "synced": 18, "stale": [], "coverage": []},
    "detectors": {"source": "local", "shards": 0, "silent_shards": []},
    "state": {"writable": True, "write_failures": 0, "last_error": None},
    "open_tickets": 3, "disabled_ports": 3, "stale_holds": 0,
}  # fmt: skip


def status(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], **changes: Any) -> tuple[int, str]:
    doc = {**HEALTH, **changes}
    monkeypatch.setattr(ApiClient, "call", lambda self, method, path, *a, **k: doc)
    code = main(["status", "--api", "http://127.0.0.1:1"])
    return code, capsys.readouterr().out


def test_ok_and_every_hold_down(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    code, out = status(monkeypatch, capsys)
    assert code == 0
    assert "open tickets: 3   ports held down: 3\n" in out and "state:" not in out


def test_stale_holds_and_an_unwritable_state_are_told(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out = status(monkeypatch, capsys, status="failing", stale_holds=2,
                       state={"writable": False, "write_failures": 7, "last_error": "disk I/O error"})  # fmt: skip
    assert code == 1
    assert out.startswith("failing  fabricd 0.1.0")
    assert "state: cannot be written (7 failed writes): disk I/O error; fabricd takes no action until it can" in out
    assert "ports held down: 1 (2 up again: reconciling)" in out


def test_actions_in_flight_are_told(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    flight = [{"action_id": 9, "op": "enable", "port": "leaf-g0-r0:Ethernet1/1", "mode": "auto", "for_s": 4.2,
               "detail": "waiting for LLDP on leaf-g0-r0:Ethernet1/1"}]  # fmt: skip
    code, out = status(monkeypatch, capsys, stale_holds=1, in_flight=flight)
    assert code == 0
    assert "ports held down: 2 (1 up again: reconciling)\n" in out
    assert (
        "  in flight: enable leaf-g0-r0:Ethernet1/1 (action 9, 4.2 s): waiting for LLDP on leaf-g0-r0:Ethernet1/1\n"
        in out
    )
