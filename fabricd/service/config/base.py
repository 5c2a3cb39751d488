"""What every section of fabricd.yaml shares: the error a bad file raises, the strictness of every section, where
a secret comes from, and the rule for a service's URL."""

from __future__ import annotations

import urllib.parse
from pathlib import Path

from pydantic import BaseModel, ConfigDict

from topology.errors import InputError


class ConfigError(InputError):
    """fabricd.yaml is invalid or a secret it points to cannot be read."""


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)  # NaN passes every bound check


class SecretRef(_Strict):
    """Where a secret comes from: an environment variable or a file only its owner can read."""

    env: str | None = None
    file: Path | None = None


def _service_url(url: str) -> str:
    """An http(s) URL without user:password@: a credential in the file would be a secret outside the env/0600 rules
    (and with a token as well, the URL's basic auth would silently replace it)."""
    parsed = urllib.parse.urlsplit(url)
    if parsed.username is not None or parsed.password is not None:
        raise ValueError("must not carry user:password@; put the credential in the token (env or 0600 file)")
    if parsed.scheme not in ("http", "https") or not parsed.hostname:
        raise ValueError("is not an http(s) URL; write it as https://host/path")
    return url
