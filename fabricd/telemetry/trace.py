"""Telemetry traces (docs/formats.md JSON Lines): record what ingestion accepted, and replay a trace through ingestion.

Replay does not write the store itself: consecutive lines with the same (device, ts, per-port root) become one gNMI
Notification (prefix = target + root, updates = relative paths), serialized and handed to `Ingestor.ingest`, so a
trace takes exactly the service's code path, with the trace's timestamps.
"""

from __future__ import annotations

import json
from collections.abc import Container, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from pygnmi.spec.v080 import gnmi_pb2

from topology.errors import InputError
from topology.sourcefile import json_lines

from .ingest import Ingestor, Value
from .paths import Elem, PathSyntaxError, parse_path, split_root

FIELDS = "each line needs ts, device, path, value"


class TraceError(InputError):
    """A telemetry trace line is malformed (message: `file:line: what`)."""


@dataclass(frozen=True, slots=True)
class TraceRecord:
    ts: int
    device: str
    path: str
    value: Value


class TraceWriter:
    """An `UpdateSink` writing one JSON object per line; attach it as `Ingestor(store, recorder=writer)`."""

    def __init__(self, out: IO[str]) -> None:
        self.out = out

    def record(self, device: str, path: str, value: Value, ts: int) -> None:
        line = json.dumps({"ts": ts, "device": device, "path": path, "value": value}, separators=(",", ":"))
        self.out.write(line + "\n")


def _check(obj: Any, source: str, line: int) -> TraceRecord:
    if not isinstance(obj, dict):
        raise TraceError(source, f"not a JSON object; {FIELDS}", line=line)
    for k in ("ts", "device", "path", "value"):
        if k not in obj:
            raise TraceError(source, f"'{k}' missing; {FIELDS}", line=line)
    ts, device, path, value = obj["ts"], obj["device"], obj["path"], obj["value"]
    if not isinstance(ts, int) or isinstance(ts, bool) or not 0 < ts < 1 << 63:
        raise TraceError(source, f"'ts' must be a positive integer (unix ns), got {ts!r}", line=line)
    if not isinstance(device, str) or not device:
        raise TraceError(source, "'device' must be a non-empty string", line=line)
    if not isinstance(path, str) or not path.startswith("/"):
        raise TraceError(source, f"'path' must be a gNMI path string starting with '/', got {path!r}", line=line)
    if isinstance(value, bool) or not isinstance(value, int | float | str):
        raise TraceError(source, f"'value' must be a number or a string, got {value!r}", line=line)
    return TraceRecord(ts, device, path, value)


def read_trace(path: str | Path) -> Iterator[TraceRecord]:
    """Validated records of a trace file; blank lines are skipped; the first bad line raises TraceError."""
    for _, rec in _numbered(path):
        yield rec


def _numbered(path: str | Path) -> Iterator[tuple[int, TraceRecord]]:
    for n, obj in json_lines(path, TraceError, "the trace", FIELDS):
        yield n, _check(obj, str(path), n)


def _set_path(pb: Any, elems: tuple[Elem, ...]) -> None:
    for name, keys in elems:
        pe = pb.elem.add(name=name)
        for k, v in keys:
            pe.key[k] = v


def _set_value(tv: Any, value: Value) -> None:
    if isinstance(value, str):
        tv.string_val = value
    elif isinstance(value, float):
        tv.double_val = value
    elif 0 <= value < 1 << 64:
        tv.uint_val = value
    elif -(1 << 63) <= value < 0:
        tv.int_val = value
    else:
        tv.json_val = json.dumps(value).encode()  # out of any protobuf integer: ingestion counts it as malformed


def _notification(device: str, ts: int, root: tuple[Elem, ...], rest: list[tuple[tuple[Elem, ...], Value]]) -> bytes:
    n = gnmi_pb2.Notification(timestamp=ts)
    n.prefix.target = device
    _set_path(n.prefix, root)
    for rel, value in rest:
        u = n.update.add()
        _set_path(u.path, rel)
        _set_value(u.val, value)
    data: bytes = gnmi_pb2.SubscribeResponse(update=n).SerializeToString()
    return data


def replay(path: str | Path, ingestor: Ingestor, known: Container[str] | None = None) -> int:
    """Feed a trace through `ingestor` (the service's ingestion path); returns the number of records. With `known`
    (the fabric's devices), a line naming another device is an error: a trace of another fabric, or a typo, would
    otherwise be replayed into nothing and find nothing."""
    source = str(path)
    group: tuple[str, int, tuple[Elem, ...]] | None = None
    rest: list[tuple[tuple[Elem, ...], Value]] = []
    count = 0
    for line, rec in _numbered(path):
        count += 1
        if known is not None and rec.device not in known:
            raise TraceError(source, f"'device': {rec.device!r} is not a device of this fabric (a trace of another "
                             "fabric, or another --spec/--cabling?)", line=line)  # fmt: skip
        try:
            elems = parse_path(rec.path)
        except PathSyntaxError as exc:
            raise TraceError(source, f"'path': {exc}", line=line) from exc
        root = split_root(elems)
        k = 0 if root is None else root[2]
        key = (rec.device, rec.ts, elems[:k])
        if key != group:
            if group is not None:
                ingestor.ingest(_notification(group[0], group[1], group[2], rest), group[0], group[1])
            group, rest = key, []
        rest.append((elems[k:], rec.value))
    if group is not None:
        ingestor.ingest(_notification(group[0], group[1], group[2], rest), group[0], group[1])
    ingestor.flush()
    return count
