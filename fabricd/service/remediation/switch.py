"""Every request remediation sends to a switch goes through here: a port's admin state committed under the revert
timer (with fabricd's mark in its description), its mark rewritten, the marks read, traffic shifted away or back
for a drain. Each request is fenced (`Fence.check` before it, and `Session.guard` before every request the driver
sends inside it, a confirm or a rollback too), runs in the action threads (the event loop never waits on a switch),
and one transaction per switch at a time (`device_lock`: EOS refuses a commit while another commit timer is
pending). The transaction around these calls (verify, confirm, roll back) is port_actions.py's."""

from __future__ import annotations

import asyncio
import contextvars
import logging
from collections.abc import Callable
from concurrent.futures import Executor
from functools import partial
from typing import TypeVar, TypeVarTuple

from drivers.base import ConfigRejectedError, PortMark, Resumed, Session
from drivers.marks import Mark
from drivers.transaction import settle
from topology.model import Endpoint

from ..remediation_io import Actuator
from ..state import FENCE
from .context import Context, FencedOff
from .older_leaders import blocked_by_older, end_older

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
        """`fn` in a driver thread, in a copy of the caller's context: the leader's token (`FENCE`) is the one it
        runs under there too (as `asyncio.to_thread` does)."""
        return await self.submit(partial(contextvars.copy_context().run, fn, *args))

    def device_lock(self, device: str) -> asyncio.Lock:
        """The switch's lock: one transaction per switch at a time."""
        loop = asyncio.get_running_loop()
        if loop is not self._locks_loop:  # an asyncio.Lock belongs to the loop it first waited in
            self._device_locks, self._locks_loop = {}, loop
        return self._device_locks.setdefault(device, asyncio.Lock())

    def begin_admin_change(
        self, ep: Endpoint, up: bool, key: str, resumed: bool, mark: Mark | None, token: int | None,
        described: str | None,
    ) -> asyncio.Future[tuple[Session, Resumed]]:  # fmt: skip
        """`_open_and_set` handed to a driver thread now: connect and commit in one trip (each hop back to a busy
        loop costs latency)."""
        return self.submit(self._open_and_set, ep, up, key, resumed, mark, token, described)

    def _open_and_set(
        self, ep: Endpoint, up: bool, key: str, resumed: bool, mark: Mark | None = None, token: int | None = None,
        described: str | None = None,
    ) -> tuple[Session, Resumed]:  # fmt: skip
        """Blocking: a session with the admin-state change committed under the revert timer (closed on failure),
        and what a fabricd before this one left of it on the switch. The switch's transaction is named by the
        action (`key`): a resumed action (a restart, not a new leader) first looks for it, and takes over a commit
        still pending under its timer (confirmed or rolled back like a new one) or one already confirmed, instead
        of committing again (EOS refuses a second commit timer; a SONiC timer left behind would revert the new
        commit). A leader (`token`) ends the transactions of older tokens there before its commit (`_commit`).
        The fence is asked before every request to the switch (`Session.guard`), inside a confirm or a rollback
        too."""
        fence = self.ctx.fence
        fence.check(token)  # before every switch call
        session = self.actuator.connect(ep.device)
        session.guard = partial(fence.check, token)
        try:
            fence.check(token)  # the connect may have taken long (or the process was paused in it)
            found = session.resume(key) if resumed else "none"
            if found == "none":

                def commit(ended: bool) -> None:
                    # Ending an old leader's transactions reverted what they had committed, its mark too; telemetry
                    # may still stream that mark, and the driver, told the port already carries the mark it is to
                    # set, would leave the description out: the port shut unmarked. The switch's own is read then.
                    session.set_port_admin(ep.port, up, self.ctx.settings.revert_in_s, key=key, mark=mark,
                                           description=None if ended else described)  # fmt: skip

                self._commit(session, ep.device, token, commit)
        except FencedOff:
            session.abandon()
            raise
        except BaseException:
            settle(session, keep=False)  # anything half-committed goes now (or with the switch's timer)
            session.close()
            raise
        return session, found

    def _commit(self, session: Session, device: str, token: int | None, commit: Callable[[bool], None]) -> None:
        """Blocking: `commit(ended)` of a leader, with every transaction of an older leader's token on the switch
        ended first (`ended`: some were), and once more, then the commit retried once, when the switch refuses it
        naming one. A paused old leader's request already past its fence check when it was paused goes out when
        it wakes, at any moment: a session of its token committed under its timer there blocks every other commit
        on EOS until the timer ends (and on SONiC its timer reverts the switch to its checkpoint when it ends). So
        a late request costs at most one retry, and no change of it stays on the switch beyond the next commit or
        the next sweep (`end_stale`). Without a token (one instance alone), there is no older leader."""
        if token is None:
            commit(False)
            return
        ended = end_older(session, device, token)
        try:
            commit(ended)
        except ConfigRejectedError as e:
            if not blocked_by_older(str(e), token):
                raise
            log.warning("%s: a commit was refused for an older leader's transaction (%s); ending it and retrying",
                        device, e)  # fmt: skip
            end_older(session, device, token)
            commit(True)

    def end_stale(self, device: str, token: int) -> list[str]:
        """Blocking: every transaction of a token older than `token` on the switch ended (uncommitted ones
        discarded, ones pending under their revert timer rolled back): the sweep of a leader's reconcile passes,
        for a paused old leader's late request that no commit of this leader has met."""
        self.ctx.fence.check(token)
        session = self.actuator.connect(device)
        session.guard = partial(self.ctx.fence.check, token)
        try:
            self.ctx.fence.check(token)  # the connect may have taken long (or the process was paused in it)
            ended = session.abort_stale(token, ())
        except FencedOff:
            session.abandon()
            raise
        except BaseException:
            session.close()
            raise
        self.actuator.release(session)
        if ended:
            log.warning("%s: ended an older leader's transactions %s (a late request of a paused leader)", device,
                        ", ".join(ended))  # fmt: skip
        return ended

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
        session, _ = self._open_and_set(ep, up, key, False, mark, token, None)
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
        revert_in_s = self.ctx.settings.revert_in_s
        self._shifted(device, key, lambda s, k: s.shift_traffic(away, revert_in_s, key=k))

    def shift_session(self, device: str, peer_address: str, asn: int, away: bool, key: str) -> None:
        """Blocking: one end of a drained link's BGP session de-preferred (or back), confirmed (a drain's step)."""
        revert_in_s = self.ctx.settings.revert_in_s
        self._shifted(device, key, lambda s, k: s.shift_session(peer_address, asn, away, revert_in_s, key=k))

    def _shifted(self, device: str, key: str, shift: Callable[[Session, str], None]) -> None:
        """A drain's shift committed and confirmed; a leader's named with its token (`fabricd_t<token>_...`, so a
        newer leader knows it for an old leader's), older leaders' transactions ended first (`_commit`)."""
        token = FENCE.get()  # the caller's, in this thread too (`submit` copies its context)
        if token is not None:
            key = f"fabricd_t{token}_{key.removeprefix('fabricd_')}"
        session = self.actuator.connect(device)
        try:
            self._commit(session, device, token, lambda _ended: shift(session, key))
        finally:
            self.actuator.release(session)
