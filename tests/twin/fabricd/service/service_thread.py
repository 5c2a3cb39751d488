"""Run the fabricd service in a background thread against a twin, for end-to-end tests (its config, token and
waits are tests/twin/processes.py's, re-exported here for the many tests that import them with it)."""

from __future__ import annotations

from typing import Any

import httpx

from fabricd.service.background import BackgroundService
from tests.twin.processes import TOKEN, free_port, wait_for, write_config

__all__ = ["TOKEN", "ServiceThread", "free_port", "wait_for", "write_config"]


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
