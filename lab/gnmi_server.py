"""The twin's gNMI servers (grpc.aio): one insecure server per switch address, all in one asyncio loop.

A device is known by the address the client reached (per-device servers, ~0.6 ms each to start), so the
client may leave the target empty. Responses are written as protobuf bytes by `gnmi_paths` (the handlers
use an identity serializer); requests are parsed by the generated stubs.

Behaviour follows the gNMI 0.8 spec and what EOS does: SAMPLE / ON_CHANGE / TARGET_DEFINED subscriptions,
ONCE and POLL, sync_response after the first full update, heartbeats for ON_CHANGE, target echo in every
prefix, and the status codes a client must handle (UNAUTHENTICATED, INVALID_ARGUMENT, NOT_FOUND,
UNAVAILABLE when a stream drop fault hits, UNIMPLEMENTED for Set).
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import threading
from collections.abc import AsyncIterator, Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

import grpc
import numpy as np
from pygnmi.spec.v080 import gnmi_pb2

from . import gnmi_paths as gp
from . import sonic_gnmi
from .counters import COL
from .endpoints import Credentials, DeviceEndpoints
from .eos_releases import served_codes
from .model import Switch, Twin
from .sonic_config import sonic_port

GNMI_VERSION = "0.8.0"
MIN_INTERVAL_NS = 100_000_000  # a sample or heartbeat interval below this is refused (INVALID_ARGUMENT)
DEFAULT_SAMPLE_NS = 1_000_000_000  # sample_interval 0
CHANGE_POLL_NS = 1_000_000_000  # ON_CHANGE leaves without a twin listener are compared this often
TICK_S = 0.05  # how often the hub advances the twin and looks for stream drops
ADMIN_POLL_S = 0.5  # admin-status has no twin listener; streams compare it this often
ENCODINGS = {0: "JSON", 2: "PROTO", 4: "JSON_IETF"}
MODELS = (
    ("openconfig-interfaces", "OpenConfig working group", "3.0.0"),
    ("openconfig-if-ethernet", "OpenConfig working group", "2.13.0"),
    ("openconfig-qos", "OpenConfig working group", "0.11.2"),
    ("openconfig-platform", "OpenConfig working group", "0.24.0"),
    ("openconfig-lldp", "OpenConfig working group", "0.2.1"),
    ("arista-intf-augments", "Arista Networks, Inc.", "1.11.0"),
    ("arista-pfc-augments", "Arista Networks, Inc.", "1.0.0"),
)
OPER_CODE = next(leaf.code for leaf in gp.CATALOG if leaf.kind == "oper-status")
ADMIN_CODE = next(leaf.code for leaf in gp.CATALOG if leaf.kind == "admin-status")


class RpcError(Exception):
    """Ends an RPC with a gRPC status; raised by request parsing, turned into context.abort by handlers."""

    def __init__(self, code: grpc.StatusCode, message: str):
        super().__init__(message)
        self.code = code


@dataclass
class Hub:
    """State shared by every device server: the twin clock, open streams, the oper-status listener."""

    twin: Twin
    credentials: Credentials
    loop: asyncio.AbstractEventLoop
    streams: dict[str, set[Watcher]] = field(default_factory=dict)
    prefixes: dict[str, gp.Prefixes] = field(default_factory=dict)
    thread: int = 0
    _task: asyncio.Task[None] | None = None

    def prefix_cache(self, sw: Switch) -> gp.Prefixes:
        p = self.prefixes.get(sw.name)
        if p is None:
            p = self.prefixes[sw.name] = gp.Prefixes(sw, gp.addresses(self.twin, sw))
        return p

    def on_oper(self, device: str, port: str, up: bool, ts_ns: int) -> None:
        """Twin listener for oper-status changes."""
        if device in self.streams:
            self._on_loop(self._dispatch, device, port, up, ts_ns)

    def on_counter(self, device: str, port: str, column: str, ts_ns: int) -> None:
        """Twin listener for counters that move on an event (a watchdog's declaration): ON_CHANGE sends them now."""
        if device in self.streams:
            self._on_loop(self._dispatch_counter, device, port, column, ts_ns)

    def _on_loop(self, fn: Callable[..., None], *args: object) -> None:
        """The twin may be advanced from another thread (tests): hop onto the loop the streams live on."""
        if threading.get_ident() == self.thread:
            fn(*args)
        else:
            self.loop.call_soon_threadsafe(fn, *args)

    def _dispatch_counter(self, device: str, port: str, column: str, ts_ns: int) -> None:
        sw = self.twin.switches[device]
        code = gp.CODE_OF_COLUMN.get(COL[column])
        if code is None:
            return
        for stream in self.streams.get(device, ()):
            # (kind, port row, time, detail): a counter event's detail is the code of its leaf
            stream.events.put_nowait(("counter", sw.index[port], ts_ns, str(code)))

    def _dispatch(self, device: str, port: str, up: bool, ts_ns: int) -> None:
        sw = self.twin.switches[device]
        for stream in self.streams.get(device, ()):
            # The new state travels with the event: by the time the stream encodes it, the port may have changed
            # again (a flap shorter than a busy loop's turn), and ON_CHANGE must still say DOWN, then UP.
            stream.events.put_nowait(("state", sw.index[port], ts_ns, "UP" if up else "DOWN"))

    def start(self) -> None:
        self.thread = threading.get_ident()
        self.twin.listeners.append(self.on_oper)
        self.twin.counter_listeners.append(self.on_counter)
        self._task = self.loop.create_task(self._tick())

    async def close(self) -> None:
        with contextlib.suppress(ValueError):
            self.twin.listeners.remove(self.on_oper)
        with contextlib.suppress(ValueError):
            self.twin.counter_listeners.remove(self.on_counter)
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task

    async def _tick(self) -> None:
        last_admin = 0.0
        while True:
            await asyncio.sleep(self._until_due())
            self.twin.advance()
            now = self.loop.time()
            poll_admin = now - last_admin >= ADMIN_POLL_S
            if poll_admin:
                last_admin = now
            for device, streams in self.streams.items():
                sw = self.twin.switches[device]
                for stream in streams:
                    if sw.stream_epoch != stream.epoch:
                        stream.events.put_nowait(("drop", 0, 0, None))
                    elif poll_admin and stream.admin_rows is not None:
                        stream.check_admin()

    def _until_due(self) -> float:
        """Seconds until the hub next advances the twin: TICK_S, or sooner when a scheduled change (a flap's edge, a
        watchdog's timer) is due: a switch sends its ON_CHANGE event when the port changes, not at a later tick."""
        due = self.twin.next_timer()
        if due is None:
            return TICK_S
        return min(TICK_S, max(0.0, (due - self.twin.clock()) / 1e9))

    def register(self, stream: Watcher) -> None:
        self.streams.setdefault(stream.sw.name, set()).add(stream)

    def unregister(self, stream: Watcher) -> None:
        streams = self.streams.get(stream.sw.name)
        if streams is not None:
            streams.discard(stream)
            if not streams:
                del self.streams[stream.sw.name]


@dataclass
class Request:
    """A validated SubscriptionList: sample plans by interval, and the leaves watched for changes."""

    mode: int  # 0 STREAM, 1 ONCE, 2 POLL
    target: str
    updates_only: bool
    json_ietf: bool
    sampled: dict[int, gp.Plan]  # interval ns -> plan
    watched: gp.Plan | None  # ON_CHANGE state leaves
    watched_keys: frozenset[tuple[int, int]]  # (row, code) of `watched`
    heartbeat_ns: int
    # ON_CHANGE leaves the twin has no listener for (LLDP, BGP, addresses, a counter): compared every CHANGE_POLL_NS,
    # only what changed is sent
    changed: gp.Plan | None = None
    changed_keys: frozenset[tuple[int, int]] = frozenset()  # (row, code) of `changed`

    def all_plans(self) -> list[gp.Plan]:
        return [*self.sampled.values(), *(p for p in (self.watched, self.changed) if p is not None)]


class Watcher:
    """An open Subscribe RPC as the hub feeds it: its events queue (state changes, drops) and the admin-status of the
    ports it watches (`admin_rows`), polled for changes."""

    def __init__(self, hub: Hub, sw: Switch, admin: Iterable[int]):
        self.hub, self.sw = hub, sw
        self.epoch = sw.stream_epoch
        # (kind, row, ts, oper-status at that time for an oper change)
        self.events: asyncio.Queue[tuple[str, int, int, str | None]] = asyncio.Queue()
        rows = sorted(admin)
        self.admin_rows = np.array(rows, dtype=np.int64) if rows else None
        self.admin = self._admin_now()

    def _admin_now(self) -> list[bool]:
        if self.admin_rows is None:
            return []
        return [self.sw.config[r].admin_up for r in self.admin_rows.tolist()]

    def check_admin(self) -> None:
        now = self._admin_now()
        if now != self.admin and self.admin_rows is not None:
            ts = self.hub.twin.clock()
            for row, old, new in zip(self.admin_rows.tolist(), self.admin, now, strict=True):
                if old != new:
                    self.events.put_nowait(("state", row, ts, None))
            self.admin = now


class Stream(Watcher):
    """One open Subscribe RPC of OpenConfig paths."""

    def __init__(self, hub: Hub, sw: Switch, req: Request):
        super().__init__(hub, sw, (row for row, code in req.watched_keys if code == ADMIN_CODE))
        self.req = req


def _metadata(context: grpc.aio.ServicerContext[Any, Any]) -> dict[str, str]:
    out = {}
    for item in context.invocation_metadata() or ():
        key, value = item[0], item[1]
        out[key] = value.decode(errors="replace") if isinstance(value, bytes) else value
    return out


class DeviceService:
    """gNMI for one switch. Handlers never let an exception escape as anything but a gRPC status."""

    def __init__(self, hub: Hub, device: str):
        self.hub = hub
        self.device = device
        self.sw = hub.twin.switches[device]

    # --- common checks ---------------------------------------------------------------------------
    def _auth(self, context: grpc.aio.ServicerContext[Any, Any]) -> None:
        md = _metadata(context)
        if "username" not in md or "password" not in md:
            raise RpcError(grpc.StatusCode.UNAUTHENTICATED, "send 'username' and 'password' metadata")
        if not self.hub.credentials.check(md["username"], md["password"]):
            raise RpcError(grpc.StatusCode.UNAUTHENTICATED, "authentication failed: wrong username or password")

    def _db(self, prefix: Any) -> str | None:
        """The database a SONiC switch's request names in its prefix target (sonic_gnmi.py), else None."""
        target = str(prefix.target)
        return target if self.sw.platform == "sonic" and target in sonic_gnmi.TARGETS else None

    def _target(self, prefix: Any) -> str:
        target = str(prefix.target)
        if target not in ("", self.device):
            raise RpcError(grpc.StatusCode.NOT_FOUND, f"target {target!r} is not this switch ({self.device})")
        return target

    def _select(self, prefix_elems: list[gp.Elem], path: Any) -> tuple[np.ndarray, np.ndarray]:
        self._target(path)  # the spec puts the target in the prefix; a wrong one anywhere still is not us
        try:
            elems = prefix_elems + gp.path_elems(path)
            matches = gp.match(elems)
            routed = self.hub.prefix_cache(self.sw).routed
            if self.sw.platform != "eos":
                return gp.select(self.sw, matches, routed)
            served = served_codes(self.sw.os_version)
            if matches and not any(code in served for code, _ in matches):
                # a path of the schema this release does not have: the whole request is refused
                raise gp.PathNotFound(f"path {gp.elems_text(elems)} is not supported")
            return gp.select(self.sw, [(code, port) for code, port in matches if code in served], routed)
        except gp.PathError as exc:
            raise RpcError(grpc.StatusCode.INVALID_ARGUMENT, str(exc)) from None
        except gp.PathNotFound as exc:
            raise RpcError(grpc.StatusCode.NOT_FOUND, str(exc)) from None

    def _plan(self, rows: np.ndarray, codes: np.ndarray, target: str) -> gp.Plan:
        rows, codes = gp.sort_unique(rows, codes)
        return gp.Plan(self.hub.twin, self.sw, rows, codes, self.hub.prefix_cache(self.sw), target)

    @staticmethod
    def _prefix_elems(prefix: Any) -> list[gp.Elem]:
        try:
            return gp.path_elems(prefix, "prefix")
        except gp.PathError as exc:
            raise RpcError(grpc.StatusCode.INVALID_ARGUMENT, str(exc)) from None

    # --- RPCs ------------------------------------------------------------------------------------
    async def capabilities(self, request: Any, context: grpc.aio.ServicerContext[Any, Any]) -> Any:
        try:
            self._auth(context)
        except RpcError as exc:
            await context.abort(exc.code, str(exc))
        return gnmi_pb2.CapabilityResponse(
            supported_models=[gnmi_pb2.ModelData(name=n, organization=o, version=v) for n, o, v in MODELS],
            supported_encodings=list(ENCODINGS),
            gNMI_version=GNMI_VERSION,
        )

    async def get(self, request: Any, context: grpc.aio.ServicerContext[Any, Any]) -> bytes:
        try:
            self._auth(context)
            return self._get(request)
        except RpcError as exc:
            await context.abort(exc.code, str(exc))
            raise AssertionError("unreachable") from exc

    def _get(self, request: Any) -> bytes:
        encoding = int(request.encoding)
        if encoding not in ENCODINGS:
            raise RpcError(
                grpc.StatusCode.UNIMPLEMENTED, f"encoding {encoding} is not supported; use JSON, PROTO or JSON_IETF"
            )
        if (db := self._db(request.prefix)) is not None:
            now = self.hub.twin.advance()
            if encoding not in (0, 4):
                raise RpcError(grpc.StatusCode.UNIMPLEMENTED, f"unsupported encoding: {ENCODINGS[encoding]}")
            rows = [r for p in request.path for r in self._db_rows(db, request.prefix, p, now)]
            # A SubscribeResponse holding a notification is field 1, as a GetResponse's notifications are.
            return b"".join(sonic_gnmi.notifications(db, rows, now))
        target = self._target(request.prefix)
        prefix = self._prefix_elems(request.prefix)
        if int(request.type) == 1:  # CONFIG: the twin serves state leaves only
            return b""
        paths = list(request.path) or [gnmi_pb2.Path()]
        selected = [self._select(prefix, p) for p in paths]
        plan = self._plan(np.concatenate([r for r, _ in selected]), np.concatenate([c for _, c in selected]), target)
        now = self.hub.twin.advance()
        return b"".join(plan.sample(now, json_ietf=encoding == 4))

    async def set(self, request: Any, context: grpc.aio.ServicerContext[Any, Any]) -> Any:
        try:
            self._auth(context)
        except RpcError as exc:
            await context.abort(exc.code, str(exc))
        await context.abort(grpc.StatusCode.UNIMPLEMENTED, "the twin's gNMI is read-only; configure through eAPI")

    async def subscribe(
        self, requests: AsyncIterator[Any], context: grpc.aio.ServicerContext[Any, Any]
    ) -> AsyncIterator[bytes]:
        stream: Stream | None = None
        try:
            self._auth(context)
            if self.hub.twin.clock() < self.sw.gnmi_blocked_until:
                raise RpcError(grpc.StatusCode.UNAVAILABLE, f"{self.device}: gNMI is not accepting subscriptions")
            it = requests.__aiter__()
            try:
                first = await it.__anext__()
            except StopAsyncIteration:
                return
            if first.WhichOneof("request") != "subscribe":
                raise RpcError(
                    grpc.StatusCode.INVALID_ARGUMENT, "the first SubscribeRequest must be a subscription list"
                )
            if (db := self._db(first.subscribe.prefix)) is not None:
                async for msg in self._db_subscribe(db, first.subscribe):
                    yield msg
                return
            req = self._request(first.subscribe)
            stream = Stream(self.hub, self.sw, req)
            self.hub.register(stream)
            if req.mode == 1:
                for msg in self._full(req):
                    yield msg
                yield gp.SYNC_RESPONSE
            elif req.mode == 2:
                async for msg in self._poll(req, it):
                    yield msg
            else:
                async for msg in self._stream(stream):
                    yield msg
        except RpcError as exc:
            await context.abort(exc.code, str(exc))
        finally:
            if stream is not None:
                self.hub.unregister(stream)

    # --- SONiC's DB paths (sonic_gnmi.py) ---------------------------------------------------------
    def _db_rows(self, db: str, prefix: Any, path: Any, now: int) -> list[sonic_gnmi.Row]:
        elems = [str(e.name) for e in prefix.elem] + [str(e.name) for e in path.elem]
        try:
            return sonic_gnmi.rows(self.hub.twin, self.sw, db, elems, now)
        except sonic_gnmi.DbPathError as exc:
            raise RpcError(grpc.StatusCode.NOT_FOUND, str(exc)) from None

    async def _db_subscribe(self, db: str, sl: Any) -> AsyncIterator[bytes]:
        """ONCE, or STREAM with SAMPLE per path and ON_CHANGE for PORT_TABLE rows (oper and admin status)."""
        encoding, mode = int(sl.encoding), int(sl.mode)
        if encoding not in (0, 4):
            raise RpcError(grpc.StatusCode.UNIMPLEMENTED, f"unsupported encoding: {ENCODINGS.get(encoding, encoding)}")
        if mode not in (0, 1):
            raise RpcError(grpc.StatusCode.UNIMPLEMENTED, f"subscription list mode {mode} is not supported for {db}")
        if not sl.subscription:
            raise RpcError(grpc.StatusCode.INVALID_ARGUMENT, "the subscription list has no subscription")
        now = self.hub.twin.advance()
        sampled: dict[int, list[Any]] = {}
        watched: set[int] = set()
        changing: list[Any] = []  # ON_CHANGE tables without a twin listener (NEIGH_STATE, LLDP_ENTRY): compared
        for sub in sl.subscription:
            selected = self._db_rows(db, sl.prefix, sub.path, now)
            interval = int(sub.sample_interval)
            if 0 < interval < MIN_INTERVAL_NS:
                raise RpcError(grpc.StatusCode.INVALID_ARGUMENT, f"sample_interval {interval} ns is below the minimum")
            table = [str(e.name) for e in sub.path.elem][:1]
            if int(sub.mode) == 1 and table in ([sonic_gnmi.NEIGH], [sonic_gnmi.LLDP]):
                changing.append(sub.path)
            elif int(sub.mode) == 1 and db == "APPL_DB":
                names = [path[1] for path, _ in selected]
                watched |= {i for i, p in enumerate(self.sw.ports) if sonic_port(p) in names}
            else:
                sampled.setdefault(interval or DEFAULT_SAMPLE_NS, []).append(sub.path)
        full = [r for sub in sl.subscription for r in self._db_rows(db, sl.prefix, sub.path, now)]
        if mode == 1 or not sl.updates_only:
            for msg in sonic_gnmi.notifications(db, full, now):
                yield msg
        yield gp.SYNC_RESPONSE
        if mode == 1:
            return
        watcher = Watcher(self.hub, self.sw, watched)
        self.hub.register(watcher)
        # sonic-gnmi streams a table's ON_CHANGE from redis' keyspace events: a row when it is written, a delete
        # when it goes (bgpmon clears the table at a reboot); the twin compares them every CHANGE_POLL_NS
        last = {tuple(p): r for p, r in full if p[:1] in ([sonic_gnmi.NEIGH], [sonic_gnmi.LLDP])}
        try:
            loop = asyncio.get_running_loop()
            start = loop.time()
            due = {i: start + i / 1e9 for i in sampled}
            if changing:
                due[-1] = start + CHANGE_POLL_NS / 1e9
            while True:
                wake = min(due.values(), default=start + 3600)
                try:
                    kind, row, ts, oper = await asyncio.wait_for(watcher.events.get(), max(0.0, wake - loop.time()))
                except TimeoutError:
                    kind, row, ts, oper = "", 0, 0, None
                if kind == "drop":
                    raise RpcError(grpc.StatusCode.UNAVAILABLE, f"{self.device}: gNMI stream dropped")
                if kind == "state" and row in watched:
                    entry = sonic_gnmi.port_table(self.sw, row)
                    if oper is not None:  # the state at the time of the change (see Hub._dispatch)
                        entry["oper_status"] = oper.lower()
                    path = ["PORT_TABLE", sonic_port(self.sw.ports[row])]
                    for msg in sonic_gnmi.notifications(db, [(path, entry)], ts):
                        yield msg
                t = loop.time()
                for interval, at in due.items():
                    if interval == -1 and t >= at:
                        now = self.hub.twin.advance()
                        rows = [r for p in changing for r in self._db_rows(db, sl.prefix, p, now)]
                        for msg in _table_changes(db, last, rows, now):
                            yield msg
                        due[-1] = t + CHANGE_POLL_NS / 1e9
                    elif t >= at:
                        now = self.hub.twin.advance()
                        rows = [r for p in sampled[interval] for r in self._db_rows(db, sl.prefix, p, now)]
                        for msg in sonic_gnmi.notifications(db, rows, now):
                            yield msg
                        step = interval / 1e9
                        due[interval] = at + step * max(1, int((loop.time() - at) // step) + 1)
        finally:
            self.hub.unregister(watcher)

    # --- subscription internals --------------------------------------------------------------------
    def _request(self, sl: Any) -> Request:
        mode = int(sl.mode)
        if mode not in (0, 1, 2):
            raise RpcError(grpc.StatusCode.INVALID_ARGUMENT, f"unknown subscription list mode {mode}")
        encoding = int(sl.encoding)
        if encoding not in ENCODINGS:
            raise RpcError(
                grpc.StatusCode.UNIMPLEMENTED, f"encoding {encoding} is not supported; use JSON, PROTO or JSON_IETF"
            )
        if sl.use_aliases:
            raise RpcError(grpc.StatusCode.UNIMPLEMENTED, "aliases are not supported")
        if not sl.subscription:
            raise RpcError(grpc.StatusCode.INVALID_ARGUMENT, "the subscription list has no subscription")
        target = self._target(sl.prefix)
        prefix = self._prefix_elems(sl.prefix)
        sampled: dict[int, tuple[list[np.ndarray], list[np.ndarray]]] = {}
        watched: tuple[list[np.ndarray], list[np.ndarray]] = ([], [])
        changed: tuple[list[np.ndarray], list[np.ndarray]] = ([], [])
        heartbeat = 0
        for sub in sl.subscription:
            rows, codes = self._select(prefix, sub.path)
            smode, interval, hb = int(sub.mode), int(sub.sample_interval), int(sub.heartbeat_interval)
            if smode not in (0, 1, 2):
                raise RpcError(grpc.StatusCode.INVALID_ARGUMENT, f"unknown subscription mode {smode}")
            for name, value in (("sample_interval", interval), ("heartbeat_interval", hb)):
                if 0 < value < MIN_INTERVAL_NS:
                    raise RpcError(
                        grpc.StatusCode.INVALID_ARGUMENT,
                        f"{name} {value} ns is below the minimum {MIN_INTERVAL_NS} ns",
                    )
            if mode != 0:  # ONCE/POLL: the per-subscription mode does not apply
                smode = 2
            state = np.isin(codes, list(gp.ON_CHANGE_CODES))
            # TARGET_DEFINED: state leaves on change, counters sampled (what EOS does).
            watch = state if smode in (0, 1) else np.zeros(len(codes), dtype=bool)
            interval = interval or DEFAULT_SAMPLE_NS
            if (watch.any() or (smode == 1 and len(codes))) and hb:
                heartbeat = min(heartbeat, hb) if heartbeat else hb
            if watch.any():
                watched[0].append(rows[watch])
                watched[1].append(codes[watch])
            if smode == 1:  # ON_CHANGE on the other leaves: sent when they change, not sampled
                changed[0].append(rows[~watch])
                changed[1].append(codes[~watch])
            elif (~watch).any():
                bucket = sampled.setdefault(interval, ([], []))
                bucket[0].append(rows[~watch])
                bucket[1].append(codes[~watch])
        watched_plan = None
        keys: frozenset[tuple[int, int]] = frozenset()
        if watched[0]:
            w_rows, w_codes = np.concatenate(watched[0]), np.concatenate(watched[1])
            watched_plan = self._plan(w_rows, w_codes, target)
            keys = frozenset(zip(watched_plan.rows.tolist(), watched_plan.codes.tolist(), strict=True))
        changed_plan = None
        if changed[0] and sum(map(len, changed[0])):
            changed_plan = self._plan(np.concatenate(changed[0]), np.concatenate(changed[1]), target)
        return Request(
            mode=mode,
            target=target,
            updates_only=bool(sl.updates_only),
            json_ietf=encoding == 4,
            sampled={i: self._plan(np.concatenate(r), np.concatenate(c), target) for i, (r, c) in sampled.items()},
            watched=watched_plan,
            watched_keys=keys,
            heartbeat_ns=heartbeat,
            changed=changed_plan,
            changed_keys=frozenset()
            if changed_plan is None
            else frozenset(zip(changed_plan.rows.tolist(), changed_plan.codes.tolist(), strict=True)),
        )

    def _full(self, req: Request, sent: dict[int, bytes] | None = None) -> list[bytes]:
        """Every leaf's value now. `sent`: what a stream's ON_CHANGE compare starts from; the changed leaves' groups
        go out through it, so it holds what was sent (one encoding, not a second pass to fill it)."""
        now = self.hub.twin.advance()
        out = []
        for plan in req.all_plans():
            if sent is not None and plan is req.changed:
                out += plan.changes(now, req.json_ietf, sent)
            else:
                out += plan.sample(now, req.json_ietf)
        return out

    async def _poll(self, req: Request, it: AsyncIterator[Any]) -> AsyncIterator[bytes]:
        for msg in self._full(req):
            yield msg
        yield gp.SYNC_RESPONSE
        async for r in it:
            if r.WhichOneof("request") != "poll":
                raise RpcError(grpc.StatusCode.INVALID_ARGUMENT, "a POLL subscription accepts only Poll requests")
            for msg in self._full(req):
                yield msg
            yield gp.SYNC_RESPONSE

    async def _stream(self, stream: Stream) -> AsyncIterator[bytes]:
        req, loop = stream.req, asyncio.get_running_loop()
        sent: dict[int, bytes] = {}  # what `changed` last sent, by group
        if not req.updates_only:
            for msg in self._full(req, sent):  # fills `sent` with what it sends
                yield msg
        elif req.changed is not None:  # updates_only: what is there now is what a change is judged against
            req.changed.changes(self.hub.twin.advance(), req.json_ietf, sent)
        yield gp.SYNC_RESPONSE
        start = loop.time()
        due = {i: start + i / 1e9 for i in req.sampled}
        hb_s = req.heartbeat_ns / 1e9
        next_hb = start + hb_s if hb_s and (req.watched or req.changed) else float("inf")
        next_change = start + CHANGE_POLL_NS / 1e9 if req.changed is not None else float("inf")
        while True:
            wake = min([*due.values(), next_hb, next_change])
            try:
                kind, row, ts, oper = await asyncio.wait_for(stream.events.get(), max(0.0, wake - loop.time()))
            except TimeoutError:
                kind, row, ts, oper = "", 0, 0, None
            if kind == "drop":
                raise RpcError(grpc.StatusCode.UNAVAILABLE, f"{self.device}: gNMI stream dropped")
            if kind == "state":
                for msg in self._state_change(stream, row, ts, oper):
                    yield msg
            elif kind == "counter" and req.changed is not None and (row, int(oper or -1)) in req.changed_keys:
                # compared now, at the event's time: the counter's group goes out (and whatever else changed), and
                # is not sent again, unchanged, by the next compare (a resend would read as "no new declaration")
                for msg in req.changed.changes(ts, req.json_ietf, sent):
                    yield msg
            now = loop.time()
            for interval, at in due.items():
                if now >= at:
                    for msg in req.sampled[interval].sample(self.hub.twin.advance(), req.json_ietf):
                        yield msg
                    # A late sample is not made up for: the next one stays on the grid, after now.
                    step = interval / 1e9
                    due[interval] = at + step * max(1, int((loop.time() - at) // step) + 1)
            if now >= next_change and req.changed is not None:
                for msg in req.changed.changes(self.hub.twin.advance(), req.json_ietf, sent):
                    yield msg
                next_change = now + CHANGE_POLL_NS / 1e9
            if now >= next_hb:
                for plan in (req.watched, req.changed):
                    if plan is not None:
                        for msg in plan.sample(self.hub.twin.advance(), req.json_ietf):
                            yield msg
                next_hb = now + hb_s

    def _state_change(self, stream: Stream, row: int, ts: int, oper: str | None) -> list[bytes]:
        keys = stream.req.watched_keys
        # An oper event (oper given) changed oper-status, an admin event admin-status: only that leaf is sent.
        changed = OPER_CODE if oper is not None else ADMIN_CODE
        codes = [changed] if (row, changed) in keys else []
        if not codes:
            return []
        plan = self._plan(np.full(len(codes), row, dtype=np.int64), np.array(codes, dtype=np.int64), stream.req.target)
        return plan.sample(ts, stream.req.json_ietf, oper=oper)


def _table_changes(db: str, last: dict[tuple[str, ...], Any], rows: list[sonic_gnmi.Row], ts: int) -> list[bytes]:
    """The rows written since `last` (sent whole) and those gone (sent as deletes); `last` becomes `rows`."""
    now = {tuple(p): r for p, r in rows}
    written = [(list(k), r) for k, r in now.items() if last.get(k) != r]
    out = sonic_gnmi.notifications(db, written, ts)
    for key in sorted(last.keys() - now.keys()):
        n = gnmi_pb2.Notification(timestamp=ts)
        n.prefix.target = db
        d = n.delete.add()
        for e in key:
            d.elem.add(name=e)
        out.append(gnmi_pb2.SubscribeResponse(update=n).SerializeToString())
    last.clear()
    last.update(now)
    return out


def _identity(b: bytes) -> bytes:
    return b


def _handlers(svc: DeviceService) -> grpc.GenericRpcHandler:
    def unary(fn: Callable[..., Any], req: Any, out: Callable[[Any], bytes]) -> grpc.RpcMethodHandler:
        return grpc.unary_unary_rpc_method_handler(fn, request_deserializer=req.FromString, response_serializer=out)

    return grpc.method_handlers_generic_handler(
        "gnmi.gNMI",
        {
            "Capabilities": unary(
                svc.capabilities, gnmi_pb2.CapabilityRequest, gnmi_pb2.CapabilityResponse.SerializeToString
            ),
            "Get": unary(svc.get, gnmi_pb2.GetRequest, _identity),
            "Set": unary(svc.set, gnmi_pb2.SetRequest, gnmi_pb2.SetResponse.SerializeToString),
            "Subscribe": grpc.stream_stream_rpc_method_handler(
                svc.subscribe, request_deserializer=gnmi_pb2.SubscribeRequest.FromString, response_serializer=_identity
            ),
        },
    )


@dataclass
class GnmiServers:
    hub: Hub
    servers: dict[str, grpc.aio.Server]
    addresses: dict[str, tuple[str, int]]  # device -> (host, bound port)

    async def close(self) -> None:
        await asyncio.gather(*(s.stop(None) for s in self.servers.values()))
        await self.hub.close()


async def start_gnmi_servers(
    twin: Twin, endpoints: dict[str, DeviceEndpoints], credentials: Credentials
) -> GnmiServers:
    """Start one gNMI server per switch in `endpoints` on the running loop (port 0 picks a free port)."""
    hub = Hub(twin, credentials, asyncio.get_running_loop())
    servers: dict[str, grpc.aio.Server] = {}
    addresses: dict[str, tuple[str, int]] = {}
    result = GnmiServers(hub, servers, addresses)
    try:
        for device, ep in endpoints.items():
            if device not in twin.switches:
                raise KeyError(f"no switch {device!r} in this twin")
            # No SO_REUSEPORT: a second twin on the same address must fail, not share the port.
            server = grpc.aio.server(options=[("grpc.so_reuseport", 0)])
            server.add_generic_rpc_handlers((_handlers(DeviceService(hub, device)),))
            address = f"{ep.host}:{ep.gnmi_port}"
            try:
                port = server.add_insecure_port(address)
            except RuntimeError as exc:
                raise OSError(errno.EADDRINUSE, f"gNMI for {device}: cannot listen on {address} (in use?)") from exc
            if port == 0:
                raise OSError(errno.EADDRINUSE, f"gNMI for {device}: cannot listen on {address} (in use?)")
            servers[device] = server
            addresses[device] = (ep.host, port)
            await server.start()
    except BaseException:
        await result.close()
        raise
    hub.start()
    return result
