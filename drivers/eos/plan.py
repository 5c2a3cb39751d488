"""Plan for one EOS switch: what fabricd owns in its running config, the unified diff to the intended
config, and the exact commands that would be pushed (hier-config remediation).

fabricd owns only the lossless settings it renders; everything else in the running config (routing,
users, descriptions, ...) is out of scope and never appears in a plan.

Speed (a 16k-GPU fabric has 832 switches): the owned part is cut out with a line scanner that follows
hier-config's own parsing rules (`_scan`), so hier-config only ever parses the small owned texts, and the
remediation of a (running, intended) pair of owned texts is computed once per process (`plan_owned`).
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Iterable, Set
from functools import lru_cache

from hier_config import HConfig, HConfigChild, Platform, WorkflowRemediation, get_hconfig, get_hconfig_driver
from hier_config.exceptions import DuplicateChildError
from hier_config.platforms.driver_base import HConfigDriverBase

from drivers.base import DevicePlan

# Global lines fabricd renders (drivers/eos/render.py), and interface sub-lines it owns.
_GLOBAL_OWNED = re.compile(
    r"^(qos map dscp |priority-flow-control pause watchdog |ip hardware fib load-balance distribution dynamic)"
)
_INTERFACE_OWNED = re.compile(r"^(no )?(qos trust |priority-flow-control|tx-queue |link-debounce )")

_DRIVER = get_hconfig_driver(Platform.ARISTA_EOS)
_RULES = _DRIVER.rules
# hier-config's per-line substitutions, in its order; one combined pattern finds the (rare) lines they touch.
_SUBS = [(re.compile(r.search), r.replace) for r in _RULES.per_line_sub]
_ANY_SUB = re.compile("|".join(f"(?:{r.search})" for r in _RULES.per_line_sub)) if _SUBS else None
# The scanner mirrors hier-config's EOS parsing as it is; if a hier-config release adds rules it does not
# model, every config goes through hier-config itself (slower, same result).
_SCANNER_OK = (
    not _RULES.full_text_sub
    and not _RULES.indent_adjust
    and not _RULES.parent_allows_duplicate_child
    and not _RULES.post_load_callbacks
    and type(_DRIVER).config_preprocessor is HConfigDriverBase.config_preprocessor
    and type(_DRIVER).sectional_exit is HConfigDriverBase.sectional_exit
)


def _text(node: HConfig | HConfigChild, depth: int = 0) -> list[str]:
    lines = []
    for child in node.children:
        lines.append("   " * depth + child.text)
        lines.extend(_text(child, depth + 1))
    return lines


def owned_config_hier(config_text: str, interfaces: Set[str]) -> str:
    """`owned_config` through a full hier-config parse: the reference the scanner is tested against."""
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


class _Node:
    __slots__ = ("children", "indent", "names", "parent", "text")

    def __init__(self, text: str, indent: int, parent: _Node | None):
        self.text = text
        self.indent = indent
        self.parent = parent
        self.children: list[_Node] = []
        self.names: set[str] = set()

    def path(self) -> list[str]:
        out: list[str] = []
        node: _Node | None = self
        while node is not None and node.parent is not None:
            out.append(node.text)
            node = node.parent
        return out[::-1]

    def kept(self) -> list[_Node]:
        # hier-config drops a section's closing `exit` (EOS: every section outside router bgp ends in `exit`).
        if self.children and self.children[-1].text == "exit":
            return self.children[:-1]
        return self.children


def _scan(config_text: str) -> _Node | None:
    """The config as a light tree, built line for line as hier-config builds its own (same duplicate
    errors); None when the text needs what only hier-config handles (banners)."""
    root = _Node("", -1, None)
    current = root
    recent = root
    for raw in config_text.splitlines():
        stripped = raw.lstrip()
        if not stripped or stripped[0] in "!#":  # comments and `!` separators (a per-line-sub rule empties them)
            continue
        if raw.startswith("banner ") and raw != "banner motd ##":
            return None
        indent = len(raw) - len(stripped)
        text = " ".join(stripped.split())
        if _ANY_SUB is not None and _ANY_SUB.search(line := " " * indent + text):
            for pattern, repl in _SUBS:
                line = pattern.sub(repl, line)
            line = line.rstrip()
            if not line:
                continue
            text = line.lstrip()
            indent = len(line) - len(text)
        # hier-config's _analyze_indent: up while not deeper than the section, down one under a deeper line.
        while indent <= current.indent:
            assert current.parent is not None  # the root's indent is -1, below any line's
            current = current.parent
        if indent > recent.indent:
            current = recent
        if text in current.names:
            raise DuplicateChildError(f"Found a duplicate section: {(*current.path(), text)}")
        recent = _Node(text, indent, current)
        current.names.add(text)
        current.children.append(recent)
    return root


def _subtree(node: _Node, depth: int, out: list[str]) -> None:
    for child in node.kept():
        out.append("   " * depth + child.text)
        _subtree(child, depth + 1, out)


def owned_config(config_text: str, interfaces: Set[str]) -> str:
    """The part of a config fabricd owns, as EOS-indented text (one level per section, three spaces)."""
    root = _scan(config_text) if _SCANNER_OK else None
    if root is None:
        return owned_config_hier(config_text, interfaces)
    out: list[str] = []
    for child in root.children:  # the root keeps a top-level `exit` (hier-config does too)
        text = child.text
        if _GLOBAL_OWNED.match(text):
            out.append(text)
        elif text.startswith("interface ") and text.split(None, 1)[1] in interfaces:
            owned = [c for c in child.kept() if _INTERFACE_OWNED.match(c.text)]
            if owned:
                out.append(text)
                for c in owned:
                    out.append("   " + c.text)
                    _subtree(c, 2, out)
    return "\n".join(out) + ("\n" if out else "")


@lru_cache(maxsize=1024)
def plan_owned(have: str, want: str) -> tuple[str, tuple[str, ...]]:
    """(diff hunks without the file header, remediation commands) from owned running to owned intended text.

    Many switches share the same pair (identical roles, identical drift), so the result is kept per process.
    """
    if have == want:
        return "", ()
    lines = difflib.unified_diff(have.splitlines(keepends=True), want.splitlines(keepends=True), "a", "b")
    hunks = "".join(line for i, line in enumerate(lines) if i >= 2)  # the two header lines name the device
    remediation = WorkflowRemediation(
        get_hconfig(Platform.ARISTA_EOS, have), get_hconfig(Platform.ARISTA_EOS, want)
    ).remediation_config
    commands = tuple(" " * 3 * (c.depth() - 1) + c.text for c in remediation.all_children_sorted())
    return hunks, commands


def device_plan(device: str, hunks: str, commands: Iterable[str]) -> DevicePlan:
    diff = f"--- {device} running\n+++ {device} intended\n{hunks}" if hunks else ""
    return DevicePlan(device, diff, list(commands))


def plan_device(device: str, running: str, intended: str, interfaces: set[str]) -> DevicePlan:
    """Diff and remediation commands from the running config to the intended one, within fabricd's scope."""
    hunks, commands = plan_owned(owned_config(running, interfaces), owned_config(intended, interfaces))
    return device_plan(device, hunks, commands)
