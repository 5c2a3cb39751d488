"""Live gNMI telemetry: one grpc.aio channel and one Subscribe STREAM per device, feeding the Ingestor.

Responses stay raw bytes (no response deserializer): `Ingestor.ingest` walks the wire format itself, so the
client only peeks at the first byte (sync_response) and, about once per message burst, at the notification
timestamp (lag). Everything runs on one asyncio loop with the Ingestor (which is not thread-safe).

Per device: TLS with certificate verification unless the inventory says `tls: false`; username/password sent as
gRPC metadata (as EOS expects) and never logged; on any end of the stream, a reconnect after an exponential
backoff with full jitter (delay uniform in [0, min(cap, base * 2**attempt)]) capped at one interval (a switch that
comes back after refusing for minutes is retried within one interval, not after a backoff grown in its absence) and
started over once a stream has been healthy (synced and up for `healthy_s`) or once a connect is accepted after
refused ones. A failure is logged at WARNING when its status differs from the
device's previous one and at DEBUG when it repeats, so a wrong password or a dead switch costs one line, not one
per retry. The store's last-seen timestamps say which devices are stale (nothing for 3 intervals); a stream that
delivers nothing for `idle_s` (default 6 intervals: a device that is merely late is reported stale before its stream
is torn down) is cancelled and re-opened, since a hung TCP connection never ends with an error.

First connects are staggered: device k of n opens its channel after a jittered delay in the k-th of n equal slots
of `connect_spread_s` (default 4 ms per device, at most 2 s), so 512 switches do not all start a TLS handshake in
the same instant. Lag is observed once per device and half-second window as the worst lag of the messages in it:
the last notification of a SAMPLE burst is the one that completes it, and the first one would flatter.

Sample phases are spread: a switch starts its SAMPLE timer when the subscription arrives (EOS, the twin), so
devices subscribed together burst together, every interval, and the last update of such a fabric-wide burst waits
for the whole burst to be decoded (lag p99 ~ burst / throughput: ~250 ms for 100k updates in one process).
Each device therefore gets a phase slot in the interval (k-th of n equal slots, jittered, dealt in random order)
and sends its SAMPLE subscription at the next instant of its slot (monotonic clock mod interval), after the
ON_CHANGE one, which goes at once; a reconnect keeps the slot. So that a device's first counters do not wait up to an
interval for its slot (a collector taking over a dead one's switches, a restart, a reconnect), a connection whose slot
is more than a quarter interval away first asks for the same paths once (a ONCE Subscribe call on the same channel:
the current values and its end; its sync_response is not the stream's): the data is there at once, the phase kept.
`spread_samples=False` subscribes at once.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import grpc
from pygnmi.spec.v080 import gnmi_pb2
from typing_extensions import TypedDict

from drivers.base import DriverError
from drivers.inventory import DeviceAccess
from fabricd.backoff import Backoff

from .channel import (
    SUBSCRIBE,
    SYNC_TAG,
    RequestCache,
    connect_delays,
    first_ended,
    open_channel,
    split_calls,
    write_unless_ended,
)
from .ingest import Ingestor
from .metrics import TelemetryMetrics
from .paths import Subscription, subscribe_request
from .platforms import JSON_IETF_ONLY, REJECTS, Plan, narrow, plans, profiles, refuses_encoding

LOST = "LOST"  # pseudo status: the call failed but gRPC lost the device's status (see _stream)
CONNECT_SPREAD_PER_DEVICE_S = 0.004  # TLS handshakes cost ~1-3 ms of CPU on either side
CONNECT_SPREAD_MAX_S = 2.0
HINTS = {
    "UNAUTHENTICATED": "; check the inventory's username and password_env/password_file for this device",
    "PERMISSION_DENIED": "; the inventory's user may not subscribe on this device",
    "UNAVAILABLE": "; is gNMI enabled and reachable at the inventory's host and gnmi port?",
    "INVALID_ARGUMENT": "; the device rejects the subscription profile (paths or intervals)",
    "UNIMPLEMENTED": "; the device does not serve gNMI Subscribe with PROTO encoding",
}


@dataclass(frozen=True)
class DeviceState:
    """What the client knows about one device's stream (for status pages and tests)."""

    device: str
    connected: bool
    synced: bool
    attempts: int
    last_error: str | None  # gRPC status name of the last failure, None after a successful stream
    rejected: tuple[tuple[str, str], ...] = ()  # (subscription path, "STATUS: detail") the device refused


