"""Benchmark: telemetry worker processes (`--workers N`) and the lag of aligned vs spread sample phases.

The gNMI side is a replay server in its own process that costs almost no CPU, so what is measured is the client:
the twin (bench_telemetry_live.py) spends half a core per 100k updates/s encoding, which on a 2-core machine
leaves too little to show what more client processes do. The replay server speaks HTTP/2 itself (h2) and
pre-serializes each switch's SAMPLE burst once from the twin's own paths and prefixes (the same notifications,
one per interface and tree, ~20 updates each); per sample it patches only timestamps and counter values in place
(counters as fixed 6-byte varints) and writes the burst as a few large DATA frames. A stream that cannot take a
burst (2 bursts already waiting for HTTP/2 flow control) skips it, so a slow client shows as fewer updates.

Sample phase per switch: `aligned`, every switch samples at the same instant on a wall-clock grid (the worst
case: one fabric-wide burst per interval); `spread`, each at its own uniform random offset in the interval (real
switches: each SAMPLE timer starts with its subscription and drifts).

Runs, same 64-switch fabric (98,304 sampled leaves), each client against the same server in the same run:
  1. throughput: ~800k updates/s offered (spread; more than any client here takes, so the server skips bursts
     and every client runs flat out); workers = 1 (TelemetryClient in this process), 2, 4: updates/s that
     reached the store the detectors read, CPU of this process plus its workers, ratio to 1;
  2. lag at ~100k updates/s, aligned and spread, workers = 1 and 2: notification timestamp -> the update is in
     the detectors' store (in process: when the client reads the message, since a snapshot flushes the ingestor;
     with workers: when the parent applies the batch), p50 / p99 / max over every message (in process, ~20
     updates each) or every series update (workers); and the p99 bucket bound of fabricd_telemetry_lag_seconds.
`--runs N` repeats each measurement N times (interleaved) and keeps the best.

    /work/venv/bin/python bench/bench_telemetry_workers.py [--window 8] [--runs 2] [--quick]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import functools
import heapq
import multiprocessing as mp
import os
import platform
import random
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import numpy as np
from bench_telemetry_live import LagIngestor
from h2.config import H2Configuration
from h2.connection import H2Connection
from h2.events import ConnectionTerminated, DataReceived, RequestReceived, StreamEnded, StreamReset, WindowUpdated
from h2.exceptions import ProtocolError
from prometheus_client import CollectorRegistry
from pydantic import SecretStr
from pygnmi.spec.v080 import gnmi_pb2

from drivers.inventory import DeviceAccess, EapiAccess, GnmiAccess, SshAccess
from fabricd.telemetry import CounterStore, Ingestor, Stat, TelemetryClient, TelemetryMetrics, TelemetryWorkers
from fabricd.telemetry.paths import eos_profile
from fabricd.telemetry.series import I64, NEVER
from fabricd.telemetry.workers import SHIP_S
from lab import gnmi_paths as gp
from lab.model import Switch, Twin
from topology.blueprint import generate_blueprint
from topology.fabric import Fabric
from topology.spec import FabricSpec

CREDS = ("admin", "bench-secret")
SIZES = {
    # 32 leaves (8 rails x 4 groups, 16 servers each) + 32 spines = 64 switches
    "64": dict(name="b64", rails=8, aggregation_groups=4, servers_per_group=16, spines_per_rail=4, superspines=0),
    "quick": dict(name="bq", rails=4, aggregation_groups=2, servers_per_group=8, spines_per_rail=2, superspines=0),
}


# --- replay server --------------------------------------------------------------------------------------------
VAL_BYTES = 6  # counter varint width: values stay in [2**35, 2**42)
TS_BYTES = 9  # a unix-ns timestamp (2**56 <= t < 2**63) is always a 9-byte varint
BASE = 1 << 35
SYNC = b"\x00\x00\x00\x00\x02" + gp.SYNC_RESPONSE


def _frame(msg: bytes) -> bytes:
    return b"\x00" + len(msg).to_bytes(4, "big") + msg


@dataclass
class Burst:
    """One switch's SAMPLE burst as gRPC-framed bytes, with where to patch timestamps and counter values."""

    blob: bytearray
    ts_pos: np.ndarray  # start of each message's timestamp varint
    val_pos: np.ndarray  # start of each counter's value varint
    step: np.ndarray  # per counter, the increase per sample
    updates: int
    messages: int
    round: int = 0
    arr: np.ndarray = field(init=False)

    def __post_init__(self) -> None:
        self.arr = np.frombuffer(self.blob, dtype=np.uint8)
        self._ts_idx = (self.ts_pos[:, None] + np.arange(TS_BYTES)).ravel()
        self._val_idx = [self.val_pos + k for k in range(VAL_BYTES)]

    def render(self, now_ns: int) -> bytes:
        self.round += 1
        v = np.uint64(BASE) + self.step * np.uint64(self.round)
        for k, idx in enumerate(self._val_idx):
            byte = (v >> np.uint64(7 * k)) & np.uint64(0x7F)
            self.arr[idx] = byte if k == VAL_BYTES - 1 else byte | np.uint64(0x80)
        ts = gp.varint(now_ns)
        assert len(ts) == TS_BYTES
        self.arr[self._ts_idx] = np.tile(np.frombuffer(ts, dtype=np.uint8), len(self.ts_pos))
        return bytes(self.blob)


