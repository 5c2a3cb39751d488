"""Record gNMI telemetry from switches into a JSON Lines trace, through the same ingestion the service uses.

One thread per device streams the EOS subscription profile (raw bytes: no protobuf objects on our side);
the shared Ingestor, guarded by a lock, writes every accepted update to the trace, so a trace replays to
exactly what the service would have seen.
"""

from __future__ import annotations

import io
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import grpc

from drivers.gnmi_check import channel_for
from drivers.inventory import DeviceAccess
from fabricd.telemetry.ingest import Ingestor
from fabricd.telemetry.paths import eos_profile, subscribe_request
from fabricd.telemetry.store import CounterStore
from fabricd.telemetry.trace import TraceWriter
from topology.sourcefile import write_atomic


def _stream(access: DeviceAccess, request: Any, ingest: Any, stop: threading.Event, seconds: float) -> str | None:
    metadata = [("username", access.username), ("password", access.password.get_secret_value())]
    with channel_for(access) as channel:
        call = channel.stream_stream(
            "/gnmi.gNMI/Subscribe",
            request_serializer=lambda m: m.SerializeToString(),
            response_deserializer=lambda b: b,  # raw bytes go straight to the ingest hot path
        )(iter([request]), metadata=metadata, timeout=seconds + 5)
        timer = threading.Timer(seconds, call.cancel)
        timer.start()
        try:
            for raw in call:
                ingest(raw, access.name)
                if stop.is_set():
                    call.cancel()
        except grpc.RpcError as e:
            if e.code() != grpc.StatusCode.CANCELLED:
                return f"{access.name}: gNMI stream ended: {e.code().name}"
        finally:
            timer.cancel()
    return None


def record_trace(
    accesses: list[DeviceAccess], seconds: float, interval_s: float, output: Path
) -> tuple[int, list[str]]:
    """Stream every device for `seconds`; write the trace atomically. Returns (lines, per-device errors)."""
    buffer = io.StringIO()
    ingestor = Ingestor(CounterStore(), recorder=TraceWriter(buffer))
    lock = threading.Lock()

    def ingest(raw: bytes, device: str) -> None:
        with lock:
            ingestor.ingest(raw, device, time.time_ns())
            ingestor.flush()  # the recorder writes at flush; keep the trace in arrival order

    stop = threading.Event()
    request = subscribe_request(eos_profile(sample_interval_s=interval_s))
    with ThreadPoolExecutor(max_workers=max(1, min(64, len(accesses)))) as pool:
        errors = [e for e in pool.map(lambda a: _stream(a, request, ingest, stop, seconds), accesses) if e]
    text = buffer.getvalue()
    write_atomic(output, text)
    return text.count("\n"), errors
