"""Live plan and safe apply across many switches (napalm's transaction, nornir's per-device results).

Apply order: a canary device first, then batches. Each device: re-read the running config and re-plan
(the plan shown may be minutes old), load the candidate, commit with a revert timer, verify (running config
re-read and re-planned to no change, ports that were up still up, gNMI still answering), then confirm.
Any failure after the commit rolls that device back and stops the rollout; an unreachable device fails
alone (nothing was changed on it). Nothing is left committed-but-unconfirmed: a session closed without
confirm aborts, and the switch's own timer reverts if we die in between.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Literal

from drivers.base import ConfigRejectedError, DevicePlan, Driver, DriverError, Session, UnreachableError
from drivers.inventory import DeviceAccess, Inventory
from drivers.registry import get_driver
from drivers.transaction import settle
from fabricd.telemetry.client import gnmi_streams
from policies.intent import DeviceIntent
from topology.errors import FabricdError

log = logging.getLogger("fabricd.rollout")

Status = Literal["unchanged", "applied", "rolled_back", "rejected", "unreachable", "failed", "skipped"]


@dataclass
class Target:
    """One switch to plan or apply: its intent rendered to config, and how to reach it."""

    intent: DeviceIntent
    intended: str
    driver: Driver
    access: DeviceAccess | None
    error: str | None = None

    @property
    def device(self) -> str:
        return self.intent.device

    @property
    def ports(self) -> set[str]:
        return {p.port for p in self.intent.ports}


@dataclass
class DeviceResult:
    device: str
    status: Status
    plan: DevicePlan | None = None
    device_diff: str = ""
    error: str | None = None
    steps: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, object]:
        return {
            "device": self.device,
            "status": self.status,
            "commands": self.plan.commands if self.plan else [],
            "device_diff": self.device_diff,
            "error": self.error,
            "steps": self.steps,
        }


def targets(devices: Iterable[DeviceIntent], inventory: Inventory) -> list[Target]:
    out = []
    for dev in devices:
        driver = get_driver(dev.platform)
        # An inventory problem with one device fails that device alone.
        try:
            access, error = inventory.access(dev.device), None
        except FabricdError as e:
            access, error = None, str(e)
        out.append(Target(dev, driver.render(dev), driver, access, error))
    return out


def plan_live(target: Target, timeout_s: float = 30.0) -> DevicePlan:
    """Read the running config through the driver and plan; a device that fails returns its error."""
    if target.access is None:
        return DevicePlan(target.device, error=target.error)
    try:
        session = target.driver.connect(target.access, timeout_s)
    except DriverError as e:
        return DevicePlan(target.device, error=str(e))
    try:
        return target.driver.plan(target.device, session.running_config(), target.intended, target.ports)
    except DriverError as e:
        return DevicePlan(target.device, error=str(e))
    finally:
        session.close()


def plan_all(items: list[Target], workers: int = 8, progress: Callable[[], None] | None = None) -> list[DevicePlan]:
    def one(t: Target) -> DevicePlan:
        plan = plan_live(t)
        if progress:
            progress()
        return plan

    with ThreadPoolExecutor(max_workers=max(1, workers)) as pool:
        return list(pool.map(one, items))


@dataclass
class ApplyOptions:
    revert_in_s: int = 300
    batch: int = 1
    timeout_s: float = 30.0
    check_gnmi: bool = True


def apply_one(target: Target, options: ApplyOptions) -> DeviceResult:
    """Push one switch under a revert timer, verify, confirm; roll back on any failure after the commit."""
    result = DeviceResult(target.device, "unchanged")
    if target.access is None:
        result.status, result.error = "unreachable", target.error
        return result
    try:
        session = target.driver.connect(target.access, options.timeout_s)
    except UnreachableError as e:
        result.status, result.error = "unreachable", str(e)
        return result
    except DriverError as e:
        result.status, result.error = "failed", str(e)
        return result
    try:
        return apply_session(session, target, options, result)
    finally:
        session.close()


def apply_session(
    session: Session, target: Target, options: ApplyOptions, result: DeviceResult | None = None,
    *, key: str | None = None,
) -> DeviceResult:  # fmt: skip
    """`apply_one` through a session the caller opened (and closes): the service's tuning pushes through its own,
    fenced sessions (service/tuning/push.py), their transaction named `key` (`Session.load`)."""
    result = result or DeviceResult(target.device, "unchanged")
    committed = False
    try:
        up_before = session.interfaces_up()
        plan = target.driver.plan(target.device, session.running_config(), target.intended, target.ports)
        result.plan = plan
        if not plan.changed:
            return result
        result.device_diff = session.load(plan.commands, key=key)
        result.steps.append("candidate loaded")
        session.commit(options.revert_in_s)
        committed = True
        result.steps.append(f"committed, reverts in {options.revert_in_s} s unless confirmed")
        _verify(session, target, up_before, options)
        result.steps.append("verified")
        result.steps.append(settle(session, keep=True))
        committed = False
        result.status = "applied"
        log.info("%s: applied %d commands", target.device, len(plan.commands))
    except ConfigRejectedError as e:
        result.status, result.error = "rejected", str(e)
        result.steps.append("candidate discarded, nothing committed")
    except DriverError as e:
        result.status, result.error = ("rolled_back" if committed else "failed"), str(e)
    finally:
        if committed:
            _roll_back(session, result)
    return result


def _verify(session: Session, target: Target, up_before: dict[str, bool], options: ApplyOptions) -> None:
    after = target.driver.plan(target.device, session.running_config(), target.intended, target.ports)
    if after.changed:
        raise DriverError(target.device, f"verify: running config still differs after commit ({after.commands[:3]})")
    up_after = session.interfaces_up()
    lost = sorted(p for p, up in up_before.items() if up and not up_after.get(p, False))
    if lost:
        raise DriverError(target.device, f"verify: ports went down after commit: {', '.join(lost)}")
    if options.check_gnmi and target.access is not None:
        gnmi_streams(target.access, timeout_s=min(10.0, options.timeout_s))


def _roll_back(session: Session, result: DeviceResult) -> None:
    result.steps.append(settle(session, keep=False))
    result.status = "rolled_back"


def apply_all(
    items: list[Target], options: ApplyOptions, progress: Callable[[DeviceResult], None] | None = None
) -> list[DeviceResult]:
    """Canary first, then batches of `options.batch`; stop after the first batch with a failed device."""
    results: dict[str, DeviceResult] = {}
    order = list(items)
    batches = [order[:1]] + [order[i : i + options.batch] for i in range(1, len(order), max(1, options.batch))]
    stopped = False
    for batch in batches:
        if not batch:
            continue
        if stopped:
            for t in batch:
                results[t.device] = DeviceResult(t.device, "skipped", error="rollout stopped after a failure")
            continue
        with ThreadPoolExecutor(max_workers=len(batch)) as pool:
            for res in pool.map(lambda t: apply_one(t, options), batch):
                results[res.device] = res
                if progress:
                    progress(res)
        if any(results[t.device].status in ("rolled_back", "rejected", "failed") for t in batch):
            stopped = True
    return [results[t.device] for t in items]
