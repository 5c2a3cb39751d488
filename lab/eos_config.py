"""Each twin switch's EOS configuration: a hierarchical running config, startup config, flash files and sessions.

The running config is a tree of lines checked against `eos_grammar`. Whenever it changes (a line in `configure
terminal`, a session commit, a commit-timer revert, `configure replace`), every port's `PortConfig` is derived from
it again and the twin is told about the ports whose settings changed, so shutting a port takes its link down and
turning PFC on makes it honour pause frames.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from topology.underlay import Underlay
from topology.units import NS

from .bgp import HOLD_TIME_S, KEEPALIVE_S
from .endpoints import Credentials
from .eos_features import SwitchLog
from .eos_grammar import CliError, parse_line
from .model import PortConfig, Twin
from .saved_config import write_private

# Bytes per buffer segment for ECN thresholds in `segments` (an approximation: cells differ by chip).
SEGMENT_BYTES = 208
_UNIT_BYTES = {"bytes": 1, "kbytes": 1000, "mbytes": 1_000_000, "segments": SEGMENT_BYTES}


@dataclass
class Node:
    """One config line and, for a mode (`interface ...`, `tx-queue 3`), the lines under it keyed by their key."""

    line: str
    rank: int = 0
    mode: str | None = None
    children: dict[str, Node] = field(default_factory=dict)

    def copy(self) -> Node:
        return Node(self.line, self.rank, self.mode, {k: c.copy() for k, c in self.children.items()})

    def ordered(self) -> list[Node]:
        return sorted(self.children.values(), key=lambda n: (n.rank, _natural(n.line)))

    def same_as(self, other: Node) -> bool:
        return render_body(self) == render_body(other)


def _natural(text: str) -> tuple[tuple[int, int | str], ...]:
    return tuple((0, int(t)) if t.isdigit() else (1, t) for t in re.split(r"(\d+)", text) if t)


# --- rendering -------------------------------------------------------------------------------------


def render_body(root: Node) -> list[str]:
    """The config lines with EOS's `!` separators and 3-space indentation (no header, no `end`)."""
    out: list[str] = []
    prev: Node | None = None
    for node in root.ordered():
        section = node.mode is not None
        if prev is None or section or prev.mode is not None or prev.rank != node.rank:
            out.append("!")
        out.append(node.line)
        _render_children(node, 1, out)
        prev = node
    out.append("!")
    return out


def _render_children(node: Node, depth: int, out: list[str]) -> None:
    pad = "   " * depth
    for i, child in enumerate(node.ordered()):
        if child.mode is not None and i > 0:
            out.append(pad + "!")
        out.append(pad + child.line)
        _render_children(child, depth + 1, out)


def render_text(root: Node, device: str, model: str, version: str, command: str = "show running-config") -> str:
    header = [f"! Command: {command}", f"! device: {device} ({model}, EOS-{version})"]
    return "\n".join([*header, *render_body(root), "end"]) + "\n"


def render_json(root: Node, model: str, version: str) -> dict[str, object]:
    """`show running-config | json`: EOS nests each mode's lines under `cmds`."""

    def wrap(node: Node) -> dict[str, object]:
        return {c.line: ({"cmds": wrap(c), "comments": []} if c.mode is not None else None) for c in node.ordered()}

    return {"cmds": wrap(root), "header": [f"! device: ({model}, EOS-{version})"]}


def unified_diff(before: Node, after: Node, session: str) -> str:
    """`show session-config named S diffs`; napalm drops the first two (file name) lines."""
    lines = difflib.unified_diff(
        render_body(before),
        render_body(after),
        fromfile="system:/running-config",
        tofile=f"session:/{session}-session-config",
        lineterm="",
    )
    text = "\n".join(lines)
    return text + "\n" if text else ""


def sanitize(text: str) -> str:
    return re.sub(r"(secret (?:sha512|5) )\S+", r"\1<removed>", text)


# --- applying lines --------------------------------------------------------------------------------


