"""`fabricd collector`: subscribe to a share of the switches and publish what they send to the bus.

Any number of collectors run on any number of machines with the same fabricd.yaml. Who streams which switch is
decided by leases in the JetStream key-value bucket `fabricd_switches` (gnmic's "locked targets"): a key per
switch, created by the collector that takes it and rewritten (compare-and-set) every third of
`telemetry.collector_lease_ttl_s`. Each collector also keeps a key of its own in `fabricd_collectors`, so every one
knows how many are alive and takes its fair share, ceil(switches / collectors), and gives back what it holds
beyond that, so a collector that joins gets work. Every collector watches both buckets (`lease_view.py`): a
collector that dies or is cut off stops renewing, and a TTL after its last renewal was seen the others take its
switches over with a compare-and-set on that revision (or create them, should the bus have expired them first),
at that instant (a collector wakes for the next lapse its views foresee, else every CLAIM_EVERY_S), then the first
values (a ONCE call on connect).

The gNMI side is the service's own `TelemetryClient` (same subscriptions, reconnects, sample phases). Instead of
decoding, `BusPublisher` hands each switch's raw SubscribeResponses to the bus every few milliseconds, on the
switch's subject of the stream (`bus_wire.py`), whose age and size limits bound what a slow reader can cost.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
import time
import zlib
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, TypeVar

from prometheus_client import CollectorRegistry, Counter, Gauge

from drivers.inventory import DeviceAccess

from . import bus_wire
from .channel import notification_ts
from .client import TelemetryClient
from .ingest import Ingestor
from .lease_view import LeaseView, Op, op_of
from .metrics import TelemetryMetrics
from .paths import Subscription
from .store import CounterStore

if TYPE_CHECKING:
    from nats.aio.client import Client as NATS
    from nats.js.client import JetStreamContext
    from nats.js.kv import KeyValue

log = logging.getLogger("fabricd.collector")
SWITCHES, MEMBERS = "fabricd_switches", "fabricd_collectors"
CLAIM_EVERY_S = 0.1  # how often a collector looks for free switches: in its watched views, no call on the bus
LAPSE_MARGIN_S = 0.002  # woken this long after a lease's lapse instant, so the view counts it abandoned
LEASE_CALLS = 256  # KV calls in flight at once in a lease round: one round trip each, so 4k leases take ~16 of them
PUBLISH_EVERY_S = 0.005  # batching window: a flap's oper-status event waits at most this long on the collector
STREAM_CHECK_S = 1.0  # how often collectors and bus readers make sure the telemetry stream still exists


async def ensure_stream(js: JetStreamContext, max_age_s: float, max_bytes: int) -> None:
    """The telemetry stream, created if missing (or its limits brought up to date): old messages go first."""
    from nats.js.api import DiscardPolicy, RetentionPolicy, StorageType, StreamConfig

    config = StreamConfig(
        name=bus_wire.STREAM, subjects=[bus_wire.SUBJECTS], retention=RetentionPolicy.LIMITS,
        max_age=max_age_s, max_bytes=max_bytes, discard=DiscardPolicy.OLD, storage=StorageType.MEMORY,
    )  # fmt: skip
    try:
        await js.add_stream(config)
    except Exception:  # noqa: BLE001 - it exists with other limits: update it
        await js.update_stream(config)


async def stream_created(js: JetStreamContext, max_age_s: float, max_bytes: int) -> object:
    """When the telemetry stream was created, making it again should the bus have lost it. The stream is kept in
    memory, which nats-server does not keep across a restart: without this, collectors would publish into nothing
    (core publishes, no error) and a reader's ordered consumer would wait for sequence numbers the new stream
    reaches only much later, blind, until some process started afresh. A reader that sees the time change reads the
    new stream from its start."""
    from nats.js.errors import NotFoundError

    try:
        return (await js.stream_info(bus_wire.STREAM)).created
    except NotFoundError:
        await ensure_stream(js, max_age_s, max_bytes)
        log.warning("bus: the telemetry stream was gone (the bus restarted?); made it again")
        return (await js.stream_info(bus_wire.STREAM)).created


async def keep_stream(js: JetStreamContext, max_age_s: float, max_bytes: int, stop: asyncio.Event) -> None:
    """A collector's watch on the stream: made again within STREAM_CHECK_S of the bus losing it."""
    while not stop.is_set():
        try:
            await stream_created(js, max_age_s, max_bytes)
        except Exception as e:  # noqa: BLE001 - the bus is away: the lease round says so; try again next time
            log.debug("bus: checking the telemetry stream: %s", e)
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(stop.wait(), STREAM_CHECK_S)


