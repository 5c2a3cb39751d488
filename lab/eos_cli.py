"""One EOS CLI session on one twin switch: modes, prompts, config sessions and `show` commands.

eAPI runs each request in a fresh `CliSession` (privileged, as EOS does per request); the SSH server keeps one per
login. Config-related commands are answered here; the other `show` commands come from `eos_show`. Servers advance
the twin before running commands, so commit timers fire and counters are current.
"""

from __future__ import annotations

import difflib
import json
import re
from typing import Any

from . import eos_features, eos_identity, eos_ping, eos_platform, eos_show
from .eos_config import (
    ConfigCursor,
    ConfigStore,
    DeviceConfig,
    Node,
    render_json,
    render_text,
    sanitize,
    unified_diff,
)
from .eos_grammar import CliError, canonical_interface, short_interface
from .model import Twin

__all__ = ["CliError", "CliSession"]

Json = dict[str, Any]

# Keywords EOS completes from a unique prefix (`sh run`, `conf t`, `wr mem`); arguments are left alone.
_VOCAB: dict[str, Any] = {
    "show": {
        "running-config": {"all": {}, "sanitized": {}, "interfaces": {}},
        "startup-config": {},
        "session-config": {"named": {}, "diffs": {}},
        "configuration": {"sessions": {"detail": {}}},
        "version": {},
        "hostname": {},
        "interfaces": {"status": {}, "counters": {"errors": {}}, "transceiver": {}},
        "lldp": {"neighbors": {"detail": {}}},
        "priority-flow-control": {"counters": {"detail": {}}},
    },
    "configure": {"terminal": {}, "session": {}, "replace": {}},
    "copy": {"running-config": {}, "startup-config": {}},
    "write": {"memory": {}},
    "enable": {},
    "disable": {},
    "terminal": {"length": {}, "width": {}},
    "exit": {},
}
# In configuration modes `en` is `end` (exec's `enable`/`disable`/`copy` do not exist there).
_CONFIG_VOCAB: dict[str, Any] = {
    "show": _VOCAB["show"],
    "configure": {"session": {}},
    "exit": {},
    "end": {},
    "commit": {"timer": {}},
    "abort": {},
    "rollback": {"clean-config": {}},
}
_TIMER = re.compile(r"^(\d{1,2}):([0-5]\d):([0-5]\d)$")
_MODE_LABELS = {
    "mgmt-http": "mgmt-api-http-cmds",
    "mgmt-gnmi": "mgmt-api-gnmi",
}


def expand(line: str, vocab: dict[str, Any]) -> str:
    toks = line.split()
    level = vocab
    for i, tok in enumerate(toks):
        if tok in level:
            level = level[tok]
            continue
        hits = [k for k in level if k.startswith(tok.lower())]
        if len(hits) != 1:
            break
        toks[i] = hits[0]
        level = level[hits[0]]
    return " ".join(toks)


