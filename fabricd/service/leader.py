"""Who acts, when several `fabricd run` share one config: a lease in a JetStream key-value bucket.

Why a lease on the bus and not a PostgreSQL advisory lock: an advisory lock lives as long as the leader's database
session, and a leader cut off from the database by the network keeps it until the server notices the dead TCP
connection (minutes, with default keepalives), so a standby could not take over within seconds. The lease is a key
in a bucket whose entries expire `lease_ttl_s` after their last write: the leader rewrites it every third of that
with a compare-and-set on its own revision; a standby polls twenty times a second and creates the key once it is
gone.
The leader counts its lease as lost two thirds of a TTL after the last renewal it sent (a third before the
bus can let anyone else have it), so two instances never both believe they lead.

Fencing: the revision at which an instance created the key grows with every new leader. The new leader writes its
token to the shared state (`Leadership.claim`), and before every switch commit remediation checks that the
state still names its token (`fence()`): an old leader that was only paused (a long GC, a frozen VM) and wakes up
believing it leads is refused there, before it touches a switch. The token is the revision under the bucket's
creation time (`fencing_token`): a bucket made anew (the bus's store lost, the bucket deleted) counts its
revisions from 1 again, and a bare revision would then be below the token the state and the switches' fences still
hold, so no new leader could act until an operator cleared both.

The lease is held by a thread of its own, with its own event loop and bus connection: a service whose event loop is
blocked (a long transaction, a burst of work after a takeover, a slow callback) keeps renewing, since a renewal
round costs a fraction of a millisecond of CPU. Before, the renewals ran on the service's loop, and any stall of
it longer than two thirds of a TTL (0.4 s by default) lost the lease: once seen as a 1.5 s stall between a
statement and its COMMIT about 10 s after a takeover (issue 53). A process that is paused (SIGSTOP, a frozen VM)
stops every thread, this one too, so it loses the lease as before. A loop that makes no progress at all must not
keep it either: the service's loop beats every sixth of a TTL, and the thread stops renewing (and does not take
the lease) once it has not beaten for LOOP_STALL_TTLS lease TTLs.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import logging
import os
import socket
import threading
import time
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING

from fabricd.backoff import Backoff

from .config import HaSettings

if TYPE_CHECKING:
    from nats.aio.client import Client as NATS
    from nats.js.kv import KeyValue

log = logging.getLogger("fabricd.leader")
KEY = "leader"
# A service loop silent this many TTLs leads no more (3 s at the default 0.6 s lease): it answers no API and runs no
# pass, and a standby takes over a TTL later. Five: well above the longest stall seen of a working service (1.5 s,
# 2.5 TTLs: issue 53), so a stall of that kind keeps the lease.
LOOP_STALL_TTLS = 5.0


TOKEN_EPOCH_S = 1_700_000_000  # bucket creation times count from here (2023-11-14): 2**31 s of them fit a bigint


def fencing_token(bucket_created_s: float | None, revision: int) -> int:
    """A leader's fencing token: the lease bucket's creation time (whole seconds since TOKEN_EPOCH_S) above the
    revision at which it took the lease (32 bits: 27 years of renewals at five a second). Tokens of one bucket order
    as their revisions; every token of a bucket made later is larger than any of an earlier one. A bus that does not
    say when the bucket was made gives the bare revision."""
    if not 0 < revision < 1 << 32:
        raise ValueError(f"a lease revision out of range: {revision}")
    epoch = max(0, int(bucket_created_s or 0) - TOKEN_EPOCH_S)
    return (epoch << 32) | revision


def default_instance() -> str:
    return f"{socket.gethostname()}:{os.getpid()}"


class Leadership:
    def __init__(
        self,
        settings: HaSettings,
        connect: Callable[[], Awaitable[NATS]],
        on_elected: Callable[[int], Awaitable[None]],
        *,
        claim: Callable[[int], Awaitable[bool]] | None = None,
        instance: str | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.settings = settings
        self.instance = instance or settings.instance or default_instance()
        self._connect, self._on_elected, self._clock = connect, on_elected, clock
        # Records a new token in the shared state (False: a newer one is there); until it has, the instance holds the
        # lease but does not act: its writes would be fenced off by the old leader's token still in the state.
        self._claim = claim
        self._claimed: int | None = None
        self.ttl = settings.lease_ttl_s
        self.token: int | None = None  # this instance's fencing token while it leads (`fencing_token`)
        self._bucket_created: float | None = None  # the lease bucket's creation time (unix s), read on each connect
        self.holder: str | None = None  # who holds the lease, as last seen
        self._revision: int | None = None
        self._valid_until = 0.0
        self._elected: asyncio.Future[None] | concurrent.futures.Future[None] | None = None
        self.changes = 0  # how many times this instance gained or lost the lease (tests, metrics)
        # The service's loop, where the takeover runs (`_elect`), and when it last beat (`run`): the lease thread
        # renews only while it beats (LOOP_STALL_TTLS).
        self._loop: asyncio.AbstractEventLoop | None = None
        self._beat = 0.0
        self._changing = threading.Lock()  # the lease thread and the service's loop both take and drop the lead

    def acting(self) -> bool:
        """This instance leads (its token is in the state) and its lease cannot have ended yet."""
        claimed = self._claim is None or self._claimed == self.token
        return self.token is not None and claimed and self._clock() < self._valid_until

    def valid_for(self) -> float:
        """Seconds this instance's lease is still certainly its own (0 when it does not lead)."""
        return max(0.0, self._valid_until - self._clock()) if self.token is not None else 0.0

    def step_down(self, why: str) -> None:
        """Stop acting now (the state names a newer leader: this one was fenced off); a new lease may follow."""
        self._step_down(why)

    def why_not_acting(self) -> str:
        """Why this instance does not act now (asked when `acting()` is False), naming the leader only when it is
        another instance."""
        if self.token is None:
            leader = self.holder if self.holder not in (None, self.instance) else "being elected"
            return f"this instance ({self.instance}) is a standby; the leader is {leader}"
        if self._claim is not None and self._claimed != self.token:
            return (f"this instance ({self.instance}) holds the leader lease (token {self.token}) but does not act "
                    "until its token is recorded in the state")  # fmt: skip
        return f"the leader lease of this instance ({self.instance}) was not renewed in time: it does not act"

    def role(self) -> str:
        return "leader" if self.acting() else "standby"

    def loop_stalled_for(self) -> float:
        """Seconds since the service's loop last beat (0 when it beat within a beat's interval)."""
        return max(0.0, self._clock() - self._beat - self.ttl / 6)

    async def run(self, stop: asyncio.Event) -> None:
        """Hold the lease (or wait for it) on a thread of its own until `stop` (or the task is cancelled: the lease
        is then given up as by a dead process, left to expire); this coroutine only beats for the thread."""
        self._loop = asyncio.get_running_loop()
        self._beat = self._clock()
        halt = threading.Event()
        thread = threading.Thread(target=self._lease_thread, args=(halt,), name="leader-lease", daemon=True)
        thread.start()
        try:
            while not stop.is_set() and thread.is_alive():
                self._beat = self._clock()
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(stop.wait(), self.ttl / 6)
            if not stop.is_set():
                log.error("the leader lease thread of %s ended unexpectedly: this instance stands down", self.instance)
        finally:
            halt.set()  # no renewal after this; the thread closes its bus connection and ends within a pause
            self._step_down("stopping")
            if self._elected is not None:
                self._elected.cancel()

    def _lease_thread(self, halt: threading.Event) -> None:
        asyncio.run(self._lease(halt))

    async def _lease(self, halt: threading.Event) -> None:
        """The lease thread's loop: connect, hold or wait for the lease, and again after the bus fails."""
        backoff = Backoff(0.5, 5.0)
        nc: NATS | None = None
        try:
            while not halt.is_set():
                try:
                    if nc is None:
                        nc = await self._connect()
                    kv = await self._bucket(nc)
                    backoff.reset()
                    await self._hold(kv, halt)
                except Exception as e:  # noqa: BLE001 - the bus went away or refused: keep trying, never crash
                    self._expire_if_due()
                    log.warning("leader lease: %s (%s); retrying", type(e).__name__, str(e)[:200])
                    await _nap(halt, backoff.next())
        finally:
            if nc is not None:
                with contextlib.suppress(Exception):
                    await nc.close()

    async def _bucket(self, nc: NATS) -> KeyValue:
        from fabricd.bus import kv_bucket

        js = nc.jetstream(timeout=max(1.0, self.ttl / 3))
        kv = await kv_bucket(js, self.settings.bucket, self.ttl)
        created = (await js.stream_info(f"KV_{self.settings.bucket}")).created
        self._bucket_created = created.timestamp() if created is not None else None
        return kv

    async def _hold(self, kv: KeyValue, halt: threading.Event) -> None:
        """Renew while leading, poll while standing by; returns (or raises) when the bus fails."""
        from nats.errors import TimeoutError as NatsTimeout
        from nats.js.errors import KeyNotFoundError, KeyWrongLastSequenceError

        me = self.instance.encode()
        while not halt.is_set():
            sent = self._clock()
            stalled = self.loop_stalled_for()
            wedged = stalled >= LOOP_STALL_TTLS * self.ttl
            if self.token is not None and wedged:
                self._step_down(f"the service's event loop has made no progress for {stalled:.1f} s: not renewing")
            if self.token is not None:
                try:
                    self._revision = await kv.update(KEY, me, last=self._revision)
                    self._valid_until = sent + self.ttl * 2 / 3
                except KeyWrongLastSequenceError:
                    self._step_down("another instance holds the lease")
                except (NatsTimeout, TimeoutError):
                    self._expire_if_due()
                pause = self.ttl / 3
            else:
                try:
                    entry = await kv.get(KEY)
                    self.holder = (entry.value or b"").decode() or None
                except KeyNotFoundError:
                    if not wedged and not halt.is_set():  # a wedged service does not take what it cannot use
                        try:
                            rev = await kv.create(KEY, me)
                        except KeyWrongLastSequenceError:
                            pass  # another standby was faster
                        else:
                            self._take(rev, sent)
                pause = min(0.05, self.ttl / 6)  # a KV read: twenty a second cost nothing, a takeover waits less
            await _nap(halt, pause)

    def _take(self, revision: int, sent: float) -> None:
        token = fencing_token(self._bucket_created, revision)
        with self._changing:
            self.token, self._revision = token, revision
            self._valid_until = sent + self.ttl * 2 / 3
            self.holder = self.instance
            self.changes += 1
        log.warning("leader lease taken by %s (fencing token %d): this instance acts now", self.instance, token)
        assert self._loop is not None  # set by run() before the thread starts
        # the takeover runs on the service's loop (it claims the token and starts the service's work there)
        self._elected = asyncio.run_coroutine_threadsafe(self._elect(token), self._loop)

    async def _elect(self, token: int) -> None:
        try:
            if self._claim is not None:
                if not await self._claim(token):
                    raise RuntimeError(f"a leader with a newer token than {token} is recorded; not taking over")
                if self.token != token:
                    return  # the lease was lost while claiming
                self._claimed = token
            await self._on_elected(token)
        except Exception:
            log.exception("taking over as leader failed; stepping down")
            self._step_down("the takeover failed")

    def _expire_if_due(self) -> None:
        if self.token is not None and self._clock() >= self._valid_until:
            self._step_down("the lease could not be renewed in time")

    def _step_down(self, why: str) -> None:
        with self._changing:
            if self.token is None:
                return
            self.token = self._revision = None
            self._valid_until = 0.0
            self.holder = None
            self.changes += 1
        log.warning("leader lease lost by %s (%s): this instance no longer acts", self.instance, why)


async def _nap(halt: threading.Event, seconds: float) -> None:
    """Sleep on the lease thread's loop, ending early (within 50 ms) once `halt` is set."""
    end = time.monotonic() + seconds
    while not halt.is_set() and (left := end - time.monotonic()) > 0:
        await asyncio.sleep(min(left, 0.05))