def build_burst(twin: Twin, sw: Switch, rng: random.Random) -> tuple[Burst, bytes]:
    """The SAMPLE burst of the EOS profile on `sw`, and its ON_CHANGE state (oper/admin status) as a dump."""
    routed = gp.addresses(twin, sw)
    prefixes = gp.Prefixes(sw, routed)
    rows_l: list[np.ndarray] = []
    codes_l: list[np.ndarray] = []
    state_rows: list[np.ndarray] = []
    state_codes: list[np.ndarray] = []
    for sub in eos_profile():
        rows, codes = gp.select(sw, gp.match(gp.parse_path_string(sub.path)), routed)
        (rows_l if sub.mode == "sample" else state_rows).append(rows)
        (codes_l if sub.mode == "sample" else state_codes).append(codes)
    rows, codes = gp.sort_unique(np.concatenate(rows_l), np.concatenate(codes_l))
    plan = gp.Plan(twin, sw, rows, codes, prefixes, "")
    blob = bytearray()
    ts_pos: list[int] = []
    val_pos: list[int] = []
    updates = 0
    ts0 = gp.varint(time.time_ns())
    for g, (prefix, row, states) in enumerate(plan.groups):
        body = bytearray(b"\x08" + ts0 + prefix)
        local: list[int] = []
        for c in plan.c_codes[plan.c_start[g] : plan.c_start[g + 1]].tolist():
            rel = gp.REL_BYTES[c, : gp.REL_LEN[c]].tobytes()
            inner = rel + b"\x1a" + bytes((1 + VAL_BYTES,)) + b"\x18" + b"\x80" * (VAL_BYTES - 1) + b"\x00"
            head = b"\x22" + gp.varint(len(inner))
            local.append(len(body) + len(head) + len(rel) + 3)
            body += head + inner
            updates += 1
        for code, kind in states:
            v = gp.state_value(twin, sw, row, kind)
            if v is not None:
                body += gp.encode_update(code, v)
                updates += 1
        head = b"\x0a" + gp.varint(len(body))
        start = len(blob) + 5 + len(head)  # gRPC frame header, then the SubscribeResponse header
        ts_pos.append(start + 1)
        val_pos.extend(start + p for p in local)
        blob += _frame(bytes(head + body))
    step = np.array([rng.randrange(0, 1_000_000) for _ in val_pos], dtype=np.uint64)
    burst = Burst(blob, np.array(ts_pos), np.array(val_pos), step, updates, len(ts_pos))
    st_rows, st_codes = gp.sort_unique(np.concatenate(state_rows), np.concatenate(state_codes))
    keep = np.isin(st_codes, list(gp.ON_CHANGE_CODES))
    watched = gp.Plan(twin, sw, st_rows[keep], st_codes[keep], prefixes, "")
    dump = b"".join(_frame(m) for m in watched.sample(time.time_ns()))
    return burst, dump


