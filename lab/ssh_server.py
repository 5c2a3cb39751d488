"""SSH CLI of every twin switch: one asyncssh listener per device, the shell of the switch's platform behind it.

EOS (netmiko `arista_eos`) relies on: password auth only, a PTY that echoes what is typed (asyncssh's line
editor does that), the `host>` / `host#` / `host(config)#` prompts after every command, `terminal width`
answering "Width set to", `terminal length 0` answering "Pagination disabled", and errors as `% ...` lines.
Modes, config and `show` output come from the CLI engine (`eos_cli.CliSession`). A SONiC switch (platform
`sonic` in the spec's `platforms:`) logs into bash instead (`sonic_shell.SonicShell`, netmiko `linux`). This
module is only the transport. An exec request (`ssh host 'show version'`) runs its command and exits.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

import asyncssh

from .endpoints import Credentials, DeviceEndpoints
from .eos_cli import CliError, CliSession
from .eos_config import ConfigStore
from .model import Twin
from .sonic_config import SonicStore
from .sonic_shell import SonicHost, SonicShell

log = logging.getLogger(__name__)
_TERMINAL = re.compile(r"^term(?:i(?:n(?:a(?:l)?)?)?)?\s+(len\w*|wid\w*)\s+(\d+)$", re.IGNORECASE)
_LOGOUT = {"exit", "logout", "quit"}


class Session(Protocol):
    def prompt(self) -> str: ...
    def run(self, line: str) -> str: ...


class Shell(Protocol):
    """What the SSH transport drives: a greeting, a prompt, and one typed line at a time."""

    def greeting(self) -> str: ...
    def prompt(self) -> str: ...
    def execute(self, line: str) -> tuple[str, int, bool]:
        """(output, exit status, whether the user logged out)."""
        ...


ShellFactory = Callable[[str], Shell]


class EosShell:
    """An EOS CLI session as a `Shell`: errors are `% ...` lines, an exec request fails on one."""

    def __init__(self, session: Session):
        self.session = session

    def greeting(self) -> str:
        return ""

    def prompt(self) -> str:
        return self.session.prompt()

    def execute(self, line: str) -> tuple[str, int, bool]:
        out, logout = execute(self.session, line)
        return out, 1 if out.startswith("%") else 0, logout


@functools.cache
def host_key() -> asyncssh.SSHKey:
    """One host key per process: generating one per switch would cost seconds on a large fabric."""
    return asyncssh.generate_private_key("ssh-ed25519")


class _AuthServer(asyncssh.SSHServer):
    """Password auth against the lab credentials; nothing else is offered (no none, keys or kbd-interactive)."""

    def __init__(self, credentials: Credentials):
        self._credentials = credentials

    def begin_auth(self, username: str) -> bool:
        return True

    def password_auth_supported(self) -> bool:
        return True

    def kbdint_auth_supported(self) -> bool:
        return False

    def validate_password(self, username: str, password: str) -> bool:
        return self._credentials.check(username, password)


def _terminal(line: str) -> str | None:
    """`terminal length|width N` belong to the SSH terminal, not the config: answer them here."""
    m = _TERMINAL.match(line)
    if m is None:
        return None
    what, n = m.group(1).lower(), int(m.group(2))
    if what.startswith("len"):
        return "Pagination disabled." if n == 0 else f"Pagination set to {n} lines."
    return f"Width set to {n} columns."


def _at_top_level(prompt: str) -> bool:
    return "(" not in prompt


def execute(session: Session, line: str) -> tuple[str, bool]:
    """Run one typed line; (output, whether the user logged out)."""
    line = line.strip()
    if not line:
        return "", False
    if line.lower() in _LOGOUT and _at_top_level(session.prompt()):
        return "", True
    term = _terminal(line)
    if term is not None:
        return term + "\n", False
    try:
        out = session.run(line)
    except CliError as e:
        out = str(e)
    except Exception:  # a bug behind one command must not drop the login (log.exception keeps it visible)
        log.exception("CLI command %r failed", line)
        out = "% Internal error"
    if out and not out.endswith("\n"):
        out += "\n"
    return out, False


async def _shell(process: asyncssh.SSHServerProcess[str], twin: Twin, new_shell: ShellFactory, device: str) -> None:
    shell = new_shell(device)
    try:
        if process.command is not None:
            twin.advance()
            out, status, _ = shell.execute(process.command)
            process.stdout.write(out)
            process.exit(status)
            return
        process.stdout.write(shell.greeting() + shell.prompt())
        while True:
            try:
                line = await process.stdin.readline()
            except (asyncssh.TerminalSizeChanged, asyncssh.BreakReceived, asyncssh.SignalReceived):
                continue
            if not line:
                break  # EOF: the client went away
            # Counters, oper state and timers follow the clock; bring them up to date before answering.
            twin.advance()
            out, _, logout = shell.execute(line)
            if logout:
                break
            process.stdout.write(out + shell.prompt())
            await process.stdout.drain()
        process.exit(0)
    except (asyncssh.ConnectionLost, BrokenPipeError, ConnectionResetError):
        process.close()


@dataclass
class SshServers:
    """The running listeners; `port(device)` is the bound port (useful when endpoints asked for port 0)."""

    acceptors: dict[str, asyncssh.SSHAcceptor]
    hosts: dict[str, str]

    def port(self, device: str) -> int:
        return self.acceptors[device].get_port()

    def address(self, device: str) -> tuple[str, int]:
        return self.hosts[device], self.port(device)

    async def close(self) -> None:
        for acceptor in self.acceptors.values():
            acceptor.close()
        await asyncio.gather(*(a.wait_closed() for a in self.acceptors.values()))
        self.acceptors.clear()


async def start_ssh_servers(
    twin: Twin,
    configs: ConfigStore,
    endpoints: dict[str, DeviceEndpoints],
    credentials: Credentials,
    sonic: SonicStore | None = None,
) -> SshServers:
    """Listen on `endpoints[d].host:ssh_port` for every switch `d` of the twin (port 0: any free port).

    EOS switches get the EOS CLI over `configs`; SONiC switches bash over `sonic` (built here if not given)."""
    sonic = sonic if sonic is not None else SonicStore(twin)
    hosts = {name: SonicHost(twin, dev) for name, dev in sonic.devices.items()}  # shared by all logins

    def new_shell(device: str) -> Shell:
        if device in hosts:
            return SonicShell(hosts[device], credentials.username)
        return EosShell(CliSession(twin, configs, device))

    servers = SshServers({}, {})
    for device, ep in endpoints.items():
        if not twin.is_switch(device):
            continue

        async def handler(process: asyncssh.SSHServerProcess[str], device: str = device) -> None:
            await _shell(process, twin, new_shell, device)

        try:
            acceptor = await asyncssh.create_server(
                functools.partial(_AuthServer, credentials),
                ep.host,
                ep.ssh_port,
                server_host_keys=[host_key()],
                process_factory=handler,
                encoding="utf-8",
                line_editor=True,  # echo and line editing, as a PTY on the switch would
                allow_scp=False,
                agent_forwarding=False,
                x11_forwarding=False,
            )
        except OSError as e:
            await servers.close()
            raise OSError(e.errno, f"cannot listen for SSH of {device} on {ep.host}:{ep.ssh_port}: {e.strerror}") from e
        servers.acceptors[device] = acceptor
        servers.hosts[device] = ep.host
    return servers
