"""What the live switches say they are wired to: LLDP from every switch of the inventory, through the drivers
(EOS: napalm over eAPI; SONiC: `show lldp table` over SSH), in napalm's get_lldp_neighbors_detail() shape, so
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

    def one(name: str) -> tuple[str, LldpTable | None, str | None]:
        try:
            access = inventory.access(name)
            session = get_driver(access.platform).connect(access, timeout_s)
            try:
                return name, session.lldp_neighbors(), None
            finally:
                session.close()
        except FabricdError as e:
            return name, None, str(e)

    out = Collected()
    with ThreadPoolExecutor(max_workers=max(1, min(workers, len(devices)))) as pool:
        for name, table, error in pool.map(one, devices):
            if table is not None:
                out.tables[name] = table
            else:
                out.unreachable[name] = error or "unknown error"
    return out