class CliSession:
    def __init__(
        self, twin: Twin, configs: ConfigStore, device: str, privileged: bool = False, autocomplete: bool = True
    ):
        self.twin = twin
        self.dev: DeviceConfig = configs.device(device)
        self.device = device
        self.privileged = privileged
        self.autocomplete = autocomplete
        self.cursor: ConfigCursor | None = None
        self.session: str | None = None  # config session this CLI is in (None: configure terminal)
        self.closed = False

    # --- prompt ----------------------------------------------------------------------------------
    def prompt(self) -> str:
        host = self.dev.hostname
        if self.cursor is None:
            return f"{host}{'#' if self.privileged else '>'}"
        parts = ["config"]
        if self.session is not None:
            parts.append("s-" + self.session[:6])
        label = self._mode_label()
        if label:
            parts.append(label)
        return f"{host}({'-'.join(parts)})#"

    def _mode_label(self) -> str:
        assert self.cursor is not None
        label = ""
        for node in self.cursor.path[1:]:
            arg = node.line.split()[-1]
            if node.mode == "if":
                label = "if-" + short_interface(arg)
            elif node.mode == "txq":
                label = f"{label}-txq-{arg}"
            elif node.mode == "gnmi-transport":
                label = "gnmi-transport-" + arg
            elif node.mode == "qos-profile":
                label = "qos-profile-" + arg
            else:
                label = _MODE_LABELS.get(node.mode or "", node.mode or "")
        return label

    # --- running commands ------------------------------------------------------------------------
    def run(self, line: str) -> str:
        """Run one line; its text output ("" for config lines). Raises CliError as EOS would reject it."""
        self._account(line)
        line, pipes = self._split(line)
        if not line:
            return ""
        if line.split()[0] != "show":
            return self._command(line)
        out = self._show(line, as_json=False)
        if out is None:
            raise _invalid(line.split(), 1)
        assert isinstance(out, str)
        for kind, arg in pipes:
            out = _filter(out, kind, arg, lambda: self._show_json(line))
        return out

    def run_json(self, line: str) -> Json:
        """Run one line for eAPI `format: json`: a config or exec command answers `{}`."""
        self._account(line)
        line, pipes = self._split(line)
        if not line:
            return {}
        if line.split()[0] == "show":
            if any(kind != "json" for kind, _ in pipes):
                raise CliError("% Output pipes are not supported in JSON mode", "unconverted command")
            return self._show_json(line)
        if line.split()[0] == "dir" and self.privileged and self.cursor is None:
            return self._dir(line.split()[1:])
        out = self._command(line)
        return {"messages": [out.strip()]} if out.strip() else {}

    def _account(self, line: str) -> None:
        """AAA accounting of exec commands (`show aaa accounting logs`), as EOS logs them."""
        if line.strip() and self.cursor is None:
            self.dev.log.accounting.append((self.twin.clock(), " ".join(line.split())))
            del self.dev.log.accounting[:-500]

    def _split(self, line: str) -> tuple[str, list[tuple[str, str]]]:
        line = " ".join(line.split())
        if not line or line.startswith("!"):
            return "", []
        if self.autocomplete:
            line = expand(line, _VOCAB if self.cursor is None else _CONFIG_VOCAB)
        if not line.startswith("show ") or " | " not in line:
            return line, []
        base, *rest = line.split(" | ")
        pipes = []
        for p in rest:
            kind, _, arg = p.partition(" ")
            full = next(
                (
                    k
                    for k in ("json", "section", "include", "exclude", "begin", "no-more", "grep", "tail", "head")
                    if k.startswith(kind)
                ),
                None,
            )
            if full is None or not kind:
                raise CliError(f"% Invalid input (at token 0: '{kind}')", "invalid command", 0)
            pipes.append((full, arg))
        return base, pipes

    def _command(self, line: str) -> str:
        toks = line.split()
        word = toks[0]
        if word == "terminal" and len(toks) == 3 and toks[1] in ("length", "width") and toks[2].isdigit():
            return ""
        if word in ("exit", "logout", "quit") and self.cursor is None:
            self.closed = True
            return ""
        if not self.privileged:
            if line == "enable":
                self.privileged = True
                return ""
            raise CliError(f"% Invalid input (privileged mode required) (at token 0: '{word}')", "invalid command", 0)
        if self.cursor is not None:
            return self._config_line(line, toks)
        return self._exec(line, toks)

    def _exec(self, line: str, toks: list[str]) -> str:
        word = toks[0]
        if line == "enable":
            return ""
        if line == "disable":
            self.privileged = False
            return ""
        if line in ("configure", "configure terminal"):
            self.cursor = ConfigCursor(self.dev.running, self.dev.physical, self.dev.sync)
            self.session = None
            return ""
        if word == "configure" and toks[1:2] == ["session"]:
            return self._configure_session(toks[2:])
        if word == "configure" and toks[1:2] == ["replace"] and len(toks) in (3, 4) and toks[3:] in ([], ["force"]):
            self.dev.set_running(self.dev.source(toks[2]))
            return ""
        if word == "copy" and len(toks) == 3:
            self.dev.copy_config(toks[1], toks[2])
            return "Copy completed successfully.\n"
        if line in ("write", "write memory"):
            self.dev.copy_config("running-config", "startup-config")
            return "Copy completed successfully.\n"
        if line == "bash timeout 10 df -h":  # what ANTA's VerifyFileSystemUtilization runs
            return eos_platform.DF_TEXT
        if line == "bash timeout 10 nproc":
            return eos_platform.NPROC_TEXT
        if word == "dir":
            return _dir_text(self._dir(toks[1:]))
        if word == "ping":
            return eos_ping.ping(self.twin, self.device, toks[1:])
        if toks[:2] == ["bash", "timeout"] and toks[3:4] == ["traceroute"]:
            return eos_ping.traceroute(self.twin, self.device, toks[4:])
        if toks[:2] == ["bash", "timeout"] and toks[3:4] == ["nslookup"] and len(toks) == 5:
            # no name server answers in the lab: what nslookup prints then
            return ";; communications error to 127.0.0.1#53: connection refused\n;; no servers could be reached\n\n"
        if toks[:2] == ["cli", "vrf"] and len(toks) == 3:
            if toks[2] != "default":
                raise CliError(f"% VRF {toks[2]} does not exist")
            return ""
        if toks[:2] == ["send", "log"]:
            ctx = eos_features.context(self.twin, self.twin.switch(self.device), self.dev.running,
                                       max(self.twin.now, self.twin.clock()), self.dev.log)  # fmt: skip
            return eos_features.send_log(ctx, toks[2:])
        raise _invalid(toks)

    def _dir(self, args: list[str]) -> Json:
        """`dir flash:/` (JSON revision 2): the files of the switch's flash."""
        where = args[0] if args else "flash:/"
        if where in ("flash:/persist/messages", "flash:persist/messages") and len(args) == 1:
            # persistent logging's file: written while `logging persistent` is configured (empty otherwise)
            persistent = any(c.line.startswith("logging persistent") for c in self.dev.running.ordered())
            size = sum(len(e.text) + 40 for e in self.dev.log.entries) if persistent else 0
            entry = {"size": size, "isDir": False, "modified": self.twin.now / 1e9, "permissions": "-rw-"}
            return {"urls": {"flash:/persist/messages": {"entries": {"messages": entry},
                                                         "totalSize": eos_platform.FLASH_SIZE,
                                                         "freeSize": eos_platform.FLASH_FREE}}}  # fmt: skip
        if where not in ("flash:", "flash:/") or len(args) > 1:
            raise CliError(f"% Error listing directory {where} (No such file or directory)", "could not run command")
        now = self.twin.now / 1e9
        size = len(str(self._config_out(self.dev.startup, "show startup-config", False, False)))
        image = f"EOS-{self.twin.switch(self.device).os_version}.swi"
        entries = {
            "startup-config": {"size": size, "isDir": False, "modified": now, "permissions": "-rwx"},
            image: {"size": 1_073_741_824, "isDir": False, "modified": now - 86400, "permissions": "-rwx"},
            "persist": {"size": 4096, "isDir": True, "modified": now - 86400, "permissions": "drwx"},
            "schedule": {"size": 4096, "isDir": True, "modified": now - 86400, "permissions": "drwx"},
        }
        return {"urls": {"flash:/": {"entries": entries, "totalSize": eos_platform.FLASH_SIZE,
                                     "freeSize": eos_platform.FLASH_FREE}}}  # fmt: skip

    def _configure_session(self, args: list[str]) -> str:
        if not args:
            n = len(self.dev.sessions)
            while f"session{n}" in self.dev.sessions:
                n += 1
            args = [f"session{n}"]
        name, rest = args[0], args[1:]
        if not rest:
            sess = self.dev.open_session(name)
            self.cursor = ConfigCursor(sess.config, self.dev.physical)
            self.session = name
            return ""
        if rest == ["commit"]:
            self.dev.commit(name)
        elif rest == ["abort"]:
            self.dev.abort(name)
        elif rest[:2] == ["commit", "timer"] and len(rest) == 3:
            self.dev.commit_timer(name, _timer_seconds(rest[2], 4))
        else:
            raise _invalid(["configure", "session", *args], 3)
        return ""

    def _config_line(self, line: str, toks: list[str]) -> str:
        assert self.cursor is not None
        word = toks[0]
        if line == "end":
            self._leave_config()
            return ""
        if line == "exit":
            if not self.cursor.exit():
                self._leave_config()
            return ""
        if word == "configure" and toks[1:2] == ["session"]:
            self._leave_config()
            return self._configure_session(toks[2:])
        if word in ("copy", "write"):  # EOS runs these exec commands from any configuration mode, staying in it
            return self._exec(line, toks)
        if self.session is not None:
            done = self._session_line(self.session, toks)
            if done is not None:
                return done
        self._current_tree()
        self.cursor.apply(line)
        return ""

    def _session_line(self, name: str, toks: list[str]) -> str | None:
        """Commands only a config session has; None if `toks` is not one of them."""
        if toks == ["commit"]:
            self.dev.commit(name)
        elif toks[:2] == ["commit", "timer"] and len(toks) == 3:
            self.dev.commit_timer(name, _timer_seconds(toks[2], 2))
        elif toks == ["abort"]:
            self.dev.abort(name)
        elif toks[0] == "rollback" and len(toks) == 2:
            self.dev.session(name).config = self.dev.source(toks[1])
            assert self.cursor is not None
            self.cursor = ConfigCursor(self.dev.session(name).config, self.dev.physical)
            return ""
        else:
            return None
        self._leave_config()
        return ""

    def _current_tree(self) -> None:
        """Re-aim the cursor when its tree was replaced meanwhile (a commit, a revert, another session)."""
        assert self.cursor is not None
        if self.session is None:
            if self.cursor.root is not self.dev.running:
                self.cursor = ConfigCursor(self.dev.running, self.dev.physical, self.dev.sync)
            return
        sess = self.dev.sessions.get(self.session)
        if sess is None or sess.state != "pending":
            name = self.session
            self._leave_config()
            raise CliError(f"% Session {name} is no longer pending")
        if self.cursor.root is not sess.config:
            self.cursor = ConfigCursor(sess.config, self.dev.physical)

    def _leave_config(self) -> None:
        self.cursor = None
        self.session = None

    # --- show ------------------------------------------------------------------------------------
    def _show(self, line: str, as_json: bool) -> str | Json | None:
        """Config-related `show` commands; everything else goes to `eos_show`."""
        toks = line.split()
        what = toks[1] if len(toks) > 1 else ""
        now = self.twin.now
        if what == "running-config" and toks[2:] == ["diffs"]:
            if as_json:  # EOS has no JSON for it either
                raise CliError("% This is an unconverted command", "unconverted command")
            return self._running_diffs()
        if what == "running-config":
            opts = toks[2:]
            root = self.dev.running
            if opts[:1] == ["interfaces"] and len(opts) == 2:
                root = _only_interface(root, opts[1], toks)
            elif any(o not in ("all", "sanitized") for o in opts):
                raise _invalid(toks, 2 + next(i for i, o in enumerate(opts) if o not in ("all", "sanitized")))
            return self._config_out(root, line, as_json, "sanitized" in opts)
        if what == "startup-config" and len(toks) == 2:
            return self._config_out(self.dev.startup, line, as_json, False)
        if what == "session-config":
            return self._session_config(toks, as_json)
        if what == "configuration" and toks[2:3] == ["sessions"] and toks[3:] in ([], ["detail"]):
            data = self.dev.sessions_json(now, detail=len(toks) == 4)
            return data if as_json else _sessions_text(data)
        command = " ".join(toks).lower()
        if command == "show agent logs crash":  # no agent has crashed; EOS prints nothing then
            if as_json:
                raise CliError("% This is an unconverted command", "unconverted command")
            return ""
        if command == "show queue-monitor length status":
            return self._lanz(as_json)
        clock = max(now, self.twin.clock())
        ctx = eos_features.context(self.twin, self.twin.switch(self.device), self.dev.running, clock, self.dev.log)
        featured = eos_features.answer(ctx, command, as_json)
        if featured is not None:
            return featured
        if command == "show ntp status":
            if as_json:
                raise CliError("% This is an unconverted command", "unconverted command")
            return self._ntp_status()
        if command == "show ntp associations" and self._ntp_servers():
            return self._ntp_associations(as_json)
        try:
            return self._show_rest(command, as_json, now)
        except eos_platform.Unavailable as e:
            raise CliError(str(e), "could not run command") from None

    def _lanz(self, as_json: bool) -> str | Json:
        """LANZ (queue-length monitoring): on where `queue-monitor length` is configured, and by default on Sand
        silicon (the DR routers) unless `no queue-monitor length` turns it off. ASSUMPTION: the platform defaults
        are not in the reference."""
        lines = {child.line for child in self.dev.running.ordered()}
        sw = self.twin.switch(self.device)
        on = "queue-monitor length" in lines or (eos_platform.sand(sw) and "no queue-monitor length" not in lines)
        data: Json = {"lanzEnabled": on, "platformName": eos_identity.model_name(sw), "globalHitCount": 0}
        return data if as_json else f"queue-monitor length {'enabled' if on else 'disabled'}\n"

    def _ntp_servers(self) -> list[tuple[str, bool]]:
        """(address, prefer) of each `ntp server` line of the running-config."""
        out = []
        for child in self.dev.running.ordered():
            toks = child.line.split()
            if toks[:2] == ["ntp", "server"] and len(toks) > 2:
                out.append((toks[2], "prefer" in toks[3:]))
        return out

    def _ntp_status(self) -> str:
        """ntpstat's words, as EOS prints them: synchronised to the preferred (else first) configured server; the
        twin's clock is its host's, which is synchronised."""
        servers = self._ntp_servers()
        if not servers:
            return "unsynchronised\n  time server re-starting\n   polling server every 8 s\n"
        peer = next((a for a, prefer in servers if prefer), servers[0][0])
        return f"synchronised to NTP server ({peer}) at stratum 3\n   time correct to within 12 ms\n" + (
            "   polling server every 1024 s\n"
        )

    def _ntp_associations(self, as_json: bool) -> str | Json:
        servers = self._ntp_servers()
        peer = next((a for a, prefer in servers if prefer), servers[0][0])
        peers = {
            addr: {"peerIpAddr": addr, "condition": "sys.peer" if addr == peer else "candidate", "stratumLevel": 2,
                   "refid": ".GPS.", "peerType": "unicast", "pollInterval": 1024, "lastReceived": self.twin.now / 1e9,
                   "reachabilityHistory": [True] * 8, "delay": 0.25, "offset": 0.012, "jitter": 0.008}
            for addr, _ in servers
        }  # fmt: skip
        if as_json:
            return {"peers": peers}
        lines = ["     remote           refid      st t when  poll reach   delay   offset  jitter",
                 "=============================================================================="]  # fmt: skip
        for addr, p in peers.items():
            mark = "*" if p["condition"] == "sys.peer" else "+"
            lines.append(
                f"{mark}{addr:<16} {p['refid']:<10} {p['stratumLevel']:>2} u   12  1024  377    0.250    0.012   0.008"
            )
        return "\n".join(lines) + "\n"

    def _show_rest(self, command: str, as_json: bool, now: int) -> str | Json | None:
        if as_json:
            shown = eos_show.show_json(self.twin, self.device, command, now)
            if shown is not None and command == "show version" and "uptime" not in shown:
                shown = {**shown, "uptime": self.dev.uptime(now)}  # napalm's commit-timer check needs it
            return shown
        return eos_show.show_text(self.twin, self.device, command, now)

    def _show_json(self, line: str) -> Json:
        out = self._show(line, as_json=True)
        if out is None:
            raise _invalid(line.split(), 1)
        assert isinstance(out, dict)
        return out

    def _running_diffs(self) -> str:
        """`show running-config diffs`: what `write memory` would save, as a unified diff of startup against running
        (empty when they are the same); the `! Command:` header lines are not config."""

        def lines(root: Node) -> list[str]:
            text = self._config_out(root, "show running-config", False, False)
            assert isinstance(text, str)
            return [ln for ln in text.splitlines(keepends=True) if not ln.startswith("! Command:")]

        diff = difflib.unified_diff(lines(self.dev.startup), lines(self.dev.running), "flash:/startup-config",
                                    "system:/running-config")  # fmt: skip
        return "".join(diff)

    def _config_out(self, root: Node, line: str, as_json: bool, sanitized: bool) -> str | Json:
        sw = self.twin.switch(self.device)
        model = eos_identity.model_name(sw)
        if as_json:
            return render_json(root, model, sw.os_version)
        text = render_text(root, self.dev.hostname, model, sw.os_version, line)
        return sanitize(text) if sanitized else text

    def _session_config(self, toks: list[str], as_json: bool) -> str | Json:
        rest = toks[2:]
        if rest[:1] == ["named"] and len(rest) >= 2:
            name, opts = rest[1], rest[2:]
        elif self.session is not None:
            name, opts = self.session, rest
        else:
            raise CliError("% Not in a configuration session", "invalid command")
        if any(o not in ("diffs", "sanitized") for o in opts):
            raise _invalid(
                toks, len(toks) - len(opts) + next(i for i, o in enumerate(opts) if o not in ("diffs", "sanitized"))
            )
        sess = self.dev.session(name)
        if "diffs" in opts:
            if as_json:
                raise CliError("% This is an unconverted command", "unconverted command")
            return unified_diff(self.dev.running, sess.config, name)
        return self._config_out(sess.config, " ".join(toks), as_json, "sanitized" in opts)