class BusPublisher(Ingestor):
    """Takes the client's raw responses per switch and publishes them in batches (no decoding here). Only for a
    switch this collector holds now (`holds`): what it received or buffered while it did not (a collector woken
    from a pause finds its gRPC streams' backlog, samples of switches another collector took meanwhile) is dropped,
    both when it comes in and when a batch goes out."""

    def __init__(
        self, nc: NATS, errors: Counter | None = None, holds: Callable[[str], bool] = lambda device: True,
        dropped: Counter | None = None,
    ) -> None:  # fmt: skip
        super().__init__(CounterStore())
        self.nc = nc
        self._pending: dict[str, list[bytes]] = {}
        self.published = 0  # responses handed to the bus
        self.bytes = 0
        self.errors = 0  # batches the bus refused
        self.dropped = 0  # responses of switches this collector did not hold when they came or went out
        self._errors_c, self._dropped_c, self._holds = errors, dropped, holds

    def _drop(self, n: int) -> None:
        self.dropped += n
        if self._dropped_c is not None:
            self._dropped_c.inc(n)

    def ingest(self, data: bytes | Any, channel: str, now: int | None = None) -> None:
        if not self._holds(channel):
            self._drop(1)
            return
        raw = data if isinstance(data, bytes) else data.SerializeToString()
        self._pending.setdefault(channel, []).append(raw)
        # what the client's lag and staleness read (nothing is decoded here: the service decodes)
        self.last_ts = notification_ts(raw) or 0
        self.store.seen(self.store.device_id(channel), self.last_ts or (now or 0))

    def flush(self) -> None:
        """Nothing to flush into a store: `drain()` publishes on its own clock."""

    async def drain(self, stop: asyncio.Event) -> None:
        while not stop.is_set():
            await self.publish_pending()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), PUBLISH_EVERY_S)
        await self.publish_pending()

    async def publish_pending(self) -> None:
        if not self._pending:
            return
        pending, self._pending = self._pending, {}
        for device, responses in pending.items():
            if not self._holds(device):
                self._drop(len(responses))
                continue
            data = bus_wire.pack(device, responses)
            try:
                await self.nc.publish(bus_wire.subject(device), data)
            except Exception:
                self.errors += 1
                if self._errors_c is not None:
                    self._errors_c.inc()
                raise
            self.published += len(responses)
            self.bytes += len(data)


def fair_share(switches: int, members: int) -> int:
    return math.ceil(switches / max(1, members))


def preference(instance: str, switch: str) -> int:
    """Rendezvous hashing: each collector tries the free switches in its own order, so several collectors taking
    over at once rarely race for the same keys."""
    return zlib.crc32(f"{instance}|{switch}".encode())


def plan_claims(
    instance: str, switches: Sequence[str], taken: set[str], mine: set[str], members: int
) -> tuple[list[str], list[str]]:
    """(switches to try to take, switches to give back) this round: up to the fair share, pure."""
    share = fair_share(len(switches), members)
    if len(mine) > share:
        extra = sorted(mine, key=lambda s: preference(instance, s))[share:]
        return [], extra
    free = [s for s in switches if s not in taken and s not in mine]
    free.sort(key=lambda s: preference(instance, s))
    return free[: share - len(mine)], []


def lease_key(switch: str) -> str:
    """The switch's key in the lease bucket (SWITCHES)."""
    return bus_wire.subject(switch).removeprefix("fabricd.tm.")


_key = lease_key


