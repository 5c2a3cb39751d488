"""`write_unless_ended`: a subscription's write that fails while the stream is being cancelled (a reconnect, the
client stopping) leaves no "Task exception was never retrieved" behind (chaos seed 3133: 25 of them in fabricd's log,
each with a gRPC traceback, for writes to a switch that had stopped accepting subscriptions)."""

from __future__ import annotations

import asyncio
import gc
from collections.abc import Callable
from typing import Any

import pytest

from fabricd.telemetry.channel import write_unless_ended


class FakeCall:
    """A stream call whose write fails once `fail` is set (as grpc.aio's does when the server refuses the call)."""

    def __init__(self) -> None:
        self.fail: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self.callbacks: list[Callable[[Any], None]] = []

    def add_done_callback(self, cb: Callable[[Any], None]) -> None:
        self.callbacks.append(cb)

    async def write(self, request: bytes) -> None:
        await self.fail
        raise ConnectionError("leaf-g0-r0: gNMI is not accepting subscriptions")


@pytest.mark.parametrize("steps", [1, 2, 3])
def test_a_write_failing_as_the_stream_is_cancelled_is_retrieved(steps: int) -> None:
    reported: list[dict[str, Any]] = []

    async def main() -> None:
        asyncio.get_running_loop().set_exception_handler(lambda _loop, ctx: reported.append(ctx))
        call = FakeCall()
        writing = asyncio.create_task(write_unless_ended(call, b"subscribe"))
        await asyncio.sleep(0)
        call.fail.set_result(None)
        for _ in range(steps):  # the write fails; the cancel lands before or after its waiter wakes the writer
            await asyncio.sleep(0)
        writing.cancel()
        with pytest.raises((asyncio.CancelledError, ConnectionError)):
            await writing
        del writing
        gc.collect()
        await asyncio.sleep(0)

    asyncio.run(main())
    gc.collect()
    assert [c.get("message") for c in reported] == []


def test_a_failed_write_still_raises_its_error() -> None:
    async def main() -> None:
        call = FakeCall()
        call.fail.set_result(None)
        with pytest.raises(ConnectionError, match="not accepting subscriptions"):
            await write_unless_ended(call, b"subscribe")

    asyncio.run(main())
