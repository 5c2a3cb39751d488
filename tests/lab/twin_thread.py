"""Run a whole twin (gNMI, eAPI, SSH, control API) in a background thread for end-to-end tests."""

from __future__ import annotations

import asyncio
import os
import random
import threading
import time
from pathlib import Path

from lab.service import TwinOptions, TwinProcess
from topology.spec import FabricSpec


class TwinThread:
    def __init__(self, spec: FabricSpec, state_dir: Path):
        # A random 127.x.y.1 block per run, so tests never collide with a `fabricd lab up` on this machine.
        base = f"127.{random.randint(100, 250)}.{random.randint(0, 250)}.1"
        os.environ.pop("FABRICD_LAB_PASSWORD", None)
        self.process = TwinProcess(spec, TwinOptions(state_dir, base_address=base, probe_interval_s=1.0))
        self.state_dir = state_dir
        self.loop = asyncio.new_event_loop()
        self.error: BaseException | None = None
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        try:
            self.loop.run_until_complete(self.process.run())
        except BaseException as e:  # noqa: BLE001 - reported to the test through start()
            self.error = e

    def start(self, timeout_s: float = 30.0) -> TwinThread:
        self.thread.start()
        deadline = time.monotonic() + timeout_s
        while not (self.state_dir / "ready").exists():
            if self.error is not None:
                raise self.error
            if time.monotonic() > deadline:
                raise TimeoutError("twin did not come up")
            time.sleep(0.05)
        return self

    @property
    def inventory(self) -> Path:
        return self.state_dir / "inventory.yaml"

    def stop(self) -> None:
        self.loop.call_soon_threadsafe(self.process.stop)
        self.thread.join(timeout=15)
