"""Probe results (docs/formats.md JSON Lines): end-to-end checks between host NICs, with the switches each one crossed.

`{"ts": <unix ns>, "src": "gpu-g0-017:nic3", "dst": "gpu-g1-002:nic3", "hops": ["leaf-g0-r3", ...],
  "sent": 1000, "corrupted": 2}`; blank lines are skipped; the first malformed line raises ProbeError (file:line).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from topology.errors import InputError
from topology.sourcefile import json_lines

FIELDS = "each line needs ts, src, dst, hops, sent, corrupted"


class ProbeError(InputError):
    """A probe-result line is malformed (message: `file:line: what`)."""


@dataclass(frozen=True, slots=True)
class Probe:
    ts: int
    src: str  # "server:nicK"
    dst: str
    hops: tuple[str, ...]  # switches crossed, in order
    sent: int
    corrupted: int


def _count(obj: dict[str, Any], key: str, source: str, line: int) -> int:
    v = obj[key]
    if not isinstance(v, int) or isinstance(v, bool) or v < 0:
        raise ProbeError(source, f"'{key}' must be a non-negative integer, got {v!r}", line=line)
    return v


def _check(obj: Any, source: str, line: int) -> Probe:
    if not isinstance(obj, dict):
        raise ProbeError(source, f"not a JSON object; {FIELDS}", line=line)
    for k in ("ts", "src", "dst", "hops", "sent", "corrupted"):
        if k not in obj:
            raise ProbeError(source, f"'{k}' missing; {FIELDS}", line=line)
    ts = obj["ts"]
    if not isinstance(ts, int) or isinstance(ts, bool) or not 0 < ts < 1 << 63:
        raise ProbeError(source, f"'ts' must be a positive integer (unix ns), got {ts!r}", line=line)
    for k in ("src", "dst"):
        if not isinstance(obj[k], str) or ":" not in obj[k]:
            raise ProbeError(source, f"'{k}' must name a NIC as 'server:nicK', got {obj[k]!r}", line=line)
    hops = obj["hops"]
    if not isinstance(hops, list) or not all(isinstance(h, str) and h for h in hops):
        raise ProbeError(source, f"'hops' must be a list of switch names, got {hops!r}", line=line)
    sent, corrupted = _count(obj, "sent", source, line), _count(obj, "corrupted", source, line)
    if corrupted > sent:
        raise ProbeError(source, f"'corrupted' ({corrupted}) exceeds 'sent' ({sent})", line=line)
    return Probe(ts, obj["src"], obj["dst"], tuple(hops), sent, corrupted)


def iter_probes(path: str | Path) -> Iterator[Probe]:
    for n, obj in json_lines(path, ProbeError, "the probe results", FIELDS):
        yield _check(obj, str(path), n)


def read_probes(path: str | Path) -> list[Probe]:
    """Every probe of a file, validated."""
    return list(iter_probes(path))
