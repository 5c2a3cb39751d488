"""schemathesis over the service's OpenAPI schema, in process (bounded examples): no 5xx, every answer matches
the schema; then no secret (service token, user tokens, switch password) in any answer, the page, /metrics, the
logs or the state file."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import schemathesis
from fastapi.testclient import TestClient
from hypothesis import HealthCheck, given, settings
from schemathesis.core.result import Err, Ok

from fabricd.service.config import load_config
from fabricd.service.daemon import Service
from fabricd.service.surface.api import create_app

from .test_access import SERVICE_TOKEN, write

PASSWORD = "switch-password-9d2e"


@pytest.fixture
def service(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Service]:
    monkeypatch.setenv("FABRICD_TEST_PW", PASSWORD)
    svc = Service(load_config(write(tmp_path), {}))
    try:
        yield svc
    finally:
        svc.state.close()


@pytest.mark.slow  # several seconds: CI runs it, `pytest tests/unit -m "not slow"` does not
def test_no_5xx_and_answers_match_the_schema(service: Service) -> None:
    api = schemathesis.openapi.from_asgi("/openapi.json", create_app(service))
    results = list(api.get_all_operations())
    bad = [r.err() for r in results if isinstance(r, Err)]
    assert not bad, bad  # the schema itself is valid
    operations = [r.ok() for r in results if isinstance(r, Ok)]
    assert len(operations) >= 15
    for op in operations:

        @given(case=op.as_strategy())
        @settings(max_examples=20, deadline=None, database=None, suppress_health_check=list(HealthCheck))
        def check(case: Any) -> None:
            case.call_and_validate(headers={"Authorization": f"Bearer {SERVICE_TOKEN}"})

        check()


def test_no_secret_in_any_answer_the_page_metrics_logs_or_state(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    import logging

    caplog.set_level(logging.DEBUG)  # every log line fabricd writes, not only warnings
    hook = "webhook-secret-41c7"
    monkeypatch.setenv("FABRICD_TEST_PW", PASSWORD)
    monkeypatch.setenv("HOOK_TOKEN", hook)
    extra = "tickets:\n  backend: webhook\n  webhook: {url: 'http://127.0.0.1:9/hook', token: {env: HOOK_TOKEN}}\n"
    svc = Service(load_config(write(tmp_path, extra), {"HOOK_TOKEN": hook}))
    try:
        c = TestClient(create_app(svc))
        admin = {"Authorization": f"Bearer {SERVICE_TOKEN}"}
        made = c.post("/api/v1/tokens", json={"user": "ursula", "role": "operator"}, headers=admin).json()
        user_token = made.pop("token")  # the one answer that carries it, once
        bearer = {"Authorization": f"Bearer {user_token}"}
        seen = [json_text(made)]
        for path in ("/api/v1/health", "/api/v1/findings", "/api/v1/actions", "/api/v1/tickets", "/api/v1/audit",
                     "/api/v1/ports/disabled", "/api/v1/topology/summary", "/api/v1/dci", "/api/v1/jobs",
                     "/metrics", "/openapi.json", "/api/v1/actions/1/approve", "/nope"):  # fmt: skip
            seen.append(c.get(path, headers=bearer).text)
        seen.append(c.get("/api/v1/tokens", headers=admin).text)
        seen.append(c.post("/api/v1/tickets/1/resolve", headers={"Authorization": "Bearer " + user_token + "x"}).text)
        c.post("/login", data={"token": user_token})
        seen += [c.get("/").text, c.get("/ui/live").text, c.get("/ui/switch/leaf-g0-r0").text]
        c.post("/login", data={"token": PASSWORD})  # a secret typed in the wrong place is not echoed
        seen.append(c.post("/login", data={"token": hook}).text)
        assert svc.state.path is not None
        state = svc.state.path.read_bytes() + Path(str(svc.state.path) + "-wal").read_bytes()
    finally:
        svc.state.close()
    for secret in (SERVICE_TOKEN, user_token, PASSWORD, hook):
        assert all(secret not in text for text in seen), secret
        assert secret not in caplog.text and secret.encode() not in state
    assert "ursula" in seen[-4]  # the page did render for the user


def json_text(obj: object) -> str:
    import json

    return json.dumps(obj)