def _only_interface(root: Node, name: str, toks: list[str]) -> Node:
    canonical = canonical_interface(name)
    key = f"interface {canonical}"
    if canonical is None or key not in root.children:
        raise _invalid(toks, 3)
    return Node("", mode="config", children={key: root.children[key]})


def _timer_seconds(text: str, at: int) -> int:
    m = _TIMER.match(text)
    if m is None:
        raise CliError(f"% Invalid input (at token {at}: '{text}')", "invalid command", at)
    h, mi, s = (int(g) for g in m.groups())
    return h * 3600 + mi * 60 + s


def _invalid(toks: list[str], at: int = 0) -> CliError:
    if at >= len(toks):
        return CliError("% Incomplete command", "invalid command", CliError.INCOMPLETE)
    return CliError(f"% Invalid input (at token {at}: '{toks[at]}')", "invalid command", at)


def _dir_text(data: Json) -> str:
    ((where, d),) = data["urls"].items()
    lines = [f"Directory of {where}", ""]
    for name, e in d["entries"].items():
        lines.append(f"       {e['permissions']} {e['size']:>14}  {name}")
    lines += ["", f"{d['totalSize']} bytes total ({d['freeSize']} bytes free)"]
    return "\n".join(lines) + "\n"


def _sessions_text(data: Json) -> str:
    lines = [
        "  Name                State              User     Terminal",
        "  ------------------- ------------------ -------- --------",
    ]
    for name, s in data["sessions"].items():
        lines.append(f"  {name:<19} {s['state']:<18}")
    return "\n".join(lines) + "\n"