class StreamOptions(TypedDict, total=False):
    """How a TelemetryClient streams, as TelemetryWorkers hands it to each worker's client (the client's keyword
    arguments of the same names)."""

    profile: Mapping[str, Sequence[Subscription]] | None
    interval_s: float
    heartbeat_s: float | None
    backoff_base_s: float
    backoff_cap_s: float | None
    healthy_s: float | None
    idle_s: float | None
    connect_spread_s: float | None
    spread_samples: bool


@dataclass(eq=False)
class _Device:
    access: DeviceAccess
    plan: Plan  # what the platform profile subscribes on this device's release
    groups: tuple[tuple[Subscription, ...], ...]  # one Subscribe call each; (): no profile
    requests: tuple[bytes, ...]  # the groups serialized
    sampled: tuple[bool, ...]  # per request: holds SAMPLE subscriptions (sent in the device's phase slot)
    backoff: Backoff
    dev_id: int
    rejected: dict[str, str] = field(default_factory=dict)  # subscription path -> "STATUS: detail"
    refused_before: dict[str, str] = field(default_factory=dict)  # what it refused before it last went away
    json_ietf: bool = False  # the device refused PROTO: its subscriptions ask for JSON_IETF
    rejection: tuple[int, str, str] | None = None  # (group, status, detail) of the call the device just refused
    synced: asyncio.Event = field(default_factory=asyncio.Event)
    calls: list[Any] = field(default_factory=list)  # the Subscribe calls of the current connection
    unsynced: int = 0  # calls of the current connection that have not sent their sync_response yet
    connected: bool = False
    attempts: int = 0
    messages: int = 0  # bumped per message; the watchdog compares it to see progress
    watch_messages: int = -1
    watch_since: float = 0.0
    cancel_reason: str | None = None
    last_error: str | None = None
    lag_next: int = 0
    refused: int = 0  # attempts in a row that ended before the device synced
    lag_worst: int | None = None  # worst lag (ns) in the current sampling window
    first_delay: float = 0.0  # before the first connect (see connect_delays)
    phase_ns: int | None = None  # SAMPLE subscriptions go at monotonic ns = phase mod interval; None: at once
    children: tuple[Any, Any, Any] | None = None  # (connected gauge, reconnects counter, last-lag gauge)
    owned: asyncio.Event = field(default_factory=asyncio.Event)  # this client streams it (see set_owned)
    warm: Any = None  # a channel opened while another collector streams it (`warm_standby`), for its next stream


RELEASED = "released"  # the cancel reason of a stream whose device another collector now owns