class Collector:
    def __init__(
        self,
        accesses: Sequence[DeviceAccess],
        connect: Callable[[], Awaitable[NATS]],
        *,
        instance: str,
        profile: Mapping[str, Sequence[Subscription]],
        interval_s: float,
        lease_ttl_s: float,
        max_age_s: float,
        max_bytes: int,
        registry: CollectorRegistry | None = None,
        warm_standby: bool = True,
    ) -> None:
        """`registry`: where the collector's own metrics go (`fabricd collector --metrics-port` serves it): the
        switches it holds, failed lease rounds, bus publish errors, and its TelemetryClient's metrics (streams
        connected, reconnects, lag, updates, staleness) for the switches it streams."""
        self.accesses = list(accesses)
        self.registry = registry
        self._held_g = self._rounds_failed_c = self._publish_errors_c = self._dropped_c = self._lost_c = None
        self.lost = 0  # leases lost to another collector (renewed too late: a pause, a saturated CPU, a short TTL)
        self._metrics = TelemetryMetrics(registry) if registry is not None else None  # one set, each client binds it
        if registry is not None:
            self._held_g = Gauge("fabricd_collector_switches", "Switches this collector holds a lease on and streams",
                                 registry=registry)  # fmt: skip
            self._rounds_failed_c = Counter("fabricd_collector_lease_rounds_failed", "Lease rounds that failed (the "
                                            "bus refused or went away)", registry=registry)  # fmt: skip
            self._publish_errors_c = Counter("fabricd_collector_publish_errors", "Telemetry batches the bus refused",
                                             registry=registry)  # fmt: skip
            self._lost_c = Counter("fabricd_collector_leases_lost", "Switch leases another collector took over "
                                   "because this one renewed too late (often: a TTL too short for the load)",
                                   registry=registry)  # fmt: skip
            self._dropped_c = Counter("fabricd_collector_dropped_unheld", "Telemetry responses dropped: of a switch "
                                      "this collector did not hold (certainly) when they came or went out",
                                      registry=registry)  # fmt: skip
        self.switches = [a.name for a in self.accesses]
        self._by_key = {_key(s): s for s in self.switches}
        self._connect = connect
        self.instance, self.profile, self.interval_s = instance, profile, interval_s
        self.ttl, self.max_age_s, self.max_bytes = lease_ttl_s, max_age_s, max_bytes
        # A connected channel to every switch another collector streams: a takeover begins with the calls
        # (TelemetryClient's warm_standby; off only to measure what it saves, bench_scaleout --cold-standby).
        self.warm_standby = warm_standby
        self.mine: dict[str, int] = {}  # switch -> revision of our lease key
        self.client: TelemetryClient | None = None
        self.publisher: BusPublisher | None = None
        self._js: JetStreamContext | None = None  # set when connected
        self._renewed = time.monotonic()  # when the last renewal round was sent

    async def run(self, stop: asyncio.Event) -> None:
        nc = await self._connect()
        try:
            js = self._js = nc.jetstream(timeout=max(1.0, self.ttl / 3))
            await ensure_stream(js, self.max_age_s, self.max_bytes)
            switches = await _bucket(js, SWITCHES, self.ttl)
            members = await _bucket(js, MEMBERS, self.ttl)
            self.publisher = BusPublisher(nc, self._publish_errors_c, self.holds, self._dropped_c)
            # ON_CHANGE leaves resent every half stream age, so a reader starting at any time finds every port's
            # oper state within the stream, not only changes after it joined (gNMI heartbeat_interval).
            self.client = TelemetryClient(
                self.accesses, self.publisher, profile=self.profile, interval_s=self.interval_s,
                heartbeat_s=self.max_age_s / 2, owned=[], log=log,
                metrics=self._metrics, warm_standby=self.warm_standby,
            )  # fmt: skip
            tasks = [
                asyncio.create_task(self.client.run(), name="gnmi"),
                asyncio.create_task(self.publisher.drain(stop), name="publish"),
                asyncio.create_task(self._leases(switches, members, stop), name="leases"),
                asyncio.create_task(keep_stream(js, self.max_age_s, self.max_bytes, stop), name="stream"),
            ]
            stopping = asyncio.create_task(stop.wait())
            try:
                done, _ = await asyncio.wait([stopping, *tasks], return_when=asyncio.FIRST_COMPLETED)
                for t in done:
                    if t is not stopping and t.exception() is not None:
                        raise t.exception()  # type: ignore[misc]
            finally:
                stop.set()
                await self.client.stop()
                await asyncio.gather(*tasks, return_exceptions=True)
                stopping.cancel()
                await self._release_all(switches)
        finally:
            with contextlib.suppress(Exception):
                await nc.drain()

    def holds(self, switch: str) -> bool:
        """This collector holds `switch` now for certain: its lease, renewed less than a TTL ago (the bus keeps the
        key at least a TTL after the renewal reached it, which was after it was sent: nobody else can have taken
        it). Not two thirds of a TTL, the margin streaming stops at: at a 1 s TTL a slow round would drop samples of
        switches it holds. False for a collector woken from a longer pause until its next renewal round, which
        also finds the leases it lost."""
        return switch in self.mine and time.monotonic() - self._renewed < self.ttl

    async def _leases(self, switches: KeyValue, members: KeyValue, stop: asyncio.Event) -> None:
        """Renew every third of the TTL; every CLAIM_EVERY_S, take what is free or abandoned. Both buckets are
        watched (`lease_view.py`), so finding free switches costs nothing on the bus, and a switch whose holder
        stopped renewing is taken over a TTL after its last renewal was seen, by a compare-and-set on that
        revision, without waiting for the bus to expire the key."""
        js = self._js
        assert js is not None
        me = self.instance.encode()
        member_key = _key(self.instance)
        renewed = -1e18
        held, alive = LeaseView(self.ttl), LeaseView(self.ttl)
        watches = _Watches(js, (switches, held), (members, alive))
        try:
            while not stop.is_set():
                started = time.monotonic()
                try:
                    if started - renewed >= self.ttl / 3:
                        await members.put(member_key, me)
                        await self._renew(switches)
                        renewed = started
                        assert self.client is not None
                        # A switch lost in this renewal (taken over while we were paused) has its stream ended now:
                        # taken back in the claims below, it streams afresh, not the backlog of the pause.
                        self.client.set_owned(list(self.mine))
                    watches.keep(started, self.ttl, bool(self.mine))
                    if watches.ready():
                        await self._take(switches, held, alive, me)
                except Exception as e:  # noqa: BLE001 - the bus went away: keep streaming what we hold until it ends
                    log.warning("collector %s: lease round failed (%s: %s)", self.instance, type(e).__name__, e)
                    if self._rounds_failed_c is not None:
                        self._rounds_failed_c.inc()
                    if time.monotonic() - self._renewed > self.ttl * 2 / 3:
                        self.mine.clear()  # our leases may be gone: stop streaming before someone else starts
                assert self.client is not None
                self.client.set_owned(list(self.mine))
                if self._held_g is not None:
                    self._held_g.set(len(self.mine))
                now = time.monotonic()
                wait = min(self.ttl / 3, CLAIM_EVERY_S) - (now - started)
                # A holder's lease (or a member) lapsing before the next round: wake just past that instant.
                lapse = min(held.next_lapse(now), alive.next_lapse(now)) + LAPSE_MARGIN_S - now
                wait = max(0.005 if lapse < wait else 0.02, min(wait, lapse))
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(stop.wait(), wait)
        finally:
            await watches.close()

    async def _take(self, kv: KeyValue, held: LeaseView, alive: LeaseView, me: bytes) -> None:
        """One claim round on the watched views: free switches created, abandoned ones taken over (only while the
        member watch shows our own renewals: a stalled watch would make every lease look abandoned), extras
        given back."""
        now = time.monotonic()
        members = max(1, len(alive.live(now) | {_key(self.instance)}))
        taken = {self._by_key[k] for k in held.live(now) if k in self._by_key}
        claim, give = plan_claims(self.instance, self.switches, taken, set(self.mine), members)
        abandoned = held.abandoned(now) if alive.fresh(now, self.ttl * 2 / 3) else {}
        await _bounded([self._claim(kv, s, me, abandoned.get(_key(s))) for s in claim])
        await _bounded([self._give_back(kv, s) for s in give])
        for s in claim:
            if s in self.mine:
                held.saw(_key(s), self.mine[s], Op.PUT, now)

    async def _renew(self, kv: KeyValue) -> None:
        """Every lease renewed with a compare-and-set on its revision, LEASE_CALLS at a time (one by one, 16k leases
        would outlast a round)."""
        from nats.js.errors import KeyWrongLastSequenceError

        sent = time.monotonic()
        me = self.instance.encode()

        async def renew(s: str, rev: int) -> tuple[str, int | None]:
            try:
                return s, await kv.update(_key(s), me, last=rev)
            except KeyWrongLastSequenceError:
                return s, None

        for s, rev in await _bounded([renew(s, r) for s, r in self.mine.items()]):
            if rev is None:
                log.warning("collector %s: lost %s to another collector", self.instance, s)
                self.mine.pop(s, None)
                self.lost += 1
                if self._lost_c is not None:
                    self._lost_c.inc()
            else:
                self.mine[s] = rev
        self._renewed = sent

    async def _claim(self, kv: KeyValue, switch: str, me: bytes, abandoned_rev: int | None = None) -> None:
        """Create the switch's key, or take it over from a holder that stopped renewing (`abandoned_rev`: the
        revision it left, seen a TTL ago); either fails if another collector got there first."""
        from nats.js.errors import KeyWrongLastSequenceError

        if abandoned_rev is not None:
            try:
                self.mine[switch] = await kv.update(_key(switch), me, last=abandoned_rev)
            except KeyWrongLastSequenceError:
                pass  # renewed after all, taken by another, or expired by the bus (then created below)
            else:
                log.info("collector %s: took over %s (its holder stopped renewing)", self.instance, switch)
                return
        try:
            self.mine[switch] = await kv.create(_key(switch), me)
        except KeyWrongLastSequenceError:
            return  # another collector was faster
        log.info("collector %s: streams %s now", self.instance, switch)

    async def _give_back(self, kv: KeyValue, switch: str) -> None:
        rev = self.mine.pop(switch)
        with contextlib.suppress(Exception):
            await kv.delete(_key(switch), last=rev)

    async def _release_all(self, kv: KeyValue) -> None:
        """On a clean stop, hand the switches over at once instead of after a TTL."""
        await _bounded([self._give_back(kv, s) for s in list(self.mine)])