def _filter(text: str, kind: str, arg: str, as_json: Any) -> str:
    if kind == "no-more":
        return text
    if kind == "json":
        return json.dumps(as_json(), indent=2) + "\n"
    if kind in ("tail", "head"):  # `| tail [-n] N`, the last (first) 10 lines by default
        words = [w for w in arg.split() if w != "-n"]
        if len(words) > 1 or (words and not words[0].lstrip("-").isdigit()):
            raise CliError(f"% Invalid input (at token 1: '{arg}')")
        n = abs(int(words[0])) if words else 10
        lines = text.splitlines()
        kept = (lines[-n:] if n else []) if kind == "tail" else lines[:n]
        return "\n".join(kept) + ("\n" if kept else "")
    if kind == "grep":
        kind = "include"
    try:
        rx = re.compile(arg)
    except re.error as e:
        raise CliError(f"% Invalid regular expression: {e}") from None
    lines = text.splitlines()
    if kind == "include":
        kept = [ln for ln in lines if rx.search(ln)]
    elif kind == "exclude":
        kept = [ln for ln in lines if not rx.search(ln)]
    elif kind == "begin":
        start = next((i for i, ln in enumerate(lines) if rx.search(ln)), len(lines))
        kept = lines[start:]
    else:
        kept = _sections(lines, rx)
    return "\n".join(kept) + ("\n" if kept else "")


def _sections(lines: list[str], rx: re.Pattern[str]) -> list[str]:
    """`| section X`: each top-level block a line of which matches (the whole block if its head matches)."""
    blocks: list[list[str]] = []
    for ln in lines:
        if ln.startswith(" ") and blocks:
            blocks[-1].append(ln)
        elif ln != "!" and not ln.startswith("! "):
            blocks.append([ln])
    kept: list[str] = []
    for block in blocks:
        if rx.search(block[0]):
            kept += block
        elif any(rx.search(ln) for ln in block[1:]):
            kept += [block[0], *(ln for ln in block[1:] if rx.search(ln))]
    return kept
