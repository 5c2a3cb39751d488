"""The event loop watch (fabricd/service/loop_watch.py): a stall of the service's loop is logged with where the loop
is, once, and its length when it ends; a pause of the whole process is told from a stalled loop."""

from __future__ import annotations

import asyncio
import logging
import sys
import time

import pytest

from fabricd.service.loop_watch import LoopWatch, where


def a_slow_reconcile_pass() -> None:
    time.sleep(1.4)  # a blocking call on the loop


def test_a_stalled_loop_is_logged_with_the_function_it_is_in(caplog: pytest.LogCaptureFixture) -> None:
    watch = LoopWatch(stall_s=0.5)

    async def scenario() -> None:
        stop = asyncio.Event()
        task = asyncio.create_task(watch.run(stop))
        await asyncio.sleep(0.3)
        a_slow_reconcile_pass()
        await asyncio.sleep(0.4)  # the loop beats again: the stall's end is seen
        stop.set()
        await task

    with caplog.at_level(logging.WARNING, logger="fabricd.service"):
        asyncio.run(scenario())
    lines = [r.getMessage() for r in caplog.records]
    so_far = [m for m in lines if "so far" in m]
    assert len(so_far) == 1, lines
    # the innermost Python frame (time.sleep is C: no frame of its own), then the callers of our own code
    assert so_far[0].split(", in ", 1)[1].startswith("a_slow_reconcile_pass (") and "test_loop_watch.py:" in so_far[0]
    assert " <- scenario (" in so_far[0]
    ended = [m for m in lines if "in all" in m]
    assert len(ended) == 1, lines
    assert watch.stalls == 1 and 1.0 < watch.longest < 3.0


def test_a_loop_that_keeps_beating_is_not_stalled(caplog: pytest.LogCaptureFixture) -> None:
    watch = LoopWatch(stall_s=0.5)

    async def scenario() -> None:
        stop = asyncio.Event()
        task = asyncio.create_task(watch.run(stop))
        for _ in range(8):
            time.sleep(0.1)  # short blocking calls, each well under the threshold
            await asyncio.sleep(0.05)
        stop.set()
        await task

    with caplog.at_level(logging.WARNING, logger="fabricd.service"):
        asyncio.run(scenario())
    assert watch.stalls == 0 and not caplog.records


def test_where_shows_the_innermost_frame_and_our_own() -> None:
    def inner() -> str:
        return where(sys._getframe(), own=lambda f: f.endswith("test_loop_watch.py"))

    def outer() -> str:
        return inner()

    got = outer()
    assert got.startswith("inner (") and " <- outer (" in got
    assert where(None) == "unknown"
