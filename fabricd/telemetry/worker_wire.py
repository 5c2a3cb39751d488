"""What crosses the socket between the telemetry service and its worker processes (see `workers`): the start
message, the batches, and the length-prefixed frames that carry them (pickled; both ends are fabricd)."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Any

from drivers.inventory import DeviceAccess

from .store import StoreChanges

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
    """What changed in a worker since its previous batch: its store's changes (ids are the worker's own), its
    streams' states, lag observations and log records."""

    changes: StoreChanges
    states: list[StateRow]
    lags: list[tuple[str, float]]
    logs: list[tuple[str, int, str]]  # (logger, level, message)


def frame(data: bytes) -> bytes:
    return len(data).to_bytes(4, "big") + data


async def read_frame(reader: asyncio.StreamReader) -> bytes:
    n = int.from_bytes(await reader.readexactly(4), "big")
    return await reader.readexactly(n)
