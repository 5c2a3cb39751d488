"""EOS CLI over SSH through netmiko (`arista_eos`): show commands and plain config for quick operations."""

from __future__ import annotations

from netmiko import ConnectHandler
from netmiko.exceptions import NetmikoAuthenticationException, NetmikoTimeoutException

from drivers.base import ConfigRejectedError, DriverError, UnreachableError
from drivers.eos.render import port_admin_lines
from drivers.inventory import DeviceAccess

# EOS prints these for a line it refuses; netmiko returns them as output rather than raising.
_REJECTED = ("% Invalid input", "% Incomplete command", "% Ambiguous command")


class EosCli:
    def __init__(self, access: DeviceAccess, timeout_s: float = 30.0):
        self.device = access.name
        try:
            self._conn = ConnectHandler(
                device_type="arista_eos",
                host=access.host,
                port=access.ssh.port,
                username=access.username,
                password=access.password.get_secret_value(),
                timeout=timeout_s,
                conn_timeout=timeout_s,
                fast_cli=False,
            )
        except NetmikoAuthenticationException:
            raise UnreachableError(self.device, f"SSH login to {access.host} refused; check the inventory") from None
        except (NetmikoTimeoutException, OSError) as e:
            raise UnreachableError(self.device, f"cannot reach SSH at {access.host}:{access.ssh.port}: {e}") from None

    def show(self, command: str) -> str:
        out = str(self._conn.send_command(command))
        if any(marker in out for marker in _REJECTED):
            raise DriverError(self.device, f"'{command}' failed: {out.strip()}")
        return out

    def configure(self, lines: list[str]) -> str:
        """Send config lines in `configure` mode; a refused line is an error naming it."""
        out: str = self._conn.send_config_set(lines)
        for marker in _REJECTED:
            if marker in out:
                raise ConfigRejectedError(self.device, f"refused config: {out.strip().splitlines()[-2:]}")
        return out

    def set_port_admin(self, port: str, up: bool) -> None:
        self.configure(port_admin_lines(port, up))

    def close(self) -> None:
        self._conn.disconnect()
