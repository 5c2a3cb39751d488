"""Builders of tiny synthetic gNMI messages for the telemetry tests."""

from __future__ import annotations

from typing import Any

from pygnmi.spec.v080 import gnmi_pb2

from fabricd.telemetry.paths import parse_path

S = 10**9  # one second in ns
T0 = 1_700_000_000 * S
IF = "/interfaces/interface[name={port}]"
QOS = "/qos/interfaces/interface[interface-id={port}]"


def path_pb(pb: Any, text: str) -> None:
    for name, keys in parse_path(text):
        pe = pb.elem.add(name=name)
        for k, v in keys:
            pe.key[k] = v


def notification(
    device: str | None, ts: int, prefix: str, updates: list[tuple[str, Any]], deletes: tuple[str, ...] = ()
) -> bytes:
    """SubscribeResponse bytes; a value is int (uint_val), float (double_val), str (string_val) or a TypedValue."""
    n = gnmi_pb2.Notification(timestamp=ts)
    if device:
        n.prefix.target = device
    path_pb(n.prefix, prefix)
    for rel, value in updates:
        u = n.update.add()
        path_pb(u.path, rel)
        if isinstance(value, gnmi_pb2.TypedValue):
            u.val.CopyFrom(value)
        elif isinstance(value, str):
            u.val.string_val = value
        elif isinstance(value, float):
            u.val.double_val = value
        elif value is not None:
            u.val.uint_val = value
    for d in deletes:
        path_pb(n.delete.add(), d)
    data: bytes = gnmi_pb2.SubscribeResponse(update=n).SerializeToString()
    return data
