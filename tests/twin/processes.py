"""The real processes the twin tests start, in one place: the twin of a spec (a fixture), fabricd's config for it,
`fabricd run` (or a test's child module) as its own process with its API, a hot pair of them on one config (a
leader and its standby), `fabricd collector`, a one-off `fabricd` command, and a word with the nats-server of the
`nats_bus` fixture. The nats-server and PostgreSQL themselves are the `nats_bus` and `postgres_url` fixtures of
tests/conftest.py (the unit tests use them too).

Every child runs from the repository with the test's Python, its FABRICD_* variables dropped (a developer's own
settings never reach it) and its stdout and stderr appended to a log the test names."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Awaitable, Callable, Iterator, Sequence
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, Literal, TypeVar

import httpx
import pytest
import yaml
from napalm import get_network_driver
from nats.aio.client import Client as NATS

from drivers.inventory import load_inventory
from fabricd.bus import LocalBus, connect, start_local, stop_local
from fabricd.service.config import BusSettings
from tests.conftest import EXAMPLES, REPO, free_port
from tests.twin.lab.twin_thread import TwinThread
from topology.spec import load_spec

__all__ = [
    "TOKEN", "TTL", "Fabricd", "Process", "admin_enabled", "bus_down", "bus_up", "collector", "collectors",
    "done_on", "eos_driver", "fabricd", "fabricd_run", "free_port", "hot_pair", "on_bus", "receiver", "running_twin",
    "twin_fixture", "wait_for", "write_config",
]  # fmt: skip

TOKEN = "test-api-token-5c1e"
TTL = 2.0  # the HA tests' lease: short, so a takeover is seconds, yet several renewals (every TTL/3) per lease
T = TypeVar("T")


# --- the twin -------------------------------------------------------------------------------------------------------
@contextmanager
def running_twin(spec: str | Path, folder: Path, **options: Any) -> Iterator[TwinThread]:
    """The twin of `spec` (an example's name, e.g. "small-pod", or a spec file) for the length of the block;
    `options` go to TwinThread (eos_version, daemons, ...)."""
    path = EXAMPLES / f"{spec}.yaml" if isinstance(spec, str) else spec
    t = TwinThread(load_spec(path), folder, **options).start()
    try:
        yield t
    finally:
        t.stop()


def twin_fixture(spec: str = "small-pod", scope: Literal["function", "module"] = "function", **options: Any) -> Any:
    """A `twin` fixture for a test module: `twin = twin_fixture("small-sonic", scope="module")`. An indirect
    parameter, if the test gives one, names the example instead of `spec`."""

    @pytest.fixture(scope=scope)
    def twin(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[TwinThread]:
        name = getattr(request, "param", spec)
        with running_twin(name, tmp_path_factory.mktemp(f"{name}-twin"), **options) as t:
            yield t

    return twin


@contextmanager
def eos_driver(twin: TwinThread, device: str) -> Iterator[Any]:
    """napalm's eos driver over eAPI to one of the twin's switches, opened for the block: as an engineer would look."""
    access = load_inventory(twin.inventory).access(device)
    drv = get_network_driver("eos")(
        access.host, access.username, access.password.get_secret_value(),
        optional_args={"transport": access.eapi.transport, "port": access.eapi.port},
    )  # fmt: skip
    drv.open()
    try:
        yield drv
    finally:
        drv.close()


def admin_enabled(twin: TwinThread, device: str, port: str) -> bool:
    """What eAPI says (napalm's eos driver, as an engineer would check)."""
    with eos_driver(twin, device) as drv:
        return bool(drv.get_interfaces()[port]["is_enabled"])


def eos_sessions(twin: TwinThread, device: str) -> dict[str, str]:
    """The switch's config sessions and their states (`show configuration sessions detail`; a session pending under
    its commit timer is "pendingCommitTimer")."""
    with eos_driver(twin, device) as drv:
        data = drv.device.run_commands(["show configuration sessions detail"])[0]
    out = {name: str(s.get("state", "")) for name, s in data.get("sessions", {}).items()}
    if data.get("commitTimerSessionName"):
        out[str(data["commitTimerSessionName"])] = "pendingCommitTimer"
    return out


# --- fabricd's config -----------------------------------------------------------------------------------------------
def write_config(tmp: Path, inventory: Path, **sections: Any) -> Path:
    """fabricd.yaml for the small pod twin: fast ticks, API on a free port, token in a 0600 file. A section given
    as a dict is merged into the default one; anything else replaces it."""
    token = tmp / "api.token"
    token.write_text(TOKEN)
    token.chmod(0o600)
    data: dict[str, Any] = {
        "spec": str(EXAMPLES / "small-pod.yaml"),
        "inventory": str(inventory),
        "state": str(tmp / "state.db"),
        "telemetry": {"interval_s": 0.5},
        "detectors": {"tick_s": 0.5},
        "remediation": {"mode": "auto", "revert_in_s": 60, "verify_timeout_s": 5},
        "api": {"port": 0, "token": {"file": str(token)}},
    }
    for key, value in sections.items():
        if isinstance(value, dict) and isinstance(data.get(key), dict):
            data[key] = {**data[key], **value}
        else:
            data[key] = value
    path = tmp / "fabricd.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


def wait_for(check: Any, timeout_s: float = 10.0, every_s: float = 0.1) -> Any:
    """Call `check` until it returns something true, and return that; fails the test past `timeout_s`."""
    deadline = time.monotonic() + timeout_s
    while True:
        value = check()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"condition not met within {timeout_s} s; last value {value!r}")
        time.sleep(every_s)


# --- processes ------------------------------------------------------------------------------------------------------
def _env(extra: dict[str, str] | None = None) -> dict[str, str]:
    return {**{k: v for k, v in os.environ.items() if not k.startswith("FABRICD_")}, **(extra or {})}


class Process:
    """`python -m ARGV...` from the repository, its output appended to `log`."""

    def __init__(self, argv: Sequence[str], log: Path, env: dict[str, str] | None = None) -> None:
        self.log = log
        with log.open("ab") as out:
            self.proc = subprocess.Popen([sys.executable, *argv], cwd=REPO, env=_env(env), stdout=out,
                                         stderr=subprocess.STDOUT)  # fmt: skip

    @property
    def pid(self) -> int:
        return self.proc.pid

    def running(self) -> bool:
        return self.proc.poll() is None

    def kill(self) -> None:
        """kill -9 (with a SIGCONT first, as the tests that pause one always sent)."""
        if self.running():
            self.proc.send_signal(signal.SIGCONT)
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait(10)

    def stop(self, timeout_s: float = 20) -> int:
        """SIGTERM (woken first if paused) and its exit code; killed if it does not end within `timeout_s`."""
        if self.running():
            self.proc.send_signal(signal.SIGCONT)
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout_s)
            except subprocess.TimeoutExpired:
                self.proc.kill()
        return self.proc.wait(10)

    def pause(self) -> None:
        """SIGSTOP, returning once the kernel shows the whole process stopped."""
        self.proc.send_signal(signal.SIGSTOP)
        wait_for(lambda: Path(f"/proc/{self.pid}/stat").read_text().split()[2] == "T", 5)

    def wake(self) -> None:
        self.proc.send_signal(signal.SIGCONT)