class _Stream:
    def __init__(self, proto: _Conn, stream_id: int) -> None:
        self.proto, self.id = proto, stream_id
        self.pending: list[memoryview] = []
        self.pending_bytes = 0
        self.request = b""
        self.subscribed = False


class _Conn(asyncio.Protocol):
    def __init__(self, server: ReplayServer, device: str) -> None:
        self.server, self.device = server, device
        self.h2 = H2Connection(H2Configuration(client_side=False, header_encoding="utf-8"))
        self.streams: dict[int, _Stream] = {}
        self.transport: asyncio.Transport | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport
        self.h2.initiate_connection()
        self.h2.update_settings({4: 16 << 20})  # SETTINGS_INITIAL_WINDOW_SIZE: requests are tiny anyway
        transport.write(self.h2.data_to_send())

    def connection_lost(self, exc: Exception | None) -> None:
        for s in self.streams.values():
            self.server.unsubscribe(self.device, s)
        self.streams.clear()

    def data_received(self, data: bytes) -> None:
        try:
            events = self.h2.receive_data(data)
        except ProtocolError:
            if self.transport is not None:
                self.transport.close()
            return
        for ev in events:
            if isinstance(ev, RequestReceived):
                self._request(ev.stream_id, dict(ev.headers or ()))
            elif isinstance(ev, DataReceived):
                self.h2.acknowledge_received_data(ev.flow_controlled_length, ev.stream_id)
                s = self.streams.get(ev.stream_id)
                if s is not None and not s.subscribed:
                    s.request += ev.data
                    if len(s.request) >= 5 and len(s.request) >= 5 + int.from_bytes(s.request[1:5], "big"):
                        s.subscribed = True
                        self.server.subscribe(self.device, s)
            elif isinstance(ev, WindowUpdated):
                for s in list(self.streams.values()) if ev.stream_id == 0 else [self.streams.get(ev.stream_id)]:
                    if s is not None:
                        self.pump(s)
            elif isinstance(ev, StreamReset | StreamEnded):
                s = self.streams.pop(ev.stream_id, None)
                if s is not None:
                    self.server.unsubscribe(self.device, s)
            elif isinstance(ev, ConnectionTerminated) and self.transport is not None:
                self.transport.close()
        self._flush()

    def _request(self, stream_id: int, headers: dict[Any, Any]) -> None:
        ok = headers.get(":path") == "/gnmi.gNMI/Subscribe"
        creds = (headers.get("username"), headers.get("password"))
        if not ok or creds != self.server.credentials:
            status = "12" if not ok else "16"  # UNIMPLEMENTED / UNAUTHENTICATED, as a trailers-only response
            self.h2.send_headers(
                stream_id,
                [(":status", "200"), ("content-type", "application/grpc"), ("grpc-status", status)],
                end_stream=True,
            )
            return
        self.h2.send_headers(stream_id, [(":status", "200"), ("content-type", "application/grpc")])
        self.streams[stream_id] = _Stream(self, stream_id)

    def send(self, s: _Stream, data: bytes) -> bool:
        """Queue `data` on the stream; False (and nothing queued) when the client is that far behind."""
        if s.pending_bytes > self.server.max_pending * len(data):
            return False
        s.pending.append(memoryview(data))
        s.pending_bytes += len(data)
        self.pump(s)
        self._flush()
        return True

    def pump(self, s: _Stream) -> None:
        h2 = self.h2
        while s.pending:
            head = s.pending[0]
            try:
                n = min(h2.local_flow_control_window(s.id), h2.max_outbound_frame_size, len(head))
                if n <= 0:
                    return
                h2.send_data(s.id, head[:n])
            except ProtocolError:  # the client closed the stream
                s.pending.clear()
                s.pending_bytes = 0
                self.streams.pop(s.id, None)
                self.server.unsubscribe(self.device, s)
                return
            s.pending_bytes -= n
            if n == len(head):
                s.pending.pop(0)
            else:
                s.pending[0] = head[n:]

    def _flush(self) -> None:
        out = self.h2.data_to_send()
        if out and self.transport is not None and not self.transport.is_closing():
            self.transport.write(out)