async def held_keys(js: JetStreamContext) -> set[str] | None:
    """The lease keys (`lease_key`) some collector holds now; None before any collector made the bucket."""
    from nats.js.errors import BucketNotFoundError

    try:
        kv = await js.key_value(SWITCHES)
    except BucketNotFoundError:
        return None
    return set(await _keys(js, kv))


async def holders(nc: NATS) -> dict[str, str]:
    """Which collector streams which switch now: {switch key: collector} from the lease bucket ({} before any)."""
    from nats.js.errors import BucketNotFoundError

    js = nc.jetstream()
    try:
        kv = await js.key_value(SWITCHES)
    except BucketNotFoundError:
        return {}
    out = {}
    for k in await _keys(js, kv):
        with contextlib.suppress(Exception):  # expired between listing and reading
            out[k] = ((await kv.get(k)).value or b"").decode()
    return out


T = TypeVar("T")


async def _bounded(calls: Sequence[Awaitable[T]], limit: int = LEASE_CALLS) -> list[T]:
    """Await `calls` with at most `limit` in flight; results in order; the first error is raised."""
    gate = asyncio.Semaphore(limit)

    async def one(call: Awaitable[T]) -> T:
        async with gate:
            return await call

    return list(await asyncio.gather(*(one(c) for c in calls)))


