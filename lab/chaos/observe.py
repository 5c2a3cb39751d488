"""The checker's eyes, as an operator's: each EOS switch over eAPI (`show interfaces description`, `show lldp
neighbors`, `show ip bgp summary`), each SONiC switch over SSH (`show interfaces description`, `show lldp table`,
`show ip bgp summary`, read by sonic_show.py), fabricd over its documented REST API, the twin over its control API.
The only module of lab/chaos that reads the network (runner.py acts on it)."""

from __future__ import annotations

import os
import re
import shlex
import threading
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import paramiko
import yaml

from lab.sonic_config import sonic_port
from topology.errors import FabricdError

from . import sonic_show
from .facts import FabricFacts
from .history import ActionRec, FindingRec, Hold, Limits, PortObs, Sample, TuneRec

NS = 1e9


class ChaosError(FabricdError):
    """Something the chaos run cannot start with (no twin, no service, a bad argument): one line, exit 2."""


@dataclass(frozen=True)
class SwitchAccess:
    name: str
    url: str  # https://host:port/command-api
    username: str
    password: str
    platform: str
    host: str = ""
    ssh_port: int = 22


def read_inventory(path: Path) -> dict[str, SwitchAccess]:
    """The inventory fabricd reads (docs/inventory.md): host, user, password, and eAPI's port and transport (EOS) or
    the SSH port (SONiC)."""
    try:
        doc = yaml.safe_load(path.read_text())
    except (OSError, yaml.YAMLError) as e:
        raise ChaosError(f"{path}: cannot read the inventory ({e})") from None
    if not isinstance(doc, dict) or not isinstance(doc.get("devices"), dict):
        raise ChaosError(f"{path}: not an inventory (no devices:); see docs/inventory.md")
    defaults = doc.get("defaults") or {}
    out = {}
    for name, entry in doc["devices"].items():
        d = {**defaults, **(entry or {})}
        eapi = {**(defaults.get("eapi") or {}), **((entry or {}).get("eapi") or {})}
        ssh = {**(defaults.get("ssh") or {}), **((entry or {}).get("ssh") or {})}
        password = os.environ.get("FABRICD_LAB_PASSWORD") or _password(d, path)
        scheme = eapi.get("transport", "https")
        port = eapi.get("port", 443 if scheme == "https" else 80)
        url = f"{scheme}://{d['host']}:{port}/command-api"
        user, platform = str(d.get("username", "admin")), str(d.get("platform", "eos"))
        out[name] = SwitchAccess(name, url, user, password, platform, str(d["host"]), int(ssh.get("port", 22)))
    return out


def _password(d: dict[str, Any], path: Path) -> str:
    if d.get("password_env"):
        value = os.environ.get(str(d["password_env"]))
        if value is None:
            raise ChaosError(f"{path}: password_env {d['password_env']} is not set")
        return value
    if d.get("password_file"):
        try:
            return Path(d["password_file"]).read_text().strip()
        except OSError as e:
            raise ChaosError(f"{path}: password_file: {e}") from None
    raise ChaosError(f"{path}: no password_env or password_file")


_PEER = re.compile(r"^(\S+) (\S+)$")


