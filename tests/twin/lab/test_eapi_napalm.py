"""The twin's eAPI driven only through napalm's unmodified `eos` driver (and raw HTTP for the protocol edges).

The servers run on an asyncio loop in a background thread (napalm blocks); time is an injected clock, so a
commit timer expires when the test moves the clock and the twin is advanced.
"""

from __future__ import annotations

import asyncio
import base64
import http.client
import json
import random
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any, TypeVar

import pyeapi.eapilib
import pytest
from napalm import get_network_driver
from napalm.base.exceptions import ConnectionException, MergeConfigException

from lab.eapi import EapiServers, start_eapi_servers
from lab.endpoints import EAPI_PORT, Credentials, DeviceEndpoints, allocate
from lab.eos_config import ConfigStore
from lab.model import Twin
from tests.conftest import DATA
from topology.fabric import Fabric
from topology.model import Cabling
from topology.units import NS

GOLDEN = DATA / "golden" / "small-pod_leaf-g0-r0.cfg"
DEVICE = "leaf-g0-r0"
PASSWORD = "twin-pw"
T = TypeVar("T")


class Clock:
    def __init__(self) -> None:
        self.t = 1_700_000_000 * NS

    def __call__(self) -> int:
        return self.t


@pytest.fixture(scope="module")
def eapi_loop() -> Iterator[asyncio.AbstractEventLoop]:
    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    yield loop
    loop.call_soon_threadsafe(loop.stop)
    thread.join(5)
    loop.close()


@dataclass
class EapiLab:
    twin: Twin
    clock: Clock
    configs: ConfigStore
    endpoints: dict[str, DeviceEndpoints]
    servers: EapiServers
    loop: asyncio.AbstractEventLoop

    def on_loop(self, fn: Callable[[], T]) -> T:
        """Touch the twin on the loop thread, where the servers use it."""

        async def call() -> T:
            return fn()

        return asyncio.run_coroutine_threadsafe(call(), self.loop).result(10)

    def advance(self, seconds: float) -> None:
        self.clock.t += int(seconds * NS)
        self.on_loop(self.twin.advance)

    def driver(self, password: str = PASSWORD) -> Any:
        ep = self.endpoints[DEVICE]
        return get_network_driver("eos")(
            ep.host, "admin", password, timeout=10, optional_args={"transport": "http", "port": ep.eapi_port}
        )

    def admin_up(self, port: str) -> bool:
        return self.on_loop(lambda: self.twin.port_config(DEVICE, port).admin_up)


def _endpoints(twin: Twin) -> dict[str, DeviceEndpoints]:
    base = f"127.42.{random.randint(1, 250)}.1"
    port = random.randint(20000, 60000)
    return allocate(sorted(twin.switches), base, port - EAPI_PORT)


@pytest.fixture
def eapi_twin(small_blueprint: Cabling, eapi_loop: asyncio.AbstractEventLoop) -> Iterator[EapiLab]:
    clock = Clock()
    twin = Twin(Fabric(small_blueprint), clock=clock)
    configs = ConfigStore(twin)
    creds = Credentials("admin", PASSWORD)
    for attempt in range(5):
        endpoints = _endpoints(twin)
        try:
            servers = asyncio.run_coroutine_threadsafe(
                start_eapi_servers(twin, configs, endpoints, creds), eapi_loop
            ).result(10)
            break
        except OSError:
            if attempt == 4:
                raise
    lab = EapiLab(twin, clock, configs, endpoints, servers, eapi_loop)
    yield lab
    asyncio.run_coroutine_threadsafe(servers.close(), eapi_loop).result(10)


def test_getters(eapi_twin: EapiLab) -> None:
    drv = eapi_twin.driver()
    drv.open()
    try:
        facts = drv.get_facts()
        assert facts["hostname"] == DEVICE
        assert facts["vendor"] == "Arista"
        ports = eapi_twin.twin.switch(DEVICE).ports
        assert facts["interface_list"] == ports
        interfaces = drv.get_interfaces()
        assert interfaces["Ethernet1/1"]["is_up"] and interfaces["Ethernet1/1"]["is_enabled"]
        eapi_twin.advance(10)  # ten seconds of traffic since boot
        expected = eapi_twin.twin.switch(DEVICE).value("Ethernet1/1", "if.in-octets", eapi_twin.clock())
        counters = drv.get_interfaces_counters()
        assert set(counters) == set(ports)
        # the twin's counter at this (injected, unmoving) time: 10 s at 30-60 % of 400G
        assert counters["Ethernet1/1"]["rx_octets"] == expected
        assert 10 * 0.3 * 400e9 / 8 <= expected <= 10 * 0.6 * 400e9 / 8
        lldp = drv.get_lldp_neighbors()
        peer = eapi_twin.twin.peer(DEVICE, "Ethernet5/1")
        assert peer is not None
        assert lldp["Ethernet5/1"] == [{"hostname": peer.device, "port": peer.port}]
        config = drv.get_config()
        assert f"hostname {DEVICE}" in config["running"]
        assert config["startup"] == config["running"].replace(
            "! Command: show running-config", "! Command: show startup-config"
        )
    finally:
        drv.close()