class Fabricd(Process):
    """A fabricd process serving its API on `port` (a free one unless given; FABRICD_API__PORT tells it) as
    instance `name` of a hot pair, with the test token on its calls."""

    def __init__(self, argv: Sequence[str], log: Path, *, name: str | None = None, port: int | None = None,
                 env: dict[str, str] | None = None) -> None:  # fmt: skip
        self.port = port or free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        own = {"FABRICD_API__PORT": str(self.port), **({"FABRICD_HA__INSTANCE": name} if name else {})}
        super().__init__(argv, log, {**own, **(env or {})})

    def get(self, path: str, **params: Any) -> Any:
        r = httpx.get(self.url + path, params=params or None, headers={"Authorization": f"Bearer {TOKEN}"},
                      timeout=10)  # fmt: skip
        r.raise_for_status()
        return r.json()

    def post(self, path: str, json: Any = None) -> httpx.Response:
        return httpx.post(self.url + path, headers={"Authorization": f"Bearer {TOKEN}"}, json=json, timeout=30)

    def role(self) -> str | None:
        """Its HA role as its health says ("leader", "standby"), or None while it does not answer."""
        try:
            return str(self.get("/api/v1/health")["ha"]["role"])
        except httpx.HTTPError:
            return None

    def started(self, timeout_s: float = 40) -> str:
        """Once it exited ("exited") or its health answers ("serving")."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if not self.running():
                return "exited"
            try:
                httpx.get(self.url + "/api/v1/health", timeout=2)
                return "serving"
            except httpx.HTTPError:
                time.sleep(0.2)
        self.proc.kill()
        raise AssertionError(f"fabricd neither exited nor served within {timeout_s} s: {self.log.read_text()[-2000:]}")

    def synced(self, timeout_s: float = 30) -> Fabricd:
        """Itself, once its telemetry has synced a switch; fails with its log's end if it exits first."""

        def healthy() -> bool:
            if not self.running():
                raise AssertionError(f"fabricd exited {self.proc.returncode}: {self.log.read_text()[-2000:]}")
            try:
                return int(httpx.get(self.url + "/api/v1/health", timeout=2).json()["telemetry"]["synced"]) > 0
            except httpx.HTTPError:
                return False

        wait_for(healthy, timeout_s, 0.2)
        return self