class SonicSsh:
    """One SSH connection to a SONiC switch, kept open; every command an exec request on it, as `ssh switch 'show
    ...'` runs one (an exit status and the output, no prompt to match). Any failure closes it; the next command
    connects again."""

    def __init__(self, access: SwitchAccess, timeout_s: float):
        self.access = access
        self.timeout_s = timeout_s
        self.client: paramiko.SSHClient | None = None
        self.lock = threading.Lock()  # the sampler and the runner's operator share the connection

    def _connected(self) -> paramiko.SSHClient:
        with self.lock:
            transport = self.client.get_transport() if self.client is not None else None
            if self.client is None or transport is None or not transport.is_active():
                self.close()
                client = paramiko.SSHClient()
                # a lab switch's own host key (the twin makes a new one each start), as eAPI is read with verify=False
                client.set_missing_host_key_policy(paramiko.AutoAddPolicy())
                t = self.timeout_s
                client.connect(
                    self.access.host, self.access.ssh_port, self.access.username, self.access.password, timeout=t,
                    banner_timeout=t, auth_timeout=t, look_for_keys=False, allow_agent=False,
                )  # fmt: skip
                self.client = client
            return self.client

    def run(self, *commands: str) -> list[tuple[int, str, str]]:
        """(exit status, stdout, stderr) of each command; every exec is sent before any output is read, so the
        switch runs them side by side. Raises ChaosError (and drops the connection) when SSH fails."""
        try:
            transport = self._connected().get_transport()
            if transport is None:
                raise EOFError("no transport")
            channels = []
            for command in commands:
                channel = transport.open_session(timeout=self.timeout_s)
                channel.settimeout(self.timeout_s)
                channel.exec_command(command)
                channels.append(channel)
            out = []
            for channel in channels:
                stdout = channel.makefile("rb").read().decode(errors="replace")
                stderr = channel.makefile_stderr("rb").read().decode(errors="replace")
                out.append((channel.recv_exit_status(), stdout, stderr))
                channel.close()
            return out
        except (paramiko.SSHException, OSError, EOFError) as e:
            with self.lock:
                self.close()
            raise ChaosError(f"{self.access.name}: SSH to {self.access.host}:{self.access.ssh_port}: {e}") from None

    def close(self) -> None:
        if self.client is not None:
            self.client.close()
            self.client = None


_ECN = re.compile(
    r"random-detect ecn minimum-threshold (\d+) kbytes maximum-threshold (\d+) kbytes"
    r"(?: max-mark-probability (\d+))?"
)


def ecn_of(config: str) -> dict[str, int] | None:
    """An interface's `random-detect ecn` line as the intent's knobs (bytes to the kbyte EOS keeps)."""
    m = _ECN.search(config)
    if m is None:
        return None
    out = {"ecn.min_bytes": int(m.group(1)) * 1000, "ecn.max_bytes": int(m.group(2)) * 1000}
    if m.group(3) is not None:
        out["ecn.max_probability"] = int(m.group(3))
    return out


