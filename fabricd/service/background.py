"""The service in a background thread with its own event loop: for embedding fabricd (a notebook, a bench, a
test) where `fabricd run` as a process is not wanted. `start()` returns once the API listens and telemetry has
synced (or raises what stopped it); `stop()` shuts it down like SIGTERM does."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, Self

from .config import ServiceConfig, load_config
from .daemon import Service


class BackgroundService:
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
        except BaseException as e:  # noqa: BLE001 - reported to the caller through start()
            self.error = e

    def start(self, timeout_s: float = 30.0) -> Self:
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

    def stop(self) -> None:
        if self.service is not None:
            self.loop.call_soon_threadsafe(self.service.stop)
        self.thread.join(timeout=30)
        if self.error is not None:
            raise self.error
