"""The state, bus and ha sections: what a leader and its standbys share (PostgreSQL, NATS) and the lease."""

from __future__ import annotations

import urllib.parse
from pathlib import Path

from pydantic import Field, field_validator, model_validator

from .base import SecretRef, _Strict


class StateSettings(_Strict):
    """Where the service keeps its state: a SQLite file (one node), or PostgreSQL that a leader and its standbys
    share (`url`, e.g. postgresql://fabricd@db1:5432/fabricd; the password from `password`, never in the URL)."""

    path: Path = Path("fabricd-state.db")
    url: str | None = None
    password: SecretRef | None = None

    @field_validator("url")
    @classmethod
    def _postgres_url(cls, v: str | None) -> str | None:
        if v is None:
            return v
        parts = urllib.parse.urlsplit(v)
        if parts.scheme not in ("postgresql", "postgres"):
            raise ValueError("must be a postgresql:// URL (leave it out for the SQLite file at state.path)")
        if parts.password:  # an empty one (user:@host) is no secret
            raise ValueError("carries a password; give it as state.password (env: or file:) instead")
        return v


class BusSettings(_Strict):
    """The NATS servers (JetStream): the leader lease (ha) and the telemetry stream (telemetry.source: bus);
    secrets from env or 0600 files as everywhere."""

    urls: list[str] = ["nats://127.0.0.1:4222"]  # noqa: RUF012 (a pydantic field)
    user: str | None = None
    password: SecretRef | None = None
    token: SecretRef | None = None
    nkey_seed: Path | None = None  # a file (0600) holding this client's nkey seed (SU...), for nkey authentication
    ca_file: Path | None = None  # TLS (tls:// URLs) verified against this CA

    @field_validator("urls")
    @classmethod
    def _nats_urls(cls, v: list[str]) -> list[str]:
        if not v:
            raise ValueError("give at least one NATS URL (nats://host:4222)")
        for url in v:
            parts = urllib.parse.urlsplit(url)
            if parts.scheme not in ("nats", "tls") or not parts.hostname:
                raise ValueError(f"{url!r} is not a nats://host:port or tls://host:port URL")
            if parts.password is not None or parts.username is not None:
                raise ValueError(f"{_no_userinfo(url)} carries credentials; give bus.user and bus.password instead")
        return v


def _no_userinfo(url: str) -> str:
    parts = urllib.parse.urlsplit(url)
    return parts._replace(netloc=(parts.hostname or "") + (f":{parts.port}" if parts.port else "")).geturl()


class HaSettings(_Strict):
    """Hot standby: every instance on the same config watches the fabric; the one holding the lease acts."""

    enabled: bool = False
    instance: str | None = None  # this instance's name in the lease and the logs (default: host:pid)
    # The lease lives this long after the leader's last renewal (every third of it); a standby takes over within
    # it plus a twentieth of a second of polling. The leader stops acting a third of it before the lease can end.
    # 0.6 s: a dead or paused leader is replaced within a second (bench/bench_scaleout.py). Short leases are safe
    # only with the fencing (docs/ha.md): a leader stalled longer than the TTL (a long GC, a frozen VM) loses the
    # lease and is fenced off. A stall of the event loop alone does not: the lease has a thread of its own (leader.py).
    lease_ttl_s: float = Field(0.6, ge=0.5, le=60.0)
    bucket: str = Field("fabricd_leader", pattern=r"^[A-Za-z0-9_-]+$")
    # Before every switch call the leader's lease must still be certainly its own for this long (a call that takes
    # longer is what naming its transactions with the fencing token covers: docs/ha.md). At most a third of the TTL:
    # the lease is renewed every third and counted valid for two thirds, so at least a third is always left.
    switch_call_margin_s: float = Field(0.15, ge=0.0, le=20.0)

    @model_validator(mode="after")
    def _margin(self) -> HaSettings:
        if self.switch_call_margin_s > self.lease_ttl_s / 3:
            raise ValueError(f"switch_call_margin_s must be at most a third of lease_ttl_s ({self.lease_ttl_s / 3:g})")
        return self