class Switches:
    """Every switch, as its operator reads it, once a sample: EOS over eAPI (kept-alive HTTPS, one request of three
    show commands), SONiC over SSH (one kept-open connection, three show commands as exec requests). A switch that
    does not answer is silent in that sample."""

    SHOW = ("show interfaces description", "show lldp neighbors", "show ip bgp summary")

    def __init__(self, access: dict[str, SwitchAccess], facts: FabricFacts, timeout_s: float = 2.0):
        self.access = {n: a for n, a in access.items() if a.platform == "eos" and n in facts.rail}
        self.sonic = {n: SonicSsh(a, timeout_s) for n, a in access.items() if a.platform == "sonic" and n in facts.rail}
        self.not_read = sorted(n for n in facts.switches if n not in self.access and n not in self.sonic)
        self.facts = facts
        # what LLDP names a SONiC switch's ports by (its SONiC names, then its aliases as each read shows them)
        self.names = sonic_show.blueprint_names(facts, self.sonic)
        self.base_names = {d: dict(n) for d, n in self.names.items()}
        self.clients = {
            n: httpx.Client(verify=False, timeout=timeout_s, auth=(a.username, a.password))  # a lab's own cert
            for n, a in self.access.items()
        }
        self.pool = ThreadPoolExecutor(max_workers=8, thread_name_prefix="chaos-read")

    def close(self) -> None:
        self.pool.shutdown(wait=False, cancel_futures=True)
        for c in self.clients.values():
            c.close()
        for s in self.sonic.values():
            with s.lock:
                s.close()

    def run(self, device: str, cmds: list[str]) -> list[dict[str, Any]]:
        body = {
            "jsonrpc": "2.0",
            "method": "runCmds",
            "params": {"version": 1, "cmds": cmds, "format": "json"},
            "id": "chaos",
        }
        r = self.clients[device].post(self.access[device].url, json=body)
        r.raise_for_status()
        doc = r.json()
        if "error" in doc:
            raise ChaosError(f"{device}: eAPI error {doc['error'].get('message', doc['error'])}")
        result: list[dict[str, Any]] = doc["result"]
        return result

    def ecn(self, port: str) -> dict[str, int] | None:
        """The lossless queue's ECN values a port runs (EOS: its running config's `random-detect ecn` line, thresholds
        in kbytes read as bytes), as the intent's knobs; None when not read (not EOS, no answer, no such line)."""
        device, name = port.split(":", 1)
        if device not in self.access:
            return None
        body = {
            "jsonrpc": "2.0",
            "method": "runCmds",
            "id": "chaos",
            "params": {"version": 1, "cmds": [f"show running-config interfaces {name}"], "format": "text"},
        }
        try:
            r = self.clients[device].post(self.access[device].url, json=body)
            text = str(r.json()["result"][0]["output"])
        except (httpx.HTTPError, ValueError, KeyError, IndexError):
            return None
        return ecn_of(text)

    def fetch(self, device: str) -> list[Any] | None:
        """The switch's three answers (eAPI's JSON, or SONiC's show text), None when it does not answer. A SONiC
        switch whose LLDP or BGP table fails (its lldp or bgp container restarting) still shows its ports: that
        table reads as empty (no neighbour, no session known); without its ports it is silent."""
        try:
            if device in self.sonic:
                got = self.sonic[device].run(*sonic_show.SHOW)
                return None if got[0][0] != 0 else [out if status == 0 else "" for status, out, _ in got]
            return list(self.run(device, list(self.SHOW)))
        except (httpx.HTTPError, ChaosError, ValueError, KeyError):
            return None

    def read(self, device: str) -> dict[str, PortObs] | None:
        return self.parse(device, self.fetch(device))

    def parse(self, device: str, got: list[Any] | None) -> dict[str, PortObs] | None:
        if got is None:
            return None
        desc, lldp, bgp = got
        if device in self.sonic:
            return sonic_show.parse_sonic_ports(device, desc, lldp, bgp, self.facts, self.names)
        try:
            return parse_ports(device, desc, lldp, bgp, self.facts, self.names)
        except (ValueError, KeyError, TypeError, AttributeError):
            return None

    def sample(self) -> tuple[dict[str, PortObs], frozenset[str]]:
        devices = [*self.access, *self.sonic]
        answers = dict(zip(devices, self.pool.map(self.fetch, devices), strict=True))
        # a SONiC switch's aliases first, so every switch's LLDP names its SONiC neighbours' ports in this sample
        for device in self.sonic:
            got = answers[device]
            if got is not None:
                self.names[device] = sonic_show.with_aliases(self.base_names[device], got[0])
        ports: dict[str, PortObs] = {}
        silent = set(self.not_read)
        for device in devices:
            obs = self.parse(device, answers[device])
            if obs is None:
                silent.add(device)
            else:
                ports.update(obs)
        return ports, frozenset(silent)

    def set_admin(self, port: str, up: bool) -> None:
        """What an operator types: on EOS `interface X` / `[no] shutdown` in a configure session over eAPI; on SONiC
        `sudo config interface startup|shutdown EthernetM` over SSH (raises ChaosError when the switch refuses)."""
        device, name = port.split(":", 1)
        if device in self.sonic:
            command = f"sudo -n config interface {'startup' if up else 'shutdown'} {shlex.quote(sonic_port(name))}"
            ((status, out, err),) = self.sonic[device].run(command)
            if status != 0:
                raise ChaosError(f"{device}: {command} exited {status}: {(err or out).strip()[-300:]}")
            return
        self.run(device, ["enable", "configure", f"interface {name}", "no shutdown" if up else "shutdown", "end"])


