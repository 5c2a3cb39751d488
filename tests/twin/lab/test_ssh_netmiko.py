"""The twin's SSH CLI driven by unmodified netmiko (`arista_eos`) and asyncssh clients over real sockets."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import asyncssh
import pytest
from netmiko import ConnectHandler
from netmiko.exceptions import NetmikoAuthenticationException
from ntc_templates.parse import parse_output

from lab.endpoints import Credentials, DeviceEndpoints
from lab.eos_config import ConfigStore
from lab.eos_releases import DEFAULT_EOS_VERSION
from lab.model import Twin
from lab.ssh_server import SshServers, start_ssh_servers
from topology.fabric import Fabric
from topology.model import Cabling

LEAF = "leaf-g0-r0"
SPINE = "spine-r0-0"
CREDS = Credentials("admin", "lab-pass")
HOST = "127.0.0.1"


@dataclass
class SshLab:
    twin: Twin
    servers: SshServers
    loop: asyncio.AbstractEventLoop

    def call(self, coro: Any, timeout: float = 10) -> Any:
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(timeout)

    def netmiko(self, device: str = LEAF, password: str = CREDS.password, enable: bool = True) -> Any:
        conn = ConnectHandler(
            device_type="arista_eos",
            host=HOST,
            port=self.servers.port(device),
            username=CREDS.username,
            password=password,
            fast_cli=True,
            conn_timeout=5,
            auth_timeout=5,
            banner_timeout=5,
        )
        if enable:
            conn.enable()
        return conn


@pytest.fixture(scope="module")
def ssh_lab(small_blueprint: Cabling) -> Iterator[SshLab]:
    twin = Twin(Fabric(small_blueprint))
    configs = ConfigStore(twin, CREDS)
    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, name="ssh-twin", daemon=True)
    thread.start()
    # Port 0: the kernel picks free ports, so parallel test runs never clash.
    endpoints = {d: DeviceEndpoints(d, HOST, ssh_port=0) for d in (LEAF, SPINE)}
    servers = asyncio.run_coroutine_threadsafe(start_ssh_servers(twin, configs, endpoints, CREDS), loop).result(10)
    lab = SshLab(twin, servers, loop)
    yield lab
    lab.call(lab.servers.close())
    loop.call_soon_threadsafe(loop.stop)
    thread.join(5)
    loop.close()


def test_netmiko_show_commands(ssh_lab: SshLab) -> None:
    with ssh_lab.netmiko(enable=False) as conn:
        assert conn.find_prompt() == f"{LEAF}>"  # EOS logs in unprivileged
        conn.enable()
        assert conn.find_prompt() == f"{LEAF}#"
        version = conn.send_command("show version")
        assert f"Software image version: {DEFAULT_EOS_VERSION}" in version
        parsed = conn.send_command("show version", use_textfsm=True)
        assert isinstance(parsed, list) and parsed[0]["model"] == "DCS-7060X5-64S"
        status = conn.send_command("show interfaces status")
        rows = parse_output(platform="arista_eos", command="show interfaces status", data=status)
        assert len(rows) == len(ssh_lab.twin.switches[LEAF].ports)
        assert "% Invalid input" in conn.send_command("show bogus-thing")


def test_netmiko_config_set_shuts_port(ssh_lab: SshLab) -> None:
    port = "Ethernet3/1"
    with ssh_lab.netmiko() as conn:
        out = conn.send_config_set([f"interface {port}", "shutdown"])
        assert f"{LEAF}(config-if-Et3/1)#" in out, out
        assert conn.find_prompt() == f"{LEAF}#"
        assert not ssh_lab.twin.port_config(LEAF, port).admin_up, out
        status = conn.send_command(f"show interfaces {port} status")
        assert "disabled" in status
        conn.send_config_set([f"interface {port}", "no shutdown"])
    assert ssh_lab.twin.port_config(LEAF, port).admin_up


def test_netmiko_reports_invalid_config_line(ssh_lab: SshLab) -> None:
    with ssh_lab.netmiko() as conn:
        out = conn.send_config_set(["interface Ethernet1/1", "frobnicate the widget"])
        assert "% Invalid input" in out
        assert conn.find_prompt() == f"{LEAF}#"


def test_each_device_has_its_own_prompt(ssh_lab: SshLab) -> None:
    with ssh_lab.netmiko(SPINE) as conn:
        assert conn.find_prompt() == f"{SPINE}#"


def test_wrong_password_is_rejected(ssh_lab: SshLab) -> None:
    with pytest.raises(NetmikoAuthenticationException):
        ssh_lab.netmiko(password="wrong")


async def _try_login(port: int, **kwargs: Any) -> None:
    async with asyncssh.connect(
        HOST, port, username=CREDS.username, known_hosts=None, client_keys=None, agent_path=None, **kwargs
    ):
        pass


def test_only_password_auth_is_offered(ssh_lab: SshLab) -> None:
    port = ssh_lab.servers.port(LEAF)
    with pytest.raises(asyncssh.PermissionDenied):  # `none` auth
        ssh_lab.call(_try_login(port, preferred_auth="none"))
    with pytest.raises(asyncssh.PermissionDenied):
        ssh_lab.call(_try_login(port, preferred_auth="keyboard-interactive", password=CREDS.password))
    ssh_lab.call(_try_login(port, preferred_auth="password", password=CREDS.password))


async def _exec(port: int, command: str) -> asyncssh.SSHCompletedProcess:
    async with asyncssh.connect(
        HOST, port, username=CREDS.username, password=CREDS.password, known_hosts=None, client_keys=None
    ) as conn:
        return await conn.run(command)


def test_exec_request_runs_one_command(ssh_lab: SshLab) -> None:
    result = ssh_lab.call(_exec(ssh_lab.servers.port(LEAF), "show hostname"))
    assert result.exit_status == 0
    assert f"Hostname: {LEAF}" in str(result.stdout)


def test_address_in_use_names_host_and_port(ssh_lab: SshLab) -> None:
    taken = ssh_lab.servers.port(LEAF)
    configs = ConfigStore(ssh_lab.twin, CREDS)
    endpoints = {LEAF: DeviceEndpoints(LEAF, HOST, ssh_port=taken)}
    with pytest.raises(OSError, match=f"{HOST}:{taken}"):
        ssh_lab.call(start_ssh_servers(ssh_lab.twin, configs, endpoints, CREDS))


def test_save_config_works_from_config_if_mode_after_an_error(ssh_lab: SshLab) -> None:
    # EOS runs exec commands (copy, write) from any configuration mode; netmiko's save_config relies on that
    with ssh_lab.netmiko() as conn:
        out = conn.send_config_set(
            ["interface Ethernet2/1", "description saved-by-test", "frobnicate the widget"], exit_config_mode=False
        )
        assert "% Invalid input" in out and "(config-if-Et2/1)" in conn.find_prompt()
        saved = conn.save_config()
        assert "Copy completed successfully" in saved, saved
        assert "(config-if-Et2/1)" in conn.find_prompt()  # still where it was
        conn.exit_config_mode()
        assert "description saved-by-test" in conn.send_command("show startup-config")
        assert "write memory" not in conn.send_command("show running-config")  # not taken as a config line
        conn.send_config_set(["interface Ethernet2/1", "no description"])
