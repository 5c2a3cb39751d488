"""Talk to a twin's control API the way `fabricd lab` does (bearer token from the state dir)."""

from __future__ import annotations

import json
import urllib.request
from pathlib import Path
from typing import Any


def call(state_dir: Path, method: str, path: str, body: dict[str, Any] | None = None) -> Any:
    url = json.loads((state_dir / "control.json").read_text())["url"]
    token = (state_dir / "lab.secret").read_text().strip()
    req = urllib.request.Request(url + path, data=json.dumps(body).encode() if body else None, method=method)
    req.add_header("Authorization", f"Bearer {token}")
    req.add_header("Content-Type", "application/json")
    with urllib.request.urlopen(req, timeout=10) as resp:
        return json.loads(resp.read())


def inject(state_dir: Path, kind: str, params: dict[str, Any]) -> dict[str, Any]:
    result: dict[str, Any] = call(state_dir, "POST", "/faults", {"kind": kind, "params": params})
    return result