def test_get_environment_fans_temperatures_power_cpu_memory(eapi_twin: EapiLab) -> None:
    # napalm's get_environment reads cooling, temperature and power as JSON and `show processes top once` as text
    drv = eapi_twin.driver()
    drv.open()
    try:
        env = drv.get_environment()
    finally:
        drv.close()
    assert env["fans"] == {str(t): {"status": True} for t in range(1, 5)}
    assert set(env["temperature"]) == {"TempSensor1", "TempSensor2", "TempSensor3", "TempSensor4", "TempSensorP1/1",
                                       "TempSensorP2/1"}  # fmt: skip
    for name, t in env["temperature"].items():
        assert 20 < t["temperature"] < 90 and not t["is_alert"] and not t["is_critical"], name
    assert set(env["power"]) == {"1", "2"}
    assert all(p["status"] and p["capacity"] == 1900.0 and 0 < p["output"] < 1900 for p in env["power"].values())
    assert 0 < env["cpu"][0]["%usage"] < 20
    assert env["memory"]["available_ram"] == 16_092_376 and 0 < env["memory"]["used_ram"] < 16_092_376


# The getters napalm's eos driver does not implement for any EOS (it raises NotImplementedError itself).
NAPALM_UNIMPLEMENTED = {"get_firewall_policies", "get_ipv6_neighbors_table", "get_ntp_peers", "get_probes_config",
                        "get_probes_results"}  # fmt: skip


def test_every_napalm_eos_getter_answers(eapi_twin: EapiLab) -> None:
    # unmodified napalm, every get_* it has: an answer of the documented shape, never "invalid command"
    drv = eapi_twin.driver()
    drv.open()
    try:
        answers: dict[str, Any] = {}
        for name in sorted(n for n in dir(drv) if n.startswith("get_")):
            if name in NAPALM_UNIMPLEMENTED:
                with pytest.raises(NotImplementedError):
                    getattr(drv, name)()
                continue
            args = ("10.0.0.0/8",) if name == "get_route_to" else ()
            answers[name] = getattr(drv, name)(*args)
    finally:
        drv.close()
    assert len(answers) == 21
    assert answers["get_vlans"] == {"1": {"name": "default", "interfaces": []}}
    assert set(answers["get_users"]) == {"admin"} and answers["get_users"]["admin"]["level"] == 15
    assert PASSWORD not in str(answers["get_users"])  # the lab password never leaves the lab, hashed or not
    assert answers["get_network_instances"]["default"]["type"] == "DEFAULT_INSTANCE"
    assert answers["get_snmp_information"] == {"chassis_id": "", "location": "", "contact": "", "community": {}}
    assert answers["get_ntp_stats"] == [] and answers["get_mac_address_table"] == []
    # the underlay's eBGP (lab/bgp.py): a session per uplink, every one up, and the config napalm parses
    sessions = {s.peer_address: s for s in eapi_twin.twin.bgp.underlay.sessions(DEVICE)}
    peers = answers["get_bgp_neighbors"]["global"]["peers"]
    assert set(peers) == set(sessions) and all(p["is_up"] for p in peers.values())
    configured = {n for group in answers["get_bgp_config"].values() for n in group["neighbors"]}
    assert configured == set(sessions), answers["get_bgp_config"]
    assert answers["get_route_to"] == {}
    assert answers["get_facts"]["hostname"] == DEVICE
    assert "Ethernet1/1" in answers["get_optics"] and answers["get_environment"]["fans"]


def test_merge_compare_commit_confirm(eapi_twin: EapiLab) -> None:
    drv = eapi_twin.driver()
    drv.open()
    drv.load_merge_candidate(config="interface Ethernet1/1\n   shutdown\n")
    diff = drv.compare_config()
    assert diff.startswith("@@")
    assert "+   shutdown" in diff.splitlines()
    assert eapi_twin.admin_up("Ethernet1/1")  # nothing applied before the commit
    drv.commit_config(revert_in=60)
    assert drv.has_pending_commit()
    assert not eapi_twin.admin_up("Ethernet1/1")
    drv.confirm_commit()
    assert not drv.has_pending_commit()
    eapi_twin.advance(120)
    assert not eapi_twin.admin_up("Ethernet1/1")
    assert "   shutdown" in drv.get_config(retrieve="startup")["startup"]  # confirm wrote memory
    drv.close()


