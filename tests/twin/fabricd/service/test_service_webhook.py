"""The daemon delivers tickets to a webhook: each version once, with the bearer token and an idempotency key;
a receiver that was down gets the ticket at the next sync."""

from __future__ import annotations

import json
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Any

import pytest

from lab.control_client import inject
from tests.twin.lab.twin_thread import TwinThread
from tests.twin.processes import receiver, twin_fixture

from .service_thread import ServiceThread, wait_for, write_config

HOOK_TOKEN = "hook-secret-77a1"


class Receiver:
    def __init__(self) -> None:
        self.posts: list[dict[str, Any]] = []
        self.failing = True  # down at first: the service must retry at the next sync
        self.server, self.url = receiver(self._answer)

    def _answer(self, request: BaseHTTPRequestHandler, raw: bytes) -> int:
        body = json.loads(raw)
        if self.failing:
            return 503
        self.posts.append({"headers": dict(request.headers), "body": body})
        return 200


twin = twin_fixture(scope="module")


def test_tickets_reach_the_webhook_after_it_recovers(
    twin: TwinThread, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    hook = Receiver()
    monkeypatch.setenv("TEST_HOOK_TOKEN", HOOK_TOKEN)
    tickets = {
        "backend": "webhook",
        "sync_interval_s": 1,
        "webhook": {"url": hook.url, "token": {"env": "TEST_HOOK_TOKEN"}, "retries": 0},
    }
    svc = ServiceThread(write_config(tmp_path, twin.inventory, tickets=tickets, remediation={"mode": "observe"}))
    svc.start()
    try:
        inject(twin.state_dir, "link_flap", {"port": "leaf-g1-r3:Ethernet2/1", "count": 8, "period_s": 0.3})
        (t,) = wait_for(lambda: svc.get("/api/v1/tickets")["tickets"], 10)
        assert hook.posts == []  # the receiver refused it so far
        hook.failing = False
        wait_for(lambda: hook.posts, 10)
        wait_for(lambda: svc.get(f"/api/v1/tickets/{t['id']}")["synced_ts"] is not None, 5)
        post = hook.posts[-1]
        assert post["headers"]["Authorization"] == f"Bearer {HOOK_TOKEN}"
        assert post["headers"]["Idempotency-Key"].startswith(f"fabricd-ticket-{t['id']}-")
        assert post["body"]["ticket"]["kind"] == "link_flap"
        assert post["body"]["ticket"]["device"] == t["device"]
        keys = [p["headers"]["Idempotency-Key"] for p in hook.posts]
        assert len(keys) == len(set(keys))  # each ticket version delivered once
    finally:
        svc.stop()
        hook.server.shutdown()


def test_config_drift_is_found_and_audited_not_pushed(twin: TwinThread, tmp_path: Path) -> None:
    # The twin still runs its factory config: every switch lacks fabricd's lossless settings.
    svc = ServiceThread(write_config(tmp_path, twin.inventory, drift_interval_s=1)).start()
    try:
        rows = wait_for(lambda: [r for r in svc.get("/api/v1/audit")["audit"] if r["what"] == "config drift"], 60, 0.5)
        assert rows[0]["why"].startswith("18 switches differ: ")
        assert "leaf-g0-r0" in rows[0]["why"]
        assert svc.get("/api/v1/actions")["actions"] == []  # drift is reported; pushing is `fabricd apply`'s job
    finally:
        svc.stop()
