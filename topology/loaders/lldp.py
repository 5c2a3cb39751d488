"""As-built cabling from LLDP tables: a directory with one `<device>.json` per switch.

Each file holds what napalm's `get_lldp_neighbors_detail()` returns for that switch (a mapping of
local port -> list of neighbours), bare or wrapped as `{"lldp_neighbors_detail": {...}}`. The file
name (without .json) is the switch's name.

- A cable seen from both ends is one link; one seen from one end only is still a link.
- A neighbour is matched to a file by its system name, or by the name's first DNS label
  (`leaf-g0-r0.example.net` is `leaf-g0-r0`).
- A neighbour without a file of its own whose `remote_port` or `remote_port_description` is `nicK`
  is a server, cabled on its port `nicK` (lldpd on a host often sends the MAC as port id and the
  interface name as description). Other neighbours without a file keep `remote_port`.
- Neighbours on management ports (Management1, Ma1, mgmt0, eth0) are not fabric cabling: skipped.
- Roles: fabricd naming, else `nicK` port (server, noted "from": "port"), else the graph
  (see `topology.loaders.roles`, noted "from": "graph"). Rail and group are left to
  `topology.labels.complete_labels`.
- Platform of a switch with a file: "eos" or "sonic" when a neighbour's `remote_system_description`
  of it says Arista/EOS or SONiC; else None. LLDP knows no speed or cable length: both None.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from topology.errors import CablingError
from topology.layout import nic_rail, parse_name
from topology.loaders.roles import infer_roles, role_from_name, site_from_name
from topology.model import Cabling, Device, Endpoint, Link, Role
from topology.sourcefile import load_document

_MGMT_PORT = re.compile(r"^(?:management|mgmt|ma)\s*\d|^eth0$", re.IGNORECASE)
_EOS = re.compile(r"arista|\beos\b", re.IGNORECASE)
_SONIC = re.compile(r"sonic", re.IGNORECASE)
_WRAPPER = "lldp_neighbors_detail"
_SHAPE = "napalm get_lldp_neighbors_detail(): a mapping of local port -> list of neighbours"


@dataclass(frozen=True, slots=True)
class Neighbour:
    name: str
    port: str
    port_description: str
    system_description: str


Table = dict[str, list[Neighbour]]


def load_lldp_dir(path: Path) -> Cabling:
    """Devices and links from a directory of per-switch LLDP tables (see the module docstring)."""
    d = Path(path)
    if not d.is_dir():
        problem = "is a file, expected a directory" if d.exists() else "directory not found; check the path"
        raise CablingError(str(d), problem + " of LLDP tables (one <device>.json per switch)")
    files = sorted(p for p in d.glob("*.json") if p.is_file())
    if not files:
        raise CablingError(
            str(d),
            "no .json files; save each switch's napalm get_lldp_neighbors_detail() result here as <device>.json",
        )
    tables: dict[str, Table] = {}
    for f in files:
        owner = _canonical(f.stem)
        if owner in tables:
            raise CablingError(str(f), f"a second LLDP table for '{owner}'; keep one file per switch")
        tables[owner] = read_table(f)
    return _build(tables, str(d))


def cabling_from_lldp(tables: Mapping[str, object], source: str) -> Cabling:
    """Devices and links from LLDP tables already in hand (`fabricd validate --inventory` reads them from the
    switches): {switch: napalm get_lldp_neighbors_detail() result}; `source` names where they came from."""
    parsed: dict[str, Table] = {}
    for name, data in tables.items():
        owner = _canonical(name)
        parsed[owner] = table_from_data(data, f"{source} ({name})")
    return _build(parsed, source)


def read_table(path: Path) -> Table:
    """One switch's LLDP table, checked for shape (errors name the file and the key)."""
    return table_from_data(load_document(path, CablingError), str(path))