def test_unconfirmed_commit_reverts_by_itself(eapi_twin: EapiLab) -> None:
    drv = eapi_twin.driver()
    drv.open()
    drv.load_merge_candidate(config="interface Ethernet2/1\nshutdown\n")
    drv.commit_config(revert_in=30)
    assert not eapi_twin.admin_up("Ethernet2/1")
    eapi_twin.advance(29)
    assert not eapi_twin.admin_up("Ethernet2/1")
    eapi_twin.advance(2)
    assert eapi_twin.admin_up("Ethernet2/1")
    assert not drv.has_pending_commit()
    assert "shutdown" not in drv.get_config(retrieve="running")["running"].split("interface Ethernet2/1")[1][:60]


def test_rollback_of_a_pending_commit_and_discard(eapi_twin: EapiLab) -> None:
    drv = eapi_twin.driver()
    drv.open()
    before = drv.get_config(retrieve="running")["running"]
    drv.load_merge_candidate(config="interface Ethernet3/1\n   shutdown\n")
    drv.commit_config(revert_in=300)
    assert not eapi_twin.admin_up("Ethernet3/1")
    drv.rollback()
    assert eapi_twin.admin_up("Ethernet3/1")
    assert drv.get_config(retrieve="running")["running"] == before
    drv.load_merge_candidate(config="hostname other\n")
    assert "+hostname other" in drv.compare_config()
    drv.discard_config()
    assert drv.compare_config() == ""
    assert drv.get_config(retrieve="running")["running"] == before
    drv.close()


def test_rollback_after_a_plain_commit_restores_the_previous_config(eapi_twin: EapiLab) -> None:
    drv = eapi_twin.driver()
    drv.open()
    drv.load_merge_candidate(config="interface Ethernet4/1\n   shutdown\n")
    drv.commit_config()
    assert not eapi_twin.admin_up("Ethernet4/1")
    drv.rollback()  # configure replace flash:rollback-0 (the startup config saved before the commit)
    assert eapi_twin.admin_up("Ethernet4/1")
    drv.close()


def test_rejected_line_raises_and_leaves_running_config(eapi_twin: EapiLab) -> None:
    drv = eapi_twin.driver()
    drv.open()
    before = drv.get_config(retrieve="running")["running"]
    with pytest.raises(MergeConfigException, match=r"Invalid input \(at token 0: 'foo'\)"):
        drv.load_merge_candidate(config="interface Ethernet1/1\n   shutdown\n   foo bar\n")
    assert drv.compare_config() == ""
    assert drv.get_config(retrieve="running")["running"] == before
    assert eapi_twin.admin_up("Ethernet1/1")
    drv.close()


def test_golden_config_applies_and_shows_in_running_config(eapi_twin: EapiLab) -> None:
    golden = GOLDEN.read_text()
    drv = eapi_twin.driver()
    drv.open()
    drv.load_merge_candidate(config=golden)
    assert "+   priority-flow-control priority 3 no-drop" in drv.compare_config()
    drv.commit_config()
    running = drv.get_config(retrieve="running")["running"]
    for line in golden.splitlines():
        if line.strip() != "!":
            assert line in running.splitlines()
    cfg = eapi_twin.on_loop(lambda: eapi_twin.twin.port_config(DEVICE, "Ethernet1/1"))
    assert cfg.pfc_enabled and cfg.no_drop == {3} and cfg.ecn == {3: (600_000, 6_000_000, 5)} and cfg.watchdog
    # Applying it again changes nothing.
    drv.load_merge_candidate(config=golden)
    assert drv.compare_config() == ""
    drv.close()


def test_wrong_password_is_refused(eapi_twin: EapiLab) -> None:
    drv = eapi_twin.driver(password="wrong")
    # napalm's open() wraps only the connection set-up; the first request's 401 surfaces as pyeapi's error.
    with pytest.raises((ConnectionException, pyeapi.eapilib.ConnectionError), match="Unauthorized"):
        drv.open()


def _post(lab: EapiLab, body: bytes, auth: str = f"admin:{PASSWORD}") -> tuple[int, dict[str, str], bytes]:
    ep = lab.endpoints[DEVICE]
    conn = http.client.HTTPConnection(ep.host, ep.eapi_port, timeout=10)
    try:
        headers = {"Authorization": "Basic " + base64.b64encode(auth.encode()).decode()}
        conn.request("POST", "/command-api", body, headers)
        resp = conn.getresponse()
        return resp.status, dict(resp.getheaders()), resp.read()
    finally:
        conn.close()


def _rpc(lab: EapiLab, cmds: list[Any], fmt: str = "json") -> dict[str, Any]:
    req = {"jsonrpc": "2.0", "method": "runCmds", "params": {"version": 1, "cmds": cmds, "format": fmt}, "id": "7"}
    status, _, body = _post(lab, json.dumps(req).encode())
    assert status == 200
    answer: dict[str, Any] = json.loads(body)
    return answer


