"""What the telemetry tests against the twin share: the twin's inventory as accesses, a client running for the
length of a block, and waiting for a condition."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager

from drivers.inventory import DeviceAccess, load_inventory
from fabricd.telemetry import TelemetryClient
from tests.twin.lab.twin_thread import TwinThread


def accesses(twin: TwinThread, names: list[str] | None = None) -> list[DeviceAccess]:
    inv = load_inventory(twin.inventory)
    return [inv.access(n) for n in (names or inv.names)]


@asynccontextmanager
async def running(c: TelemetryClient) -> AsyncIterator[TelemetryClient]:
    task = asyncio.create_task(c.run())
    try:
        yield c
    finally:
        await asyncio.wait_for(c.stop(), 5)
        await task


async def until(cond: Callable[[], bool], timeout_s: float, step_s: float = 0.02) -> float:
    """Wait for `cond()` to hold; returns when (monotonic)."""
    deadline = time.monotonic() + timeout_s
    while not cond():
        if time.monotonic() > deadline:
            raise AssertionError(f"condition not met within {timeout_s} s")
        await asyncio.sleep(step_s)
    return time.monotonic()
