"""What the live switches say they are wired to: LLDP from every switch of the inventory, through the drivers
(EOS: napalm over eAPI; SONiC: `show lldp table` over SSH), in napalm's get_lldp_neighbors_detail() shape with
fabricd's port names (a SONiC neighbour advertises its port's alias: read back through its CONFIG_DB), so
`fabricd validate --inventory` runs the same loader and rules as `--cabling` on a directory of such tables."""

from __future__ import annotations

import json
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

from drivers.inventory import Inventory
from drivers.registry import get_driver
from topology.errors import FabricdError

LldpTable = dict[str, list[dict[str, str]]]


@dataclass
class Collected:
    tables: dict[str, LldpTable] = field(default_factory=dict)  # switch -> its LLDP table
    unreachable: dict[str, str] = field(default_factory=dict)  # switch -> why it could not be read

    def save(self, folder: Path) -> None:
        """One `<switch>.json` per table read: a directory `fabricd validate --cabling` takes as it is."""
        folder.mkdir(parents=True, exist_ok=True)
        for name, table in self.tables.items():
            (folder / f"{name}.json").write_text(json.dumps({"lldp_neighbors_detail": table}, indent=1) + "\n")


def collect_lldp(inventory: Inventory, devices: Sequence[str], workers: int = 16, timeout_s: float = 15.0) -> Collected:
    """Every switch's LLDP table, `workers` switches at a time; one that cannot be reached or read is named in
    `unreachable` and the rest are still read."""

    def one(name: str) -> tuple[str, LldpTable | None, dict[str, str], str | None]:
        try:
            access = inventory.access(name)
            session = get_driver(access.platform).connect(access, timeout_s)
            try:
                return name, session.lldp_neighbors(), session.port_aliases(), None
            finally:
                session.close()
        except FabricdError as e:
            return name, None, {}, str(e)

    out = Collected()
    aliases: dict[str, dict[str, str]] = {}
    with ThreadPoolExecutor(max_workers=max(1, min(workers, len(devices)))) as pool:
        for name, table, named, error in pool.map(one, devices):
            if table is not None:
                out.tables[name] = table
                aliases[name] = named
            else:
                out.unreachable[name] = error or "unknown error"
    out.tables = {name: by_port_names(table, aliases) for name, table in out.tables.items()}
    return out


def by_port_names(table: LldpTable, aliases: dict[str, dict[str, str]]) -> LldpTable:
    """A table whose SONiC neighbours' port ids (their aliases or SONiC names, as lldpmgrd advertises them) are
    read back to fabricd's port names through what each neighbour says its aliases are."""
    out: LldpTable = {}
    for port, entries in table.items():
        out[port] = []
        for e in entries:
            named = aliases.get(e.get("remote_system_name", "").split(".", 1)[0], {})
            remote = e.get("remote_port", "")
            out[port].append({**e, "remote_port": named.get(remote, remote)} if named else e)
    return out
