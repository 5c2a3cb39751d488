"""Every request remediation sends to a switch goes through here: a port's admin state committed under the revert
timer (with fabricd's mark in its description), its mark rewritten, the marks read, traffic shifted away or back
for a drain. Each request is fenced (`Fence.check` before it, and `Session.guard` before every request the driver
sends inside it, a confirm or a rollback too), runs in the action threads (the event loop never waits on a switch),
and one transaction per switch at a time (`device_lock`: EOS refuses a commit while another commit timer is
pending). The transaction around these calls (verify, confirm, roll back) is port_actions.py's."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from concurrent.futures import Executor
from functools import partial
from typing import TypeVar, TypeVarTuple

from drivers.base import PortMark, Resumed, Session
from drivers.marks import Mark
from drivers.transaction import settle
from topology.model import Endpoint

from ..remediation_io import Actuator
from .context import Context, FencedOff

log = logging.getLogger("fabricd.remediation")
R = TypeVar("R")
Ts = TypeVarTuple("Ts")


class Switch:
    def __init__(self, ctx: Context, actuator: Actuator, executor: Executor | None = None) -> None:
        self.ctx, self.actuator, self.executor = ctx, actuator, executor
        self._device_locks: dict[str, asyncio.Lock] = {}
        self._locks_loop: asyncio.AbstractEventLoop | None = None

    def submit(self, fn: Callable[[*Ts], R], *args: *Ts) -> asyncio.Future[R]:
        """A blocking driver call handed to the executor now (the event loop never waits on a switch)."""
        return asyncio.get_running_loop().run_in_executor(self.executor, fn, *args)

    async def blocking(self, fn: Callable[[*Ts], R], *args: *Ts) -> R:
        return await self.submit(fn, *args)

    def device_lock(self, device: str) -> asyncio.Lock:
        """The switch's lock: one transaction per switch at a time."""
        loop = asyncio.get_running_loop()
        if loop is not self._locks_loop:  # an asyncio.Lock belongs to the loop it first waited in
            self._device_locks, self._locks_loop = {}, loop
        return self._device_locks.setdefault(device, asyncio.Lock())

    def begin_admin_change(
        self, ep: Endpoint, up: bool, key: str, resumed: bool, mark: Mark | None, clean: int | None,
        token: int | None, described: str | None,
    ) -> asyncio.Future[tuple[Session, Resumed]]:  # fmt: skip
        """`_open_and_set` handed to a driver thread now: connect and commit in one trip (each hop back to a busy
        loop costs latency)."""
        return self.submit(self._open_and_set, ep, up, key, resumed, mark, clean, token, described)

    def _open_and_set(
        self, ep: Endpoint, up: bool, key: str, resumed: bool, mark: Mark | None = None, clean: int | None = None,
        token: int | None = None, described: str | None = None,
    ) -> tuple[Session, Resumed]:  # fmt: skip
        """Blocking: a session with the admin-state change committed under the revert timer (closed on failure),
        and what a fabricd before this one left of it on the switch. The switch's transaction is named by the
        action (`key`): a resumed action (a restart, not a new leader) first looks for it, and takes over a commit
        still pending under its timer (confirmed or rolled back like a new one) or one already confirmed, instead
        of committing again (EOS refuses a second commit timer; a SONiC timer left behind would revert the new
        commit). `clean`: end the transactions of leader tokens older than this one first. The fence is asked
        before every request to the switch (`Session.guard`), inside a confirm or a rollback too."""
        fence = self.ctx.fence
        fence.check(token)  # before every switch call, in this thread too (FENCE is the loop's, not ours)
        session = self.actuator.connect(ep.device)
        session.guard = partial(fence.check, token)
        try:
            fence.check(token)  # the connect may have taken long (or the process was paused in it)
            if clean is not None:
                # A new leader ends what an old one left open on this switch (by the token in its names) before it
                # acts: a late command of the old leader then finds nothing to act on.
                ended = session.abort_stale(clean, ())
                if ended:
                    log.warning("%s: ended an old leader's transactions %s", ep.device, ", ".join(ended))
                    # Ending them reverted what they had committed, the old leader's mark too; telemetry may still
                    # stream that mark, and the driver, told the port already carries the mark it is to set, would
                    # leave the description out: the port shut unmarked. The switch's own description is read instead.
                    described = None
            found = session.resume(key) if resumed else "none"
            if found == "none":
                session.set_port_admin(
                    ep.port, up, self.ctx.settings.revert_in_s, key=key, mark=mark, description=described
                )
        except FencedOff:
            session.abandon()
            raise
        except BaseException:
            settle(session, keep=False)  # anything half-committed goes now (or with the switch's timer)
            session.close()
            raise
        return session, found

    async def settle(self, session: Session, keep: bool, fenced: bool = True) -> str:
        """Confirm (`keep`) or roll back the session's pending commit, in a driver thread, after asking the fence
        (unless not `fenced`: a failed action's rollback, already asked)."""
        if fenced:
            await self.ctx.fence.wait()
        return await self.blocking(settle, session, keep)

    async def let_go(self, session: Session, fenced: bool, failed: bool) -> None:
        """A fenced leader lets go without a word to the switch (the new leader decides what it left); after a
        failure the session is closed, not kept warm: the next action opens a new one."""
        if fenced:
            await self.blocking(session.abandon)
        else:
            await self.blocking(session.close if failed else partial(self.actuator.release, session))

    def rewrite_mark(self, ep: Endpoint, key: str, up: bool, mark: Mark | None, token: int | None) -> None:
        """Blocking: the port's present admin state committed again with its description's mark set (`mark`) or
        removed (None), under the revert timer, and confirmed."""
        session, _ = self._open_and_set(ep, up, key, False, mark, None, token, None)
        try:
            settle(session, True)
        except BaseException:
            settle(session, False)
            session.close()
            raise
        self.actuator.release(session)

    def read_marks(self, device: str) -> dict[str, PortMark]:
        """Blocking: fabricd's marks as the switch's port descriptions carry them."""
        session = self.actuator.connect(device)
        try:
            marks = session.port_marks()
        except BaseException:
            session.close()
            raise
        self.actuator.release(session)
        return marks

    def shift(self, device: str, away: bool, key: str) -> None:
        """Blocking: the switch's traffic shifted away (or back), confirmed (a drain's step)."""
        session = self.actuator.connect(device)
        try:
            session.shift_traffic(away, self.ctx.settings.revert_in_s, key=key)
        finally:
            self.actuator.release(session)

    def shift_session(self, device: str, peer_address: str, asn: int, away: bool, key: str) -> None:
        """Blocking: one end of a drained link's BGP session de-preferred (or back), confirmed (a drain's step)."""
        session = self.actuator.connect(device)
        try:
            session.shift_session(peer_address, asn, away, self.ctx.settings.revert_in_s, key=key)
        finally:
            self.actuator.release(session)
