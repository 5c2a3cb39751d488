"""The api section: where the API listens, its TLS, its service token and SSO through a trusted proxy."""

from __future__ import annotations

import ipaddress
from pathlib import Path
from typing import Literal

from pydantic import Field, field_validator

from .base import SecretRef, _Strict


class TlsSettings(_Strict):
    cert: Path  # PEM certificate (chain) the API serves
    key: Path  # its private key: a 0600 file
    client_ca: Path | None = None  # with it, clients must present a certificate this CA signed (mutual TLS)


class TrustedProxySettings(_Strict):
    """SSO in front of fabricd: a reverse proxy that authenticates people and passes the user in a header. Only
    requests from `addresses` may carry it; from anywhere else the header is ignored."""

    addresses: list[str] = Field(min_length=1)  # the proxy's addresses or networks, e.g. [10.0.0.5, 10.1.0.0/24]
    user_header: str = "X-Forwarded-User"
    roles: dict[str, Literal["viewer", "operator", "admin"]] = Field(default_factory=dict)  # user -> role
    default_role: Literal["viewer", "operator", "admin"] | None = "viewer"  # None: users not in roles are refused

    @field_validator("addresses")
    @classmethod
    def _networks(cls, v: list[str]) -> list[str]:
        for a in v:
            try:
                ipaddress.ip_network(a, strict=False)
            except ValueError:
                raise ValueError(f"{a!r} is not an IP address or network") from None
        return v


class ApiSettings(_Strict):
    host: str = "127.0.0.1"
    port: int = Field(8340, ge=0, le=65535)  # 0 = any free port (tests)
    # The service token: an admin credential for automation and for the first `fabricd token create` over the API;
    # people get their own tokens (`fabricd token create --user U --role viewer|operator|admin`, docs/access.md).
    token: SecretRef | None = None
    anonymous_read: bool = False  # true: reads need no token (a lab); /metrics and /api/v1/health never do
    tls: TlsSettings | None = None
    allow_plain_http: bool = False  # plain HTTP on an address other than loopback needs this, said out loud
    max_list: int = Field(5000, ge=1, le=100_000)  # the largest `limit` a list endpoint takes
    trusted_proxy: TrustedProxySettings | None = None  # SSO: the user from a header, only from these addresses
    # /metrics also carries every port's counters and optics (fabricd_port_*: 19 series per port, ~700k at 16k
    # GPUs); false leaves them to another exporter
    port_metrics: bool = True


def _loopback(host: str) -> bool:
    return host in ("localhost", "::1") or host.startswith("127.")