class ConfigCursor:
    """Where a CLI is in a config tree (the mode stack) and how a line changes it.

    A line not valid in the current mode is tried in the enclosing modes, which is how EOS leaves `interface` mode
    when a global command follows (napalm sends configs flat, without indentation).
    """

    def __init__(self, root: Node, physical: frozenset[str], on_change: Callable[[], None] = lambda: None):
        self.root = root
        self.physical = physical
        self.on_change = on_change
        self.path: list[Node] = [root]

    @property
    def mode(self) -> str:
        return self.path[-1].mode or "config"

    def exit(self) -> bool:
        """Leave one mode; False when already at the top (`exit` there leaves configuration)."""
        if len(self.path) == 1:
            return False
        self.path.pop()
        return True

    def apply(self, line: str) -> None:
        errors: list[CliError] = []
        for depth in range(len(self.path) - 1, -1, -1):
            node = self.path[depth]
            try:
                action = parse_line(node.mode or "config", line)
            except CliError as e:
                errors.append(e)
                continue
            del self.path[depth + 1 :]
            self._do(node, action.key, action.line, action.command.rank, action.command.mode)
            self.on_change()
            return
        raise max(errors, key=lambda e: e.at)

    def _do(self, parent: Node, key: str, line: str | None, rank: int, mode: str | None) -> None:
        if mode == "if":
            name = key.split()[1]
            if not name.startswith("Loopback") and name not in self.physical:
                raise CliError(f"% Interface {name} does not exist on this switch", "invalid command", 1)
        if line is None:
            node = parent.children.get(key)
            if node is not None and mode == "if" and key.split()[1] in self.physical:
                node.children.clear()  # a physical interface cannot be removed, only reset to defaults
            else:
                parent.children.pop(key, None)
            return
        if mode is not None:
            node = parent.children.setdefault(key, Node(line, rank, mode))
            self.path.append(node)
            return
        parent.children[key] = Node(line, rank)


# --- the twin's port settings from the config ------------------------------------------------------


DLB_LINE = "ip hardware fib load-balance distribution dynamic"


def derive_port_config(root: Node, port: str, speed_gbps: float) -> PortConfig:
    iface = root.children.get(f"interface {port}")
    lines: dict[str, Node] = {}
    if iface is not None:
        profile_ref = iface.children.get("service-profile")
        if profile_ref is not None:
            profile = root.children.get(f"qos profile {profile_ref.line.split()[1]}")
            if profile is not None:
                lines.update(profile.children)
        lines.update(iface.children)  # the interface's own lines override its profile
    pfc = lines.get("priority-flow-control")
    pfc_on = pfc is not None and pfc.line == "priority-flow-control on"
    no_drop = frozenset(
        int(k.split()[2])
        for k, n in lines.items()
        if k.startswith("priority-flow-control priority ") and n.line.endswith("no-drop")
    )
    # A global watchdog timeout arms the watchdog on every PFC port unless the port turns it off.
    wd = lines.get("priority-flow-control pause watchdog")
    global_wd = "priority-flow-control pause watchdog default timeout" in root.children
    watchdog = pfc_on and (not wd.line.startswith("no ") if wd is not None else global_wd)
    timeout, recovery = _watchdog_timers(root, lines)
    ecn: dict[int, tuple[int, int, int]] = {}
    for key, node in lines.items():
        red = node.children.get("random-detect ecn") if key.startswith("tx-queue ") else None
        if red is not None:
            ecn[int(key.split()[1])] = _ecn_thresholds(red.line.split(), speed_gbps)
    return PortConfig(
        admin_up="shutdown" not in lines,
        pfc_enabled=pfc_on,
        no_drop=no_drop,
        ecn=ecn,
        watchdog=watchdog,
        watchdog_timeout_ns=timeout,
        watchdog_recovery_ns=recovery,
        description=_description(iface),
    )


def _description(iface: Node | None) -> str:
    node = None if iface is None else iface.children.get("description")
    return "" if node is None else node.line.partition(" ")[2]


