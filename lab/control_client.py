"""The one client of a twin's control API (faults, clock, status): `fabricd lab`, the tests and the benches all
call through here. The URL and the bearer token come from the twin's state directory (FABRICD_LAB_PASSWORD
overrides the token)."""

from __future__ import annotations

import json
import os
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

from topology.errors import FabricdError


class LabControlError(FabricdError):
    """The twin is not running, does not answer, or refused the call."""


def call(state_dir: Path, method: str, path: str, body: dict[str, Any] | None = None, timeout_s: float = 30) -> Any:
    try:
        url = json.loads((state_dir / "control.json").read_text())["url"]
        token = os.environ.get("FABRICD_LAB_PASSWORD") or (state_dir / "lab.secret").read_text().strip()
    except (OSError, ValueError, KeyError):
        raise LabControlError(f"no twin running with state dir {state_dir}; start one with `fabricd lab up`") from None
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(url + path, data=data, method=method)
    req.add_header("Authorization", f"Bearer {token}")
    req.add_header("Content-Type", "application/json")
    try:
        with urllib.request.urlopen(req, timeout=timeout_s) as resp:
            return json.loads(resp.read())
    except urllib.error.HTTPError as e:
        detail = json.loads(e.read() or b"{}").get("detail", e.reason)
        raise LabControlError(f"twin refused: {detail}") from None
    except (urllib.error.URLError, OSError) as e:
        raise LabControlError(f"twin at {url} does not answer ({e}); `fabricd lab status` or restart it") from None


def inject(state_dir: Path, kind: str, params: dict[str, Any]) -> dict[str, Any]:
    """Inject a fault (`docs/lab.md`); returns its record (id, ports, devices, params)."""
    result: dict[str, Any] = call(state_dir, "POST", "/faults", {"kind": kind, "params": params})
    return result