async def _bucket(js: JetStreamContext, name: str, ttl: float) -> KeyValue:
    from fabricd.bus import kv_bucket

    return await kv_bucket(js, name, ttl)


KEYS_INACTIVE_S = 2.0  # should deleting a listing's consumer fail, the server drops it after this long


@contextlib.asynccontextmanager
async def _watching(js: JetStreamContext, kv: KeyValue, **kwargs: Any) -> AsyncIterator[Any]:
    """A watch on the bucket whose consumer is gone when it ends. nats-py's watchers leave their ephemeral consumer
    on the server for 5 minutes: a listing per lease round, ~0.6/s per collector, reached nats-server's
    1,000-consumer limit, after which every lease round failed (`maximum consumers limit reached`). This deletes
    the consumer as the watch ends, and asks the server to drop it after KEYS_INACTIVE_S should the delete not
    arrive (a collector killed -9)."""
    watcher = await kv.watchall(inactive_threshold=KEYS_INACTIVE_S, **kwargs)
    sub: Any = watcher._sub  # the ordered consumer's subscription: nats-py exposes no other handle on it
    try:
        yield watcher
    finally:
        name = stream = None
        with contextlib.suppress(Exception):
            info = await sub.consumer_info()
            name, stream = info.name, info.stream_name
        await watcher.stop()  # type: ignore[no-untyped-call]  # nats-py leaves it unannotated
        if name and stream:
            with contextlib.suppress(Exception):  # gone already (inactive), or the bus went away
                await js.delete_consumer(stream, name)


