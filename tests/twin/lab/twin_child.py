"""Run a whole twin in a child process (`python -m lab`) for end-to-end tests that must not share the test
process's interpreter (its GIL and heap) with the twin: eAPI timing tests in a long suite."""

from __future__ import annotations

import os
import random
import subprocess
import sys
from pathlib import Path

from tests.twin.lab.twin_thread import wait_ready

ROOT = Path(__file__).resolve().parents[3]


class TwinChild:
    def __init__(self, spec_file: Path, state_dir: Path):
        # A random 127.x.y.1 block per run, so tests never collide with a `fabricd lab up` on this machine.
        self.base = f"127.{random.randint(100, 250)}.{random.randint(0, 250)}.1"
        self.spec_file, self.state_dir = spec_file, state_dir
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self, timeout_s: float = 60.0) -> TwinChild:
        env = {k: v for k, v in os.environ.items() if k != "FABRICD_LAB_PASSWORD"}
        cmd = [sys.executable, "-m", "lab", "--spec", str(self.spec_file), "--state-dir", str(self.state_dir),
               "--base-address", self.base, "--probe-interval", "1"]  # fmt: skip
        log = (self.state_dir / "twin.log").open("wb")
        self.proc = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT)
        proc = self.proc

        def failed() -> None:
            if proc.poll() is not None:
                raise RuntimeError(f"twin exited {proc.returncode}; see {self.state_dir / 'twin.log'}")

        wait_ready(self.state_dir, timeout_s, failed, self.stop)
        return self

    @property
    def inventory(self) -> Path:
        return self.state_dir / "inventory.yaml"

    def stop(self) -> None:
        if self.proc is None:
            return
        self.proc.terminate()
        try:
            self.proc.wait(15)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
