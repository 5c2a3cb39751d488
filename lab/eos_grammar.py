"""The EOS configuration lines the twin accepts, mode by mode, and how each line is matched.

Each command is written in a small syntax (`literal`, `{a|b}`, `[optional ...]`, `<param>`) and matched token by
token, so a rejected line gets EOS's own error: `% Invalid input (at token N: 'x')` at the first token no command
accepts, or `% Incomplete command` when the line is a valid prefix. Unknown lines are never accepted silently.

A command's *key* (its first `key` tokens after normalisation) says which existing line it replaces: `description
x` replaces any `description ...`, `qos map dscp 26 to traffic-class 3` replaces `qos map dscp 26 ...`.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

# --- errors ----------------------------------------------------------------------------------------


class CliError(Exception):
    """A command EOS would reject; the message is what the CLI prints (e.g. "% Invalid input (at token 1: 'x')")."""

    INCOMPLETE = 1 << 30  # ranks above any token position when errors of several modes are compared

    def __init__(self, message: str, reason: str = "could not run command", at: int = -1):
        super().__init__(message)
        self.message = message
        # eAPI's summary ("CLI command 2 of 3 'x' failed: <reason>")
        self.reason = reason
        self.at = at  # token the parser stopped at (INCOMPLETE: the line was a valid prefix)


def invalid_at(tokens: list[str], index: int) -> CliError:
    if index >= len(tokens):
        return CliError("% Incomplete command", "invalid command", CliError.INCOMPLETE)
    return CliError(f"% Invalid input (at token {index}: '{tokens[index]}')", "invalid command", index)


# --- interface names -------------------------------------------------------------------------------

_INTF_TYPES = {"ethernet": "Ethernet", "management": "Management", "loopback": "Loopback"}
_INTF_RE = re.compile(r"^([a-zA-Z]+)(\d+(?:/\d+)*)$")


def canonical_interface(name: str) -> str | None:
    """`et1/1`, `Eth1/1`, `ethernet1/1` -> `Ethernet1/1`; None if it is not an interface name."""
    m = _INTF_RE.match(name)
    if not m or len(m.group(1)) < 2:
        return None
    prefix = m.group(1).lower()
    for full, canonical in _INTF_TYPES.items():
        if full.startswith(prefix):
            return canonical + m.group(2)
    return None


def short_interface(name: str) -> str:
    """`Ethernet1/1` -> `Et1/1` (the form EOS prompts use)."""
    m = _INTF_RE.match(name)
    return (m.group(1)[:2] + m.group(2)) if m else name


# --- the command syntax ----------------------------------------------------------------------------

_DEC = re.compile(r"^\d+(\.\d+)?$")


@dataclass(frozen=True)
class Lit:
    words: tuple[str, ...]  # one word, or alternatives from {a|b}


@dataclass(frozen=True)
class Param:
    kind: str  # int, dec, word, text, intf, ints
    lo: int = 0
    hi: int = 0

    def accept(self, token: str) -> str | None:
        """The normalised token, or None if it does not fit."""
        if self.kind in ("int", "ints"):
            return token if token.isdigit() and self.lo <= int(token) <= self.hi else None
        if self.kind == "dec":
            return token if _DEC.match(token) else None
        if self.kind == "intf":
            return canonical_interface(token)
        return token  # word, text


@dataclass(frozen=True)
class Opt:
    items: tuple[Item, ...]


Item = Lit | Param | Opt


def parse_syntax(syntax: str) -> tuple[Item, ...]:
    tokens = syntax.replace("[", " [ ").replace("]", " ] ").split()
    items, rest = _parse_items(tokens, 0)
    if rest != len(tokens):
        raise ValueError(f"unbalanced ] in {syntax!r}")
    return items


def _parse_items(tokens: list[str], i: int) -> tuple[tuple[Item, ...], int]:
    out: list[Item] = []
    while i < len(tokens):
        tok = tokens[i]
        if tok == "]":
            return tuple(out), i
        if tok == "[":
            inner, i = _parse_items(tokens, i + 1)
            if i >= len(tokens) or tokens[i] != "]":
                raise ValueError("unbalanced [")
            out.append(Opt(inner))
        elif tok.startswith("<"):
            kind, _, rng = tok.strip("<>").partition(":")
            lo, _, hi = rng.partition("-")
            out.append(Param(kind, int(lo or 0), int(hi or 0)))
        elif tok.startswith("{"):
            out.append(Lit(tuple(tok.strip("{}").split("|"))))
        else:
            out.append(Lit((tok,)))
        i += 1
    return tuple(out), i


@dataclass
class _Progress:
    """How far the best failed attempt got: the first token nothing accepted, or that input ran out."""

    furthest: int = -1
    ran_out: bool = False

    def fail(self, i: int, n: int) -> None:
        if i >= n:
            self.ran_out = True
        else:
            self.furthest = max(self.furthest, i)


def _match(
    items: tuple[Item, ...], k: int, toks: list[str], i: int, out: list[str], prog: _Progress
) -> Iterator[tuple[int, list[str]]]:
    """Every way `items[k:]` can consume `toks[i:]`: (next token index, normalised tokens so far)."""
    if k == len(items):
        yield i, out
        return
    item = items[k]
    n = len(toks)
    if isinstance(item, Opt):
        # Try the optional part first (greedy), then without it.
        for j, got in _match(item.items, 0, toks, i, out, prog):
            yield from _match(items, k + 1, toks, j, got, prog)
        yield from _match(items, k + 1, toks, i, out, prog)
        return
    if i >= n:
        prog.fail(i, n)
        return
    if isinstance(item, Lit):
        if toks[i] in item.words:
            yield from _match(items, k + 1, toks, i + 1, [*out, toks[i]], prog)
        else:
            prog.fail(i, n)
        return
    if item.kind == "text":  # the rest of the line, verbatim
        yield n, [*out, *toks[i:]]
        return
    value = item.accept(toks[i])
    if value is None:
        prog.fail(i, n)
        return
    if item.kind == "ints":  # one or more, greedy
        j = i + 1
        vals = [value]
        while j < n and item.accept(toks[j]) is not None:
            vals.append(toks[j])
            j += 1
        while j > i:
            yield from _match(items, k + 1, toks, j, [*out, *vals[: j - i]], prog)
            j -= 1
        return
    yield from _match(items, k + 1, toks, i + 1, [*out, value], prog)


def match_syntax(items: tuple[Item, ...], toks: list[str], prog: _Progress) -> list[str] | None:
    for j, got in _match(items, 0, toks, 0, [], prog):
        if j == len(toks):
            return got
        prog.fail(j, len(toks))
    return None


# --- commands and modes ----------------------------------------------------------------------------

Normalize = Callable[[list[str]], list[str]]


@dataclass(frozen=True)
class Command:
    syntax: str
    key: int  # leading tokens that identify the line (what a new line replaces)
    rank: int  # position in the running config (EOS prints features in a fixed order)
    mode: str | None = None  # the line opens this child mode
    no_stored: bool = False  # `no X` is shown in the running config (e.g. `no shutdown` under management api)
    positive_default: bool = False  # the positive form is the default and is not shown (e.g. `switchport`)
    negatable: bool = True
    normalize: Normalize | None = None
    items: tuple[Item, ...] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "items", parse_syntax(self.syntax))

    def no_items(self) -> tuple[Item, ...]:
        # `no X` takes the key words alone or the whole line (`no qos map dscp 26 [to traffic-class 3]`).
        return (*self.items[: self.key], Opt(self.items[self.key :]))


@dataclass(frozen=True)
class Action:
    """One accepted line: set `line` under `key` (or remove `key` when `line` is None)."""

    command: Command
    key: str
    line: str | None


_DSCP_MAP = "qos map dscp <ints:0-63> to traffic-class <int:0-7>"
_ECN = (
    "random-detect ecn minimum-threshold <int:1-4294967295> {segments|bytes|kbytes|mbytes|milliseconds|microseconds} "
    "maximum-threshold <int:1-4294967295> {segments|bytes|kbytes|mbytes|milliseconds|microseconds} "
    "[max-mark-probability <int:1-100>] [weight <int:0-15>]"
)
_SECONDS = "<dec>"

# Lossless settings shared by interfaces and qos profiles.
_LOSSLESS = (
    Command("qos trust {dscp|cos}", 2, 30),
    Command("priority-flow-control on", 1, 31, no_stored=True),
    Command("priority-flow-control priority <int:0-7> {no-drop|drop}", 3, 32),
    Command("priority-flow-control pause watchdog", 3, 33, no_stored=True),
    Command("priority-flow-control pause watchdog port action {drop|notify-only}", 5, 34),
    Command(
        f"priority-flow-control pause watchdog port timer timeout {_SECONDS} polling-interval {{auto|{_SECONDS}}} "
        f"recovery-time {_SECONDS} [forced]",
        5,
        35,
    ),
    Command("tx-queue <int:0-7>", 2, 50, mode="txq"),
)


def _hash_secret(tokens: list[str]) -> list[str]:
    """Cleartext secrets are stored hashed, as EOS does (`secret PW` / `secret 0 PW` -> `secret sha512 $6$...`)."""
    i = tokens.index("secret")
    if tokens[i + 1] in ("5", "sha512"):
        return tokens
    clear = tokens[-1]
    return [*tokens[: i + 1], "sha512", sha512_crypt_like(clear, salt=tokens[1])]


def sha512_crypt_like(password: str, salt: str) -> str:
    """A string shaped like a sha512-crypt hash. The twin checks logins with `Credentials`, never with this."""
    import base64
    import hashlib

    digest = hashlib.sha512(f"{salt}:{password}".encode()).digest()
    salt16 = base64.b64encode(hashlib.sha256(salt.encode()).digest(), b"./").decode()[:16]
    return f"$6${salt16}${base64.b64encode(digest, b'./').decode().rstrip('=')}"


GRAMMAR: dict[str, tuple[Command, ...]] = {
    "config": (
        Command("service routing protocols model {multi-agent|ribd}", 4, 1),
        Command("no aaa root", 2, 5, negatable=False),
        Command(
            "username <word> [privilege <int:0-15>] [role <word>] secret [{0|5|sha512}] <word>",
            2,
            10,
            normalize=_hash_secret,
        ),
        Command("username <word> [privilege <int:0-15>] [role <word>] nopassword", 2, 10),
        Command("hostname <word>", 1, 20),
        Command("spanning-tree mode {mstp|rstp|rapid-pvst|none}", 2, 30),
        Command("qos profile <word>", 3, 35, mode="qos-profile"),
        Command("interface <intf>", 2, 40, mode="if"),
        Command("ip routing", 2, 50, no_stored=True),
        # DLB of ECMP groups (pyavd's ip_hardware.fib.load_balance_distribution; flow-set-size sizes its table).
        Command("ip hardware fib load-balance distribution dynamic", 6, 51),
        Command("ip hardware fib load-balance distribution dynamic flow-set-size <int:1-7>", 7, 51),
        Command(_DSCP_MAP, 4, 60),
        Command("qos map cos <ints:0-7> to traffic-class <int:0-7>", 4, 61),
        Command("qos map traffic-class <ints:0-7> to tx-queue <int:0-7>", 4, 62),
        Command(f"priority-flow-control pause watchdog default timeout {_SECONDS}", 5, 70),
        Command(f"priority-flow-control pause watchdog default recovery-time {_SECONDS}", 5, 71),
        Command(f"priority-flow-control pause watchdog default polling-interval {_SECONDS}", 5, 72),
        Command("priority-flow-control pause watchdog action {drop|no-drop|notify-only}", 4, 73),
        Command("router bgp <int:1-4294967295>", 2, 55, mode="router-bgp"),
        Command("ntp server <word> [prefer] [iburst]", 3, 80),
        # operator services (lab/eos_features.py reads them)
        Command("ip name-server [vrf <word>] <word> [priority <int:0-5>]", 10, 81),
        Command("snmp-server contact <text>", 2, 82),
        Command("snmp-server location <text>", 2, 82),
        Command("snmp-server community <word> [{ro|rw}]", 3, 83),
        Command("snmp-server vrf <word>", 3, 83),
        Command("snmp-server host <word> [vrf <word>] [version {1|2c|3}] <word>", 3, 84),
        Command("logging buffered [<int:10-2147483647>] [<word>]", 2, 86),
        Command("logging persistent [<int:1-100>]", 2, 86),
        Command("logging trap <word>", 2, 86),
        Command("logging host <word> [port <int:1-65535>]", 3, 87),
        Command("logging source-interface <intf>", 2, 87),
        Command("logging format timestamp {high-resolution|traditional}", 3, 88),
        Command("logging format hostname {fqdn|ipv4}", 3, 88),
        Command("errdisable recovery cause <word>", 4, 89),
        Command("errdisable recovery interval <int:30-86400>", 3, 89),
        Command("management security", 2, 92, mode="mgmt-security"),
        Command("queue-monitor length", 2, 85),
        Command("management api http-commands", 3, 90, mode="mgmt-http"),
        Command("management api gnmi", 3, 91, mode="mgmt-gnmi"),
        # EOS maintenance mode (reference/maintenance-lldp-bgp-state.md): `maintenance` / `unit System` / `quiesce`
        # puts the whole switch's maintenance unit into maintenance; its BGP peers are quiesced (lab/eos_config.py)
        Command("maintenance", 1, 93, mode="maintenance"),
        # route maps: what a BGP neighbour's policy refers to (RFC 8326: `set community 65535:0 additive` tags what
        # is advertised over a session being drained; a prepended AS path takes it out of the peers' ECMP set)
        Command("route-map <word> {permit|deny} <int:1-65535>", 4, 94, mode="route-map"),
    ),
    "route-map": (
        Command("set community <text>", 2, 1),
        Command("set as-path prepend <text>", 3, 2),
    ),
    "maintenance": (Command("unit <word>", 2, 1, mode="maint-unit"),),
    "maint-unit": (Command("quiesce", 1, 1),),
    "if": (
        Command("description <text>", 1, 1),
        Command("shutdown", 1, 2),
        Command("mtu <int:68-9214>", 1, 3),
        Command("speed [forced] {auto|100g|200g|400g|800g|100gfull|200gfull|400gfull|800gfull}", 1, 4),
        Command("error-correction encoding {reed-solomon|fire-code}", 2, 5),
        Command("switchport", 1, 6, no_stored=True, positive_default=True),
        Command("ip address <word>", 2, 7),
        Command("link-debounce time <int:0-30000> [<int:0-30000>]", 1, 8),
        Command("service-profile <word>", 1, 9),
        *_LOSSLESS,
    ),
    "qos-profile": _LOSSLESS,
    "txq": (
        Command("bandwidth percent <int:1-100>", 2, 1),
        Command("priority strict", 1, 2, no_stored=True),
        Command(_ECN, 2, 3),
    ),
    "mgmt-http": (
        Command("shutdown", 1, 1, no_stored=True),
        Command("protocol {http|https} [port <int:1-65535>]", 2, 2, no_stored=True),
    ),
    # the underlay's eBGP (lab/bgp.py): what the twin's sessions are configured with
    "router-bgp": (
        Command("router-id <word>", 1, 1),
        Command("timers bgp <int:0-3600> <int:0-7200>", 2, 2),
        Command("maximum-paths <int:1-512> [ecmp <int:1-512>]", 1, 3),
        Command("bgp bestpath as-path multipath-relax", 4, 4),
        Command("neighbor <word> remote-as <word>", 3, 10),
        Command("neighbor <word> description <text>", 3, 11),
        Command("neighbor <word> bfd", 3, 12),
        Command("neighbor <word> shutdown", 3, 13),
        # EOS keeps one route map per direction; the twin keeps one per neighbour (the key is the first 3 words)
        Command("neighbor <word> route-map <word> {in|out}", 3, 14),
        Command("network <word>", 2, 20),
    ),
    "mgmt-security": (Command("entropy source hardware", 3, 1),),
    "mgmt-gnmi": (Command("transport grpc <word>", 3, 1, mode="gnmi-transport"),),
    "gnmi-transport": (
        Command("port <int:1-65535>", 1, 1),
        Command("vrf <word>", 1, 2),
    ),
}


def parse_line(mode: str, line: str) -> Action:
    """The action one config line stands for in `mode`; raises CliError as EOS would."""
    toks = line.split()
    prog = _Progress()
    negated = toks[:1] in (["no"], ["default"])
    best: tuple[int, Action] | None = None
    for cmd in GRAMMAR[mode]:
        if negated:
            if not cmd.negatable:
                if (got := match_syntax(cmd.items, toks, prog)) is not None:
                    return Action(cmd, " ".join(got), " ".join(got))
                continue
            sub = _Progress()
            got = match_syntax(cmd.no_items(), toks[1:], sub)
            _shift(prog, sub, 1)
            if got is None:
                continue
            key = " ".join(got[: cmd.key])
            stored = cmd.no_stored and toks[0] == "no" and not cmd.mode
            act = Action(cmd, key, "no " + key if stored else None)
            # `no priority-flow-control priority 3` matches the 1-word key too: the longest key wins.
            if best is None or cmd.key > best[0]:
                best = (cmd.key, act)
            continue
        got = match_syntax(cmd.items, toks, prog)
        if got is None:
            continue
        if cmd.normalize is not None:
            got = cmd.normalize(got)
        key = " ".join(got[: cmd.key])
        return Action(cmd, key, None if cmd.positive_default else " ".join(got))
    if best is not None:
        return best[1]
    if prog.ran_out:  # some command accepted every token and wanted more
        raise invalid_at(toks, len(toks))
    raise invalid_at(toks, max(prog.furthest, 0))


def _shift(into: _Progress, sub: _Progress, by: int) -> None:
    if sub.furthest >= 0:
        into.furthest = max(into.furthest, sub.furthest + by)
    into.ran_out = into.ran_out or sub.ran_out
