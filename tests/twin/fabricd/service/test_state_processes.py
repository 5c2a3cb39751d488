"""The state layer's property with real processes (hypothesis; the unit part is tests/unit/fabricd/service/
test_state_properties.py): a writer process making a service's writes is killed (SIGKILL) at random moments, one or
more times on one state file, the file then takes random row or file damage, and `fabricd run` starts on it against
the twin. It either exits 2 with its error on one line, or it starts and serves (health, the API and /metrics
answer for a while, it stops cleanly on SIGTERM); never a traceback, never a crash after start."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import httpx
import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from tests.conftest import REPO
from tests.state_damage import apply_damage, damages
from tests.twin.lab.twin_thread import TwinThread
from tests.twin.processes import TOKEN, fabricd_run, free_port, twin_fixture, write_config

pytestmark = [pytest.mark.slow]
SERVE_S = 2.0  # how long a started service must keep serving
twin = twin_fixture(scope="module")


def write_and_kill(state: Path, seed: int, after_s: float) -> None:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    p = subprocess.Popen([sys.executable, "-m", "tests.twin.fabricd.service.state_writer", str(state), str(seed)],
                         cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)  # fmt: skip
    assert p.stdout is not None and p.stdout.readline() == b"writing\n"
    time.sleep(after_s)
    p.send_signal(signal.SIGKILL)
    _, err = p.communicate(timeout=20)
    assert p.returncode == -signal.SIGKILL, err.decode()[-2000:]  # it was still writing


def serves(proc: subprocess.Popen[bytes], port: int) -> None:
    url, auth = f"http://127.0.0.1:{port}", {"Authorization": f"Bearer {TOKEN}"}
    until = time.monotonic() + SERVE_S
    while time.monotonic() < until:
        assert proc.poll() is None, "the service died after it started"
        health = httpx.get(url + "/api/v1/health", timeout=5).json()
        assert health["status"] in ("ok", "degraded", "failing")
        for path in ("/api/v1/tickets", "/api/v1/actions", "/api/v1/findings", "/api/v1/ports/disabled",
                     "/api/v1/audit"):  # fmt: skip
            r = httpx.get(url + path, headers=auth, timeout=5)
            assert r.status_code == 200, (path, r.status_code, r.text[:300])
        assert httpx.get(url + "/metrics", timeout=5).status_code == 200
        time.sleep(0.3)


@settings(max_examples=6, deadline=None, database=None, suppress_health_check=list(HealthCheck))
@given(kills=st.lists(st.tuples(st.integers(0, 10**6), st.floats(0.05, 1.0)), min_size=1, max_size=2),
       damage=damages)  # fmt: skip
def test_a_start_after_kills_and_damage_exits_2_in_one_line_or_serves(
    twin: TwinThread, tmp_path_factory: pytest.TempPathFactory, kills: list[tuple[int, float]],
    damage: list[tuple[Any, ...]],
) -> None:  # fmt: skip
    tmp = tmp_path_factory.mktemp("state")
    port = free_port()
    cfg = write_config(tmp, twin.inventory, api={"port": port})
    state = tmp / "state.db"
    for seed, after_s in kills:
        write_and_kill(state, seed, after_s)
    apply_damage(state, damage)
    log = tmp / "fabricd.log"
    d = fabricd_run(cfg, log, port=port)
    proc, how = d.proc, d.started()
    event(how)
    try:
        if how == "exited":
            assert proc.returncode == 2, log.read_text()[-3000:]
            lines = log.read_text().strip().splitlines()
            event("exited: " + lines[-1].removeprefix(f"fabricd: error: {state}: ").split(" (")[0].split(";")[0])
            assert lines and lines[-1].startswith("fabricd: error: "), lines[-3:]
            assert str(state) in lines[-1]
        else:
            event(
                f"{len(httpx.get(f'http://127.0.0.1:{port}/api/v1/health').json()['state']['quarantined'])} quarantined"
            )
            serves(proc, port)
            proc.send_signal(signal.SIGTERM)
            assert proc.wait(30) == 0, log.read_text()[-3000:]
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)
    assert "Traceback" not in log.read_text(), log.read_text()[-3000:]
