"""Run the fabricd service in a background thread against a twin, for end-to-end tests."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import yaml

from fabricd.service.config import ServiceConfig, load_config
from fabricd.service.daemon import Service
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


class ServiceThread:
    def __init__(self, config: Path | ServiceConfig) -> None:
        self.cfg = config if isinstance(config, ServiceConfig) else load_config(config)
        self.service: Service | None = None
        self.error: BaseException | None = None
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        async def main() -> None:
            self.service = Service(self.cfg)
            await self.service.run()

        try:
            self.loop.run_until_complete(main())
        except BaseException as e:  # noqa: BLE001 - reported to the test through start()
            self.error = e

    def start(self, timeout_s: float = 30.0) -> ServiceThread:
        self.thread.start()
        deadline = time.monotonic() + timeout_s
        while self.service is None or not self.service.ready.is_set():
            if self.error is not None:
                raise self.error
            if time.monotonic() > deadline:
                raise TimeoutError("service did not become ready")
            time.sleep(0.05)
        return self

    def on_loop(self, fn: Callable[[Service], Any]) -> Any:
        """Run `fn(service)` on the service's own loop: its telemetry store is not for other threads."""
        service = self.service
        assert service is not None

        async def call() -> Any:
            return fn(service)

        return asyncio.run_coroutine_threadsafe(call(), self.loop).result(10)

    @property
    def url(self) -> str:
        assert self.service is not None
        return f"http://127.0.0.1:{self.service.api_port}"

    def get(self, path: str, token: str | None = TOKEN, **params: Any) -> Any:
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        r = httpx.get(self.url + path, params=params or None, headers=headers, timeout=10)
        r.raise_for_status()
        return r.json()

    def post(self, path: str, token: str | None = TOKEN) -> httpx.Response:
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        return httpx.post(self.url + path, headers=headers, timeout=30)

    def stop(self) -> None:
        if self.service is not None:
            self.loop.call_soon_threadsafe(self.service.stop)
        self.thread.join(timeout=30)
        if self.error is not None:
            raise self.error


def wait_for(check: Any, timeout_s: float = 10.0, every_s: float = 0.1) -> Any:
    deadline = time.monotonic() + timeout_s
    while True:
        value = check()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"condition not met within {timeout_s} s; last value {value!r}")
        time.sleep(every_s)