def _watchdog_timers(root: Node, lines: dict[str, Node]) -> tuple[int, int]:
    """(timeout, recovery time) in ns: the port's `... port timer timeout S polling-interval P recovery-time R`,
    else the global `... default timeout S` / `... default recovery-time R`, else the twin's defaults."""
    default = PortConfig()
    timeout, recovery = default.watchdog_timeout_ns, default.watchdog_recovery_ns
    prefix = "priority-flow-control pause watchdog default "
    for node in root.children.values():
        if node.line.startswith(prefix + "timeout "):
            timeout = _seconds_ns(node.line.split()[-1], timeout)
        elif node.line.startswith(prefix + "recovery-time "):
            recovery = _seconds_ns(node.line.split()[-1], recovery)
    for node in lines.values():
        toks = node.line.split()
        if node.line.startswith("priority-flow-control pause watchdog port timer ") and "recovery-time" in toks:
            timeout = _seconds_ns(toks[toks.index("timeout") + 1], timeout)
            recovery = _seconds_ns(toks[toks.index("recovery-time") + 1], recovery)
    return timeout, recovery


def _seconds_ns(text: str, fallback: int) -> int:
    try:
        return round(float(text) * 1e9)
    except ValueError:
        return fallback


def _ecn_thresholds(toks: list[str], speed_gbps: float) -> tuple[int, int, int]:
    # random-detect ecn minimum-threshold N UNIT maximum-threshold M UNIT [max-mark-probability P] [weight W]
    def to_bytes(value: str, unit: str) -> int:
        if unit in ("milliseconds", "microseconds"):
            seconds = int(value) / (1000 if unit == "milliseconds" else 1_000_000)
            return int(seconds * speed_gbps * 1e9 / 8)
        return int(value) * _UNIT_BYTES[unit]

    prob = int(toks[toks.index("max-mark-probability") + 1]) if "max-mark-probability" in toks else 100
    return to_bytes(toks[3], toks[4]), to_bytes(toks[6], toks[7]), prob


def bgp_lines(underlay: Underlay, device: str) -> list[str]:
    """The `router bgp` section a switch of the underlay starts with (RFC 7938 eBGP, one neighbour per link)."""
    sp = underlay.speakers.get(device)
    sessions = underlay.sessions(device)
    if sp is None or not sessions:
        return []
    lines = [f"router bgp {sp.asn}", f"router-id {sp.router_id}", f"timers bgp {KEEPALIVE_S} {HOLD_TIME_S}",
             "maximum-paths 64 ecmp 64", "bgp bestpath as-path multipath-relax"]  # fmt: skip
    for s in sessions:
        lines += [f"neighbor {s.peer_address} remote-as {s.peer_asn}",
                  f"neighbor {s.peer_address} description {s.peer.device} {s.peer.port}",
                  f"neighbor {s.peer_address} bfd"]  # fmt: skip
    lines += [f"network {p}" for p in sp.originated]
    return [*lines, "exit"]


def port_config_lines(cfg: PortConfig) -> list[str]:
    """Interface lines that stand for a `PortConfig` (the initial config mirrors the twin's state)."""
    lines = [] if cfg.admin_up else ["shutdown"]
    if cfg.pfc_enabled:
        lines.append("priority-flow-control on")
        lines += [f"priority-flow-control priority {p} no-drop" for p in sorted(cfg.no_drop)]
    if cfg.watchdog:
        lines.append("priority-flow-control pause watchdog")
    for q, (lo, hi, prob) in sorted(cfg.ecn.items()):
        unit, div = ("kbytes", 1000) if lo % 1000 == 0 and hi % 1000 == 0 else ("bytes", 1)
        lines += [
            f"tx-queue {q}",
            f"random-detect ecn minimum-threshold {lo // div} {unit} maximum-threshold {hi // div} {unit} "
            f"max-mark-probability {prob}",
            "exit",
        ]
    return lines


