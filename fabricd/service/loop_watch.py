"""Says when the service's event loop stalls, and in what. Everything the service does on its loop (telemetry's
ingest, the detectors' pass, a reconcile, the API) waits while one callback runs long: detections come late, a lease
on the loop would be lost. A thread of its own looks at the loop's heartbeat every WATCH_EVERY_S; once the loop is
STALL_S late it takes the loop thread's stack (`sys._current_frames`: no signal, no debugger) and logs where the loop
is, once per stall, and the stall's length when it ends; `fabricd_event_loop_stalls_total` and
`fabricd_event_loop_stall_longest_seconds` count them. A process that is not run at all (SIGSTOP, a machine that
gives it no CPU) stalls its threads too: such a stall is logged as not run rather than blamed on the code."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import sys
import threading
import time
import traceback
from collections.abc import Callable
from types import FrameType

log = logging.getLogger("fabricd.service")
BEAT_S = 0.1  # the loop's heartbeat
WATCH_EVERY_S = 0.1  # the watching thread's look
STALL_S = 1.0  # a loop this late is stalled (a GC pass of a large fabric costs 0.15-0.4 s: not one)
FRAMES = 6  # the innermost frames of fabricd's own code shown


def where(frame: FrameType | None, own: Callable[[str], bool] = lambda f: "fabricd" in f or "drivers" in f) -> str:
    """The loop thread's stack, innermost first, as "func (file:line)": the frames of our own code (`own` of the
    file name), up to FRAMES, after the innermost frame whatever its code (a library's blocking call, a sleep)."""
    if frame is None:
        return "unknown"
    stack = list(reversed(traceback.extract_stack(frame)))
    if not stack:
        return "unknown"
    shown = [stack[0], *(f for f in stack[1:] if own(f.filename))][: FRAMES + 1]
    return " <- ".join(f"{f.name} ({_short(f.filename)}:{f.lineno})" for f in shown)


def _short(path: str) -> str:
    for root in ("/fabricd/", "/drivers/", "/site-packages/", "/lib/python"):
        i = path.rfind(root)
        if i >= 0:
            return path[i + 1 :]
    return path


class LoopWatch:
    def __init__(self, stall_s: float = STALL_S, clock: Callable[[], float] = time.monotonic) -> None:
        self.stall_s, self.clock = stall_s, clock
        self.stalls = 0
        self.longest = 0.0
        self._beat = clock()
        self._loop_thread: int | None = None

    async def run(self, stop: asyncio.Event) -> None:
        """Beat on the loop until `stop`; the watching thread runs as long."""
        self._loop_thread, self._beat = threading.get_ident(), self.clock()
        halt = threading.Event()
        thread = threading.Thread(target=self._watch, args=(halt,), name="loop-watch", daemon=True)
        thread.start()
        try:
            while not stop.is_set():
                self._beat = self.clock()
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(stop.wait(), BEAT_S)
        finally:
            halt.set()

    def _watch(self, halt: threading.Event) -> None:
        stalled_at: float | None = None  # the beat the current stall began after
        thread_late = 0.0  # how late this thread itself woke during the stall (the process not run)
        last = self.clock()
        while not halt.wait(WATCH_EVERY_S):
            now = self.clock()
            woke_late, last = now - last - WATCH_EVERY_S, now
            beat = self._beat
            late = now - beat - BEAT_S
            if stalled_at is None and late >= self.stall_s:
                stalled_at, thread_late = beat, max(0.0, woke_late)
                if thread_late >= late / 2:  # this thread was held up as long: the whole process, not the loop
                    log.warning("event loop and the whole process not run for %.1f s (a pause, or no CPU)", late)
                else:
                    frame = sys._current_frames().get(self._loop_thread or -1)
                    log.warning("event loop stalled %.1f s so far, in %s", late, where(frame))
            elif stalled_at is not None:
                thread_late = max(thread_late, woke_late)
                if beat != stalled_at:  # it beat again: the stall is over
                    length = beat - stalled_at - BEAT_S
                    self.stalls += 1
                    self.longest = max(self.longest, length)
                    cause = ""
                    if thread_late >= self.stall_s / 2:
                        cause = f" (the process itself was not run for {thread_late:.1f} s of it: a pause, or no CPU)"
                    log.warning("event loop stalled %.1f s in all%s", length, cause)
                    stalled_at = None