def test_json_rpc_edges(eapi_twin: EapiLab) -> None:
    status, headers, _ = _post(eapi_twin, b"{}", auth="admin:nope")
    assert status == 401 and headers["WWW-Authenticate"].startswith("Basic")
    status, _, body = _post(eapi_twin, b"{not json")
    assert json.loads(body)["error"]["code"] == -32700
    status, _, body = _post(eapi_twin, json.dumps({"jsonrpc": "2.0", "method": "nope", "id": 1}).encode())
    assert json.loads(body)["error"]["code"] == -32601
    bad = {"jsonrpc": "2.0", "method": "runCmds", "params": {"version": 1, "cmds": []}, "id": 1}
    status, _, body = _post(eapi_twin, json.dumps(bad).encode())
    assert json.loads(body)["error"]["code"] == -32602
    ok = _rpc(eapi_twin, ["enable", {"cmd": "show hostname"}, "show running-config"], fmt="text")
    assert ok["id"] == "7"
    assert ok["result"][0] == {"output": ""}
    assert "hostname" in ok["result"][2]["output"]
    err = _rpc(eapi_twin, ["show hostname", "show bogus", "show version"])["error"]
    assert err["code"] == 1002
    assert err["message"] == "CLI command 2 of 3 'show bogus' failed: invalid command"
    assert err["data"][0]["hostname"] == DEVICE
    assert err["data"][1] == {"errors": ["Invalid input (at token 1: 'bogus')"]}
    assert len(err["data"]) == 2


def test_each_request_starts_a_fresh_privileged_session(eapi_twin: EapiLab) -> None:
    _rpc(eapi_twin, ["configure", "interface Ethernet1/1"])
    # Still at the top: a global line in a new request is not taken as an interface line.
    assert "error" not in _rpc(eapi_twin, ["configure", "hostname fresh"])
    text = _rpc(eapi_twin, ["show running-config | include hostname"], fmt="text")["result"][0]["output"]
    assert text == "hostname fresh\n"


def test_address_in_use_names_host_and_port(eapi_twin: EapiLab) -> None:
    with pytest.raises(
        OSError, match=eapi_twin.endpoints[DEVICE].host + ":" + str(eapi_twin.endpoints[DEVICE].eapi_port)
    ):
        asyncio.run_coroutine_threadsafe(
            start_eapi_servers(eapi_twin.twin, eapi_twin.configs, eapi_twin.endpoints, Credentials("admin", PASSWORD)),
            eapi_twin.loop,
        ).result(10)


def test_cookie_sessions_as_asynceapi_uses_them(eapi_twin: EapiLab) -> None:
    """EOS's eAPI sessions: POST /login sets a Session cookie that authorises /command-api until POST /logout.
    ANTA's asynceapi (unmodified, use_session_auth) logs in once and runs commands on the cookie."""
    from asynceapi import Device
    from asynceapi.errors import EapiAuthenticationError

    ep = eapi_twin.endpoints[DEVICE]

    async def run(password: str) -> Any:
        async with Device(host=ep.host, username="admin", password=password, proto="http", port=ep.eapi_port,
                          use_session_auth=True) as dev:  # fmt: skip
            return await dev.cli(command="show hostname")

    assert asyncio.run(run(PASSWORD))["hostname"] == DEVICE
    with pytest.raises(EapiAuthenticationError):
        asyncio.run(run("wrong"))

    def post(path: str, body: bytes, headers: dict[str, str]) -> tuple[int, str, bytes]:
        conn = http.client.HTTPConnection(ep.host, ep.eapi_port, timeout=10)
        conn.request("POST", path, body, {"Content-Type": "application/json", **headers})
        r = conn.getresponse()
        out = (r.status, r.getheader("Set-Cookie") or "", r.read())
        conn.close()
        return out

    status, cookie, _ = post("/login", json.dumps({"username": "admin", "password": PASSWORD}).encode(), {})
    assert status == 200 and cookie.startswith("Session=") and "HttpOnly" in cookie
    session = {"Cookie": cookie.split(";")[0]}
    rpc = json.dumps({"jsonrpc": "2.0", "method": "runCmds", "id": 1,
                      "params": {"version": 1, "cmds": ["show hostname"]}}).encode()  # fmt: skip
    status, _, body = post("/command-api", rpc, session)
    assert status == 200 and json.loads(body)["result"][0]["hostname"] == DEVICE
    assert post("/logout", b"", session)[0] == 200
    assert post("/command-api", rpc, session)[0] == 401  # the session ended
    assert post("/login", json.dumps({"username": "admin", "password": "x"}).encode(), {})[0] == 401
    assert post("/login", b"not json", {})[0] == 400
