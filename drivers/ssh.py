"""The one way a driver opens an SSH CLI session (netmiko), with the errors every driver names the same way."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from netmiko import ConnectHandler
from netmiko.exceptions import NetmikoAuthenticationException, NetmikoBaseException, NetmikoTimeoutException

from drivers.base import UnreachableError
from drivers.inventory import DeviceAccess

# paramiko's SSHException (no SSH banner, a reset handshake), which netmiko lets through and its timeout error
# derives from; taken from there because paramiko ships no type stubs.
SSH_ERROR: type[Exception] = NetmikoTimeoutException.__base__


def open_ssh(
    access: DeviceAccess, device_type: str, timeout_s: float, clean: Callable[[BaseException], str] = str, **extra: Any
) -> Any:
    """A logged-in netmiko connection (`device_type` as netmiko names it), or UnreachableError naming the switch and
    what to check; `clean` strips what must not reach a message (the password)."""
    try:
        return ConnectHandler(
            device_type=device_type,
            host=access.host,
            port=access.ssh.port,
            username=access.username,
            password=access.password.get_secret_value(),
            timeout=timeout_s,
            conn_timeout=timeout_s,
            **extra,
        )
    except NetmikoAuthenticationException:
        raise UnreachableError(access.name, f"SSH login to {access.host} refused; check the inventory") from None
    except (NetmikoBaseException, SSH_ERROR, OSError, EOFError, ValueError) as e:
        where = f"{access.host}:{access.ssh.port}"
        raise UnreachableError(access.name, f"cannot reach SSH at {where}: {clean(e)}") from None
