"""The secrets fabricd.yaml points to (never values in the file): which fields name one, and reading one."""

from __future__ import annotations

import os
import stat
from pathlib import Path

from pydantic import SecretStr

from .base import ConfigError, SecretRef
from .service import ServiceConfig


def _secret_refs(cfg: ServiceConfig) -> list[tuple[str, SecretRef]]:
    refs: list[tuple[str, SecretRef]] = []
    if cfg.api.token is not None:
        refs.append(("api.token", cfg.api.token))
    if cfg.tickets.backend == "webhook":
        if cfg.tickets.webhook is None:
            raise ConfigError(str(cfg.source), "tickets.backend is webhook but tickets.webhook is missing; add url:")
        if cfg.tickets.webhook.token is not None:
            refs.append(("tickets.webhook.token", cfg.tickets.webhook.token))
    if cfg.tickets.backend == "jira":
        if cfg.tickets.jira is None:
            raise ConfigError(str(cfg.source), "tickets.backend is jira but tickets.jira is missing; add url, project")
        refs.append(("tickets.jira.token", cfg.tickets.jira.token))
    if cfg.jobs.slurmrestd is not None:
        refs.append(("jobs.slurmrestd.token", cfg.jobs.slurmrestd.token))
    if cfg.state.password is not None:
        refs.append(("state.password", cfg.state.password))
    if cfg.ha.enabled or cfg.telemetry.source == "bus":
        for name in ("password", "token"):
            ref = getattr(cfg.bus, name)
            if ref is not None:
                refs.append((f"bus.{name}", ref))
    return refs


def read_secret(ref: SecretRef, field: str, source: Path | None, environ: dict[str, str] | None = None) -> SecretStr:
    """The secret `ref` points to; the error names the field, never the value."""
    where = str(source or "fabricd.yaml")
    env = os.environ if environ is None else environ
    if ref.env:
        value = env.get(ref.env)
        if not value:
            raise ConfigError(where, f"environment variable {ref.env} is not set", field=field)
        return SecretStr(value)
    if ref.file is not None:
        path = ref.file if ref.file.is_absolute() or source is None else source.parent / ref.file
        try:
            mode = path.stat().st_mode
        except OSError as e:
            raise ConfigError(where, f"{path}: {e.strerror}", field=field) from None
        if mode & (stat.S_IRWXG | stat.S_IRWXO):
            raise ConfigError(where, f"{path} is readable by others; chmod 600 it", field=field)
        try:
            value = path.read_text().strip()
        except (OSError, UnicodeDecodeError) as e:
            raise ConfigError(where, f"{path}: cannot read it ({type(e).__name__})", field=field) from None
        if not value:  # an empty token would let an empty bearer header through
            raise ConfigError(where, f"{path} is empty; write the secret into it", field=field)
        return SecretStr(value)
    raise ConfigError(where, "give env: VAR or file: PATH (never the secret itself)", field=field)
