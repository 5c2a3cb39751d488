"""gNMI plumbing of the telemetry client: channels as the inventory asks, one Subscribe call per group of
subscriptions and its serialized request, and what the client peeks at on the wire (sync, notification time).
The client (`client.py`) owns the per-device loop; everything here is stateless or a cache."""

from __future__ import annotations

import asyncio
import random
from collections.abc import Sequence
from typing import Any

import grpc
from pygnmi.spec.v080 import gnmi_pb2

from drivers.inventory import DeviceAccess

from .paths import Subscription, subscribe_request

SUBSCRIBE = "/gnmi.gNMI/Subscribe"
MAX_MESSAGE = 64 << 20  # a full-device initial dump in JSON can exceed gRPC's 4 MiB default
SYNC_TAG = 0x18  # SubscribeResponse field 3 (sync_response), varint


def connect_delays(n: int, spread_s: float, rng: random.Random) -> list[float]:
    """First-connect delays for `n` devices: one per equal slot of `spread_s`, jittered inside its slot, the slots
    dealt in random order (stratified, so no two devices crowd together as independent uniform draws would)."""
    if n <= 0:
        return []
    slot = spread_s / n
    order = list(range(n))
    rng.shuffle(order)
    return [slot * (k + rng.random()) for k in order]


def split_calls(subs: Sequence[Subscription]) -> list[tuple[Subscription, ...]]:
    """One Subscribe call per (ON_CHANGE or not, prefix target): HTTP/2 flow control is per stream, so an oper-status
    change never waits behind a SAMPLE burst of thousands of counters still being read; and a call has one prefix,
    so one target (SONiC: one database)."""
    calls: dict[tuple[bool, str], list[Subscription]] = {}
    for s in subs:
        calls.setdefault((s.mode != "on_change", s.target), []).append(s)
    return [tuple(group) for _, group in sorted(calls.items(), key=lambda kv: kv[0])]


def channel_options(access: DeviceAccess) -> list[tuple[str, Any]]:
    """The options of every gNMI channel fabricd opens (streams and the post-commit check alike)."""
    opts: list[tuple[str, Any]] = [("grpc.max_receive_message_length", MAX_MESSAGE), ("grpc.enable_retries", 0)]
    if access.gnmi.tls and access.gnmi.skip_verify:
        # The certificate must still chain to the CA; only the name check is made against the inventory host.
        opts.append(("grpc.ssl_target_name_override", access.host))
    return opts


def open_channel(access: DeviceAccess) -> grpc.aio.Channel:
    """A grpc.aio channel as the inventory asks: TLS with verification by default, plaintext only if `tls: false`."""
    target = f"{access.host}:{access.gnmi.port}"
    opts = channel_options(access)
    if not access.gnmi.tls:
        return grpc.aio.insecure_channel(target, options=opts)
    root = access.gnmi.ca_file.read_bytes() if access.gnmi.ca_file else None
    return grpc.aio.secure_channel(target, grpc.ssl_channel_credentials(root_certificates=root), options=opts)


def first_ended(calls: Sequence[Any]) -> asyncio.Future[None]:
    """A future done when the first of `calls` ends (cancel it once no longer waited on)."""
    ended: asyncio.Future[None] = asyncio.get_running_loop().create_future()

    def on_done(_: object) -> None:
        if not ended.done():
            ended.set_result(None)

    for call in calls:
        call.add_done_callback(on_done)
    return ended


async def write_unless_ended(call: Any, request: bytes) -> None:
    """`call.write(request)`, but returning when the call ends first. grpc.aio's write waits for the call's headers
    to be sent, and a call cancelled before that (a device that accepts TCP and never completes the HTTP/2
    handshake, cancelled as idle or by `stop()`) never sends them: the plain write would wait forever."""
    ended = first_ended([call])
    write = asyncio.ensure_future(call.write(request))
    try:
        await asyncio.wait((write, ended), return_when=asyncio.FIRST_COMPLETED)
    finally:
        if not write.done():
            write.cancel()
            await asyncio.gather(write, return_exceptions=True)
        elif not write.cancelled():
            # Retrieved here: should this wait itself be cancelled as the write fails (the stream reconnecting, the
            # client stopping), its error would otherwise be logged as never retrieved, with a traceback.
            write.exception()
        ended.cancel()
    if write.done() and not write.cancelled():
        write.result()  # its error, if any


def notification_ts(raw: bytes) -> int | None:
    """The timestamp of a serialized SubscribeResponse's notification (field 1 of the Notification, written first
    by every protobuf serializer), or None if the message is something else."""
    try:
        if raw[0] != 0x0A:
            return None
        pos = 1
        while raw[pos] & 0x80:  # skip the notification's length
            pos += 1
        pos += 1
        if raw[pos] != 0x08:
            return None
        pos += 1
        ts = shift = 0
        while True:
            c = raw[pos]
            ts |= (c & 0x7F) << shift
            if c < 0x80:
                return ts
            pos += 1
            shift += 7
            if shift > 63:
                return None
    except IndexError:
        return None


class RequestCache:
    """Serialized SubscribeRequests per (group of subscriptions, JSON_IETF or not), built once for every device that
    asks the same; with `heartbeat_ns`, ON_CHANGE subscriptions ask for heartbeats that often (collectors)."""

    def __init__(self, heartbeat_ns: int = 0) -> None:
        self.heartbeat_ns = heartbeat_ns
        self._serialized: dict[tuple[tuple[Subscription, ...], bool], bytes] = {}
        self._once: dict[tuple[tuple[Subscription, ...], bool], bytes] = {}

    def once(self, group: tuple[Subscription, ...], json_ietf: bool) -> bytes:
        """A ONCE SubscribeRequest for the group's paths: the current values at once, a sync_response, the end."""
        key = (group, json_ietf)
        raw = self._once.get(key)
        if raw is None:
            req = subscribe_request(group, target=group[0].target, once=True, json_ietf=json_ietf)
            raw = self._once[key] = req.SerializeToString()
        return raw

    def get(self, group: tuple[Subscription, ...], json_ietf: bool) -> bytes:
        raw = self._serialized.get((group, json_ietf))
        if raw is None:
            req = subscribe_request(group, target=group[0].target, json_ietf=json_ietf)
            if self.heartbeat_ns:
                for sub in req.subscribe.subscription:
                    if sub.mode == gnmi_pb2.ON_CHANGE:
                        sub.heartbeat_interval = self.heartbeat_ns
            raw = self._serialized[(group, json_ietf)] = req.SerializeToString()
        return raw
