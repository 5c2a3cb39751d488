"""Plan for one EOS switch: what fabricd owns in its running config, the unified diff to the intended
config, and the exact commands that would be pushed (hier-config remediation).

fabricd owns only the lossless settings it renders; everything else in the running config (routing,
users, descriptions, ...) is out of scope and never appears in a plan.
"""

from __future__ import annotations

import difflib
import re

from hier_config import HConfig, HConfigChild, Platform, WorkflowRemediation, get_hconfig

from drivers.base import DevicePlan

# Global lines fabricd renders (drivers/eos/render.py), and interface sub-lines it owns.
_GLOBAL_OWNED = re.compile(r"^(qos map dscp |priority-flow-control pause watchdog )")
_INTERFACE_OWNED = re.compile(r"^(no )?(qos trust |priority-flow-control|tx-queue |link-debounce )")


def _text(node: HConfig | HConfigChild, depth: int = 0) -> list[str]:
    lines = []
    for child in node.children:
        lines.append("   " * depth + child.text)
        lines.extend(_text(child, depth + 1))
    return lines


def owned_config(config_text: str, interfaces: set[str]) -> str:
    """The part of a config fabricd owns, as EOS-indented text with `!` between sections."""
    tree = get_hconfig(Platform.ARISTA_EOS, config_text)
    out: list[str] = []
    for child in tree.children:
        if _GLOBAL_OWNED.match(child.text):
            out.append(child.text)
        elif child.text.startswith("interface ") and child.text.split(None, 1)[1] in interfaces:
            owned = [c for c in child.children if _INTERFACE_OWNED.match(c.text)]
            if owned:
                out.append(child.text)
                for c in owned:
                    out.append("   " + c.text)
                    out.extend("   " * 2 + line for line in _text(c))
    return "\n".join(out) + ("\n" if out else "")


def plan_device(device: str, running: str, intended: str, interfaces: set[str]) -> DevicePlan:
    """Diff and remediation commands from the running config to the intended one, within fabricd's scope."""
    have = owned_config(running, interfaces)
    want = owned_config(intended, interfaces)
    diff = "".join(
        difflib.unified_diff(
            have.splitlines(keepends=True), want.splitlines(keepends=True), f"{device} running", f"{device} intended"
        )
    )
    remediation = WorkflowRemediation(
        get_hconfig(Platform.ARISTA_EOS, have), get_hconfig(Platform.ARISTA_EOS, want)
    ).remediation_config
    commands = [" " * 3 * (c.depth() - 1) + c.text for c in remediation.all_children_sorted()]
    return DevicePlan(device, diff, commands)
