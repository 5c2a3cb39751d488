"""Notification templates: one compiled regex reads every update of a notification in a single C call.

A switch sends the same update paths, in the same order, in every SAMPLE notification of a port and tree; only the
values change, and with them the lengths of counter varints (and of the enclosing update). A template is a regex
over the update region of such a notification: per update, the exact path bytes and a group capturing the
TypedValue: a `uint_val` (tag 0x18 + varint; one alternative per varint length, checked by a lookahead, ties every
length byte to it) or a `double_val` (tag 0x71 + 8 bytes: optics power, pre-FEC BER). `Pattern.fullmatch` over
the region either proves the message has exactly this layout, so the groups are the values in order, or fails and
the raw walker takes the message. It never accepts bytes the walker would read differently: a layout with another
field, length form or value type does not match. Strings (ON_CHANGE state) are left to the walker.

Templates are keyed by the prefix shape (its dict of relative path -> leaf code), the value kinds and the path
sequence, so every port of a tree shares one. A compile stalls the event loop that reads every stream for ~14 ms per
KB of path bytes in the layout (~40 ms for EOS's 20-update interface layout, once; a pattern that names each path
once compiles twice as fast but matches 60% slower). So only layouts of known leaves get one, at most
`MAX_LAYOUT_BYTES` of paths (~115 ms), at most `MAX_TEMPLATES` of them, and compiles are paced by their size
(`CompileBudget`: 16 tokens at once, then one a second; a layout costs a token per 2 KB of paths): a device that
changes its layout all the time is walked, not compiled for.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

MAX_TEMPLATES = 128
MAX_UPDATES = 64  # more updates per notification: no template (a regex of many groups costs more than it saves)
MAX_LAYOUT_BYTES = 8192  # path bytes of all updates of a layout
COST_BYTES = 2048  # path bytes per token of the compile budget
_MAX_VARINT = 10  # a uint64 varint has 1-10 bytes
_UINT = rb"(\x18[\x80-\xff]{0,9}[\x00-\x7f])"
_DOUBLE = rb"(\x71[\x00-\xff]{8})"


@dataclass
class CompileBudget:
    """A token bucket: `burst` tokens at once, then one per `every_s` seconds of `clock`."""

    every_s: float = 1.0
    burst: float = 16.0
    clock: Callable[[], float] = time.monotonic
    _tokens: float = field(default=-1.0, repr=False)
    _at: float = field(default=0.0, repr=False)

    def take(self, cost: float = 1.0) -> bool:
        """Spend `cost` tokens if there are that many."""
        now = self.clock()
        if self._tokens < 0:
            self._tokens = self.burst
        else:
            self._tokens = min(self.burst, self._tokens + (now - self._at) / self.every_s)
        self._at = now
        if self._tokens >= cost:
            self._tokens -= cost
            return True
        return False


def compile_cost(keys: Sequence[bytes]) -> float:
    """Tokens of `CompileBudget` a layout's compile costs (its time grows with its path bytes)."""
    return max(1.0, sum(map(len, keys)) / COST_BYTES)


@dataclass(frozen=True, slots=True)
class Template:
    match: re.Pattern[bytes]
    codes: tuple[int, ...]


def value_kinds(keys: Sequence[bytes], vals: Sequence[bytes]) -> bytes | None:
    """The TypedValue tag of each update of a notification read by the walker (its update path keys and TypedValue
    bytes), if a template can read it: uint and double values only, at most MAX_LAYOUT_BYTES of paths."""
    if not 0 < len(keys) <= MAX_UPDATES or sum(map(len, keys)) > MAX_LAYOUT_BYTES:
        return None
    kinds = bytes(v[0] if len(v) >= 2 else 0 for v in vals)
    if kinds.strip(b"\x18\x71") or any(len(v) != 9 for v in vals if v[0] == 0x71):
        return None
    return kinds


def varint(n: int) -> bytes:
    """A protobuf varint."""
    out = bytearray()
    while n >= 0x80:
        out.append(n & 0x7F | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def _update(key: bytes, kind: int) -> bytes:
    """update{path, val} as serialized: 0x22 len 0x0a plen <path> 0x1a tvlen <TypedValue>. For a uint, TypedValue
    is 0x18 <varint>, tvlen = 1 + the varint's bytes and len covers the rest: one alternative per varint length
    (minimal lengths only). A double is 0x71 and 8 bytes: fixed lengths."""
    path = b"\x0a" + varint(len(key)) + key
    if kind == 0x71:
        return re.escape(b"\x22" + varint(len(path) + 2 + 9) + path + b"\x1a\x09") + _DOUBLE
    alts = []
    for k in range(1, _MAX_VARINT + 1):
        tvlen = 1 + k
        head = b"\x22" + varint(len(path) + 2 + tvlen) + path + bytes((0x1A, tvlen))
        alts.append(re.escape(head) + rb"(?=\x18" + rb"[\x80-\xff]{%d}[\x00-\x7f])" % (k - 1))
    return b"(?:" + b"|".join(alts) + b")" + _UINT


def compile_template(keys: Sequence[bytes], kinds: bytes, codes: Sequence[int]) -> Template:
    """The template of a notification layout: its update path keys, `value_kinds` and leaf codes."""
    assert len(keys) == len(kinds) == len(codes) and sum(map(len, keys)) <= MAX_LAYOUT_BYTES
    return Template(re.compile(b"".join(_update(k, t) for k, t in zip(keys, kinds, strict=True))), tuple(codes))
