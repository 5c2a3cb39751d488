"""A tuning change on the switch: the intent with the ledger's values (the knobs tuning set, over what `fabricd intent`
derives), rendered by the switch's driver and pushed like `fabricd apply` pushes (fabricd/rollout.py
`apply_session`: re-read the running config and re-plan, load, commit under the revert timer, verify the config
and that no port went down, confirm; anything failing after the commit is rolled back). A proposal is about one
switch's port or ECMP group, so that switch is the whole rollout: its own canary.

The push goes through the service's own sessions (the actuator's), fenced like remediation's (`Fence.check` before
it and before every request the driver sends inside it), under the switch's lock (one transaction per switch at a
time: EOS refuses a commit while another commit timer is pending). A push whose plan finds the values already
running changes nothing: a new leader resuming a push the old one finished does not push again."""

from __future__ import annotations

import asyncio
import contextvars
import logging
from collections.abc import Callable, Mapping
from concurrent.futures import Executor
from functools import partial

from drivers.base import DriverError
from drivers.registry import get_driver
from fabricd.rollout import ApplyOptions, DeviceResult, Target, apply_session
from fabricd.tuning.from_intent import patch_intent
from fabricd.tuning.observed import ecmp_groups
from fabricd.tuning.propose import Change, Knob
from policies.intent import DeviceIntent, Intent, PortIntent
from topology.fabric import Fabric

from ..remediation.context import Fence, FencedOff
from ..remediation.older_leaders import blocked_by_older, end_older, leader_key
from ..remediation_io import Actuator

log = logging.getLogger("fabricd.service")


def subject_ports(dev: DeviceIntent, fabric: Fabric, subject: str) -> list[PortIntent]:
    """The ports a subject names: one port (`device:port`), or an ECMP group's members (`device:group`)."""
    name = subject.split(":", 1)[1]
    port = next((p for p in dev.ports if p.port == name), None)
    return [port] if port is not None else list(ecmp_groups(dev, fabric).get(name, []))


def overlay(intent: Intent, fabric: Fabric, values: Mapping[str, Mapping[Knob, int]]) -> Intent:
    """The intent with each subject's knobs at `values` (the ledger's, ledger.values_of)."""
    by_device: dict[str, dict[str, Mapping[Knob, int]]] = {}
    for subject, knobs in values.items():
        by_device.setdefault(subject.split(":", 1)[0], {})[subject] = knobs
    devices = []
    for d in intent.devices:
        subjects = by_device.get(d.device)
        if not subjects:
            devices.append(d)
            continue
        patched: dict[str, PortIntent] = {}
        for subject, knobs in subjects.items():
            changes = [Change(k, 0, v, 0, 0) for k, v in knobs.items()]
            for p in subject_ports(d, fabric, subject):
                patched[p.port] = patch_intent(patched.get(p.port, p), changes).port
        devices.append(d.model_copy(update={"ports": [patched.get(p.port, p) for p in d.ports]}))
    return Intent(devices=devices)


def not_in_intent(changes: tuple[Change, ...]) -> list[Change]:
    """The changes the intent has no field for (a DR's own CNP thresholds, `patch_intent`'s `not_in_intent`): a
    proposal with one cannot be pushed, it is recorded as refused."""
    return [c for c in changes if c.knob in (Knob.DR_CNP_MIN, Knob.DR_CNP_MAX)]


class Pusher:
    def __init__(
        self, actuator: Actuator, fence: Fence, lock: Callable[[str], asyncio.Lock], revert_in_s: int,
        executor: Executor | None = None,
    ) -> None:  # fmt: skip
        self.actuator, self.fence, self.lock, self.executor = actuator, fence, lock, executor
        self.options = ApplyOptions(revert_in_s=revert_in_s, check_gnmi=False)  # telemetry watches the streams

    @staticmethod
    def renders(before: Intent, after: Intent, fabric: Fabric, subject: str) -> bool:
        """Does the change show in the switch's config? (EOS renders DLB without an inactivity gap, so a flowlet
        gap proposal changes nothing there: it is refused, not pushed and "verified" on noise.)"""
        device = subject.split(":", 1)[0]
        old, new = before.device(device), after.device(device)
        if old is None or new is None:
            return False
        driver = get_driver(new.platform)
        return driver.render(old) != driver.render(new)

    async def push(self, intent: Intent, fabric: Fabric, subject: str) -> DeviceResult:
        """The subject's ports on its switch brought to `intent` (and the switch-wide lines fabricd renders)."""
        device = subject.split(":", 1)[0]
        dev = intent.device(device)
        if dev is None:
            return DeviceResult(device, "failed", error=f"{device} is not in the intent")
        ports = subject_ports(dev, fabric, subject)
        if not ports:
            return DeviceResult(device, "failed", error=f"{subject}: no such port or ECMP group in the intent")
        only = dev.model_copy(update={"ports": ports})
        token = self.fence.token()
        async with self.lock(device):
            await self.fence.wait()
            run = partial(contextvars.copy_context().run, self._push, only, token)
            return await asyncio.get_running_loop().run_in_executor(self.executor, run)

    def _push(self, dev: DeviceIntent, token: int | None) -> DeviceResult:
        """Blocking, in a driver thread."""
        self.fence.check(token)
        driver = get_driver(dev.platform)
        target = Target(dev, driver.render(dev), driver, None)
        try:
            session = self.actuator.connect(dev.device)
        except DriverError as e:
            return DeviceResult(dev.device, "unreachable", error=str(e))
        session.guard = partial(self.fence.check, token)
        try:
            if token is None:  # one instance alone: no older leader
                result = apply_session(session, target, self.options)
            else:  # a leader: its transaction named with its token, older leaders' ended first (older_leaders.py)
                end_older(session, dev.device, token)
                result = apply_session(session, target, self.options, key=leader_key(token, "tune"))
                if result.status in ("rejected", "failed") and blocked_by_older(result.error or "", token):
                    log.warning("%s: a tuning push was refused for an older leader's transaction (%s); ending it and "
                                "retrying", dev.device, result.error)  # fmt: skip
                    end_older(session, dev.device, token)
                    result = apply_session(session, target, self.options, key=leader_key(token, "tune"))
        except FencedOff:
            session.abandon()  # the new leader decides what is left; the switch's timer reverts a pending commit
            raise
        except BaseException:
            session.close()
            raise
        if result.status in ("applied", "unchanged"):
            self.actuator.release(session)
        else:
            session.close()
        return result