def parse_ports(
    device: str,
    desc: dict[str, Any],
    lldp: dict[str, Any],
    bgp: dict[str, Any],
    facts: FabricFacts,
    names: sonic_show.Names | None = None,
) -> dict[str, PortObs]:
    """One switch's ports from its three answers (EOS's JSON shapes). A BGP peer is placed on its port by the
    blueprint: the peer's description names its device and port, whose far end is ours. A SONiC neighbour's port,
    which its LLDP names by alias or SONiC name, is given its blueprint name through `names`."""
    names = names or {}
    neighbors = {
        n["port"]: sonic_show.far_end(n["neighborDevice"], n["neighborPort"], names)
        for n in lldp.get("lldpNeighbors", [])
    }
    bgp_up: dict[str, bool] = {}
    for vrf in (bgp.get("vrfs") or {}).values():
        for peer in (vrf.get("peers") or {}).values():
            m = _PEER.match(str(peer.get("description", "")))
            local = facts.peer.get(f"{m.group(1)}:{m.group(2)}") if m else None
            if local is not None and local.startswith(device + ":"):
                bgp_up[local] = peer.get("peerState") == "Established"
    out = {}
    for name, row in (desc.get("interfaceDescriptions") or {}).items():
        key = f"{device}:{name}"
        if key not in facts.peer:
            continue
        out[key] = PortObs(
            admin_up=row.get("interfaceStatus") != "adminDown",
            oper_up=row.get("lineProtocolStatus") == "up",
            description=str(row.get("description", "")),
            neighbor=neighbors.get(name),
            bgp_up=bgp_up.get(key),
        )
    return out


