"""A fabricd remediator that dies (`os._exit`, as a kill -9 would leave it) at one step of taking a port down.

`python -m tests.twin.fabricd.service.crash_child STATE INVENTORY DEVICE PORT STEP` disables DEVICE:PORT of a running
twin in auto mode through the real driver and the real state file, and dies at STEP:
- decided: the decision, action and ticket are recorded; the switch is not touched yet;
- committed: the change is committed on the switch under its revert timer, not confirmed;
- confirmed: the switch confirmed it; the state does not know yet;
- recorded: the state says done; the ticket's last note has not reached the ticket backend.
test_crash_recovery.py then starts a new remediator on the same state file and switch and checks the outcome.
"""

from __future__ import annotations

import asyncio
import os
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from drivers.base import Session
from drivers.inventory import load_inventory
from drivers.marks import Mark
from fabricd.detectors.finding import Finding
from fabricd.service.actuator import DriverActuator
from fabricd.service.config import MaintenanceSettings, RemediationSettings, SafetyLimits
from fabricd.service.remediation.wiring import Remediation, build_remediation
from fabricd.service.remediation_io import Actuator
from fabricd.service.state import StateStore, Ticket
from tests.conftest import EXAMPLES
from topology.fabric import Fabric
from topology.load import load_fabric
from topology.model import Endpoint
from topology.units import NS

SPEC = EXAMPLES / "small-sonic.yaml"  # EOS spines, SONiC leaves
T0 = 1_700_000_000 * NS
KILLED = 137
REVERT_S = 30  # the shortest revert timer fabricd allows: the test waits it out once


class SwitchView:
    """Reads a port's state from the switch itself: the crash is the subject here, not telemetry."""

    def __init__(self, actuator: Actuator) -> None:
        self.actuator = actuator

    def oper_down(self) -> frozenset[Endpoint]:
        return frozenset()

    def routed_down(self) -> frozenset[Endpoint]:
        return frozenset()

    def expects_lldp(self, device: str, port: str) -> bool:
        return False  # not judged here: the crash is the subject

    async def lldp_neighbour(self, device: str, port: str, since_ns: int, timeout_s: float) -> Endpoint | None:
        return None

    def admin_up(self) -> dict[Endpoint, bool]:
        return {}  # no admin states known: reconcile judges no hold (the crash is the subject here)

    def evidence(self, device: str, port: str) -> dict[str, Any]:
        return {}

    def out_rate_bps(self, device: str, port: str) -> float | None:
        return None

    def description(self, device: str, port: str) -> str | None:
        return None  # read by the session, in the same transaction

    def _up(self, device: str, port: str) -> bool | None:
        s = self.actuator.connect(device)
        try:
            return s.interfaces_up().get(s.port_key(port))
        finally:
            s.close()

    async def wait_oper(self, device: str, port: str, up: bool, timeout_s: float) -> bool:
        deadline = time.monotonic() + timeout_s
        while True:
            if await asyncio.to_thread(self._up, device, port) == up:
                return True
            if time.monotonic() > deadline:
                return False
            await asyncio.sleep(0.2)


class DrainView(SwitchView):
    """The same, for a drain: its ports fall quiet at once (the shift is the subject, not the traffic)."""

    def out_rate_bps(self, device: str, port: str) -> float | None:
        return 0.0


def remediator(state: StateStore, inventory: Path, actuator: Actuator | None = None,
               publish: Any = None, view: type[SwitchView] = SwitchView) -> Remediation:  # fmt: skip
    fabric = load_fabric(SPEC, None)[1]
    real = actuator or DriverActuator(load_inventory(inventory), timeout_s=15)
    # a drain's checks short: the undrain's LLDP (not judged here) and its watch of the counters
    quick = MaintenanceSettings(shift_timeout_s=5, lldp_wait_s=0.5, undrain_watch_s=0.2)
    return build_remediation(
        fabric,
        state,
        RemediationSettings(mode="auto", verify_timeout_s=10.0, revert_in_s=REVERT_S, maintenance=quick),
        # the small lab has 2 uplinks per leaf: let one go, the guard is not the subject here
        SafetyLimits(min_uplink_fraction=0.25),
        managed={d.name for d in fabric.switches()},
        actuator=real,
        view=view(real),
        clock=lambda: T0 + time.monotonic_ns(),
        executor=ThreadPoolExecutor(max_workers=2),
        publish=publish,
    )


def finding(fabric: Fabric, ep: Endpoint) -> Finding:
    peer = fabric.peer(ep.device, ep.port)
    assert peer is not None
    ends = tuple(sorted((str(ep), str(peer))))
    return Finding(kind="link_flap", device=ep.device, port=ep.port, devices=tuple(sorted({ep.device, peer.device})),
                   ports=ends, start_ts=T0, detected_ts=T0 + 3 * NS, severity="warning", confidence=1.0,
                   summary=f"link {ends[0]}--{ends[1]} flapped 8 times in 2.4 s", evidence={"flaps": 8})  # fmt: skip


