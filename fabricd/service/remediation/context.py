"""What every part of remediation shares: the fabric, the state, the settings in force, the clock, the one decision
lock, the background tasks, and the fence (may this instance act now?). Each part receives this and, in its
constructor, the other parts it works with; no part inherits from another.

The fence is asked before each action starts, before every switch request (`Fence.check`, in the driver thread,
`Fence.wait` on the event loop) and by every request of people (`Fence.leader_only`)."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Container, Coroutine
from dataclasses import dataclass, field
from typing import Any

from topology.errors import FabricdError
from topology.fabric import Fabric

from ..config import RemediationSettings, SafetyLimits
from ..remediation_io import PortView
from ..state import FENCE, StateStore
from ..state.db import FencedError

log = logging.getLogger("fabricd.remediation")
FENCE_WAIT_S = 1.0  # a leader whose lease is only close to its next renewal waits this long for it before a call


class FencedOff(Exception):
    """Raised inside an action when this instance may no longer act: the action is left to the leader."""


class StandbyError(FabricdError):
    """This instance is a standby (or was fenced off): the leader acts; send the request there."""


class Fence:
    """May this instance act now? `ask()` says why not (a standby, or a leader whose token was superseded), or None;
    `token()` is the leader's fencing token now (None: acting alone); `on_fenced(why)` is told when the state says
    the lease is no longer ours."""

    def __init__(
        self,
        ask: Callable[[], str | None] | None = None,
        token: Callable[[], int | None] | None = None,
        on_fenced: Callable[[str], None] | None = None,
    ) -> None:
        self.ask = ask
        self.token: Callable[[], int | None] = token or (lambda: None)
        self.on_fenced: Callable[[str], None] = on_fenced or (lambda why: None)

    def why(self) -> str | None:
        return None if self.ask is None else self.ask()

    def fenced_out(self, why: str) -> None:
        log.warning("%s", why)
        self.on_fenced(why)

    def leader_only(self) -> None:
        if (why := self.why()) is not None:
            raise StandbyError(f"this fabricd does not act now: {why}; send the request to the leader")

    def may_call(self, token: int | None, deadline: float) -> bool:
        """Before a switch call: True if this instance may act now; False if it should ask again (a leader whose
        lease is merely close to its renewal waits for it until `deadline`); FencedOff if it lost the lease or a
        newer leader fenced it off."""
        why = self.why()
        if why is None:
            return True
        if token is None or self.token() != token or time.monotonic() >= deadline:
            raise FencedOff(why)
        return False

    def check(self, token: int | None = None) -> None:
        """`may_call`, blocking: for the driver thread (FENCE is the event loop's, so the token is passed)."""
        token, deadline = FENCE.get() if token is None else token, time.monotonic() + FENCE_WAIT_S
        while not self.may_call(token, deadline):
            time.sleep(0.02)

    async def wait(self) -> None:
        """`may_call` for the event loop."""
        token, deadline = FENCE.get(), time.monotonic() + FENCE_WAIT_S
        while not self.may_call(token, deadline):
            await asyncio.sleep(0.02)


class Tasks:
    """Remediation's background work (actions, drains): `idle()` waits for every one (tests, shutdown, a takeover)."""

    def __init__(self) -> None:
        self._tasks: set[asyncio.Task[None]] = set()

    def start(self, work: Coroutine[Any, Any, None]) -> asyncio.Task[None]:
        task: asyncio.Task[None] = asyncio.ensure_future(work)
        self._tasks.add(task)
        task.add_done_callback(self._done)
        return task

    def _done(self, task: asyncio.Task[None]) -> None:
        """Its exception retrieved here (asyncio would log "Task exception was never retrieved" with a traceback):
        one line when it is the fence's doing (this instance no longer acts), the traceback otherwise."""
        self._tasks.discard(task)
        if task.cancelled() or (e := task.exception()) is None:
            return
        if isinstance(e, FencedError | FencedOff):
            log.warning("left to the leader: this instance was fenced off (%s)", e)
        else:
            log.error("remediation task failed: %s: %s", type(e).__name__, e, exc_info=e)

    async def idle(self) -> None:
        while self._tasks:
            await asyncio.gather(*list(self._tasks), return_exceptions=True)


@dataclass
class Context:
    """What every part of remediation reads. `settings` is the one in force: `fabricd mode` replaces it while the
    service runs (requests.py), and every part sees the new one."""

    fabric: Fabric
    state: StateStore
    settings: RemediationSettings
    limits: SafetyLimits
    managed: Container[str]
    view: PortView
    clock: Callable[[], int]
    fence: Fence = field(default_factory=Fence)
    # one decision at a time: budgets must count the action just taken
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    tasks: Tasks = field(default_factory=Tasks)