class Api:
    """fabricd's REST API (docs/operations.md), at one URL or several (HA: every instance answers reads from the
    shared state; only the leader acts, a standby answers a change with 503). Reads go to the instance that last
    answered, then the others, with a short timeout (a paused fabricd answers nothing); changes to each in turn
    until one is not a standby."""

    def __init__(self, urls: list[str], token: str, timeout_s: float = 1.0):
        self.urls = [u.rstrip("/") for u in urls]
        headers = {"Authorization": f"Bearer {token}"}
        self.clients = [httpx.Client(base_url=u, headers=headers, timeout=timeout_s) for u in self.urls]
        self.best = 0

    def close(self) -> None:
        for c in self.clients:
            c.close()

    def _order(self) -> list[int]:
        return [self.best, *(i for i in range(len(self.clients)) if i != self.best)]

    def get(self, path: str, **params: Any) -> Any:
        error: httpx.HTTPError | None = None
        for i in self._order():
            try:
                r = self.clients[i].get(path, params=params or None)
                r.raise_for_status()
                self.best = i
                return r.json() if path != "/metrics" else r.text
            except httpx.HTTPError as e:
                error = e
        assert error is not None
        raise error

    def post(self, path: str, body: dict[str, Any] | None = None, timeout_s: float = 3.0) -> httpx.Response:
        error: httpx.HTTPError | None = None
        answer: httpx.Response | None = None
        for i in self._order():
            try:
                answer = self.clients[i].post(path, json=body, timeout=timeout_s)
            except httpx.HTTPError as e:
                error = e
                continue
            if answer.status_code != 503:
                return answer
        if answer is not None:
            return answer
        assert error is not None
        raise error

    def reachable(self, i: int | None = None) -> bool:
        for j in [i] if i is not None else range(len(self.clients)):
            try:
                self.clients[j].get("/api/v1/health").raise_for_status()
                return True
            except httpx.HTTPError:
                pass
        return False

    def holds(self) -> dict[str, Hold] | None:
        try:
            ports = self.get("/api/v1/ports/disabled")["ports"]
        except (httpx.HTTPError, ValueError, KeyError):
            return None
        return {f"{p['device']}:{p['port']}": Hold(p["action_id"], p["ticket_id"], p["since_ts"] / NS) for p in ports}

    def to_reapply(self) -> frozenset[str]:
        """The holds fabricd's health lists as to re-apply (up again, the guard refusing to take them down)."""
        try:
            rows = self.get("/api/v1/health").get("to_reapply") or []
            return frozenset(str(r["port"]) for r in rows)
        except (httpx.HTTPError, ValueError, KeyError, TypeError, AttributeError):
            return frozenset()

    def open_tickets(self) -> frozenset[int] | None:
        try:
            return frozenset(t["id"] for t in self._all("/api/v1/tickets", "tickets", status="open"))
        except (httpx.HTTPError, ValueError, KeyError):
            return None

    def _all(self, path: str, key: str, **params: Any) -> list[dict[str, Any]]:
        out: list[dict[str, Any]] = []
        while True:
            page = self.get(path, limit=500, offset=len(out), **params)[key]
            out += page
            if len(page) < 500:
                return out

    def actions(self) -> list[ActionRec]:
        return [
            ActionRec(
                a["id"],
                a["op"],
                f"{a['device']}:{a['port']}",
                a["status"],
                a["finding_id"],
                a["ticket_id"],
                a["created_ts"] / NS,
                a["updated_ts"] / NS,
                a.get("key"),
            )
            for a in self._all("/api/v1/actions", "actions")
        ]

    def findings(self) -> list[FindingRec]:
        out = []
        for f in self._all("/api/v1/findings", "findings"):
            ports = tuple(p if ":" in p else f"{f['device']}:{p}" for p in (f.get("ports") or []))
            if not ports and f.get("port"):
                ports = (f"{f['device']}:{f['port']}",)
            out.append(
                FindingRec(
                    f["id"],
                    f["kind"],
                    f["device"],
                    ports,
                    tuple(f.get("devices") or ()),
                    f["detected_ts"] / NS,
                    f.get("last_seen_ts", f["detected_ts"]) / NS,
                )
            )
        return out

    def audit(self) -> tuple[list[int], set[int]]:
        out: list[dict[str, Any]] = []
        while True:
            page = self.get("/api/v1/audit", limit=200, offset=len(out))["audit"]
            out += page
            if len(page) < 200:
                break
        return [e["id"] for e in out], {e["action_id"] for e in out if e.get("action_id") is not None}

    def tuning(self) -> list[TuneRec]:
        """The tuning ledger's changes (observe's records left out), oldest first."""
        doc = self.get("/api/v1/tuning/history", limit=1000, changes="true")["changes"]
        return sorted(
            (TuneRec(c["id"], c["subject"], c["status"], c["action_id"], c["created_ts"] / NS,
                     None if c["applied_ts"] is None else c["applied_ts"] / NS,
                     None if c["ended_ts"] is None else c["ended_ts"] / NS,
                     tuple((str(x["knob"]), int(x["before"]), int(x["after"])) for x in c["changes"])) for c in doc),
            key=lambda t: t.id,
        )  # fmt: skip

    def limits(self, min_uplink_fraction: float) -> Limits:
        """The guard's limits as /metrics publishes them (fabricd_remediation_budget_limit)."""
        text = self.get("/metrics")
        got = {}
        for m in re.finditer(r'^fabricd_remediation_budget_limit\{limit="(\w+)"\} ([0-9.e+]+)$', text, re.M):
            got[m.group(1)] = int(float(m.group(2)))
        d = Limits()
        return Limits(
            min_uplink_fraction,
            got.get("switch_budget", d.max_down_per_switch),
            got.get("rail_budget", d.max_down_per_rail),
            got.get("fabric_budget", d.max_down_fabric),
            got.get("rate", d.max_actions_per_hour),
        )


def sample(t: float, switches: Switches, api: Api) -> Sample:
    with ThreadPoolExecutor(max_workers=3) as pool:
        held = pool.submit(api.holds)
        tickets = pool.submit(api.open_tickets)
        again = pool.submit(api.to_reapply)
        ports, silent = switches.sample()
        return Sample(t, ports, silent, held.result(), tickets.result(), again.result())
