"""Kill fabricd at each step of taking a port down (a real process, os._exit as kill -9 leaves it), on an EOS and a
SONiC switch of the twin, through the real drivers and the real state file; a new fabricd on the same state
completes the action: the port is down and confirmed on the switch (no commit left pending under a revert timer),
one action, done, one ticket, and what the ticket backend has not taken yet is still marked for it."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from drivers.inventory import load_inventory
from fabricd.service.actuator import DriverActuator
from fabricd.service.state import StateStore
from tests.conftest import REPO
from tests.twin.lab.twin_thread import TwinThread
from tests.twin.processes import twin_fixture

from .crash_child import KILLED, REVERT_S, remediator

pytestmark = [pytest.mark.slow]
STEPS = ["decided", "committed", "confirmed", "recorded"]
PORTS = {"eos": ("spine-r0-0", "Ethernet1/1"), "sonic": ("leaf-g0-r0", "Ethernet1/1")}

twin = twin_fixture("small-sonic", scope="module")  # crash_child's SPEC: EOS spines, SONiC leaves


def port_up(twin: TwinThread, device: str, port: str) -> bool | None:
    s = DriverActuator(load_inventory(twin.inventory), 15).connect(device)
    try:
        return s.interfaces_up().get(s.port_key(port))
    finally:
        s.close()


def left_on_switch(twin: TwinThread, device: str, key: str) -> str:
    s = DriverActuator(load_inventory(twin.inventory), 15).connect(device)
    try:
        found = s.resume(key)
        if found == "pending":
            s.rollback()  # leave the switch clean for the next case; the assertion fails anyway
        return found
    finally:
        s.close()


def bring_back(twin: TwinThread, device: str, port: str) -> None:
    s = DriverActuator(load_inventory(twin.inventory), 15).connect(device)
    try:
        s.set_port_admin(port, True, 60)
        s.confirm()
    finally:
        s.close()


@pytest.mark.parametrize("step", STEPS)
@pytest.mark.parametrize("platform", ["eos", "sonic"])
def test_killed_at_each_step_the_next_fabricd_completes_the_disable(
    twin: TwinThread, tmp_path: Path, platform: str, step: str
) -> None:
    device, port = PORTS[platform]
    state_path = tmp_path / "state.db"
    child = subprocess.run(
        [sys.executable, "-m", "tests.twin.fabricd.service.crash_child", str(state_path), str(twin.inventory), device,
         port, step],
        cwd=REPO, env=os.environ.copy(), capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert child.returncode == KILLED, child.stderr[-2000:]
    died = time.monotonic()

    state = StateStore(state_path)
    try:
        (before,) = state.actions.all()
        assert before.status == ("done" if step == "recorded" else "running")
        rem = remediator(state, twin.inventory)
        notes = asyncio.run(rem.reconciler.reconcile())
        assert bool(notes) == (step != "recorded")

        (action,) = state.actions.all()  # one action, never a second
        assert (action.id, action.op, action.status) == (before.id, "disable", "done"), action.detail
        assert [(p["device"], p["port"]) for p in state.holds.all()] == [(device, port)]
        assert port_up(twin, device, port) is False
        # nothing left pending on the switch that its timer would revert later
        assert left_on_switch(twin, device, action.switch_key) in ("confirmed", "none")
        if step == "committed":
            # the dead fabricd's revert timer is still armed on the switch: once it ends, the port is still down
            # (before resume, SONiC's orphaned timer rolled the new, confirmed commit back)
            time.sleep(max(0.0, died + REVERT_S + 2 - time.monotonic()))
            assert port_up(twin, device, port) is False
            assert state.holds.all() != []
        (ticket,) = state.tickets.all()
        assert ticket.body["status_note"].startswith(f"disabled {device}:{port}")
        assert ticket.id in {t.id for t in state.tickets.unsynced()}  # the backend gets the latest note
        audit = [e["what"] for e in state.audit.entries()]
        assert (f"resume action {action.id}" in audit) == (step != "recorded")
    finally:
        state.close()
        bring_back(twin, device, port)
