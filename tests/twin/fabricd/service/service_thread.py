"""Run the fabricd service in a background thread against a twin, for end-to-end tests."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import httpx
import yaml

from fabricd.service.background import BackgroundService
from tests.conftest import EXAMPLES

TOKEN = "test-api-token-5c1e"


def write_config(tmp: Path, inventory: Path, **sections: Any) -> Path:
    """fabricd.yaml for the small pod twin: fast ticks, API on a free port, token in a 0600 file."""
    token = tmp / "api.token"
    token.write_text(TOKEN)
    token.chmod(0o600)
    data: dict[str, Any] = {
        "spec": str(EXAMPLES / "small-pod.yaml"),
        "inventory": str(inventory),
        "state": str(tmp / "state.db"),
        "telemetry": {"interval_s": 0.5},
        "detectors": {"tick_s": 0.5},
        "remediation": {"mode": "auto", "revert_in_s": 60, "verify_timeout_s": 5},
        "api": {"port": 0, "token": {"file": str(token)}},
    }
    for key, value in sections.items():
        if isinstance(value, dict) and isinstance(data.get(key), dict):
            data[key] = {**data[key], **value}
        else:
            data[key] = value
    path = tmp / "fabricd.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


class ServiceThread(BackgroundService):
    """The service in a thread, with the test token on its API calls."""

    def get(self, path: str, token: str | None = TOKEN, **params: Any) -> Any:
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        r = httpx.get(self.url + path, params=params or None, headers=headers, timeout=10)
        r.raise_for_status()
        return r.json()

    def post(self, path: str, token: str | None = TOKEN) -> httpx.Response:
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        return httpx.post(self.url + path, headers=headers, timeout=30)


def wait_for(check: Any, timeout_s: float = 10.0, every_s: float = 0.1) -> Any:
    deadline = time.monotonic() + timeout_s
    while True:
        value = check()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"condition not met within {timeout_s} s; last value {value!r}")
        time.sleep(every_s)
