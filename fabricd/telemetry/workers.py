"""Telemetry past one core: N worker processes stream and decode, one parent store feeds the detectors.

Worker k owns the devices whose crc32(name) falls in the k-th of N equal ranges of [0, 2**32) (stable across runs
and Python versions, unlike `hash()`). It runs its own TelemetryClient + Ingestor + CounterStore and, every
`ship_s`, sends the parent what changed in its store since the last batch, as numpy arrays: the changed series
rows (value, gauge, ts, prev_value, prev_ts, rate as the worker's store computed them), the ENUM change events
(oper-status), and per-device last-seen, sync and ingest stats; plus its client's per-device stream state, lag
observations and log records. Names (devices, ports, leaves, strings) cross the socket once, when first interned;
after that a series is a local row number the parent maps to its own with one array lookup. The parent
(`TelemetryWorkers`, the surface of TelemetryClient the daemon uses) applies a batch with a few vectorised writes
into the one CounterStore the detectors snapshot; it never decodes gNMI.

Processes: started with `python -c` (not fork: grpc's threads do not survive it; not multiprocessing's spawn,
which would re-run the service's main script in every worker), talking over a private socketpair. The inventory
with its passwords is sent over that socket after start: never in argv, the environment (a worker inherits the
service's minus any variable holding a switch password, such as a password_env) or a log line; worker log records
are forwarded to the parent's logging and go through its redaction there. A worker exits when its socket reaches
EOF (the parent died, even by SIGKILL) or its parent pid changes, ignores SIGINT (a terminal's Ctrl-C is for the
parent, which stops the workers in order) and stops cleanly on SIGTERM.

A worker that dies is restarted after 1 s, doubling to 30 s while it keeps dying young: what an operator wants
from a supervisor. One that sends nothing (not even its heartbeat, every `hang_s` / 4) for `hang_s` (at least 60 s
before its first frame: imports are slow on a busy machine) is hung, and is killed and restarted the same way.
Until the new worker's streams sync, its devices read as disconnected and not synced at once, and as stale 3
intervals after their last sample, like any silent device (so detectors never act on them); the restart is
logged and counted (fabricd_telemetry_worker_restarts_total). The new worker's first samples are fresh baselines
(no rate for one interval); the parent keeps ingest stats and reconnect counts monotonic across restarts and does
not report an oper-status it already knew as a change.

This module is the parent side; the worker process is `worker_process`, what crosses the socket `worker_wire`.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import pickle
import signal
import socket
import subprocess
import sys
import time
import zlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, Unpack

import numpy as np

from drivers.inventory import DeviceAccess
from fabricd.backoff import Backoff

from .client import DeviceState, StreamOptions
from .ingest import Ingestor
from .metrics import TelemetryMetrics
from .paths import Kind
from .series import Stat
from .store import CounterStore, StoreChanges
from .worker_wire import STOP, Batch, WorkerInit, frame, read_frame

SHIP_S = 0.025  # how often a worker sends what changed: the lag it adds is half of this on average
RESTART_HEALTHY_S = 60.0  # a worker that lived this long restarts after the base delay again
STARTUP_S = 60.0  # allowed until a new worker's first frame (imports on a busy machine), if more than hang_s


class TelemetrySource(Protocol):
    """What the service needs from telemetry: TelemetryClient (in process) or TelemetryWorkers."""

    @property
    def devices(self) -> list[str]: ...

    @property
    def synced(self) -> dict[str, bool]: ...

    def stale_devices(self, now: int | None = None) -> list[str]: ...

    async def wait_synced(self, timeout_s: float | None = None) -> bool: ...

    def state(self, device: str) -> DeviceState: ...

    async def run(self) -> None: ...

    async def stop(self) -> None: ...


def worker_of(name: str, workers: int) -> int:
    """The worker that owns device `name`: crc32 splits [0, 2**32) into `workers` equal ranges."""
    return (zlib.crc32(name.encode()) * workers) >> 32


# --- parent side -------------------------------------------------------------------------------------------
class _Mirror:
    """One worker incarnation's ids mapped to the parent store's, and the parent-side offsets of its counts."""

    def __init__(self, store: CounterStore) -> None:
        self.store = store
        self.dev = np.empty(0, dtype=np.int64)
        self.port = np.empty(0, dtype=np.int64)
        self.code = np.empty(0, dtype=np.int64)
        self.string = np.empty(0, dtype=np.int64)
        self.series = np.empty(0, dtype=np.int64)
        self.stats_base = np.empty((0, len(Stat)), dtype=np.int64)

    def apply(self, c: StoreChanges) -> None:
        """Write a worker's store changes into the parent's store, through its public writes."""
        st = self.store
        if c.devices:
            ids = np.array([st.device_id(name) for name in c.devices], dtype=np.int64)
            self.dev = np.concatenate([self.dev, ids])
            # Counts restart at 0 in a new worker; the parent's keep counting from where they were.
            self.stats_base = np.concatenate([self.stats_base, st.stats_of(ids)])
        if c.port_names:
            devs = self.dev[c.port_dev].tolist()
            rows = [st.port_row(d, p) for d, p in zip(devs, c.port_names, strict=True)]
            self.port = np.concatenate([self.port, np.array(rows, dtype=np.int64)])
        if c.codes:
            self.code = np.concatenate([self.code, np.array([st.code(lf, ix) for lf, ix in c.codes], dtype=np.int64)])
        if c.strings:
            self.string = np.concatenate([self.string, np.array([st.intern(t) for t in c.strings], dtype=np.int64)])
        if len(c.s_port):
            self.series = np.concatenate([self.series, st.series_at(self.port[c.s_port], self.code[c.s_code])])
        self._events(c)  # before the rows: a worker's first value is compared with the parent's current one
        if len(c.sidx):
            sidx = self.series[c.sidx]
            fields = c.fields
            text = st.kinds_of_series(sidx) >= Kind.ENUM  # values are string ids of the worker's store
            if text.any():
                fields = dict(fields)
                for f in ("value", "prev_value"):
                    v = fields[f].copy()
                    v[text] = self.string[v[text].astype(np.int64)]
                    fields[f] = v
            st.put_series(sidx, fields)
        if len(c.dev):
            devs = self.dev[c.dev]
            for d, t, s in zip(devs.tolist(), c.last_seen.tolist(), c.synced.tolist(), strict=True):
                st.seen(d, t)
                st.set_synced(d, s)
            st.put_stats(devs, self.stats_base[c.dev] + c.stats)

    def _events(self, c: StoreChanges) -> None:
        series, value, prev, ts = c.events
        if not len(series):
            return
        st = self.store
        ps, pv, pp = self.series[series], self.string[value], self.string[prev]
        keep = np.ones(len(ps), dtype=bool)
        for j in np.flatnonzero(prev == 0).tolist():  # the worker's first value of the series
            parent = st.last_value(int(ps[j]))
            if parent is not None:  # ...but not the parent's: a restarted worker re-reads it
                pp[j] = parent
                keep[j] = pp[j] != pv[j]
        st.put_events(ps[keep], pv[keep], pp[keep], ts[keep])


@dataclass(eq=False)
class _Worker:
    index: int
    devices: list[DeviceAccess]
    proc: asyncio.subprocess.Process | None = None
    writer: asyncio.StreamWriter | None = None
    receiver: asyncio.Task[None] | None = None
    mirror: _Mirror | None = None
    started: float = 0.0
    heard: float = 0.0  # monotonic time of its last frame (or of its start)
    talked: bool = False  # has this incarnation sent a frame yet?
    restarts: int = 0
    restart_backoff: Backoff | None = None  # grows while the worker keeps dying young
    attempts_base: dict[str, int] = field(default_factory=dict)  # stream attempts of earlier incarnations
    lost: asyncio.Event = field(default_factory=asyncio.Event)


class TelemetryWorkers:
    """`workers` processes stream `inventory_devices` (split by `worker_of`) into `ingestor`'s store until `stop()`.

    Same queries and lifecycle as TelemetryClient (devices, stale_devices, synced, wait_synced, state, run, stop),
    with the same meaning; `metrics` gets the same fabricd_telemetry_* series, merged from the workers, plus
    fabricd_telemetry_worker_up{worker} and fabricd_telemetry_worker_restarts_total{worker}. The client options
    are passed to each worker's TelemetryClient. `ship_s` is how often a worker sends what changed: the lag it adds.
    `hang_s` (default: 6 intervals, at least 30 s) of silence from a worker gets it killed and restarted.
    """

    def __init__(
        self,
        inventory_devices: Sequence[DeviceAccess],
        ingestor: Ingestor,
        *,
        workers: int,
        metrics: TelemetryMetrics | None = None,
        clock: Callable[[], int] = time.time_ns,
        ship_s: float = SHIP_S,
        hang_s: float | None = None,
        restart_base_s: float = 1.0,
        restart_cap_s: float = 30.0,
        log: logging.Logger | None = None,
        **options: Unpack[StreamOptions],
    ) -> None:
        """`options` go to each worker's TelemetryClient as they are (profile, interval_s, backoff, ...)."""
        interval_s = options.get("interval_s", 10.0)
        profile = options.get("profile")
        if workers < 1:
            raise ValueError("workers must be >= 1")
        if interval_s <= 0 or ship_s <= 0:
            raise ValueError("interval_s and ship_s must be > 0")
        if ingestor.recorder is not None:
            raise ValueError("recording a trace needs the in-process client (workers=1): workers decode elsewhere")
        self.ingestor = ingestor
        self.store = ingestor.store
        self.interval_ns = int(interval_s * 1e9)
        self.metrics = metrics
        self.clock = clock
        self.log = log or logging.getLogger("fabricd.telemetry.workers")
        self.ship_s = ship_s
        self.hang_s = max(30.0, 6 * interval_s) if hang_s is None else hang_s
        self.restart_base_s, self.restart_cap_s = restart_base_s, restart_cap_s
        # what crosses to the worker process: plain values (a profile's sequences as lists)
        self._options: dict[str, Any] = {
            **options,
            "profile": None if profile is None else {k: list(v) for k, v in profile.items()},
        }
        platforms = {"eos"} if profile is None else set(profile)
        self._accesses = {a.name: a for a in inventory_devices}
        self._streamed = {a.name for a in inventory_devices if a.platform in platforms}
        ranges: list[list[DeviceAccess]] = [[] for _ in range(workers)]
        for a in inventory_devices:
            ranges[worker_of(a.name, workers)].append(a)
            self.store.device_id(a.name)  # interned now: stats rows and staleness from the start
        self._workers = [_Worker(k, devs) for k, devs in enumerate(ranges) if devs]
        self._owner = {a.name: w for w in self._workers for a in w.devices}
        self._states = {n: DeviceState(n, False, False, 0, None) for n in self._accesses}
        self._synced = {n: asyncio.Event() for n in self._accesses}
        self._reconnects = dict.fromkeys(self._accesses, 0)
        self._worker_metrics: tuple[Any, Any] | None = None
        if metrics is not None:
            metrics.bind(self.store, list(self._accesses), lambda: self.stale_devices())
            self._worker_metrics = metrics.bind_workers(len(ranges))
        self._closing = asyncio.Event()
        self._done = asyncio.Event()
        self._running = False

    # --- queries (the same as TelemetryClient's) -----------------------------------------------------------
    @property
    def devices(self) -> list[str]:
        return list(self._accesses)

    @property
    def workers(self) -> dict[int, list[str]]:
        """Worker index -> the devices it owns (workers with no device are not started)."""
        return {w.index: [a.name for a in w.devices] for w in self._workers}

    def pid(self, worker: int) -> int | None:
        """The process id of a running worker (None while it is being restarted)."""
        w = next(w for w in self._workers if w.index == worker)
        return None if w.proc is None or w.proc.returncode is not None else w.proc.pid

    def stale_devices(self, now: int | None = None) -> list[str]:
        """Devices nothing (update, heartbeat) arrived from for 3 intervals before `now` (unix ns), or ever."""
        t = self.clock() if now is None else now
        return [name for name in self._accesses if self.store.stale(name, t, self.interval_ns)]

    @property
    def synced(self) -> dict[str, bool]:
        return {name: s.synced for name, s in self._states.items()}

    async def wait_synced(self, timeout_s: float | None = None) -> bool:
        """Wait until every streamable device's current stream has synced; False on timeout."""
        waits = [self._synced[n].wait() for n in self._accesses if n in self._streamed]
        try:
            await asyncio.wait_for(asyncio.gather(*waits), timeout_s)
        except TimeoutError:
            return False
        return True

    def state(self, device: str) -> DeviceState:
        return self._states[device]

    # --- lifecycle -----------------------------------------------------------------------------------------
    async def run(self) -> None:
        """Run the workers until `stop()`; a worker that dies is restarted. Runs once, like TelemetryClient."""
        if self._running:
            raise RuntimeError("TelemetryWorkers.run() is already running")
        self._running = True
        tasks = [asyncio.create_task(self._supervise(w)) for w in self._workers if not self._closing.is_set()]
        try:
            await asyncio.gather(*tasks)
        finally:
            self._closing.set()  # on cancellation too: each supervisor then stops its worker
            await asyncio.gather(*tasks, return_exceptions=True)
            self._running = False
            self._done.set()

    async def stop(self) -> None:
        """Stop every worker (each ends its streams and sends what it has) and wait for `run()` to return."""
        self._closing.set()
        if self._running:
            await self._done.wait()

    async def _supervise(self, w: _Worker) -> None:
        """Start the worker; each time it dies, report its devices down and start it again after a backoff.
        Once closing, stop it (also when this task is cancelled: the process must not outlive the service)."""
        closing = asyncio.create_task(self._closing.wait())
        try:
            while not self._closing.is_set():
                try:
                    await self._start(w)
                except OSError as e:
                    self.log.error("telemetry worker %d could not start (%s); retrying", w.index, e)
                else:
                    await self._watch(w, closing)
                if self._closing.is_set():
                    return
                await self._restart_delay(w)
        finally:
            closing.cancel()
            await asyncio.shield(self._halt(w))

    async def _watch(self, w: _Worker, closing: asyncio.Task[Any]) -> None:
        """Until the worker is lost or we are closing; a worker silent for `hang_s` is killed (and so lost)."""
        lost = asyncio.create_task(w.lost.wait())
        try:
            while not (lost.done() or closing.done()):
                await asyncio.wait([lost, closing], timeout=self.hang_s / 4, return_when=asyncio.FIRST_COMPLETED)
                silent = time.monotonic() - w.heard
                limit = self.hang_s if w.talked else max(self.hang_s, STARTUP_S)
                if silent > limit and w.proc is not None and not lost.done():
                    self.log.warning("telemetry worker %d sent nothing for %.0f s; killing it", w.index, silent)
                    with contextlib.suppress(ProcessLookupError):
                        w.proc.kill()
                    w.heard = time.monotonic()  # once: its EOF follows
        finally:
            lost.cancel()

    async def _restart_delay(self, w: _Worker) -> None:
        """Log the death and wait before the next start: 1 s, doubling to 30 s while the worker keeps dying young."""
        what = "could not start" if w.proc is None else _exit_text(await self._reap(w))
        lived = time.monotonic() - w.started
        if w.restart_backoff is None:
            w.restart_backoff = Backoff(self.restart_base_s, self.restart_cap_s, jitter=False)
        if lived >= RESTART_HEALTHY_S:
            w.restart_backoff.reset()
        delay = w.restart_backoff.next()
        w.restarts += 1
        if self._worker_metrics is not None:
            self._worker_metrics[1].labels(str(w.index)).inc()
        self.log.warning(
            "telemetry worker %d (%d switches) %s after %.0f s; restarting it in %.1f s (its switches read as not "
            "synced now and stale after 3 intervals without data)",
            w.index, len(w.devices), what, lived, delay,
        )  # fmt: skip
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._closing.wait(), delay)

    async def _start(self, w: _Worker) -> None:
        w.proc = None
        w.started = time.monotonic()
        parent, child = socket.socketpair()
        try:
            secrets = {a.password.get_secret_value() for a in w.devices}
            env = {k: v for k, v in os.environ.items() if v not in secrets}  # it gets them over the socket
            # The same modules as this process, wherever they were found (a checkout, a venv, a bench's sys.path).
            env["PYTHONPATH"] = os.pathsep.join(p for p in sys.path if p)
            code = "from fabricd.telemetry.worker_process import worker_main; worker_main()"
            w.proc = await asyncio.create_subprocess_exec(
                sys.executable, "-c", code, str(child.fileno()),
                pass_fds=(child.fileno(),), stdin=subprocess.DEVNULL, env=env,
            )  # fmt: skip
        except BaseException:
            parent.close()
            raise
        finally:
            child.close()  # the worker's copy is its only one: its end closes when it dies
        reader, w.writer = await asyncio.open_connection(sock=parent)
        w.mirror = _Mirror(self.store)
        w.lost.clear()
        for name in self._names(w):
            w.attempts_base[name] = self._states[name].attempts
        level = logging.getLogger("fabricd.telemetry").getEffectiveLevel()
        init = WorkerInit(w.index, w.devices, self._options, self.ship_s, self.hang_s / 4, level, os.getpid())
        w.heard, w.talked = time.monotonic(), False
        w.writer.write(frame(pickle.dumps(init, protocol=5)))
        w.receiver = asyncio.create_task(self._receive(w, reader))
        if self._worker_metrics is not None:
            self._worker_metrics[0].labels(str(w.index)).set(1)

    async def _receive(self, w: _Worker, reader: asyncio.StreamReader) -> None:
        """Apply the worker's batches as they come (never blocking the loop on a half-sent one) until its EOF."""
        try:
            while True:
                data = await read_frame(reader)
                w.heard, w.talked = time.monotonic(), True
                if not data:
                    continue  # a heartbeat
                try:
                    self._apply(w, pickle.loads(data))
                except Exception:  # a bug here must not stop the other workers' batches
                    self.log.exception("telemetry worker %d: could not apply a batch; continuing", w.index)
        except (asyncio.IncompleteReadError, ConnectionError):
            pass  # the worker exited (or died): its end of the socket is closed
        finally:
            self._lose(w)

    def _lose(self, w: _Worker) -> None:
        """The worker's socket closed: it died or finished stopping. Its devices are down until it is back."""
        if w.lost.is_set():
            return
        if w.writer is not None:
            w.writer.close()
            w.writer = None
        for name in self._names(w):
            s = self._states[name]
            self._states[name] = DeviceState(name, False, False, s.attempts, s.last_error, s.rejected)
            self._synced[name].clear()
            self.store.set_synced(self.store.device_id(name), False)
            if self.metrics is not None:
                self.metrics.connected.labels(name).set(0)
        if self._worker_metrics is not None:
            self._worker_metrics[0].labels(str(w.index)).set(0)
        w.lost.set()

    async def _reap(self, w: _Worker) -> int | None:
        if w.proc is None:
            return None
        with contextlib.suppress(TimeoutError):
            return await asyncio.wait_for(w.proc.wait(), 5)
        return None

    async def _halt(self, w: _Worker) -> None:
        """Ask the worker to stop, read what it still sends, and make sure the process is gone."""
        proc = w.proc
        if proc is None:
            return
        if w.writer is not None:
            with contextlib.suppress(ConnectionError):
                w.writer.write(frame(STOP))
        try:
            await asyncio.wait_for(w.lost.wait(), 5)  # the worker closes its socket as it exits
            await asyncio.wait_for(proc.wait(), 5)
        except TimeoutError:
            self.log.warning("telemetry worker %d did not stop within 5 s; killing it", w.index)
            with contextlib.suppress(ProcessLookupError):
                proc.kill()
            await proc.wait()
        if w.receiver is not None:
            await w.receiver  # ends at the socket's EOF (and reports the devices down)

    def _names(self, w: _Worker) -> list[str]:
        return [a.name for a in w.devices]

    # --- applying a batch ----------------------------------------------------------------------------------
    def _apply(self, w: _Worker, b: Batch) -> None:
        assert w.mirror is not None
        w.mirror.apply(b.changes)
        m = self.metrics
        for name, connected, synced, attempts, last_error, rejected in b.states:
            if name not in self._states or self._owner[name] is not w:
                continue  # not this worker's device: ignore rather than trust it
            total = w.attempts_base.get(name, 0) + attempts
            self._states[name] = DeviceState(name, connected, synced, total, last_error, rejected)
            if synced:
                self._synced[name].set()
            else:
                self._synced[name].clear()
            if m is not None:
                m.connected.labels(name).set(1 if connected else 0)
                reconnects = max(total - 1, 0)
                if reconnects > self._reconnects[name]:
                    m.reconnects.labels(name).inc(reconnects - self._reconnects[name])
                    self._reconnects[name] = reconnects
        if m is not None:
            for name, lag in b.lags:
                m.lag.observe(max(lag, 0.0))
                m.last_lag.labels(name).set(lag)
        for logger, level, msg in b.logs:
            logging.getLogger(logger).log(level, "%s", msg)


def _exit_text(code: int | None) -> str:
    if code is None:
        return "stopped answering"
    if code < 0:
        try:
            return f"was killed by {signal.Signals(-code).name}"
        except ValueError:
            return f"was killed by signal {-code}"
    return f"exited with status {code}"
