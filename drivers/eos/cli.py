"""EOS CLI over SSH through netmiko (`arista_eos`): show commands and plain config for quick operations."""

from __future__ import annotations

from drivers.base import ConfigRejectedError, DriverError
from drivers.eos.render import port_admin_lines
from drivers.inventory import DeviceAccess
from drivers.ssh import open_ssh

# EOS prints these for a line it refuses; netmiko returns them as output rather than raising.
_REJECTED = ("% Invalid input", "% Incomplete command", "% Ambiguous command")


class EosCli:
    def __init__(self, access: DeviceAccess, timeout_s: float = 30.0):
        self.device = access.name
        self._conn = open_ssh(access, "arista_eos", timeout_s, fast_cli=False)

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