async def _keys(js: JetStreamContext, kv: KeyValue) -> list[str]:
    """The bucket's live keys, listed once."""
    keys: list[str] = []
    async with _watching(js, kv, ignore_deletes=True, meta_only=True) as watcher:
        async for entry in watcher:
            if entry is None:  # the end of what the bucket holds now
                break
            keys.append(entry.key)
    return keys


async def _feed(js: JetStreamContext, kv: KeyValue, view: LeaseView, ready: asyncio.Event) -> None:
    """Keep `view` up to date from a watch on `kv` until cancelled; `ready` once the bucket's current keys are in."""
    async with _watching(js, kv, meta_only=True) as watcher:
        async for entry in watcher:
            if entry is None:
                ready.set()
            else:
                view.saw(entry.key, entry.revision, op_of(entry.operation), time.monotonic())


class _Watches:
    """A collector's two watches (its switch leases' bucket, the members' bucket), restarted when one ends (the
    bus went away) or goes quiet: the member bucket gets our own renewal every third of a TTL, the switch bucket
    too while we hold any, so a watch silent for a TTL is broken whatever the others do."""

    def __init__(self, js: JetStreamContext, held: tuple[KeyValue, LeaseView], alive: tuple[KeyValue, LeaseView]):
        self.js, self.held, self.alive = js, held, alive
        self.tasks: list[asyncio.Task[None]] = []
        self.readies: list[asyncio.Event] = []
        self.started = float("-inf")

    def keep(self, now: float, ttl: float, holding: bool) -> None:
        if self.tasks and now - self.started < ttl / 3:
            return  # just (re)started: give it a round trip
        broken = not self.tasks or any(t.done() for t in self.tasks)
        quiet = now - self.started > ttl and (
            not self.alive[1].fresh(now, ttl) or (holding and not self.held[1].fresh(now, ttl))
        )
        if not (broken or quiet):
            return
        for t in self.tasks:
            t.cancel()
        self.readies = [asyncio.Event(), asyncio.Event()]
        self.tasks = [
            asyncio.create_task(_feed(self.js, kv, view, ready), name=f"watch {view_name}")
            for (kv, view), ready, view_name in zip(
                (self.held, self.alive), self.readies, ("leases", "members"), strict=True
            )
        ]
        self.started = now

    def ready(self) -> bool:
        """Both watches have delivered what their bucket held when they started."""
        return bool(self.readies) and all(r.is_set() for r in self.readies)

    async def close(self) -> None:
        for t in self.tasks:
            t.cancel()
        await asyncio.gather(*self.tasks, return_exceptions=True)
