"""`telemetry.source: bus`: the service reads the collectors' stream instead of subscribing to the switches.

An ordered push consumer (ephemeral, in order, re-created by the client library on a gap in its own sequence)
reads `fabricd.tm.>` from the oldest message the stream still keeps, so a service that starts (or a standby that
takes over) has every port's state from the collectors' heartbeats within the stream's age. Each message is one
switch's raw SubscribeResponses (`bus_wire.py`), decoded by the same `Ingestor` as a direct subscription, so
detectors cannot tell the difference. A reader slower than the stream's limits loses the oldest messages: the
gap in the stream sequence is counted (`fabricd_bus_lost_messages_total`), as is what still waits
(`fabricd_bus_pending_messages`); neither grows memory here. The service exports the same telemetry metrics as one
that streams itself (stale, synced, connected, updates, lag), derived from what arrives, so the alert rules work in
both modes.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable, Sequence
from typing import TYPE_CHECKING, Any

from prometheus_client import CollectorRegistry, Counter, Gauge

from . import bus_wire
from .channel import SYNC_TAG
from .client import DeviceState
from .ingest import Ingestor
from .metrics import TelemetryMetrics

if TYPE_CHECKING:
    from nats.aio.client import Client as NATS
    from nats.aio.msg import Msg

log = logging.getLogger("fabricd.telemetry.bus")
LAG_EVERY_NS = 500_000_000  # lag observed and sync state judged about twice a second (as the client samples lag)
HELD_EVERY_S = 1.0  # how often the collectors' leases are listed: which switches no collector holds


class BusTelemetry:
    """The TelemetrySource of a service that reads the bus (same queries as TelemetryClient)."""

    def __init__(
        self,
        devices: Sequence[str],
        ingestor: Ingestor,
        connect: Callable[[], Awaitable[NATS]],
        *,
        interval_s: float,
        max_age_s: float,
        max_bytes: int,
        registry: CollectorRegistry | None = None,
        metrics: TelemetryMetrics | None = None,
        clock: Callable[[], int] = time.time_ns,
    ) -> None:
        """`metrics`: the same telemetry metrics a service streaming itself exports (updates, drops, stale, synced,
        connected, lag), here from what arrives on the bus, so the alert rules work in both modes."""
        self._devices = list(devices)
        self._known = set(devices)
        self.ingestor, self.store = ingestor, ingestor.store
        self._connect = connect
        self.interval_ns = int(interval_s * 1e9)
        self.max_age_s, self.max_bytes = max_age_s, max_bytes
        self.clock = clock
        self._synced: dict[str, asyncio.Event] = {d: asyncio.Event() for d in devices}
        for d in devices:
            self.store.device_id(d)
        self._stop = asyncio.Event()
        self._stream_renewed = asyncio.Event()  # the bus lost the stream and it was made anew: subscribe again
        self._last_seq = 0
        self.messages = 0
        self.lost = 0
        self.foreign = 0  # malformed messages (not a telemetry batch)
        self.skipped = 0  # messages of switches this reader does not read (not in its list: another shard's)
        self._pending = 0
        self._caught_up = False  # the reader has read the whole stream once (num_pending reached 0)
        self._lag_worst: dict[str, int] = {}  # per device: worst lag (ns) of the current window
        self._lag_next = 0
        self.metrics = metrics
        if metrics is not None:
            metrics.bind(self.store, self._devices, lambda: self.stale_devices())
        self._lost_c = self._pending_g = self._held_g = None
        # Lease keys some collector holds (collector.py), as last listed; None until listed. A stale switch no
        # collector holds is unserved (start a collector); one a collector holds is silent (the switch or its gNMI).
        self._held: set[str] | None = None
        if registry is not None:
            self._held_g = Gauge("fabricd_bus_switch_held", "1 while a collector holds the switch (its lease on the "
                                 "bus): stale with 0, no collector serves it; stale with 1, its collector gets nothing "
                                 "from it", ["device"], registry=registry)  # fmt: skip
            self._lost_c = Counter("fabricd_bus_lost_messages", "Telemetry batches the stream dropped before this "
                                   "service read them (it fell behind the stream's age or size limit)",
                                   registry=registry)  # fmt: skip
            self._pending_g = Gauge("fabricd_bus_pending_messages", "Telemetry batches on the stream this service "
                                    "has not read yet", registry=registry)  # fmt: skip

    # --- queries (TelemetrySource) ---------------------------------------------------------------------------
    @property
    def devices(self) -> list[str]:
        return list(self._devices)

    @property
    def synced(self) -> dict[str, bool]:
        return {d: e.is_set() for d, e in self._synced.items()}

    def stale_devices(self, now: int | None = None) -> list[str]:
        t = self.clock() if now is None else now
        return [d for d in self._devices if self.store.stale(d, t, self.interval_ns)]

    def unheld_devices(self) -> list[str]:
        """Switches no collector holds (no lease on the bus) as last listed: nobody streams them."""
        from .collector import lease_key

        held = self._held
        return [] if held is None else [d for d in self._devices if lease_key(d) not in held]

    async def wait_synced(self, timeout_s: float | None = None) -> bool:
        try:
            await asyncio.wait_for(asyncio.gather(*(e.wait() for e in self._synced.values())), timeout_s)
        except TimeoutError:
            return False
        return True

    def state(self, device: str) -> DeviceState:
        fresh = not self.store.stale(device, self.clock(), self.interval_ns)
        why = None if fresh else "no collector holds it" if device in self.unheld_devices() else "no data on the bus"
        return DeviceState(device, fresh, self._synced[device].is_set(), 0, why)

    # --- the consumer ----------------------------------------------------------------------------------------
    def _on_message(self, msg: Msg) -> None:
        meta = msg.metadata
        seq = meta.sequence.stream
        if self._last_seq and seq > self._last_seq + 1:
            gap = seq - self._last_seq - 1
            self.lost += gap
            if self._lost_c is not None:
                self._lost_c.inc(gap)
        self._last_seq = seq
        self._pending = meta.num_pending
        self.messages += 1
        try:
            device, responses = bus_wire.unpack(msg.data)
        except bus_wire.WireError:
            self.foreign += 1
            return
        if device not in self._known:
            self.skipped += 1
            return
        now = self.clock()
        ingestor = self.ingestor
        worst = self._lag_worst.get(device)
        for raw in responses:
            ingestor.ingest(raw, device, now)
            ts = ingestor.last_ts
            if ts and (worst is None or now - ts > worst):
                worst = now - ts
            if raw and raw[0] == SYNC_TAG:
                self._synced[device].set()
        if worst is not None:
            self._lag_worst[device] = worst
        if meta.num_pending == 0:
            self._caught_up = True

    async def run(self) -> None:
        """Read until stop(); a lost bus is retried with backoff (the devices go stale meanwhile, as they would
        with a direct subscription that lost its switches)."""
        from fabricd.backoff import Backoff

        backoff = Backoff(0.5, 10.0)
        while not self._stop.is_set():
            try:
                await self._consume()
                backoff.reset()
            except Exception as e:  # noqa: BLE001 - the bus went away: keep trying, never crash the service
                log.warning("telemetry from the bus: %s (%s); retrying", type(e).__name__, str(e)[:200])
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._stop.wait(), backoff.next())
        self.ingestor.flush()

    async def _consume(self) -> None:
        from nats.js.api import DeliverPolicy

        from .collector import ensure_stream, stream_created

        nc = await self._connect()
        try:
            js = nc.jetstream()
            await ensure_stream(js, self.max_age_s, self.max_bytes)
            created = await stream_created(js, self.max_age_s, self.max_bytes)
            self._last_seq = 0  # sequence numbers are the stream's: a stream made anew starts again at 1
            self._stream_renewed.clear()
            sub = await js.subscribe(bus_wire.SUBJECTS, stream=bus_wire.STREAM, ordered_consumer=True,
                                     deliver_policy=DeliverPolicy.ALL, cb=self._async_cb)  # fmt: skip
            leases = asyncio.create_task(self._watch_leases(js), name="bus-leases")
            stream = asyncio.create_task(self._watch_stream(js, created), name="bus-stream")
            try:
                while not self._stop.is_set() and not self._stream_renewed.is_set():
                    with contextlib.suppress(TimeoutError):
                        await asyncio.wait_for(self._stop.wait(), 0.05)
                    self.ingestor.flush()  # the detectors' snapshot sees what arrived
                    if self._pending_g is not None:
                        self._pending_g.set(self._pending)
                    self._health(self.clock())
                    if not nc.is_connected and not nc.is_reconnecting:
                        raise ConnectionError("the bus connection closed")
            finally:
                leases.cancel()
                stream.cancel()
                with contextlib.suppress(Exception):
                    await sub.unsubscribe()
        finally:
            with contextlib.suppress(Exception):
                await nc.close()

    def _health(self, now: int) -> None:
        """Per switch, from what arrives: a reader that has caught up with the stream counts a switch with fresh
        data as synced (the stream holds every port's state: collectors resend ON_CHANGE leaves every half stream
        age, so the sync message of a stream that started before this reader may have aged out); connected while
        data is fresh; the lag (receive time - notification time) observed about twice a second per switch."""
        if now < self._lag_next:
            return
        self._lag_next = now + LAG_EVERY_NS
        stale = set(self.stale_devices(now))
        m = self.metrics
        for d in self._devices:
            fresh = d not in stale
            if fresh and self._caught_up and not self._synced[d].is_set():
                self._synced[d].set()
                self.store.set_synced(self.store.device_id(d), True)
            if m is not None:
                m.connected.labels(d).set(1 if fresh else 0)
        for d, worst in self._lag_worst.items():
            if m is not None:
                m.lag.observe(max(worst / 1e9, 0.0))
                m.last_lag.labels(d).set(worst / 1e9)
        self._lag_worst.clear()

    async def _watch_leases(self, js: Any) -> None:
        """List the collectors' leases every HELD_EVERY_S (unheld_devices, fabricd_bus_switch_held)."""
        from .collector import held_keys, lease_key

        while not self._stop.is_set():
            try:
                self._held = await held_keys(js)
            except Exception as e:  # noqa: BLE001 - the bus went away: the consumer notices and reconnects
                log.debug("listing the collectors' leases: %s", e)
            if self._held_g is not None and self._held is not None:
                for d in self._devices:
                    self._held_g.labels(d).set(1 if lease_key(d) in self._held else 0)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._stop.wait(), HELD_EVERY_S)

    async def _watch_stream(self, js: Any, created: object) -> None:
        """Every STREAM_CHECK_S: the stream this reader subscribed to is still the bus's. One made anew (the bus
        restarted and lost it) sets `_stream_renewed`: the consumer is left and the new stream read from its start;
        the ordered consumer alone would resume at the old stream's next sequence number, not yet reached."""
        from .collector import STREAM_CHECK_S, stream_created

        while not self._stop.is_set():
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._stop.wait(), STREAM_CHECK_S)
            try:
                now = await stream_created(js, self.max_age_s, self.max_bytes)
            except Exception as e:  # noqa: BLE001 - the bus is away: the client reconnects; check again then
                log.debug("checking the telemetry stream: %s", e)
                continue
            if now != created:
                log.warning("telemetry from the bus: the stream was made anew (the bus restarted); reading it "
                            "from its start")  # fmt: skip
                self._stream_renewed.set()
                return

    async def _async_cb(self, msg: Any) -> None:
        self._on_message(msg)

    async def stop(self) -> None:
        self._stop.set()
