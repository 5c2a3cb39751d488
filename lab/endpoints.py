"""Where each twin switch listens, and the credentials every protocol checks."""

from __future__ import annotations

import hmac
import ipaddress
import os
from dataclasses import dataclass, field

GNMI_PORT = 6030  # cEOS default gNMI port (platforms.md)
EAPI_PORT = 8080  # eAPI over plain HTTP (EOS's `protocol http`), kept for clients that ask for it
# eAPI over HTTPS, EOS's default; 443 needs root (or CAP_NET_BIND_SERVICE): otherwise the twin uses 8443
EAPI_HTTPS_PORT = 443
EAPI_HTTPS_UNPRIVILEGED = 8443
SSH_PORT = 2022


@dataclass(frozen=True)
class Credentials:
    username: str
    password: str = field(repr=False)

    def check(self, username: str, password: str) -> bool:
        # Constant-time compare, as a switch's AAA would not leak the match length.
        return hmac.compare_digest(username.encode(), self.username.encode()) & hmac.compare_digest(
            password.encode(), self.password.encode()
        )


@dataclass(frozen=True)
class DeviceEndpoints:
    device: str
    host: str
    gnmi_port: int = GNMI_PORT
    eapi_port: int = EAPI_PORT
    ssh_port: int = SSH_PORT
    eapi_https_port: int = EAPI_HTTPS_PORT


def allocate(devices: list[str], base: str = "127.42.0.1", port_offset: int = 0) -> dict[str, DeviceEndpoints]:
    """One loopback address per switch (Linux answers on all of 127/8), the same ports on each."""
    https = (EAPI_HTTPS_PORT if os.geteuid() == 0 else EAPI_HTTPS_UNPRIVILEGED) + port_offset
    start = int(ipaddress.IPv4Address(base))
    out = {}
    for i, name in enumerate(devices):
        host = str(ipaddress.IPv4Address(start + i))
        if not host.startswith("127."):
            raise ValueError(f"{len(devices)} switches do not fit in 127/8 from {base}")
        out[name] = DeviceEndpoints(
            name, host, GNMI_PORT + port_offset, EAPI_PORT + port_offset, SSH_PORT + port_offset, https
        )
    return out
