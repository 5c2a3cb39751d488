"""The SONiC driver: config_db rendering, JSON-patch planning (live, or offline from saved config_db.json) and
sessions over SSH that apply a patch under a switch-side revert timer (session.py)."""

from __future__ import annotations

import difflib
import json

from drivers.base import DevicePlan
from drivers.inventory import DeviceAccess
from drivers.sonic.patch import json_patch, owned_view, patch_commands
from drivers.sonic.render import render_config_db, sonic_port_name
from drivers.sonic.session import SonicSession
from policies.intent import DeviceIntent


class SonicDriver:
    platform = "sonic"
    running_suffix = ".json"  # a saved `show runningconfiguration all` / config_db.json

    def render(self, intent: DeviceIntent) -> str:
        return json.dumps(render_config_db(intent), indent=2, sort_keys=True) + "\n"

    def plan(self, device: str, running: str, intended: str, ports: set[str]) -> DevicePlan:
        try:
            have = json.loads(running) if running.strip() else {}
        except json.JSONDecodeError as e:
            return DevicePlan(device, error=f"running config_db is not JSON (line {e.lineno}: {e.msg})")
        want = json.loads(intended)
        patch = json_patch(have, want)
        names = {sonic_port_name(p) for p in ports}
        before = json.dumps(owned_view(have, names), indent=2, sort_keys=True).splitlines(keepends=True)
        after = json.dumps(owned_view(want, names), indent=2, sort_keys=True).splitlines(keepends=True)
        diff = "".join(difflib.unified_diff(before, after, f"{device} running", f"{device} intended"))
        return DevicePlan(device, diff if patch else "", patch_commands(patch))

    def connect(self, access: DeviceAccess, timeout_s: float = 30.0) -> SonicSession:
        return SonicSession(access, timeout_s)
