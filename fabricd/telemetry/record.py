"""Record gNMI telemetry from switches into a JSON Lines trace, through the same subscription and ingestion the
service uses: the service's `TelemetryClient` (same profile, reconnects, raw bytes) feeds an `Ingestor` whose
recorder writes every accepted update, so a trace replays to exactly what the service would have seen.
"""

from __future__ import annotations

import asyncio
import io
import time
from pathlib import Path
from typing import Any

from drivers.inventory import DeviceAccess
from fabricd.telemetry.client import TelemetryClient
from fabricd.telemetry.ingest import Ingestor
from fabricd.telemetry.platforms import profiles
from fabricd.telemetry.store import CounterStore
from fabricd.telemetry.trace import TraceWriter
from topology.sourcefile import write_atomic


class _InOrder(Ingestor):
    """Writes each response to the trace as it arrives (the recorder writes at flush), so the trace keeps the
    arrival order across switches."""

    def ingest(self, data: bytes | Any, channel: str, now: int | None = None) -> None:
        super().ingest(data, channel, now)
        self.flush()


def record_trace(
    accesses: list[DeviceAccess], seconds: float, interval_s: float, output: Path
) -> tuple[int, list[str]]:
    """Stream every device for `seconds`; write the trace atomically. Returns (lines, per-device errors)."""
    buffer = io.StringIO()
    ingestor = _InOrder(CounterStore(), recorder=TraceWriter(buffer))

    async def run() -> list[str]:
        client = TelemetryClient(accesses, ingestor, profile=profiles(interval_s),
                                 interval_s=interval_s, connect_spread_s=0, spread_samples=False,
                                 clock=time.time_ns)  # fmt: skip
        task = asyncio.create_task(client.run())
        await asyncio.sleep(seconds)
        await client.stop()
        await task
        errors = []
        for d in client.devices:
            state = client.state(d)
            if state.last_error is not None:
                errors.append(f"{d}: gNMI stream ended: {state.last_error}")
            elif state.attempts == 0:
                errors.append(f"{d}: gNMI never connected within {seconds:g} s")
        return errors

    errors = asyncio.run(run())
    text = buffer.getvalue()
    write_atomic(output, text)
    return text.count("\n"), errors
