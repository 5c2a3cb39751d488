"""Commits that take ports down go to the switches before confirms.

A confirm only keeps a change the switch already made (the port is down from the commit on); its revert timer runs
for `remediation.revert_in_s` (30 s at least). When several links cross at once, the confirms of the first actions
(napalm reads the sessions twice, then commits: three requests) would otherwise share the driver threads, the
switches' management planes and the CPU with the commits of the later ones, which are what stops the damage.
So a confirm waits while any port-down commit is in flight, at most CONFIRM_YIELD_S.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Iterator

CONFIRM_YIELD_S = 1.0  # far inside the shortest revert timer (30 s): a confirm is never late for it


class CommitsFirst:
    """Counts port-down commits in flight; `yield_to_commits` waits until there are none (or the cap)."""

    def __init__(self) -> None:
        self.in_flight = 0
        self._idle: asyncio.Event | None = None
        self._loop: asyncio.AbstractEventLoop | None = None

    def _event(self) -> asyncio.Event:
        loop = asyncio.get_running_loop()
        if self._idle is None or loop is not self._loop:  # an asyncio.Event belongs to the loop it waited in
            self._idle, self._loop = asyncio.Event(), loop
            if self.in_flight == 0:
                self._idle.set()
        return self._idle

    @contextlib.contextmanager
    def commit(self) -> Iterator[None]:
        """Around a port-down commit (connect and commit, in the driver thread)."""
        self.in_flight += 1
        self._event().clear()
        try:
            yield
        finally:
            self.in_flight -= 1
            if self.in_flight == 0:
                self._event().set()

    async def yield_to_commits(self, cap_s: float = CONFIRM_YIELD_S) -> None:
        """Before a confirm: let the port-down commits in flight go first, waiting at most `cap_s`."""
        if self.in_flight == 0:
            return
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._event().wait(), cap_s)