def table_from_data(data: object, src: str) -> Table:
    """One switch's LLDP table from its napalm shape, checked (errors name `src` and the key)."""
    if isinstance(data, dict) and isinstance(data.get(_WRAPPER), dict):
        data = data[_WRAPPER]
    if not isinstance(data, dict):
        raise CablingError(src, f"expected the result of {_SHAPE}, got {type(data).__name__}")
    table: Table = {}
    for port, entries in data.items():
        if not isinstance(entries, list):
            raise CablingError(src, f"expected a list of neighbours ({_SHAPE})", field=str(port))
        table[str(port)] = [_neighbour(src, f"{port}[{i}]", e) for i, e in enumerate(entries)]
    return table


def _neighbour(src: str, where: str, entry: object) -> Neighbour:
    if not isinstance(entry, dict):
        raise CablingError(src, "a neighbour must be a mapping with remote_system_name and remote_port", field=where)
    values: dict[str, str] = {}
    for key in ("remote_system_name", "remote_port", "remote_port_description", "remote_system_description"):
        value = entry.get(key, "")
        if value is None:
            value = ""
        if not isinstance(value, str):
            raise CablingError(src, f"must be a string, got {type(value).__name__}", field=f"{where}.{key}")
        values[key] = value.strip()
    if not values["remote_system_name"]:
        raise CablingError(
            src,
            "missing or empty; every neighbour needs the name it advertises (enable the LLDP system-name TLV"
            " on that device, or fix the file)",
            field=f"{where}.remote_system_name",
        )
    if not values["remote_port"] and not values["remote_port_description"]:
        raise CablingError(
            src,
            "missing; a neighbour needs remote_port (or remote_port_description)",
            field=f"{where}.remote_port",
        )
    return Neighbour(
        values["remote_system_name"],
        values["remote_port"],
        values["remote_port_description"],
        values["remote_system_description"],
    )


def _canonical(name: str) -> str:
    """The name without its DNS domain when the rest follows fabricd naming (gpu-g0-001.example.net)."""
    short = name.split(".", 1)[0]
    return short if short != name and parse_name(short) is not None else name


def _build(tables: dict[str, Table], source: str) -> Cabling:
    owners = set(tables)
    alias = {o.split(".", 1)[0]: o for o in owners}
    names: dict[str, None] = dict.fromkeys(tables)
    links: dict[frozenset[Endpoint], Link] = {}
    servers: set[str] = set()
    descriptions: dict[str, str] = {}
    for owner, table in tables.items():
        for local_port, neighbours in table.items():
            if _MGMT_PORT.match(local_port):
                continue
            for nb in neighbours:
                remote = _canonical(nb.name)
                if remote not in owners:
                    remote = alias.get(remote.split(".", 1)[0], remote)
                port = nb.port or nb.port_description
                if remote not in owners:
                    nic = next((p for p in (nb.port, nb.port_description) if nic_rail(p) is not None), None)
                    if nic is not None:
                        port = nic
                        servers.add(remote)
                if nb.system_description:
                    descriptions.setdefault(remote, nb.system_description)
                a, b = Endpoint(owner, local_port), Endpoint(remote, port)
                if a == b:
                    continue
                names.setdefault(remote, None)
                links.setdefault(frozenset((a, b)), Link(a, b))
    known: dict[str, Role] = {}
    notes: list[dict[str, object]] = []
    for name in names:
        role = role_from_name(name)
        if role is None and name in servers:
            role = Role.SERVER
            notes.append({"device": name, "field": "role", "value": role.value, "from": "port"})
        if role is not None:
            known[name] = role
    link_list = list(links.values())
    roles, graph_notes = infer_roles(names, known, link_list, source)
    devices = [
        Device(
            name,
            roles[name],
            platform=_platform(descriptions.get(name, "")) if name in owners else None,
            site=site_from_name(name, roles[name]),
        )
        for name in names
    ]
    return Cabling(devices=devices, links=link_list, source=source, inferred=notes + graph_notes)


def _platform(description: str) -> str | None:
    if _SONIC.search(description):
        return "sonic"
    if _EOS.search(description):
        return "eos"
    return None
