"""The bus with nkey authentication, on a real nats-server configured to require it: fabricd connects with its seed
from a 0600 file, and says what is wrong (one line, the field named) without it or with a file others can read."""

from __future__ import annotations

import asyncio
import os
import socket
import subprocess
import time
from pathlib import Path

import nkeys
import pytest

from fabricd.bus import BusError, connect, server_binary
from fabricd.service.config import BusSettings
from tests.conftest import free_port

pytestmark = [pytest.mark.distributed]


def test_nkey_authentication(tmp_path: Path) -> None:
    seed = nkeys.encode_seed(os.urandom(32), nkeys.PREFIX_BYTE_USER)
    public = nkeys.from_seed(bytearray(seed)).public_key.decode()
    port = free_port()
    conf = tmp_path / "nats.conf"
    conf.write_text(f'port: {port}\nauthorization {{ users = [ {{ nkey: "{public}" }} ] }}\n')
    server = subprocess.Popen([server_binary(), "-c", str(conf), "-a", "127.0.0.1"],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)  # fmt: skip
    try:
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
                break
            except OSError:
                time.sleep(0.05)
        seed_file = tmp_path / "fabricd.nk"
        seed_file.write_bytes(seed)
        seed_file.chmod(0o600)
        url = [f"nats://127.0.0.1:{port}"]

        async def hello(settings: BusSettings) -> bool:
            nc = await connect(settings, None, "test")
            try:
                return bool(nc.is_connected)
            finally:
                await nc.close()

        assert asyncio.run(hello(BusSettings(urls=url, nkey_seed=seed_file)))
        with pytest.raises(BusError, match="Authorization Violation"):  # the server refuses a client without it
            asyncio.run(hello(BusSettings(urls=url)))
        seed_file.chmod(0o644)
        with pytest.raises(BusError, match=r"bus.nkey_seed: .* is readable by others; chmod 600 it"):
            asyncio.run(hello(BusSettings(urls=url, nkey_seed=seed_file)))
        with pytest.raises(BusError, match=r"bus.nkey_seed: .*: No such file"):
            asyncio.run(hello(BusSettings(urls=url, nkey_seed=tmp_path / "missing.nk")))
    finally:
        server.terminate()
        server.wait(10)
