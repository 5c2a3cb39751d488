"""What crosses the socket between the telemetry service and its worker processes (see `workers`): the start
message, the batches, and the length-prefixed frames that carry them (pickled; both ends are fabricd)."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from drivers.inventory import DeviceAccess

from .store import I64

STOP = b"stop"


# A device's stream state: (device, connected, synced, attempts, last_error, rejected (path, reason) pairs).
StateRow = tuple[str, bool, bool, int, str | None, tuple[tuple[str, str], ...]]


@dataclass(frozen=True)
class WorkerInit:
    index: int
    devices: list[DeviceAccess]
    client: dict[str, Any]  # TelemetryClient keyword arguments
    ship_s: float
    beat_s: float  # an empty frame at least this often, so the parent can tell a hung worker from a quiet one
    log_level: int
    parent_pid: int


@dataclass
class Batch:
    """What changed in a worker's store since its previous batch; ids are the worker's own (rows, codes, ...)."""

    devices: list[str]  # newly interned, in id order
    port_dev: I64  # new ports: device id and name
    port_names: list[str]
    codes: list[tuple[str, str | None]]
    strings: list[str]
    s_port: I64  # new series: port row and code
    s_code: I64
    sidx: I64  # changed series rows and their MIRRORED fields
    fields: dict[str, npt.NDArray[Any]]
    events: tuple[I64, I64, I64, I64]  # series, value, previous (string ids), ts
    dev: I64  # devices whose last_seen, synced or stats changed
    last_seen: I64
    synced: npt.NDArray[np.bool_]
    stats: I64
    states: list[StateRow]
    lags: list[tuple[str, float]]
    logs: list[tuple[str, int, str]]  # (logger, level, message)


def grow(a: npt.NDArray[Any], n: int, fill: Any) -> npt.NDArray[Any]:
    if len(a) >= n:
        return a
    out = np.full((max(n, 2 * len(a)), *a.shape[1:]), fill, dtype=a.dtype)
    out[: len(a)] = a
    return out


def frame(data: bytes) -> bytes:
    return len(data).to_bytes(4, "big") + data


async def read_frame(reader: asyncio.StreamReader) -> bytes:
    n = int.from_bytes(await reader.readexactly(4), "big")
    return await reader.readexactly(n)
