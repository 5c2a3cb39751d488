"""Run the fabricd service in a background thread against a twin, for end-to-end tests."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import httpx
import yaml

from fabricd.service.background import BackgroundService
from tests.conftest import EXAMPLES, free_port

__all__ = ["TOKEN", "Daemon", "ServiceThread", "free_port", "wait_for", "write_config"]

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


class Daemon:
    """`fabricd run` as its own process, the way systemd runs it."""

    def __init__(self, config: Path, port: int, log: Path, *args: str) -> None:
        self.url = f"http://127.0.0.1:{port}"
        self.log = log
        env = {k: v for k, v in os.environ.items() if not k.startswith("FABRICD_")}
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "fabricd", "run", "--config", str(config), *args],
            stdout=subprocess.DEVNULL,
            stderr=log.open("ab"),
            env=env,
        )
        wait_for(self._healthy, 30, 0.2)

    def _healthy(self) -> bool:
        if self.proc.poll() is not None:
            raise AssertionError(f"fabricd run exited {self.proc.returncode}: {self.log.read_text()[-2000:]}")
        try:
            synced: int = httpx.get(self.url + "/api/v1/health", timeout=2).json()["telemetry"]["synced"]
            return synced > 0
        except httpx.HTTPError:
            return False

    def get(self, path: str) -> Any:
        return httpx.get(self.url + path, headers={"Authorization": f"Bearer {TOKEN}"}, timeout=10).json()

    def kill(self) -> None:
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(10)

    def stop(self) -> int:
        self.proc.send_signal(signal.SIGTERM)
        return self.proc.wait(20)
