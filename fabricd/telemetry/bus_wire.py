"""Telemetry on the bus: what a collector publishes and the service reads (docs/formats.md, "Telemetry on the bus").

One JetStream stream (`STREAM`) with a subject per switch, `fabricd.tm.<switch>`. A message carries one switch's
gNMI SubscribeResponses as they came off the wire, in arrival order, so the service decodes them with the same
`Ingestor.ingest` as a direct subscription:

    u16 name length | name (UTF-8) | { u32 response length | SubscribeResponse bytes }*

Bytes, not objects: no protobuf on either side beyond the switch's own encoding, and nothing lost in translation.
"""

from __future__ import annotations

import re
import struct
from collections.abc import Iterator, Sequence

STREAM = "FABRICD_TELEMETRY"
SUBJECTS = "fabricd.tm.>"
_PLAIN = re.compile(r"^[A-Za-z0-9_-]+$")
_U16 = struct.Struct(">H")
_U32 = struct.Struct(">I")


class WireError(ValueError):
    """A message that is not a telemetry batch (a foreign publisher on the subject, or a truncated message)."""


def subject(device: str) -> str:
    """The switch's subject; a name with characters a NATS subject token cannot hold goes hex-encoded."""
    token = device if _PLAIN.match(device) else "x" + device.encode().hex()
    return f"fabricd.tm.{token}"


def pack(device: str, responses: Sequence[bytes]) -> bytes:
    name = device.encode()
    parts = [_U16.pack(len(name)), name]
    for r in responses:
        parts += (_U32.pack(len(r)), r)
    return b"".join(parts)


def unpack(data: bytes) -> tuple[str, Iterator[bytes]]:
    """(switch, its responses); raises WireError on a malformed message."""
    if len(data) < 2:
        raise WireError("shorter than its header")
    n = _U16.unpack_from(data)[0]
    if 2 + n > len(data):
        raise WireError("the switch name runs past the end")
    try:
        device = data[2 : 2 + n].decode()
    except UnicodeDecodeError:
        raise WireError("the switch name is not UTF-8") from None
    offsets: list[tuple[int, int]] = []
    i = 2 + n
    while i < len(data):
        if i + 4 > len(data):
            raise WireError("a response length runs past the end")
        size = _U32.unpack_from(data, i)[0]
        if i + 4 + size > len(data):
            raise WireError("a response runs past the end")
        offsets.append((i + 4, i + 4 + size))
        i += 4 + size
    view = memoryview(data)
    return device, (bytes(view[a:b]) for a, b in offsets)