def fabricd_run(config: Path, log: Path, *args: str, name: str | None = None, port: int | None = None,
                env: dict[str, str] | None = None) -> Fabricd:  # fmt: skip
    """`fabricd run --config CONFIG ARGS`, the way systemd runs it."""
    return Fabricd(["-m", "fabricd", "run", "--config", str(config), *args], log, name=name, port=port, env=env)


@contextmanager
def hot_pair(config: Path, folder: Path, a: Sequence[str] | None = None, b: Sequence[str] | None = None,
             a_env: dict[str, str] | None = None) -> Iterator[tuple[Fabricd, Fabricd]]:  # fmt: skip
    """Instances "a" then "b" on one HA config (`fabricd run`, or the argv given), logs a.log and b.log in
    `folder`: yields once a leads and b stands by, knowing a leads; both killed (-9) at the end."""
    run = ["-m", "fabricd", "run", "--config", str(config)]
    first = Fabricd(a or run, folder / "a.log", name="a", env=a_env)
    second: Fabricd | None = None
    try:
        wait_for(lambda: first.role() == "leader", 60)
        second = Fabricd(b or run, folder / "b.log", name="b")
        wait_for(lambda: second is not None and second.role() == "standby", 60)
        # and has read the lease once (its health names the leader; under load the first read can come later)
        wait_for(lambda: second is not None and second.get("/api/v1/health")["ha"]["leader"] == "a", 10)
        yield first, second
    finally:
        first.kill()
        if second is not None:
            second.kill()


def done_on(inst: Fabricd) -> list[str]:
    """The ports the instance's actions took down (done), sorted."""
    return sorted(f"{a['device']}:{a['port']}" for a in inst.get("/api/v1/actions")["actions"] if a["status"] == "done")


def collector(name: str, config: Path, log: Path, *args: str) -> Process:
    """`fabricd collector --instance NAME` (its metrics on a port of its own unless `args` say otherwise)."""
    args = args or ("--metrics-port", "0")
    return Process(["-m", "fabricd", "collector", "--config", str(config), "--instance", name, *args], log)


@contextmanager
def collectors(config: Path, folder: Path, names: Sequence[str],
               args: Callable[[str], Sequence[str]] = lambda name: ()) -> Iterator[dict[str, Process]]:  # fmt: skip
    """A collector per name (its log NAME.log in `folder`, its options `args(name)`), stopped at the end."""
    procs = {n: collector(n, config, folder / f"{n}.log", *args(n)) for n in names}
    try:
        yield procs
    finally:
        for p in procs.values():
            p.stop(10)


def fabricd(*args: str, token: bool = False, timeout_s: float = 60) -> subprocess.CompletedProcess[str]:
    """One `fabricd ARGS` command to its end (with the test token in FABRICD_API_TOKEN if `token`)."""
    env = _env({"FABRICD_API_TOKEN": TOKEN} if token else None)
    return subprocess.run([sys.executable, "-m", "fabricd", *args], cwd=REPO, env=env, capture_output=True,
                          text=True, timeout=timeout_s)  # fmt: skip


# --- a receiver of fabricd's requests (a webhook) --------------------------------------------------------------------
def receiver(answer: Callable[[BaseHTTPRequestHandler, bytes], int],
             path: str = "/tickets") -> tuple[ThreadingHTTPServer, str]:  # fmt: skip
    """An HTTP server on loopback, in a thread, and its URL: each POST is answered with the status that
    `answer(request, body)` returns (it may record the request, or hold it)."""

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            status = answer(self, self.rfile.read(int(self.headers["Content-Length"])))
            self.send_response(status)
            self.end_headers()

        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server, f"http://127.0.0.1:{server.server_address[1]}{path}"


# --- the bus --------------------------------------------------------------------------------------------------------
def on_bus(bus: LocalBus, body: Callable[[NATS], Awaitable[T]]) -> T:
    """`body` run with a connection to the bus, closed after."""

    async def run() -> T:
        nc = await connect(BusSettings(urls=[bus.url]), None, "test")
        try:
            return await body(nc)
        finally:
            await nc.close()

    return asyncio.run(run())


def bus_down(bus: LocalBus) -> None:
    """The nats-server stops (what it kept in memory is gone)."""
    stop_local(bus.folder)


def bus_up(bus: LocalBus) -> None:
    """The nats-server starts again on its port, from its folder."""
    start_local(bus.folder, port=int(bus.url.rsplit(":", 1)[1]))