class ReplayServer:
    """One listening socket per switch on 127.0.0.1, all served by one asyncio loop."""

    def __init__(
        self,
        bursts: dict[str, tuple[Burst, bytes]],
        interval_s: float,
        phases: dict[str, float] | None,
        credentials: tuple[str, str],
        max_pending: int = 2,
        clock: Callable[[], int] = time.time_ns,
    ) -> None:
        self.bursts, self.interval_s, self.phases = bursts, interval_s, phases
        self.credentials = credentials
        self.max_pending = max_pending
        self.clock = clock
        self.subs: dict[str, set[_Stream]] = {d: set() for d in bursts}
        self.servers: list[asyncio.AbstractServer] = []
        self.addresses: dict[str, tuple[str, int]] = {}
        self.sent_updates = 0
        self.skipped_updates = 0
        self._task: asyncio.Task[None] | None = None
        self._heap: list[tuple[float, int, str, _Stream | None]] = []
        self._seq = 0
        self._changed = asyncio.Event()

    async def start(self) -> None:
        loop = asyncio.get_running_loop()
        for device in self.bursts:
            server = await loop.create_server(functools.partial(_Conn, self, device), "127.0.0.1", 0)
            self.servers.append(server)
            self.addresses[device] = ("127.0.0.1", server.sockets[0].getsockname()[1])
        self._task = asyncio.create_task(self._schedule())

    async def close(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
        for s in self.servers:
            s.close()

    def subscribe(self, device: str, s: _Stream) -> None:
        """Answer a Subscribe call with what its SubscriptionList asks for, as a target does: the SAMPLE burst (then
        every interval) if it holds SAMPLE subscriptions, the oper-status dump if it holds ON_CHANGE ones. fabricd
        asks in two calls; sending the burst on both (as this server did) doubled the rate the lag runs offered."""
        burst, dump = self.bursts[device]
        msg = s.request[5 : 5 + int.from_bytes(s.request[1:5], "big")]  # gRPC frame: flag, length, message
        modes = {sub.mode for sub in gnmi_pb2.SubscribeRequest.FromString(msg).subscribe.subscription}
        sample = gnmi_pb2.SAMPLE in modes
        s.proto.send(
            s, (burst.render(self.clock()) if sample else b"") + (dump if gnmi_pb2.ON_CHANGE in modes else b"") + SYNC
        )
        if sample:
            self.subs[device].add(s)
            if self.phases is None:  # the stream's own timer, from now
                self._push(time.time() + self.interval_s, device, s)

    def unsubscribe(self, device: str, s: _Stream) -> None:
        self.subs[device].discard(s)

    def _push(self, due: float, device: str, stream: _Stream | None) -> None:
        self._seq += 1
        heapq.heappush(self._heap, (due, self._seq, device, stream))
        self._changed.set()

    async def _schedule(self) -> None:
        """Each switch's next sample on its own grid (wall clock: grid = k * interval + phase), or with `phases`
        None each SAMPLE stream's on the grid that starts when its subscription arrived (as EOS and the twin do)."""
        step = self.interval_s
        if self.phases is not None:
            start = (time.time() // step + 1) * step
            for d in self.bursts:
                self._push(start + self.phases[d], d, None)
        heap = self._heap
        while True:
            if not heap:
                self._changed.clear()
                await self._changed.wait()
                continue
            due, _, device, stream = heap[0]
            delay = due - time.time()
            if delay > 0:
                self._changed.clear()
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._changed.wait(), delay)
                continue
            heapq.heappop(heap)
            if stream is not None and stream not in self.subs[device]:
                continue  # that subscription ended
            # A late sample is not made up for: the next one stays on the grid, after now.
            late = max(0, int((time.time() - due) // step))
            self._push(due + step * (late + 1), device, stream)
            subs = self.subs[device] if stream is None else (stream,)
            if not subs:
                continue
            burst, _ = self.bursts[device]
            data = burst.render(self.clock())
            for s in list(subs):
                if s.proto.send(s, data):
                    self.sent_updates += burst.updates
                else:
                    self.skipped_updates += burst.updates


def phases(devices: list[str], interval_s: float, mode: str, seed: int = 7) -> dict[str, float] | None:
    if mode == "subscription":
        return None  # each stream's timer starts with its subscription
    if mode == "aligned":
        return dict.fromkeys(devices, 0.0)
    if mode == "spread":
        rng = random.Random(seed)
        return {d: rng.uniform(0.0, interval_s) for d in devices}
    raise ValueError(f"phase must be aligned, spread or subscription, not {mode!r}")


def server_main(size: str, interval_s: float, phase: str, ctl: Any) -> None:
    """The replay server process: reports its addresses, then its CPU time on "cpu", until "stop"."""

    async def run() -> None:
        twin = Twin(Fabric(generate_blueprint(FabricSpec.model_validate(SIZES[size]))))
        rng = random.Random(1)
        bursts = {n: build_burst(twin, sw, rng) for n, sw in twin.switches.items()}
        server = ReplayServer(bursts, interval_s, phases(list(bursts), interval_s, phase), CREDS)
        await server.start()
        ctl.send((server.addresses, sum(b.updates for b, _ in bursts.values())))
        loop = asyncio.get_running_loop()
        while await loop.run_in_executor(None, ctl.recv) == "cpu":
            ctl.send((time.process_time(), server.skipped_updates))
        await server.close()

    asyncio.run(run())


# --- clients --------------------------------------------------------------------------------------------------
class LagStore(CounterStore):
    """With workers: apply time - sample time of every series row a batch writes into the parent store."""

    def __init__(self) -> None:
        super().__init__()
        self.lags: list[I64] = []
        self.recording = False

    def put_series(self, sidx: I64, fields: dict[str, Any]) -> None:
        if self.recording:
            ts = fields["ts"]
            self.lags.append(time.time_ns() - ts[ts != NEVER])
        super().put_series(sidx, fields)


def _proc_cpu(pid: int) -> float:
    """utime + stime of a process, in seconds."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def _hist_p99(registry: CollectorRegistry, before: list[tuple[float, float]] | None) -> tuple[Any, float]:
    now = sorted(
        (float(s.labels["le"]), s.value)
        for m in registry.collect()
        if m.name == "fabricd_telemetry_lag_seconds"
        for s in m.samples
        if s.name.endswith("_bucket")
    )
    if before is None:
        return now, float("nan")
    window = [(le, n - n0) for (le, n), (_, n0) in zip(now, before, strict=True)]
    total = window[-1][1]
    return now, next((le for le, n in window if n >= 0.99 * total), float("nan"))


@dataclass
class Result:
    workers: int
    rate: float  # updates/s into the parent store
    cpu: float  # cores: this process + its workers
    parent_cpu: float  # cores: this process alone (with workers: applying their batches)
    lags_ms: np.ndarray = field(default_factory=lambda: np.zeros(0))
    hist_p99_ms: float = float("nan")
    sync_s: float = 0.0
    worker_rss_mb: float = float("nan")
    stale: int = 0

    def pct(self, q: float) -> float:
        return float(np.percentile(self.lags_ms, q)) if len(self.lags_ms) else float("nan")


async def measure(
    accesses: list[DeviceAccess],
    interval_s: float,
    workers: int,
    window_s: float,
    ship_s: float | None,
    spread_samples: bool = True,
) -> Result:
    registry = CollectorRegistry()
    metrics = TelemetryMetrics(registry)
    lag_store = LagStore()
    ingestor: Ingestor
    source: TelemetryClient | TelemetryWorkers
    if workers == 1:
        ingestor = LagIngestor(CounterStore())
        source = TelemetryClient(
            accesses, ingestor, interval_s=interval_s, metrics=metrics, spread_samples=spread_samples
        )
    else:
        ingestor = Ingestor(lag_store)
        source = TelemetryWorkers(
            accesses,
            ingestor,
            workers=workers,
            interval_s=interval_s,
            metrics=metrics,
            ship_s=ship_s or SHIP_S,
            spread_samples=spread_samples,
        )
    t0 = time.perf_counter()
    task = asyncio.create_task(source.run())
    assert await source.wait_synced(60), "not every switch synced"
    sync_s = time.perf_counter() - t0
    await asyncio.sleep(2 * interval_s + 1.0)  # past the initial dumps and the first rates
    pids = [p for k in range(workers) if isinstance(source, TelemetryWorkers) and (p := source.pid(k)) is not None]
    store = ingestor.store

    def sample() -> tuple[int, float, float, float]:
        ingestor.flush()
        own = time.process_time()
        return int(store.stats[:, Stat.UPDATES].sum()), own + sum(_proc_cpu(p) for p in pids), own, time.perf_counter()

    u0, c0, p0, w0 = sample()
    hist0, _ = _hist_p99(registry, None)
    if isinstance(ingestor, LagIngestor):
        ingestor.recording = True
    lag_store.recording = True
    await asyncio.sleep(window_s)
    lag_store.recording = False
    if isinstance(ingestor, LagIngestor):
        ingestor.recording = False
    u1, c1, p1, w1 = sample()
    _, hist_p99 = _hist_p99(registry, hist0)
    rss = float(np.mean([_rss_mb(p) for p in pids])) if pids else float("nan")
    stale = len(source.stale_devices())
    await source.stop()
    await task
    if isinstance(ingestor, LagIngestor):
        lags = np.array(ingestor.lags, dtype=np.float64)
    else:
        lags = np.concatenate(lag_store.lags).astype(np.float64) if lag_store.lags else np.zeros(0)
    wall = w1 - w0
    return Result(workers, (u1 - u0) / wall, (c1 - c0) / wall, (p1 - p0) / wall, lags / 1e6, 1000 * hist_p99, sync_s,
                  rss, stale)  # fmt: skip


class Server:
    def __init__(self, size: str, interval_s: float, phase: str) -> None:
        ctx = mp.get_context("spawn")
        self.ctl, child = ctx.Pipe()
        self.proc = ctx.Process(target=server_main, args=(size, interval_s, phase, child), daemon=True)
        self.proc.start()
        addresses, self.leaves = self.ctl.recv()
        self.accesses = [
            DeviceAccess(n, h, "eos", CREDS[0], SecretStr(CREDS[1]), GnmiAccess(port=p, tls=False), EapiAccess(),
                         SshAccess())
            for n, (h, p) in addresses.items()
        ]  # fmt: skip
        self.interval_s = interval_s

    def cpu(self) -> tuple[float, int]:
        self.ctl.send("cpu")
        cpu, skipped = self.ctl.recv()
        return float(cpu), int(skipped)

    def run(self, workers: int, window_s: float, ship_s: float | None = None, spread_samples: bool = True) -> Result:
        return asyncio.run(measure(self.accesses, self.interval_s, workers, window_s, ship_s, spread_samples))

    def close(self) -> None:
        self.ctl.send("stop")
        self.proc.join(10)


def best(results: list[Result], key: Callable[[Result], float], low: bool = False) -> Result:
    ok = [r for r in results if key(r) == key(r)]  # not NaN
    return (min if low else max)(ok or results, key=key)


def table(rows: Sequence[tuple[str, ...]]) -> None:
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    for k, row in enumerate(rows):
        cells = [f"{c:<{w}}" if i == 0 else f"{c:>{w}}" for i, (c, w) in enumerate(zip(row, widths, strict=True))]
        print("| " + " | ".join(cells) + " |")
        if k == 0:
            print("|" + "|".join("-" * (w + 2) for w in widths) + "|")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--window", type=float, default=8.0, help="seconds measured per client run")
    ap.add_argument("--runs", type=int, default=1, help="repeat each measurement and keep the best")
    ap.add_argument(
        "--throughput", type=float, default=800_000, help="offered updates/s of the throughput runs (more than taken)"
    )
    ap.add_argument("--lag-rate", type=float, default=100_000, help="offered updates/s of the lag runs")
    ap.add_argument("--workers", default="1,2,4", help="worker counts of the throughput runs")
    ap.add_argument("--ship", type=float, help="TelemetryWorkers ship_s (default: its own)")
    ap.add_argument("--only", choices=("throughput", "lag"), help="run one part only")
    ap.add_argument("--quick", action="store_true", help="a 16-switch fabric and a 3 s window (smoke test)")
    ap.add_argument(
        "--smoke", action="store_true", help="seconds on a tiny fabric: proves the bench still runs (a test runs it)"
    )
    args = ap.parse_args()
    size, window = ("quick", 3.0) if args.quick else ("64", args.window)
    if args.smoke:
        size, window, args.workers = "quick", 1.0, "1,2"
    print(f"machine: {platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}")

    probe = Server(size, 1.0, "spread")
    leaves, switches = probe.leaves, len(probe.accesses)
    probe.close()
    if args.only != "lag":
        throughput(args, size, window, leaves, switches)
    if args.only != "throughput":
        lag(args, size, window, leaves)


def throughput(args: argparse.Namespace, size: str, window: float, leaves: int, switches: int) -> None:
    counts = [int(x) for x in args.workers.split(",")]
    interval = max(0.1, round(leaves / args.throughput, 3))
    server = Server(size, interval, "spread")
    s0 = server.cpu()
    runs: dict[int, list[Result]] = {n: [] for n in counts}
    for _ in range(args.runs):
        for n in counts:
            runs[n].append(server.run(n, window, args.ship))
    s1 = server.cpu()
    server.close()
    print(
        f"replay server (own process): {switches} switches, {leaves:,} sampled leaves; throughput runs: SAMPLE every "
        f"{interval:g} s (spread) = {leaves / interval:,.0f} updates/s offered; {window:g} s windows, best of "
        f"{args.runs}; server CPU {s1[0] - s0[0]:.1f} s over all runs, {s1[1] - s0[1]:,} updates skipped for slow "
        "clients"
    )
    base = best(runs[counts[0]], lambda r: r.rate)
    rows = [("workers", "updates/s into the store", f"vs {counts[0]}", "client CPU (cores)", "of which parent",
             "CPU s per 100k", "RSS per worker")]  # fmt: skip
    for n in counts:
        r = best(runs[n], lambda r: r.rate)
        every = f" (runs: {', '.join(f'{x.rate / 1000:.0f}k' for x in runs[n])})" if args.runs > 1 else ""
        rows.append((
            f"{n}" + (" (in process)" if n == 1 else ""),
            f"{r.rate:,.0f}{every}",
            f"{r.rate / base.rate:.2f}x",
            f"{r.cpu:.2f}",
            "-" if n == 1 else f"{r.parent_cpu:.2f}",
            f"{100_000 * r.cpu / max(r.rate, 1):.2f}",
            "-" if n == 1 else f"{r.worker_rss_mb:.0f} MB",
        ))  # fmt: skip
    table(rows)


def lag(args: argparse.Namespace, size: str, window: float, leaves: int) -> None:
    interval = max(0.1, round(leaves / args.lag_rate, 3))
    lag_rows = [("phase", "workers", "updates/s", "lag p50", "lag p99", "lag max", "histogram p99 <=", "sync", "stale")]
    # (server phase, fabricd spreads its SAMPLE subscriptions): the switch's timer runs on a wall-clock grid
    # (aligned: all at one instant; spread: a random offset each), or starts with the subscription (EOS, the twin),
    # with fabricd sending each switch's SAMPLE subscription in its own slot of the interval, or all at connect.
    cases = [("aligned", True), ("spread", True), ("subscription", True), ("subscription", False)]
    for phase in dict.fromkeys(p for p, _ in cases):
        server = Server(size, interval, phase)
        spreads = [sp for p, sp in cases if p == phase]
        results: dict[tuple[bool, int], list[Result]] = {(sp, n): [] for sp in spreads for n in (1, 2)}
        for _ in range(args.runs):
            for sp, n in results:
                results[sp, n].append(server.run(n, window, args.ship, spread_samples=sp))
        server.close()
        for (sp, n), rs in results.items():
            r = best(rs, lambda r: r.pct(99), low=True)
            how = "fabricd spreads" if sp else "all at once"
            name = phase if phase != "subscription" else f"at subscription, {how}"
            lag_rows.append((
                name, str(n), f"{r.rate:,.0f}", f"{r.pct(50):.1f} ms", f"{r.pct(99):.1f} ms",
                f"{float(r.lags_ms.max()) if len(r.lags_ms) else float('nan'):.1f} ms", f"{r.hist_p99_ms:g} ms",
                f"{r.sync_s:.1f} s", str(r.stale),
            ))  # fmt: skip
    print(f"lag runs: SAMPLE every {interval:g} s = {leaves / interval:,.0f} updates/s offered")
    table(lag_rows)


if __name__ == "__main__":
    main()
