"""Kill fabricd at each step of a drain and of its undrain that reaches a switch (a real process, os._exit as kill -9
leaves it, once the switch saw the step and before the state recorded it: crash_child.py's DRAIN_STEPS and
UNDRAIN_STEPS), on a link between a SONiC leaf and an EOS spine of the twin; a new fabricd on the same state file
finishes it (issue 54): the drain drained then undrained, or the undrain finished; each port shut once and brought
back once; no end left de-preferred, no drain route map left behind, nothing pending under a revert timer, and no
refusal from a session an earlier attempt of the same step left ("Cannot enter session fabricd_m1_2 (session is
pending a commit timer)")."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from pathlib import Path

import pytest

from drivers.eos.session import EosSession
from drivers.inventory import load_inventory
from fabricd.service.actuator import DriverActuator
from fabricd.service.state import StateStore
from tests.conftest import REPO
from tests.twin.lab.twin_thread import TwinThread
from tests.twin.processes import twin_fixture

from .crash_child import DRAIN_LINK, DRAIN_STEPS, KILLED, UNDRAIN_STEPS, DrainView, remediator
from .test_crash_recovery import port_up

pytestmark = [pytest.mark.slow]
SPINE_END = ("spine-r0-0", "Ethernet1/1")

twin = twin_fixture("small-sonic", scope="module")  # crash_child's SPEC: EOS spines, SONiC leaves


def spine_config(twin: TwinThread) -> tuple[str, str]:
    """The spine's running config and the config session pending under a commit timer ('' if none)."""
    s = DriverActuator(load_inventory(twin.inventory), 15).connect(SPINE_END[0])
    try:
        assert isinstance(s, EosSession)
        return s.running_config(), str(s._sessions().get("commitTimerSessionName") or "")
    finally:
        s.close()


@pytest.mark.parametrize("step", DRAIN_STEPS + UNDRAIN_STEPS)
def test_a_drain_killed_at_each_step_is_finished_by_the_next_fabricd(twin: TwinThread, tmp_path: Path,
                                                                     step: str) -> None:  # fmt: skip
    state_path = tmp_path / "state.db"
    child = subprocess.run(
        [sys.executable, "-m", "tests.twin.fabricd.service.crash_child", "drain", str(state_path),
         str(twin.inventory), step],
        cwd=REPO, env=os.environ.copy(), capture_output=True, text=True, timeout=180,
    )  # fmt: skip
    assert child.returncode == KILLED, child.stderr[-3000:]

    state = StateStore(state_path)
    try:
        (d,) = state.drains.all()
        assert d.state == ("undraining" if step in UNDRAIN_STEPS else "draining"), d  # recorded before the step
        rem = remediator(state, twin.inventory, view=DrainView)

        async def restart() -> None:
            await rem.reconciler.reconcile()  # the actions the dead one left running
            assert rem.maintenance.resume_drains() == [d.id]
            await rem.idle()
            if step in DRAIN_STEPS:
                finished = state.drains.get(d.id)
                assert finished is not None and (finished.state, finished.done) == ("drained", len(d.steps)), finished
                await rem.maintenance.undrain(str(DRAIN_LINK), "bob")
                await rem.idle()

        asyncio.run(restart())
        end = state.drains.get(d.id)
        assert end is not None and end.state == "undrained", end
        ops = sorted((a.op, a.device, a.port, a.status) for a in state.actions.all())
        ports = sorted([(DRAIN_LINK.device, DRAIN_LINK.port), SPINE_END])
        assert ops == sorted([(op, dev, port, "done") for op in ("disable", "enable") for dev, port in ports]), ops
        assert state.holds.all() == []
        for dev, port in ports:
            assert port_up(twin, dev, port), (dev, port)
        assert twin.process.twin.depreferred == {}  # neither end de-preferred
        running, pending = spine_config(twin)
        assert "FABRICD-DRAIN" not in running and pending == ""
        audit = " ".join(f"{e['what']} {e['why']}" for e in state.audit.entries())
        assert "Cannot enter session" not in audit and "stopped" not in audit, audit
    finally:
        state.close()