class TelemetryClient:
    """Streams every device in `inventory_devices` into `ingestor` until `stop()`.

    `profile` maps a platform name to its subscriptions (default: `platforms.profiles(interval_s)`, EOS: ON_CHANGE
    oper/admin status, counters SAMPLEd every `interval_s`, PFC and watchdog for the lossless priorities only);
    devices of other platforms are reported once and left stale. `interval_s` is also the staleness unit: a device
    is stale once nothing arrived for 3 intervals. `clock` gives unix ns (lag, staleness); `rng` seeds the jitter.
    `connect_spread_s` is the window first connects are spread over (None: 4 ms per device, at most 2 s; 0: all at
    once). `on_lag(device, seconds)` also receives every lag observation (telemetry workers ship them to the parent).
    `spread_samples` sends each device's SAMPLE subscription in its own slot of the interval (module docstring).
    """

    def __init__(
        self,
        inventory_devices: Sequence[DeviceAccess],
        ingestor: Ingestor,
        *,
        profile: Mapping[str, Sequence[Subscription]] | None = None,
        interval_s: float = 10.0,
        heartbeat_s: float | None = None,
        metrics: TelemetryMetrics | None = None,
        clock: Callable[[], int] = time.time_ns,
        backoff_base_s: float = 0.5,
        backoff_cap_s: float | None = None,
        healthy_s: float | None = None,
        idle_s: float | None = None,
        rng: random.Random | None = None,
        flush_s: float = 1.0,
        connect_spread_s: float | None = None,
        spread_samples: bool = True,
        on_lag: Callable[[str, float], None] | None = None,
        log: logging.Logger | None = None,
        owned: Sequence[str] | None = None,
        warm_standby: bool = False,
    ) -> None:
        """`owned`: the devices to stream now (None: every one); `set_owned` changes it while running (a collector
        streams the switches it holds a lease on). `warm_standby`: keep a connected channel (no call on it) to every
        device not owned, so that a stream taken over begins with its calls, not with the connection (a collector
        taking over a dead one's switches, dozens at once: the TCP, HTTP/2 and TLS handshakes out of the way)."""
        if backoff_cap_s is None:  # retried within one interval of coming back (never more than 30 s)
            backoff_cap_s = max(backoff_base_s, min(30.0, interval_s))
        if interval_s <= 0 or backoff_base_s <= 0 or backoff_cap_s < backoff_base_s:
            raise ValueError("interval_s and backoff_base_s must be > 0 and backoff_cap_s >= backoff_base_s")
        self.ingestor = ingestor
        self.store = ingestor.store
        self.warm_standby = warm_standby
        self.interval_ns = int(interval_s * 1e9)
        self.metrics = metrics
        self.clock = clock
        self.log = log or logging.getLogger("fabricd.telemetry.client")
        self.healthy_s = 3 * interval_s if healthy_s is None else healthy_s
        self.idle_s = 6 * interval_s if idle_s is None else idle_s
        self.flush_s = flush_s
        self.on_lag = on_lag
        self._lag_every_ns = int(min(interval_s / 2, 1.0) * 1e9)
        rng = rng or random.Random()
        self.profiles = profiles(interval_s) if profile is None else dict(profile)
        self.heartbeat_ns = int(heartbeat_s * 1e9) if heartbeat_s else 0
        self._requests = RequestCache(self.heartbeat_ns)  # shared by devices alike
        device_plans = plans(((a.name, a.platform, a.os_version) for a in inventory_devices), self.profiles)
        self._devices: dict[str, _Device] = {}
        for access in inventory_devices:
            p = device_plans[access.name]
            d = _Device(
                access,
                p,
                (),
                (),
                (),
                Backoff(backoff_base_s, backoff_cap_s, rng=rng),
                self.store.device_id(access.name),  # interned now: stats rows and staleness from the start
                json_ietf=access.platform in JSON_IETF_ONLY,
            )
            self._regroup(d, split_calls(p.subscriptions))
            self._devices[access.name] = d
        for name, d in self._devices.items():
            if owned is None or name in owned:
                d.owned.set()
        streamed = [d for d in self._devices.values() if d.requests]
        if connect_spread_s is None:
            connect_spread_s = min(CONNECT_SPREAD_MAX_S, CONNECT_SPREAD_PER_DEVICE_S * len(streamed))
        self.connect_spread_s = connect_spread_s
        for d, delay in zip(streamed, connect_delays(len(streamed), connect_spread_s, rng), strict=True):
            d.first_delay = delay
        if spread_samples:
            for d, phase in zip(streamed, connect_delays(len(streamed), interval_s, rng), strict=True):
                d.phase_ns = int(phase * 1e9)
        if metrics is not None:
            metrics.bind(self.store, list(self._devices), lambda: self.stale_devices())
            for d in self._devices.values():
                n = d.access.name
                d.children = (metrics.connected.labels(n), metrics.reconnects.labels(n), metrics.last_lag.labels(n))
        self._closing = asyncio.Event()
        self._done = asyncio.Event()
        self._running = False

    # --- queries -----------------------------------------------------------------------------------------
    @property
    def devices(self) -> list[str]:
        return list(self._devices)

    def stale_devices(self, now: int | None = None) -> list[str]:
        """Devices nothing (update, heartbeat) arrived from for 3 intervals before `now` (unix ns), or ever."""
        t = self.clock() if now is None else now
        return [name for name in self._devices if self.store.stale(name, t, self.interval_ns)]

    @property
    def synced(self) -> dict[str, bool]:
        """Per device: has its current stream delivered the initial sync_response?"""
        return {name: d.synced.is_set() for name, d in self._devices.items()}

    async def wait_synced(self, timeout_s: float | None = None) -> bool:
        """Wait until every streamable device's current stream has synced; False on timeout."""
        waits = [d.synced.wait() for d in self._devices.values() if d.requests]
        try:
            await asyncio.wait_for(asyncio.gather(*waits), timeout_s)
        except TimeoutError:
            return False
        return True

    def state(self, device: str) -> DeviceState:
        d = self._devices[device]
        rejected = tuple(sorted(d.rejected.items()))
        return DeviceState(device, d.connected, d.synced.is_set(), d.attempts, d.last_error, rejected)

    def plan(self, device: str) -> Plan:
        """What the platform profile subscribes on this device's release (before any rejection)."""
        return self._devices[device].plan

    # --- subscription groups -------------------------------------------------------------------------------
    def _regroup(self, d: _Device, groups: Sequence[tuple[Subscription, ...]]) -> None:
        d.groups = tuple(groups)
        d.requests = tuple(self._request(g, d.json_ietf) for g in d.groups)
        d.sampled = tuple(any(s.mode != "on_change" for s in g) for g in d.groups)

    def _request(self, group: tuple[Subscription, ...], json_ietf: bool) -> bytes:
        return self._requests.get(group, json_ietf)

    def _narrow(self, d: _Device, index: int, code: str, detail: str) -> bool:
        """The device refused Subscribe call `index` (`code`, `detail`): subscribe the rest without what it refused
        (platforms.narrow). A refusal of the PROTO encoding switches the device to JSON_IETF (which gNMI targets must
        support for JSON-modelled data; the ingestor reads both). False when narrowing would leave nothing: then the
        profile as a whole is refused, and the device is retried with all of it, after a backoff, like any other
        failure."""
        if not d.json_ietf and refuses_encoding(code, detail):
            d.json_ietf = True
            self._regroup(d, d.groups)
            self.log.warning(
                "telemetry from %s: the switch refuses PROTO encoding (%s: %s); subscribing with JSON_IETF",
                d.access.name,
                code,
                self._redact(d, detail),
            )
            return True
        instead, given_up = narrow(d.groups[index], self._redact(d, detail))
        groups = [*d.groups[:index], *instead, *d.groups[index + 1 :]]
        if not any(groups):
            return False
        self._regroup(d, groups)
        name = d.access.name
        for s in given_up:
            why = f"{code}: {self._redact(d, detail)}"
            d.rejected[s.path] = why
            again = d.refused_before.get(s.path) == why  # named when it first refused it, not on every reconnect
            self.log.log(
                logging.DEBUG if again else logging.WARNING,
                "telemetry from %s: the switch rejects %s (%s: %s); streaming the rest without it",
                name,
                s.path,
                code,
                self._redact(d, detail),
            )
        if not given_up:
            self.log.debug("telemetry from %s: %s names no path; splitting the subscription to find it", name, code)
        return True

    # --- lifecycle ---------------------------------------------------------------------------------------
    async def run(self) -> None:
        """Stream until `stop()` (or until cancelled); one device's failures never affect another's stream.
        A client runs once: after `stop()` (even a `stop()` that came before `run()` started) it returns at once."""
        if self._running:
            raise RuntimeError("TelemetryClient.run() is already running")
        self._running = True
        for d in self._devices.values():
            if not d.requests:
                self.log.warning(
                    "telemetry: %s is platform %r, which has no subscription profile; it stays stale",
                    d.access.name,
                    d.access.platform,
                )
        self._log_skipped()
        tasks = [asyncio.create_task(self._device_loop(d)) for d in self._devices.values() if d.requests]
        tasks.append(asyncio.create_task(self._housekeeping()))
        try:
            await asyncio.gather(*tasks)
        finally:
            self._closing.set()
            for d in self._devices.values():
                for call in d.calls:
                    call.cancel()
            for t in tasks:
                t.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            for d in self._devices.values():
                if d.warm is not None:
                    channel, d.warm = d.warm, None
                    with contextlib.suppress(Exception):
                        await channel.close()
            self.ingestor.flush()
            self._running = False
            self._done.set()

    async def stop(self) -> None:
        """End every stream and wait for `run()` to return."""
        self._closing.set()
        for d in self._devices.values():
            if d.calls:
                d.cancel_reason = "stop"
            for call in d.calls:
                call.cancel()
        if self._running:
            await self._done.wait()

    def set_owned(self, names: Sequence[str] | set[str]) -> None:
        """Stream exactly these devices from now on: a device dropped from the set has its stream ended at once
        (another collector streams it now), one added connects at once."""
        wanted = set(names)
        for name, d in self._devices.items():
            if name in wanted:
                d.owned.set()
            elif d.owned.is_set():
                d.owned.clear()
                d.synced.clear()
                if d.calls:
                    d.cancel_reason = RELEASED
                    for call in d.calls:
                        call.cancel()

    def owned(self) -> list[str]:
        return [name for name, d in self._devices.items() if d.owned.is_set()]

    def _log_skipped(self) -> None:
        """Once per run and per left-out path: which switches' release does not serve it (one line, not one per
        switch)."""
        by_path: dict[tuple[str, str], list[str]] = {}
        for name, d in self._devices.items():
            for path, why in d.plan.skipped:
                by_path.setdefault((path, why), []).append(name)
        for (path, why), names in sorted(by_path.items()):
            shown = ", ".join(names[:5]) + (f" and {len(names) - 5} more" if len(names) > 5 else "")
            self.log.info("telemetry: not subscribing to %s on %s: %s", path, shown, why)

    # --- per device --------------------------------------------------------------------------------------
    async def _device_loop(self, d: _Device) -> None:
        name = d.access.name
        if d.first_delay > 0:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._closing.wait(), d.first_delay)
        while not self._closing.is_set():
            if not d.owned.is_set():
                if self.warm_standby and d.warm is None:
                    d.warm = open_channel(d.access)
                    d.warm.get_state(try_to_connect=True)  # connects now; no call is made on it until ours
                closing = asyncio.ensure_future(self._closing.wait())
                owned = asyncio.ensure_future(d.owned.wait())
                try:
                    await asyncio.wait([closing, owned], return_when=asyncio.FIRST_COMPLETED)
                finally:
                    closing.cancel()
                    owned.cancel()
                continue
            if d.attempts and d.children is not None:
                d.children[1].inc()
            d.attempts += 1
            started = time.monotonic()
            d.cancel_reason = None
            d.rejection = None
            try:
                code, detail = await self._stream(d)
            except Exception as e:  # a bug in one device's handling must not stop the others
                code, detail = "INTERNAL", f"{type(e).__name__} in the telemetry client"
                self.log.exception("telemetry from %s: unexpected error; reconnecting", name)
            finally:
                self._set_connected(d, False)
            if self._closing.is_set():
                return
            if code == "CANCELLED" and detail == RELEASED:
                continue  # not a failure: wait until it is ours again
            if d.rejection is not None and self._narrow(d, *d.rejection):
                continue  # subscribe again at once, without what the switch refused
            if code == "UNAVAILABLE" and d.rejected:
                # The switch went away (a reboot, an upgrade): the release it comes back with may serve what this
                # one refused, so the next connect asks for the whole plan again (and narrows again if refused).
                d.refused_before.update(d.rejected)
                d.rejected.clear()
                self._regroup(d, split_calls(d.plan.subscriptions))
            if d.synced.is_set() and (time.monotonic() - started >= self.healthy_s or d.refused):
                d.backoff.reset()  # healthy for a while, or accepted after refusals: the switch is back
            d.refused = 0 if d.synced.is_set() else d.refused + 1
            d.synced.clear()
            delay = d.backoff.next()
            # Repeats are DEBUG; so is a lost status, which the next attempt (within the backoff) will name.
            level = logging.DEBUG if code in (d.last_error, LOST) else logging.WARNING
            if self.log.isEnabledFor(level):
                self.log.log(
                    level,
                    "telemetry from %s: stream ended (%s: %s)%s; reconnecting in %.1f s%s",
                    name,
                    code,
                    self._redact(d, detail),
                    HINTS.get(code, ""),
                    delay,
                    " (repeats of this failure are logged at DEBUG)" if level == logging.WARNING else "",
                )
            if code != LOST:
                d.last_error = code
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._closing.wait(), delay)

    async def _stream(self, d: _Device) -> tuple[str, str]:
        """One connection: a Subscribe call per request on one channel; returns (status name, detail) when the
        first of them ends (the others are cancelled with it, and the whole connection is made again)."""
        access = d.access
        assert d.requests
        store = self.store
        warm, d.warm = d.warm, None  # a channel connected while another collector streamed it (warm_standby)
        async with warm or open_channel(access) as channel:
            metadata = (("username", access.username), ("password", access.password.get_secret_value()))
            calls = [
                channel.stream_stream(SUBSCRIBE, request_serializer=None, response_deserializer=None)(metadata=metadata)
                for _ in d.requests
            ]
            d.calls, d.unsynced = calls, len(calls)
            d.watch_since, d.watch_messages = time.monotonic(), -1
            store.set_synced(d.dev_id, False)  # this stream's sync is still to come
            readers: list[asyncio.Task[None]] = []
            primers = self._prime(d, channel, metadata)
            try:
                for call, request, sampled in zip(calls, d.requests, d.sampled, strict=True):
                    if sampled and d.phase_ns is not None and not await self._until_phase(d, readers):
                        break  # the connection ended (or stop) while waiting: the readers below say how
                    # The request side stays open (no done_writing): many gNMI targets take the client's half-close
                    # as the end of a STREAM subscription; pygnmi and gnmic keep it open too.
                    try:
                        await write_unless_ended(call, request)
                    except asyncio.InvalidStateError:
                        pass  # the call already ended: reading raises its status
                    except grpc.aio.AioRpcError as e:
                        if e.code() == grpc.StatusCode.INTERNAL:
                            # A server that rejects the call as soon as it sees the headers (auth, gNMI blocked)
                            # races this write; when the write loses, grpc.aio replaces the server's status with
                            # INTERNAL.
                            return LOST, "the device ended the call before the subscription was sent"
                        raise
                    readers.append(asyncio.create_task(self._read(d, call, len(readers))))
                if not readers:
                    return "CANCELLED", d.cancel_reason or "stop"
                done, _ = await asyncio.wait(readers, return_when=asyncio.FIRST_COMPLETED)
                for t in done:
                    t.result()  # the status of the call that ended first
                return "OK", "the server ended the stream"
            except grpc.aio.AioRpcError as e:
                return e.code().name, str(e.details() or "")
            except asyncio.CancelledError:
                reason = d.cancel_reason
                task = asyncio.current_task()
                if reason is None or (task is not None and task.cancelling()):
                    raise  # our own task is being cancelled, not just the call
                return "CANCELLED", reason
            finally:
                for call in calls:
                    call.cancel()
                for t in [*readers, *primers]:
                    t.cancel()
                await asyncio.gather(*readers, *primers, return_exceptions=True)
                d.calls = []
                # The stream is over: what it said stands until the next one's sync, but is no longer live (a
                # switch restarting shows nothing of its restart here; the guard must not judge on its old word).
                store.set_synced(d.dev_id, False)

    def _prime(self, d: _Device, channel: Any, metadata: tuple[tuple[str, str], ...]) -> list[asyncio.Task[None]]:
        """When the device's phase slot is more than a quarter interval away, a ONCE call per SAMPLE group for the
        current values now (module docstring); none otherwise, or with spread_samples off."""
        if d.phase_ns is None:
            return []
        wait_ns = (d.phase_ns - time.monotonic_ns()) % self.interval_ns
        if wait_ns <= self.interval_ns // 4:
            return []
        out = []
        for group, sampled in zip(d.groups, d.sampled, strict=True):
            if sampled:
                call = channel.stream_stream(SUBSCRIBE, request_serializer=None, response_deserializer=None)(
                    metadata=metadata
                )
                out.append(asyncio.create_task(self._read_once(d, call, self._requests.once(group, d.json_ietf))))
        return out

    async def _read_once(self, d: _Device, call: Any, request: bytes) -> None:
        """One ONCE call: its updates into the store as any; its sync_response and its end are not the stream's (the
        stream syncs by its own calls). A device that refuses ONCE, or a call that fails, costs nothing but the
        wait for the phase, as before."""
        ingest, name, clock = self.ingestor.ingest, d.access.name, self.clock
        try:
            await write_unless_ended(call, request)
            async for raw in call:
                if raw and raw[0] == SYNC_TAG:
                    break  # everything was sent; the server ends the call
                ingest(raw, name, clock())
                d.messages += 1
        except (grpc.aio.AioRpcError, asyncio.InvalidStateError):
            pass  # the stream's own calls meet the same failure and say it (once, with what to check)
        finally:
            call.cancel()

    async def _until_phase(self, d: _Device, readers: list[asyncio.Task[None]]) -> bool:
        """Wait for the device's next phase instant; False if the connection ended first (a call or reader done,
        or the client stopping)."""
        assert d.phase_ns is not None
        delay = ((d.phase_ns - time.monotonic_ns()) % self.interval_ns) / 1e9
        ended = first_ended(d.calls)
        closing = asyncio.ensure_future(self._closing.wait())
        waits: list[asyncio.Future[Any]] = [ended, closing, *readers]
        try:
            done, _ = await asyncio.wait(waits, timeout=delay, return_when=asyncio.FIRST_COMPLETED)
        finally:
            closing.cancel()
            ended.cancel()
        return not done

    async def _read(self, d: _Device, call: Any, index: int) -> None:
        ingestor, name, clock = self.ingestor, d.access.name, self.clock
        ingest = ingestor.ingest
        # An ON_CHANGE call's message (an oper-status change) goes into the store at once, not with the next batch:
        # the store wakes whoever waits for events (the service's pass loop, a worker's shipping).
        urgent = not d.sampled[index]
        got = 0
        try:
            async for raw in call:
                got += 1
                now = clock()
                ingest(raw, name, now)
                if urgent:
                    ingestor.flush()
                d.messages += 1
                ts = ingestor.last_ts  # of this message's notification; 0 if it had none
                if ts and (d.lag_worst is None or now - ts > d.lag_worst):
                    d.lag_worst = now - ts
                if now >= d.lag_next:
                    self._sample(d, now)
                if raw and raw[0] == SYNC_TAG:
                    d.unsynced -= 1
                    if d.unsynced > 0:
                        continue  # synced once every call of the connection has sent its initial state
                    d.synced.set()
                    if d.last_error is not None:
                        self.log.info("telemetry from %s: streaming again (attempt %d)", name, d.attempts)
                    d.last_error = None
        except grpc.aio.AioRpcError as e:
            # Refused before it sent anything: the switch rejects what this call subscribes (a path, a mode).
            if not got and e.code().name in REJECTS and d.rejection is None:
                d.rejection = (index, e.code().name, str(e.details() or ""))
            raise

    def _sample(self, d: _Device, now: int) -> None:
        """Lag (receive time - notification time), observed at most once per `_lag_every_ns` per device as the worst
        of the window's notifications (with SAMPLE bursts every interval: about one observation per burst, for the
        message that completed it). The first message of a stream (lag_next is 0 then) also marks it connected."""
        if not d.connected:
            self._set_connected(d, True)
        if d.lag_worst is None:
            return
        d.lag_next = now + self._lag_every_ns
        lag = d.lag_worst / 1e9
        d.lag_worst = None
        if self.metrics is not None and d.children is not None:
            self.metrics.lag.observe(max(lag, 0.0))
            d.children[2].set(lag)
        if self.on_lag is not None:
            self.on_lag(d.access.name, lag)

    def _set_connected(self, d: _Device, up: bool) -> None:
        d.connected = up
        if d.children is not None:
            d.children[0].set(1 if up else 0)
        if not up:
            d.lag_next = 0  # the first message of the next stream marks it connected
            d.lag_worst = None

    @staticmethod
    def _redact(d: _Device, text: str) -> str:
        """Status details come from the device; never let one echo the password into our logs."""
        secret = d.access.password.get_secret_value()
        return text.replace(secret, "***") if secret else text

    # --- background ----------------------------------------------------------------------------------------
    async def _housekeeping(self) -> None:
        """Flush the ingestor (so store stats and metrics stay current at low rates) and cancel idle streams."""
        idle_s = self.idle_s
        tick = max(0.01, min(self.flush_s, idle_s / 6))
        while not self._closing.is_set():
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._closing.wait(), tick)
            self.ingestor.flush()
            mono = time.monotonic()
            for d in self._devices.values():
                if not d.calls:
                    continue
                if d.messages != d.watch_messages:
                    d.watch_messages, d.watch_since = d.messages, mono
                elif mono - d.watch_since > idle_s:
                    d.cancel_reason = f"nothing received for {idle_s:g} s"
                    for call in d.calls:
                        call.cancel()


