"""What the twin's SONiC surfaces read when real daemons run under them (`lab/daemons.py`): lldpd's neighbours and
FRR's sessions, as a protocol so the model holds it without importing the daemons."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol


@dataclass
class Lldp:
    """One neighbour as lldpd shows it."""

    system: str
    port_id: str
    port_descr: str
    system_descr: str
    chassis_id: str
    capabilities: tuple[str, ...]  # enabled ones: "Bridge", "Router", "Station", ...


class ControlPlane(Protocol):
    lldp: dict[str, dict[str, Lldp]]  # switch -> topology port -> its neighbour (the last read)
    frr: dict[str, dict[str, Any]]  # switch -> FRR's `show bgp summary json` ipv4Unicast (the last read)

    def vtysh(self, device: str, commands: list[str]) -> tuple[str, str, int]: ...

    def lldpctl(self, device: str) -> str: ...