# --- one switch ------------------------------------------------------------------------------------


@dataclass
class Session:
    name: str
    config: Node
    state: str = "pending"  # pending | pendingCommitTimer | completed
    before: Node | None = None  # the running config a timed commit reverts to
    commit_by_ns: int = 0
    timer: int = 0  # which scheduled expiry is current (a re-armed timer ignores the older ones)
    completed_ns: int = 0


class DeviceConfig:
    def __init__(self, twin: Twin, device: str, credentials: Credentials | None, saved_dir: Path | None = None):
        """`saved_dir`: where the startup-config is kept across restarts of the twin (a power cycle of every switch:
        each boots from what `write memory` saved, as a real one does); None: in memory only."""
        self.twin = twin
        self.device = device
        sw = twin.switch(device)
        self.physical = frozenset([*sw.ports, "Management1"])
        self.running = self.parse(self._initial_lines(credentials))
        self.startup = self.running.copy()
        self.flash: dict[str, Node] = {}
        self.sessions: dict[str, Session] = {}
        self.log = SwitchLog()  # its syslog buffer and command accounting (lab/eos_features.py)
        self.saved_file = saved_dir / f"{device}.startup-config" if saved_dir is not None else None
        if self.saved_file is not None and self.saved_file.exists():
            self.startup = self.parse(self.saved_file.read_text().splitlines())
            self.set_running(self.startup.copy())  # booted from its startup-config

    # -- building and reading configs --
    def clean(self) -> Node:
        """`clean-config`: the factory default (physical interfaces exist, nothing else)."""
        root = Node("", mode="config")
        cursor = ConfigCursor(root, self.physical)
        for name in sorted(self.physical):
            cursor.apply(f"interface {name}")
        return root

    def parse(self, lines: list[str]) -> Node:
        root = self.clean()
        cursor = ConfigCursor(root, self.physical)
        for raw in lines:
            line = raw.strip()
            if not line or line.startswith("!") or line == "end":
                continue
            if line == "exit":
                cursor.exit()
                continue
            cursor.apply(line)
        return root

    def _bgp_shut(self) -> frozenset[str]:
        """Peer addresses `neighbor X shutdown` shuts in the running config."""
        out: set[str] = set()
        for node in self.running.children.values():
            if node.line.startswith("router bgp "):
                for child in node.children.values():
                    toks = child.line.split()
                    if len(toks) == 3 and toks[0] == "neighbor" and toks[2] == "shutdown":
                        out.add(toks[1])
        return frozenset(out)

    def _depreferred(self) -> frozenset[str]:
        """Peer addresses whose outbound route map makes what this switch advertises to them least preferred:
        RFC 8326's GRACEFUL_SHUTDOWN community (65535:0, or EOS's name GSHUT) or a prepended AS path (longer than
        the other paths, out of the peer's ECMP set). The peer then sends nothing over that link where it has
        another path (reference/maintenance-lldp-bgp-state.md)."""
        maps: set[str] = set()
        for node in self.running.children.values():
            toks = node.line.split()
            if toks[:1] != ["route-map"] or len(toks) < 3 or toks[2] != "permit":
                continue
            for child in node.children.values():
                words = child.line.split()
                if words[:3] == ["set", "as-path", "prepend"] or (
                    words[:2] == ["set", "community"] and {"65535:0", "GSHUT", "gshut"} & set(words[2:])
                ):
                    maps.add(toks[1])
        out: set[str] = set()
        for node in self.running.children.values():
            if node.line.startswith("router bgp "):
                for child in node.children.values():
                    toks = child.line.split()
                    outbound = len(toks) == 5 and toks[0] == "neighbor" and toks[2] == "route-map" and toks[4] == "out"
                    if outbound and toks[3] in maps:
                        out.add(toks[1])
        return frozenset(out)

    def _quiesced(self) -> bool:
        """`maintenance` / `unit System` / `quiesce` in the running config: the switch is in maintenance."""
        node = self.running.children.get("maintenance")
        unit = node.children.get("unit System") if node is not None else None
        return unit is not None and "quiesce" in unit.children

    def _initial_lines(self, credentials: Credentials | None) -> list[str]:
        user, password = (credentials.username, credentials.password) if credentials else ("admin", "admin")
        lines = [
            "no aaa root",
            f"username {user} privilege 15 role network-admin secret {password}",  # stored hashed by the grammar
            f"hostname {self.device}",
            "spanning-tree mode mstp",
        ]
        sw = self.twin.switch(self.device)
        bgp = self.twin.bgp.underlay
        for port, cfg in zip(sw.ports, sw.config, strict=True):
            s = bgp.session(self.device, port)
            address = [f"ip address {s.local_address}/31"] if s is not None else []
            lines += [f"interface {port}", "no switchport", *address, *port_config_lines(cfg), "exit"]
        lines += ["ip routing", *bgp_lines(bgp, self.device)]
        lines += [
            "management api http-commands",
            "no shutdown",
            "management api gnmi",
            "transport grpc default",
        ]
        return lines

    @property
    def hostname(self) -> str:
        node = self.running.children.get("hostname")
        return node.line.split()[1] if node is not None else "localhost"

    def now(self) -> int:
        return self.twin.clock()

    def uptime(self, now_ns: int) -> float:
        return (now_ns - self.twin.switch(self.device).boot_ns) / NS

    # -- changing the running config --
    def set_running(self, root: Node) -> None:
        self.running = root
        self.sync()

    def sync(self) -> None:
        """Tell the twin about every port whose settings the running config changed, and the hostname."""
        sw = self.twin.switch(self.device)
        sw.hostname = self.hostname
        if self.twin.bgp.set_shut(self.device, self._bgp_shut()):
            self.twin.touch()
        self.twin.set_maintenance(self.device, self._quiesced())
        self.twin.set_depreferred(self.device, self._depreferred())
        # DLB on the switch's ECMP groups (drivers/eos/render.py renders it switch-wide, without a flowlet gap)
        self.twin.set_dlb(self.device, any(k.startswith(DLB_LINE) for k in self.running.children))
        for port, speed, current in zip(sw.ports, sw.speeds, sw.config, strict=True):
            wanted = derive_port_config(self.running, port, float(speed))
            if wanted != current:
                self.twin.set_port_config(self.device, port, wanted)

    def reload(self) -> None:
        """A reboot: the running config becomes the startup config and sessions are gone."""
        self.sessions.clear()
        self.set_running(self.startup.copy())

    def source(self, name: str) -> Node:
        """A config named in `copy`/`configure replace`: running-config, startup-config, clean-config, flash:X."""
        if name in ("running-config", "system:running-config"):
            return self.running.copy()
        if name in ("startup-config", "flash:startup-config"):
            return self.startup.copy()
        if name == "clean-config":
            return self.clean()
        if name.startswith("flash:") and name[6:] in self.flash:
            return self.flash[name[6:]].copy()
        raise CliError(f"% Error: {name} (No such file or directory)")

    def copy_config(self, src: str, dst: str) -> None:
        tree = self.source(src)
        if dst == "startup-config":
            self.startup = tree
            if self.saved_file is not None:
                write_private(self.saved_file, "\n".join(render_body(tree)) + "\n")
        elif dst == "running-config":
            self.set_running(tree)
        elif dst.startswith("flash:") and len(dst) > 6:
            self.flash[dst[6:]] = tree
        else:
            raise CliError(f"% Invalid input (at token 2: '{dst}')", "invalid command", 2)

    # -- sessions --
    def open_session(self, name: str) -> Session:
        sess = self.sessions.get(name)
        if sess is None:
            pending = [s for s in self.sessions.values() if s.state == "pending"]
            if len(pending) >= 5:
                raise CliError("% Maximum number of pending sessions has been reached")
            sess = self.sessions[name] = Session(name, self.running.copy())
        elif sess.state != "pending":
            raise CliError(f"% Cannot enter session {name} (session is {_STATE_WORDS[sess.state]})")
        return sess

    def session(self, name: str) -> Session:
        try:
            return self.sessions[name]
        except KeyError:
            raise CliError(f"% Session {name} does not exist") from None

    def commit(self, name: str) -> None:
        """Commit a pending session, or confirm one whose commit timer is running."""
        sess = self.session(name)
        if sess.state == "pendingCommitTimer":
            sess.before = None
        elif sess.state == "pending":
            self._check_no_timer(name)
            self.set_running(sess.config.copy())
        else:
            raise CliError(f"% Session {name} has already been committed")
        self._complete(sess)

    def commit_timer(self, name: str, seconds: int) -> None:
        """Apply the session now and go back to the config before it unless confirmed within `seconds`."""
        if seconds <= 0:
            raise CliError("% Commit timer must be at least 1 second")
        sess = self.session(name)
        if sess.state == "completed":
            raise CliError(f"% Session {name} has already been committed")
        if sess.state == "pending":
            self._check_no_timer(name)
            sess.before = self.running.copy()
            sess.state = "pendingCommitTimer"
            self.set_running(sess.config.copy())
        sess.commit_by_ns = self.now() + seconds * NS
        sess.timer += 1
        token = sess.timer
        self.twin.schedule(sess.commit_by_ns, lambda at: self._expire(name, token))

    def _expire(self, name: str, token: int) -> None:
        sess = self.sessions.get(name)
        if sess is not None and sess.state == "pendingCommitTimer" and sess.timer == token:
            self.abort(name)

    def abort(self, name: str) -> None:
        sess = self.session(name)
        if sess.state == "completed":
            raise CliError(f"% Cannot abort session {name} (session has been committed)")
        del self.sessions[name]
        if sess.state == "pendingCommitTimer" and sess.before is not None:
            self.set_running(sess.before)

    def _check_no_timer(self, name: str) -> None:
        for other in self.sessions.values():
            if other.state == "pendingCommitTimer" and other.name != name:
                raise CliError(f"% Cannot commit: session {other.name} has a pending commit timer")

    def _complete(self, sess: Session) -> None:
        sess.state = "completed"
        sess.completed_ns = self.now()
        # EOS keeps a bounded history of completed sessions.
        done = [s.name for s in self.sessions.values() if s.state == "completed"]
        for old in done[:-1]:
            del self.sessions[old]

    def sessions_json(self, now_ns: int, detail: bool) -> dict[str, Any]:
        out: dict[str, object] = {}
        for name, sess in self.sessions.items():
            entry: dict[str, object] = {"state": sess.state, "description": "", "instances": {}, "commitUser": ""}
            if sess.state == "pendingCommitTimer":
                entry["commitBy"] = round(self.uptime(sess.commit_by_ns), 3)
            if detail and sess.state == "completed":
                entry["completedTime"] = round(self.uptime(sess.completed_ns), 3)
            out[name] = entry
        return {"sessions": out, "maxSavedSessions": 1, "maxOpenSessions": 5}


_STATE_WORDS = {"pendingCommitTimer": "pending a commit timer", "completed": "completed", "pending": "pending"}


class ConfigStore:
    """The configuration of every EOS switch of a twin."""

    def __init__(self, twin: Twin, credentials: Credentials | None = None, saved_dir: Path | None = None):
        self.twin = twin
        self.devices = {
            name: DeviceConfig(twin, name, credentials, saved_dir)
            for name, sw in twin.switches.items()
            if sw.platform == "eos"
        }

    def reboot(self, device: str, now_ns: int) -> None:
        """`FaultInjector(on_reboot=...)`: a rebooted EOS switch comes back with its startup config."""
        if device in self.devices:
            self.devices[device].reload()

    def device(self, name: str) -> DeviceConfig:
        try:
            return self.devices[name]
        except KeyError:
            raise KeyError(f"no EOS switch {name!r} in this twin") from None