# --- the post-commit check ---------------------------------------------------------------------------------
OPER_STATUS = Subscription("/interfaces/interface[name=*]/state/oper-status", "on_change")


async def subscribe_once(access: DeviceAccess, subs: Sequence[Subscription], timeout_s: float) -> int:
    """One ONCE Subscribe on a channel like the streams' (TLS, options, credentials): the number of updates before
    sync_response. Raises DriverError when the switch does not answer with a complete dump in time."""
    where = f"gNMI at {access.host}:{access.gnmi.port}"
    metadata = (("username", access.username), ("password", access.password.get_secret_value()))
    request = subscribe_request(subs, once=True).SerializeToString()
    updates = 0
    try:
        async with open_channel(access) as channel:
            call = channel.stream_stream(SUBSCRIBE, response_deserializer=gnmi_pb2.SubscribeResponse.FromString)
            async for response in call(iter([request]), metadata=metadata, timeout=timeout_s):
                if response.sync_response:
                    return updates
                updates += len(response.update.update)
    except grpc.aio.AioRpcError as e:
        raise DriverError(access.name, f"{where} does not stream ({e.code().name})") from None
    raise DriverError(access.name, f"{where} ended the stream before sync_response")


def gnmi_streams(access: DeviceAccess, timeout_s: float = 5.0) -> int:
    """The post-commit check (rollouts; a config change must not cut telemetry): every port's oper-status, ONCE,
    until sync_response: proof that telemetry flows, not just that the gRPC server accepts calls. Called from worker
    threads, which have no event loop of their own."""
    return asyncio.run(subscribe_once(access, [OPER_STATUS], timeout_s))
