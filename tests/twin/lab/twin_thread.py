"""Run a whole twin (gNMI, eAPI, SSH, control API) in a background thread for end-to-end tests."""

from __future__ import annotations

import asyncio
import os
import random
import shutil
import threading
import time
from collections.abc import Callable
from pathlib import Path

from lab.eos_releases import DEFAULT_EOS_VERSION
from lab.saved_config import SAVED_DIR
from lab.service import TwinOptions, TwinProcess
from lab.sonic_releases import DEFAULT_RELEASE as DEFAULT_SONIC_RELEASE
from topology.spec import FabricSpec


def wait_ready(
    state_dir: Path, timeout_s: float, failed: Callable[[], None], on_timeout: Callable[[], None] = lambda: None
) -> None:
    """Wait for the twin's `ready` file; `failed()` raises if the twin died meanwhile, `on_timeout()` cleans up."""
    deadline = time.monotonic() + timeout_s
    while not (state_dir / "ready").exists():
        failed()
        if time.monotonic() > deadline:
            on_timeout()
            raise TimeoutError("twin did not come up")
        time.sleep(0.05)


class TwinThread:
    def __init__(
        self,
        spec: FabricSpec,
        state_dir: Path,
        eos_version: str = DEFAULT_EOS_VERSION,
        base: str | None = None,
        sonic_version: str = DEFAULT_SONIC_RELEASE,
        sonic_aliases: bool = False,
        daemons: str = "model",
        no_neigh_state: bool = False,
    ):
        # A random 127.x.y.1 block per run, so tests never collide with a `fabricd lab up` on this machine.
        base = base or f"127.{random.randint(100, 250)}.{random.randint(0, 250)}.1"
        self.spec, self.base, self.eos_version, self.sonic_version = spec, base, eos_version, sonic_version
        os.environ.pop("FABRICD_LAB_PASSWORD", None)
        self.process = TwinProcess(
            spec,
            TwinOptions(
                state_dir,
                base_address=base,
                probe_interval_s=1.0,
                eos_version=eos_version,
                sonic_version=sonic_version,
                sonic_aliases=sonic_aliases,
                daemons=daemons,
                no_neigh_state=no_neigh_state,
            ),
        )
        self.state_dir = state_dir
        self.started = time.monotonic()
        self.loop = asyncio.new_event_loop()
        self.error: BaseException | None = None
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        try:
            self.loop.run_until_complete(self.process.run())
        except BaseException as e:  # noqa: BLE001 - reported to the test through start()
            self.error = e

    def start(self, timeout_s: float = 30.0) -> TwinThread:
        self.started = time.monotonic()
        self.thread.start()

        def failed() -> None:
            if self.error is not None:
                raise self.error

        wait_ready(self.state_dir, timeout_s, failed)
        return self

    @property
    def inventory(self) -> Path:
        return self.state_dir / "inventory.yaml"

    def stop(self) -> None:
        self.loop.call_soon_threadsafe(self.process.stop)
        self.thread.join(timeout=15)

    def restarted(self) -> TwinThread:
        """Every switch off and on again with a clean config (as `fabricd lab down` then `lab up` on the same spec,
        or switches replaced): the same addresses and password, nothing of what was configured on them, not even
        what they saved (the twin would boot them from it, lab/saved_config.py)."""
        self.stop()
        (self.state_dir / "ready").unlink(missing_ok=True)
        shutil.rmtree(self.state_dir / SAVED_DIR, ignore_errors=True)
        return TwinThread(
            self.spec, self.state_dir, self.eos_version, base=self.base, sonic_version=self.sonic_version
        ).start()
