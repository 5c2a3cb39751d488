"""Loading fabricd.yaml: the file, FABRICD_* overrides, paths resolved against its folder, the API's TLS files and
every secret checked at start; each error one line naming the field (and the variable, when one set it)."""

from __future__ import annotations

import os
import stat
import typing
from collections.abc import Callable
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from topology.sourcefile import load_document, load_model

from .api import TlsSettings, _loopback
from .base import ConfigError
from .secret import _secret_refs, read_secret
from .service import ServiceConfig

ENV_PREFIX = "FABRICD_"


_PATH_FIELDS = ("spec", "cabling", "inventory", "policy")


def load_config(
    path: Path, environ: dict[str, str] | None = None, *, secrets: Callable[[str], bool] | None = None
) -> ServiceConfig:
    """Read fabricd.yaml, apply FABRICD_* overrides, resolve paths against the file's folder, check secrets (those
    `secrets` accepts by their field name, all by default: a tool that needs only some asks only for them)."""
    data = load_document(path, ConfigError)
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise ConfigError(str(path), "fabricd.yaml must be a mapping (spec, inventory, remediation, ...)")
    overrides = _apply_env(data, os.environ if environ is None else environ, path)
    try:
        cfg = load_model(path, ServiceConfig, ConfigError, "fabricd.yaml", "spec, inventory, ...", data=data)
    except ConfigError as e:
        var = _override_of(e.field, overrides)
        if var is None:
            raise
        # The bad value is not in the file: name the variable, not a line of the file (and never the value).
        raise ConfigError(str(path), f"{e.problem} (set by environment variable {var})", field=e.field) from None
    base = path.parent
    updates: dict[str, Any] = {"source": path}
    for name in _PATH_FIELDS:
        value = getattr(cfg, name)
        if isinstance(value, Path) and not value.is_absolute():
            updates[name] = base / value
    if not cfg.state.path.is_absolute():
        updates["state"] = cfg.state.model_copy(update={"path": base / cfg.state.path})
    if cfg.telemetry.record is not None and not cfg.telemetry.record.is_absolute():
        updates["telemetry"] = cfg.telemetry.model_copy(update={"record": base / cfg.telemetry.record})
    if cfg.jobs.path is not None and not cfg.jobs.path.is_absolute():
        updates["jobs"] = cfg.jobs.model_copy(update={"path": base / cfg.jobs.path})
    if cfg.api.tls is not None:
        tls = cfg.api.tls
        resolved = {k: (v if v is None or v.is_absolute() else base / v) for k, v in tls.model_dump().items()}
        updates["api"] = cfg.api.model_copy(update={"tls": TlsSettings(**resolved)})
    cfg = cfg.model_copy(update=updates)
    _check_api(cfg, path)
    for field, ref in _secret_refs(cfg):
        if secrets is None or secrets(field):
            read_secret(ref, field, path, environ)  # refuse at start, not at the first ticket
    return cfg


def _check_api(cfg: ServiceConfig, path: Path) -> None:
    api = cfg.api
    if api.tls is None and not api.allow_plain_http and not _loopback(api.host):
        raise ConfigError(
            str(path),
            f"serves plain HTTP on {api.host}: give api.tls (cert, key) or set api.allow_plain_http: true",
            field="api.host",
        )
    if api.tls is None:
        return
    for name in ("cert", "key", "client_ca"):
        file = getattr(api.tls, name)
        if file is not None and not file.is_file():
            raise ConfigError(str(path), f"{file}: no such file", field=f"api.tls.{name}")
    if api.tls.key.stat().st_mode & (stat.S_IRWXG | stat.S_IRWXO):
        raise ConfigError(str(path), f"{api.tls.key} is readable by others; chmod 600 it", field="api.tls.key")


def _apply_env(data: dict[str, Any], environ: Any, path: Path) -> dict[str, str]:
    """Apply FABRICD_* overrides to `data`; returns {dotted field: variable} of what was overridden."""
    overrides: dict[str, str] = {}
    for key, value in environ.items():
        if not key.startswith(ENV_PREFIX):
            continue
        parts = key[len(ENV_PREFIX) :].lower().split("__")
        if parts[0] not in ServiceConfig.model_fields or parts[0] == "source":
            continue  # other FABRICD_* variables (lab password, cache dir) are not config overrides
        node = data
        for part in parts[:-1]:
            child = node.setdefault(part, {})
            if not isinstance(child, dict):
                raise ConfigError(str(path), f"{key} overrides '{part}', which is not a section")
            node = child
        node[parts[-1]] = _env_value(value, parts)
        overrides[".".join(parts)] = key
    return overrides


def _env_value(text: str, parts: list[str]) -> Any:
    """A list field as comma-separated text (one item without a comma); everything else as text that pydantic
    converts (a comma in a string, such as a drain hook's reason, stays in the string)."""
    return [t.strip() for t in text.split(",")] if _is_list_field(parts) else text


def _is_list_field(parts: list[str]) -> bool:
    model: type[BaseModel] | None = ServiceConfig
    for i, part in enumerate(parts):
        field = model.model_fields.get(part) if model is not None else None
        if field is None:
            return False
        if i == len(parts) - 1:
            return typing.get_origin(field.annotation) is list
        # descend into the section's model (`WebhookSettings | None` is a section too)
        types = (field.annotation, *typing.get_args(field.annotation))
        model = next((t for t in types if isinstance(t, type) and issubclass(t, BaseModel)), None)
    return False


def _override_of(field: str | None, overrides: dict[str, str]) -> str | None:
    """The FABRICD_* variable that set `field` (or the list or section it is in), if one did."""
    if not field:
        return None
    for dotted, var in overrides.items():
        if field == dotted or field.startswith((dotted + ".", dotted + "[")):
            return var
    return None