class Dying:
    """A driver session that dies right after the step it is told to."""

    def __init__(self, session: Session, step: str) -> None:
        self.session, self.step = session, step

    def __getattr__(self, name: str) -> Any:
        return getattr(self.session, name)

    def set_port_admin(
        self,
        port: str,
        up: bool,
        revert_in_s: int,
        *,
        key: str | None = None,
        mark: Mark | None = None,
        description: str | None = None,
    ) -> None:
        self.session.set_port_admin(port, up, revert_in_s, key=key, mark=mark, description=description)
        if self.step == "committed":
            os._exit(KILLED)

    def confirm(self) -> None:
        self.session.confirm()
        if self.step == "confirmed":
            os._exit(KILLED)


class DyingActuator:
    def __init__(self, real: DriverActuator, step: str) -> None:
        self.real, self.step = real, step

    def connect(self, device: str) -> Session:
        if self.step == "decided":
            os._exit(KILLED)
        return Dying(self.real.connect(device), self.step)

    def release(self, session: Session) -> None:
        session.close()


def main(state_path: str, inventory: str, device: str, port: str, step: str) -> None:
    state = StateStore(Path(state_path))
    real = DriverActuator(load_inventory(Path(inventory)), timeout_s=15)

    async def publish(t: Ticket) -> None:
        actions = state.actions.all()
        if step == "recorded" and actions and actions[0].status == "done":
            os._exit(KILLED)

    rem = remediator(state, Path(inventory), DyingActuator(real, step), publish)

    async def run() -> None:
        await rem.incidents.on_findings([finding(rem.ctx.fabric, Endpoint(device, port))])
        await rem.idle()

    asyncio.run(run())
    sys.exit(0)  # not killed: the step was never reached


# A drain's steps that reach a switch, and the undrain's (issue 54), each killed once the switch saw it and before the
# state recorded it: a link between a SONiC leaf and an EOS spine, its BGP session de-preferred at the leaf (FRR,
# at once), then at the spine (an EOS config session: committed under its timer, then confirmed), its ports shut
# (the action path), and back in the undrain's order: the ports up, the leaf's session, the spine's.
DRAIN_LINK = Endpoint("leaf-g0-r0", "Ethernet3/1")  # faces spine-r0-0:Ethernet1/1
DRAIN_STEPS = ["shift_leaf", "shift_spine_committed", "shift_spine_confirmed", "shut"]
UNDRAIN_STEPS = ["up", "back_leaf", "back_spine_committed", "back_spine_confirmed"]


def _die_at(step: str) -> None:
    """Patch the drivers of this process so it dies (os._exit) at `step`."""
    from drivers.eos.session import EosSession
    from drivers.sonic.session import SonicSession

    back = step.startswith("back_")
    sonic_shift, eos_confirm = SonicSession.shift_session, EosSession.confirm

    def shift_session(self: SonicSession, peer_address: str, asn: int, away: bool, revert_in_s: int, *,
                      key: str | None = None) -> None:  # fmt: skip
        sonic_shift(self, peer_address, asn, away, revert_in_s, key=key)
        if step in ("shift_leaf", "back_leaf") and away != back:
            os._exit(KILLED)

    def confirm(self: EosSession) -> None:
        name = str(self._napalm.config_session or "")
        ours = name.startswith("fabricd_m") and ("_back" in name) == back
        if ours and step.endswith("_committed"):
            os._exit(KILLED)
        eos_confirm(self)
        if ours and step.endswith("_confirmed"):
            os._exit(KILLED)

    SonicSession.shift_session = shift_session  # type: ignore[method-assign]
    EosSession.confirm = confirm  # type: ignore[method-assign]
    for cls in (SonicSession, EosSession):
        admin = cls.set_port_admin

        def set_port_admin(self: Any, port: str, up: bool, revert_in_s: int, *, _admin: Any = admin,
                           **kw: Any) -> None:  # fmt: skip
            _admin(self, port, up, revert_in_s, **kw)
            if step == ("up" if up else "shut"):
                os._exit(KILLED)

        cls.set_port_admin = set_port_admin  # type: ignore[method-assign]


def main_drain(state_path: str, inventory: str, step: str) -> None:
    """`crash_child drain STATE INVENTORY STEP`: drain DRAIN_LINK (and, for an undrain's step, undrain it once
    drained), dying at STEP."""
    state = StateStore(Path(state_path))
    rem = remediator(state, Path(inventory), view=DrainView)

    async def run() -> None:
        if step in UNDRAIN_STEPS:
            await rem.maintenance.drain("link", str(DRAIN_LINK), "alice", "optic swap")
            await rem.idle()
            _die_at(step)
            await rem.maintenance.undrain(str(DRAIN_LINK), "bob")
        else:
            _die_at(step)
            await rem.maintenance.drain("link", str(DRAIN_LINK), "alice", "optic swap")
        await rem.idle()

    asyncio.run(run())
    sys.exit(0)  # not killed: the step was never reached


if __name__ == "__main__":
    if sys.argv[1] == "drain":
        main_drain(*sys.argv[2:5])
    else:
        main(*sys.argv[1:6])
