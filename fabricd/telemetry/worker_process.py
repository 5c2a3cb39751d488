"""A telemetry worker process (see `workers`): streams and decodes its devices' gNMI with its own TelemetryClient
and store, and every `ship_s` sends the service what changed, as a `Batch`."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import pickle
import signal
import socket
import sys
import time
import traceback

import numpy as np

from .client import TelemetryClient
from .ingest import Ingestor
from .store import MIRRORED, NEVER, CounterStore, Stat
from .worker_wire import STOP, Batch, StateRow, WorkerInit, frame, grow, read_frame

MAX_LOGS = 200  # log records per batch; a log storm in a worker must not flood the socket


class _Shipper:
    """Finds what changed in the worker's store since the last batch (by comparing against what it shipped)."""

    def __init__(self, store: CounterStore, client: TelemetryClient) -> None:
        self.store, self.client = store, client
        self.n_dev = self.n_ports = self.n_codes = self.n_strings = self.n_series = self.ev_total = 0
        self.sent = {f: np.empty(0, dtype=store.arrays[f].dtype) for f in ("ts", "prev_ts", "value")}
        self.last_seen = np.empty(0, dtype=np.int64)
        self.synced = np.empty(0, dtype=bool)
        self.stats = np.empty((0, len(Stat)), dtype=np.int64)
        self.states: dict[str, StateRow] = {}
        self.lags: list[tuple[str, float]] = []
        self.logs: list[tuple[str, int, str]] = []

    def collect(self) -> Batch | None:
        st = self.store
        n, nd, npo, nc, ns = st.n, len(st.devices), st.n_ports, len(st.codes), len(st.strings)
        a = st.arrays
        for f, fill in (("ts", NEVER), ("prev_ts", NEVER), ("value", 0)):
            self.sent[f] = grow(self.sent[f], n, fill)
        diff = np.zeros(n, dtype=bool)
        for f in ("ts", "prev_ts", "value"):
            diff |= a[f][:n] != self.sent[f][:n]
        sidx = np.flatnonzero(diff).astype(np.int64)
        for f in ("ts", "prev_ts", "value"):
            self.sent[f][sidx] = a[f][sidx]
        total = st.ev_total
        k = np.arange(max(self.ev_total, total - st.ev_cap), total) % st.ev_cap
        self.ev_total = total
        self.last_seen = grow(self.last_seen, nd, NEVER)
        self.synced = grow(self.synced, nd, False)
        self.stats = grow(self.stats, nd, 0)
        seen, synced, stats = np.array(st.last_seen, dtype=np.int64), np.array(st.synced, dtype=bool), st.stats[:nd]
        dev = np.flatnonzero(
            (seen != self.last_seen[:nd]) | (synced != self.synced[:nd]) | (stats != self.stats[:nd]).any(axis=1)
        ).astype(np.int64)
        self.last_seen[dev], self.synced[dev], self.stats[dev] = seen[dev], synced[dev], stats[dev]
        states = []
        for name in self.client.devices:
            s = self.client.state(name)
            row = (name, s.connected, s.synced, s.attempts, s.last_error, s.rejected)
            if self.states.get(name) != row:
                self.states[name] = row
                states.append(row)
        if not (len(sidx) or len(k) or len(dev) or states or self.lags or self.logs or n > self.n_series):
            return None
        batch = Batch(
            devices=st.devices[self.n_dev : nd],
            port_dev=st.port_dev[self.n_ports : npo].astype(np.int64),
            port_names=st.port_names[self.n_ports : npo],
            codes=st.codes[self.n_codes : nc],
            strings=st.strings[self.n_strings : ns],
            s_port=a["s_port"][self.n_series : n].astype(np.int64),
            s_code=a["s_code"][self.n_series : n].astype(np.int64),
            sidx=sidx,
            fields={f: a[f][sidx] for f in MIRRORED},
            events=(
                st.ev_series[k].astype(np.int64),
                st.ev_value[k].astype(np.int64),
                st.ev_prev[k].astype(np.int64),
                st.ev_ts[k].copy(),
            ),
            dev=dev,
            last_seen=seen[dev],
            synced=synced[dev],
            stats=stats[dev].copy(),
            states=states,
            lags=self.lags,
            logs=self.logs,
        )
        self.n_dev, self.n_ports, self.n_codes, self.n_strings, self.n_series = nd, npo, nc, ns, n
        self.lags, self.logs = [], []
        return batch


class _Forward(logging.Handler):
    """Keeps a worker's log records for the next batch; the parent logs them (and redacts secrets) there."""

    def __init__(self, shipper: _Shipper) -> None:
        super().__init__()
        self.shipper = shipper
        self.dropped = 0

    def emit(self, record: logging.LogRecord) -> None:
        logs = self.shipper.logs
        if len(logs) >= MAX_LOGS:
            self.dropped += 1
            return
        msg = record.getMessage()
        if record.exc_info:
            msg += "\n" + "".join(traceback.format_exception(*record.exc_info)).rstrip()
        if self.dropped:
            msg += f" ({self.dropped} earlier log records of this worker were dropped)"
            self.dropped = 0
        logs.append((record.name, record.levelno, msg))


async def _serve(sock: socket.socket) -> None:
    loop = asyncio.get_running_loop()
    reader, writer = await asyncio.open_connection(sock=sock)
    try:
        init: WorkerInit = pickle.loads(await read_frame(reader))
    except (asyncio.IncompleteReadError, ConnectionError):
        return  # the parent went away before it sent the inventory
    ingestor = Ingestor(CounterStore())
    client = TelemetryClient(init.devices, ingestor, **init.client)
    shipper = _Shipper(ingestor.store, client)
    client.on_lag = lambda device, lag: shipper.lags.append((device, lag))
    root = logging.getLogger()
    root.handlers[:] = [_Forward(shipper)]
    root.setLevel(logging.WARNING)  # grpc's own debug chatter stays here
    logging.getLogger("fabricd").setLevel(init.log_level)
    stopping: asyncio.Task[None] | None = None

    def stop() -> None:
        nonlocal stopping
        if stopping is None:
            stopping = loop.create_task(client.stop())

    async def control() -> None:
        """The parent's STOP, or EOF when the parent is gone (even SIGKILLed: the kernel closes its end)."""
        with contextlib.suppress(asyncio.IncompleteReadError, ConnectionError):
            while await read_frame(reader) != STOP:
                pass
        stop()

    ctl = asyncio.create_task(control())
    loop.add_signal_handler(signal.SIGTERM, stop)
    task = asyncio.create_task(client.run())
    sent = 0.0  # the first frame goes at once: the parent times hangs from it
    while True:
        await asyncio.wait([task], timeout=init.ship_s)
        if os.getppid() != init.parent_pid:
            stop()
        ingestor.flush()
        batch = shipper.collect()
        if batch is not None or time.monotonic() - sent >= init.beat_s:
            try:
                writer.write(frame(b"" if batch is None else pickle.dumps(batch, protocol=5)))
                await writer.drain()  # the loop keeps reading streams while a busy parent catches up
            except ConnectionError:
                stop()
            sent = time.monotonic()
        if task.done():
            break
    ctl.cancel()
    writer.close()
    with contextlib.suppress(ConnectionError):
        await writer.wait_closed()
    task.result()


def worker_main() -> None:
    """Entry point of a worker process: `python -c '...worker_main()' FD` (FD: its end of the socketpair)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    asyncio.run(_serve(socket.socket(fileno=int(sys.argv[1]))))
