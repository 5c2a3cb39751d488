"""The device inventory: how to reach each switch (host, ports, transport) and where its secret comes from.

Passwords are never written in the inventory itself: `password_env` names an environment variable and
`password_file` a file that must be mode 0600 (as ssh insists for keys). The format is documented in
docs/inventory.md; `fabricd lab up` writes one for the twin.
"""

from __future__ import annotations

import os
import stat
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, SecretStr

from topology.errors import InputError
from topology.sourcefile import load_model


class InventoryError(InputError):
    """The inventory is invalid, or a secret it points to cannot be read."""


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class GnmiAccess(_Strict):
    port: int = Field(6030, ge=1, le=65535)
    # TLS with certificate verification unless the inventory says otherwise for a device.
    tls: bool = True
    ca_file: Path | None = None
    skip_verify: bool = False


class EapiAccess(_Strict):
    port: int | None = Field(None, ge=1, le=65535)
    transport: Literal["https", "http"] = "https"


class SshAccess(_Strict):
    port: int = Field(22, ge=1, le=65535)


class AccessSettings(_Strict):
    username: str | None = None
    password_env: str | None = None
    password_file: Path | None = None
    gnmi: GnmiAccess | None = None
    eapi: EapiAccess | None = None
    ssh: SshAccess | None = None


class DeviceEntry(AccessSettings):
    host: str
    platform: str = "eos"
    # The release the switch runs (e.g. "4.31.2F"): fabricd then subscribes only to the gNMI paths that release
    # serves (fabricd/telemetry/platforms.py). Unset: everything is subscribed and what the switch rejects is left out.
    os_version: str | None = None
    role: str | None = None


class InventoryFile(_Strict):
    fabric: str | None = None
    defaults: AccessSettings = Field(default_factory=AccessSettings)
    devices: dict[str, DeviceEntry]


@dataclass(frozen=True)
class DeviceAccess:
    """Everything a driver needs to reach one switch; the password is a SecretStr so it never prints."""

    name: str
    host: str
    platform: str
    username: str
    password: SecretStr
    gnmi: GnmiAccess
    eapi: EapiAccess
    ssh: SshAccess
    os_version: str | None = None


class Inventory:
    def __init__(self, source: Path, data: InventoryFile):
        self.source = source
        self.data = data

    def __contains__(self, name: object) -> bool:
        return name in self.data.devices

    @property
    def names(self) -> list[str]:
        return list(self.data.devices)

    def access(self, name: str) -> DeviceAccess:
        entry = self.data.devices.get(name)
        if entry is None:
            raise InventoryError(str(self.source), f"device '{name}' is not in the inventory; add it under devices:")
        d = self.data.defaults
        username = entry.username or d.username
        if not username:
            raise InventoryError(str(self.source), "no username: set defaults.username or the device's username")
        password = self._password(name, entry.password_env or d.password_env, entry.password_file or d.password_file)
        return DeviceAccess(
            name,
            entry.host,
            entry.platform,
            username,
            password,
            entry.gnmi or d.gnmi or GnmiAccess(),
            entry.eapi or d.eapi or EapiAccess(),
            entry.ssh or d.ssh or SshAccess(),
            entry.os_version,
        )

    def _password(self, device: str, env: str | None, file: Path | None) -> SecretStr:
        if env:
            value = os.environ.get(env)
            if value is None:
                raise InventoryError(str(self.source), f"{device}: environment variable {env} is not set")
            return SecretStr(value)
        if file is not None:
            path = file if file.is_absolute() else self.source.parent / file
            try:
                mode = path.stat().st_mode
            except OSError as e:
                raise InventoryError(str(self.source), f"{device}: password_file {path}: {e.strerror}") from None
            if mode & (stat.S_IRWXG | stat.S_IRWXO):
                raise InventoryError(
                    str(self.source), f"{device}: password_file {path} is readable by others; chmod 600 it"
                )
            return SecretStr(path.read_text().strip())
        raise InventoryError(str(self.source), f"{device}: no password_env or password_file (never a password)")


def load_inventory(path: Path) -> Inventory:
    data = load_model(path, InventoryFile, InventoryError, "an inventory", "defaults, devices")
    return Inventory(path, data)
