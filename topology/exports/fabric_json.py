"""The fabric as JSON: name, a summary, and the docs/formats.md cabling schema (devices + links).

One device or link per line, so the file diffs well and stays small for a 16k-GPU fabric.
The `devices`/`links` part loads back as a cabling file (topology.cabling_io.cabling_from_data).
"""

from __future__ import annotations

import json
from collections import Counter

from topology.fabric import Fabric
from topology.model import Role
from topology.spec import FabricSpec


def fabric_summary(fabric: Fabric, spec: FabricSpec) -> dict[str, object]:
    """Local devices per role, remote (other-campus) devices, links and GPUs (servers x rails)."""
    local = Counter(d.role for d in fabric.devices(local_only=True))
    remote = sum(1 for d in fabric.devices() if d.is_remote)
    servers = len(fabric.devices(Role.SERVER))
    return {
        "devices": {role.value: local[role] for role in Role},
        "remote_devices": remote,
        "links": len(fabric.links),
        "gpus": servers * spec.rails,
    }


def fabric_json(fabric: Fabric, spec: FabricSpec) -> str:
    """JSON text of the fabric: {"name", "summary", "devices", "links"}."""
    devices = [d.to_dict() for d in fabric.devices()]
    links = [link.to_dict() for link in fabric.links]
    lines = [
        "{",
        f' "name": {json.dumps(spec.name)},',
        f' "summary": {json.dumps(fabric_summary(fabric, spec))},',
        ' "devices": [',
        *_items(devices),
        " ],",
        ' "links": [',
        *_items(links),
        " ]",
        "}",
    ]
    return "\n".join(lines) + "\n"


def _items(items: list[dict[str, object]]) -> list[str]:
    last = len(items) - 1
    return [f"  {json.dumps(item)}{',' if i < last else ''}" for i, item in enumerate(items)]
