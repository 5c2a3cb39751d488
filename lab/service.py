"""The twin process: one asyncio loop serving gNMI, eAPI and SSH for every switch, plus the control API.

Start-up writes into the state dir: `inventory.yaml` (what fabricd reads), `lab.secret` (mode 0600, the
password every protocol checks), `control.json` (control API address), `twin.pid`, and `ready` last, so
whoever waits on `ready` sees a complete state dir. Faults go to `faults.jsonl`, probes to `probes.jsonl`.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import json
import os
import secrets
import signal
import socket
import time
from collections import deque
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import uvicorn
import yaml

from topology.blueprint import generate_blueprint
from topology.fabric import Fabric
from topology.spec import FabricSpec

from .control import build_app
from .daemons import Daemons, DaemonsError
from .eapi import start_eapi_servers
from .endpoints import Credentials, DeviceEndpoints, allocate
from .eos_config import ConfigStore
from .eos_releases import DEFAULT_EOS_VERSION, release
from .faults import FaultInjector
from .gnmi_server import start_gnmi_servers
from .model import Twin
from .probes import ProbeGenerator
from .saved_config import SAVED_DIR
from .sonic_config import SonicStore
from .sonic_releases import DEFAULT_RELEASE as DEFAULT_SONIC_RELEASE
from .sonic_releases import release_of
from .ssh_server import start_ssh_servers
from .tls import self_signed
from .workloads import WorkloadRunner

USERNAME = "admin"


class _Closable(Protocol):
    async def close(self) -> None: ...


TICK_S = 0.1


@dataclass
class TwinOptions:
    state_dir: Path
    base_address: str = "127.42.0.1"
    port_offset: int = 0
    probe_interval_s: float = 5.0
    eos_version: str = DEFAULT_EOS_VERSION  # the release every EOS switch of the twin runs (lab/eos_releases.py)
    sonic_version: str = DEFAULT_SONIC_RELEASE  # every SONiC switch's (lab/sonic_releases.py)
    sonic_aliases: bool = False  # sonic-gnmi keys COUNTERS_DB rows by the ports' aliases
    daemons: str = "model"  # "real": FRR and lldpd in a namespace per switch under the SONiC surfaces (daemons.py)
    # the SONiC switches' STATE_DB has no NEIGH_STATE_TABLE rows (FRR in unified or split mode), vtysh still answers
    no_neigh_state: bool = False
    converge_timeout_s: float = 60.0  # with real daemons: how long `ready` waits for every session and neighbour


def lab_password(state_dir: Path) -> str:
    """The lab password: FABRICD_LAB_PASSWORD, else the one saved in the state dir, else a new random one."""
    env = os.environ.get("FABRICD_LAB_PASSWORD")
    if env:
        return env
    secret = state_dir / "lab.secret"
    if secret.exists():
        return secret.read_text().strip()
    return secrets.token_urlsafe(16)


def _save_secret(state_dir: Path, password: str) -> Path:
    path = state_dir / "lab.secret"
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(password + "\n")
    path.chmod(0o600)
    return path


def inventory_document(
    spec: FabricSpec, twin: Twin, endpoints: dict[str, DeviceEndpoints], secret_file: Path
) -> dict[str, Any]:
    """The inventory format fabricd reads (docs/lab.md): connection defaults plus one entry per switch."""
    any_ep = next(iter(endpoints.values()))
    return {
        "fabric": spec.name,
        "defaults": {
            "username": USERNAME,
            "password_file": str(secret_file.resolve()),
            "gnmi": {"port": any_ep.gnmi_port, "tls": False},
            "eapi": {"port": any_ep.eapi_https_port, "transport": "https"},  # EOS's default (HTTP on eapi_port too)
            "ssh": {"port": any_ep.ssh_port},
        },
        "devices": {name: _device_entry(twin, name, ep) for name, ep in endpoints.items()},
    }


def _device_entry(twin: Twin, name: str, ep: DeviceEndpoints) -> dict[str, str]:
    sw = twin.switches[name]
    entry = {"host": ep.host, "platform": sw.platform, "role": str(sw.role)}
    entry["os_version"] = sw.os_version  # as an inventory synced from `show version` would say
    return entry


def _free_port(host: str) -> int:
    with socket.socket() as s:
        s.bind((host, 0))
        port: int = s.getsockname()[1]
        return port


class TwinProcess:
    def __init__(self, spec: FabricSpec, options: TwinOptions):
        self.spec = spec
        self.options = options
        self.state_dir = options.state_dir
        release(options.eos_version)  # VersionError before anything starts
        release_of(options.sonic_version)
        self.twin = Twin(Fabric(generate_blueprint(spec)), eos_version=options.eos_version,
                         sonic_version=options.sonic_version)  # fmt: skip
        self.password = lab_password(options.state_dir)
        self.credentials = Credentials(USERNAME, self.password)
        saved = options.state_dir / SAVED_DIR  # what the switches saved before this start (a power cycle)
        self.configs = ConfigStore(self.twin, self.credentials, saved)
        self.twin.sonic_aliases = options.sonic_aliases
        self.twin.bgpmon.silent = options.no_neigh_state
        self.sonic = SonicStore(self.twin, saved)  # the SONiC switches' CONFIG_DB (their SSH logins work on it)
        self.faults = FaultInjector(self.twin, on_reboot=self.configs.reboot)
        self.workloads = WorkloadRunner(self.twin)
        self.probes: deque[dict[str, Any]] = deque(maxlen=50_000)
        self.prober = ProbeGenerator(self.twin)
        self.endpoints = allocate(sorted(self.twin.switches), options.base_address, options.port_offset)
        self.daemons: Daemons | None = None
        if options.daemons == "real":
            self.daemons = Daemons(self.twin, options.state_dir)
        elif options.daemons != "model":
            raise DaemonsError(f"--daemons must be model or real, got {options.daemons!r}")
        self._stop = asyncio.Event()

    async def run(self) -> None:
        state = self.state_dir
        state.mkdir(parents=True, exist_ok=True)
        (state / "ready").unlink(missing_ok=True)
        password, creds = self.password, self.credentials
        secret_file = _save_secret(state, password)
        t0 = time.perf_counter()
        closers: list[_Closable] = []
        converged = ""
        try:
            if self.daemons is not None:
                converged = await self._start_daemons(self.daemons)
            closers.append(await start_gnmi_servers(self.twin, self.endpoints, creds))
            tls = self_signed(state, [ep.host for ep in self.endpoints.values()])  # made anew at each `lab up`
            closers.append(await start_eapi_servers(self.twin, self.configs, self.endpoints, creds, tls))
            closers.append(await start_ssh_servers(self.twin, self.configs, self.endpoints, creds, self.sonic))
            control_port = _free_port("127.0.0.1")
            info = {"fabric": self.spec.name, "pid": os.getpid(), "state_dir": str(state.resolve())}
            app = build_app(self.twin, self.faults, password, self.probes, info, self.workloads)
            server = uvicorn.Server(
                uvicorn.Config(app, host="127.0.0.1", port=control_port, log_level="warning", lifespan="off")
            )
            control = asyncio.create_task(server.serve())
            while not server.started:
                if control.done():
                    control.result()
                await asyncio.sleep(0.01)
            startup_s = time.perf_counter() - t0
            inventory = inventory_document(self.spec, self.twin, self.endpoints, secret_file)
            (state / "inventory.yaml").write_text(yaml.safe_dump(inventory, sort_keys=False))
            (state / "control.json").write_text(
                json.dumps({"url": f"http://127.0.0.1:{control_port}", "startup_s": round(startup_s, 2)})
            )
            (state / "twin.pid").write_text(str(os.getpid()))
            # The fabric, configs and indexes live as long as the twin: out of the cyclic GC's scans (a full
            # collection over them held the loop ~50 ms at 16 switches, an eAPI commit waiting behind it).
            gc.freeze()
            (state / "ready").write_text(f"{len(self.twin.switches)} switches up in {startup_s:.2f} s{converged}\n")
            loop = asyncio.get_running_loop()
            for sig in (signal.SIGTERM, signal.SIGINT):
                # Only the main thread may own signals; a twin run from a test thread is stopped with stop().
                with contextlib.suppress(NotImplementedError, ValueError, RuntimeError):
                    loop.add_signal_handler(sig, self._stop.set)
            await self._loop()
            server.should_exit = True
            await control
        finally:
            for closer in reversed(closers):
                await closer.close()
            if self.daemons is not None:
                await asyncio.to_thread(self.daemons.stop)
            for name in ("ready", "twin.pid", "control.json"):
                (state / name).unlink(missing_ok=True)

    def stop(self) -> None:
        self._stop.set()

    async def _start_daemons(self, daemons: Daemons) -> str:
        """Namespaces, veths, FRR and lldpd up; wait (up to converge_timeout_s) until every BGP session is
        Established and every LLDP neighbour known; what `ready` says of it."""
        t0 = time.perf_counter()
        await asyncio.to_thread(daemons.start)
        self.twin.daemons = daemons
        self.twin.bgpmon.read = daemons.frr_states  # bgpmon reads the real FRR, from its start with them
        for device in self.twin.bgpmon.tables:
            self.twin.bgpmon.start(device, self.twin.clock())
        deadline = time.monotonic() + self.options.converge_timeout_s
        while True:
            ok, what = daemons.converged()
            if ok or time.monotonic() > deadline:
                break
            await asyncio.sleep(0.2)
        state = "converged" if ok else "NOT converged"
        return f"; real daemons {state} in {time.perf_counter() - t0:.1f} s ({what})"

    async def _loop(self) -> None:
        faults_seen = 0
        cleared_seen: set[str] = set()
        next_probe = 0.0
        with (
            (self.state_dir / "faults.jsonl").open("a") as fault_log,
            (self.state_dir / "probes.jsonl").open("a") as probe_log,
        ):
            while not self._stop.is_set():
                now = self.twin.advance()
                if self.daemons is not None:
                    self.daemons.sync()
                for rec in self.faults.log[faults_seen:]:
                    fault_log.write(json.dumps({"event": "inject"} | rec.to_dict()) + "\n")
                faults_seen = len(self.faults.log)
                for rec in self.faults.log:
                    if rec.cleared_ns is not None and rec.id not in cleared_seen:
                        cleared_seen.add(rec.id)
                        fault_log.write(json.dumps({"event": "clear"} | rec.to_dict()) + "\n")
                fault_log.flush()
                if time.monotonic() >= next_probe:
                    next_probe = time.monotonic() + self.options.probe_interval_s
                    for probe in self.prober.round(now):
                        self.probes.append(probe)
                        probe_log.write(json.dumps(probe) + "\n")
                    probe_log.flush()
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._stop.wait(), TICK_S)
