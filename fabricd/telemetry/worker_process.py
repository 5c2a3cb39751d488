"""A telemetry worker process (see `workers`): streams and decodes its devices' gNMI with its own TelemetryClient
and store, and every `ship_s` sends the service what changed, as a `Batch`."""

from __future__ import annotations

import asyncio
import contextlib
import gc
import logging
import os
import pickle
import signal
import socket
import sys
import time
import traceback

from .client import TelemetryClient
from .ingest import Ingestor
from .store import CounterStore, ExportCursor
from .worker_wire import STOP, Batch, StateRow, WorkerInit, frame, read_frame

URGENT_GAP_S = 0.005  # batches that carry new events go at most this often (each compares the whole store)
MAX_LOGS = 200  # log records per batch; a log storm in a worker must not flood the socket


class _Shipper:
    """What changed in the worker since the last batch: the store's changes (its export cursor remembers what was
    shipped) and the streams' states that differ from the ones last sent."""

    def __init__(self, store: CounterStore, client: TelemetryClient) -> None:
        self.store, self.client = store, client
        self.cursor = ExportCursor(store)
        self.states: dict[str, StateRow] = {}
        self.lags: list[tuple[str, float]] = []
        self.logs: list[tuple[str, int, str]] = []

    def collect(self) -> Batch | None:
        changes = self.store.export_changes(self.cursor)
        states = []
        for name in self.client.devices:
            s = self.client.state(name)
            row = (name, s.connected, s.synced, s.attempts, s.last_error, s.rejected)
            if self.states.get(name) != row:
                self.states[name] = row
                states.append(row)
        if changes.empty and not (states or self.lags or self.logs):
            return None
        batch = Batch(changes, states, self.lags, self.logs)
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
    gc.freeze()  # the inventory, the client and the modules live as long as the worker: out of the GC's scans

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
    # New events (an ON_CHANGE oper-status change) ship at once; the rest every ship_s.
    urgent = asyncio.Event()
    ingestor.store.on_event.append(urgent.set)
    shipped = 0.0
    while True:
        if not urgent.is_set():
            waiting = asyncio.ensure_future(urgent.wait())
            await asyncio.wait([task, waiting], timeout=init.ship_s, return_when=asyncio.FIRST_COMPLETED)
            waiting.cancel()
        if (early := URGENT_GAP_S - (time.monotonic() - shipped)) > 0 and not task.done():
            await asyncio.sleep(early)  # a burst of events (a switch rebooting) ships in batches, not one by one
        urgent.clear()
        shipped = time.monotonic()
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
