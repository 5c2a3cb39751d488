"""The EOS driver: pyavd rendering, hier-config planning, napalm sessions over eAPI."""

from __future__ import annotations

from drivers.base import DevicePlan
from drivers.eos.plan import plan_device
from drivers.eos.render import render
from drivers.eos.session import EosSession
from drivers.inventory import DeviceAccess
from policies.intent import DeviceIntent


class EosDriver:
    platform = "eos"
    running_suffix = ".cfg"  # a saved `show running-config`

    def render(self, intent: DeviceIntent) -> str:
        return render(intent)

    def plan(self, device: str, running: str, intended: str, ports: set[str]) -> DevicePlan:
        return plan_device(device, running, intended, ports)

    def connect(self, access: DeviceAccess, timeout_s: float = 30.0) -> EosSession:
        return EosSession(access, timeout_s)
