"""A rule violation (docs/formats.md validation result contract)."""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum


class Code(StrEnum):
    RAIL_MISMATCH = "RAIL_MISMATCH"
    GROUP_SPLIT = "GROUP_SPLIT"
    CROSS_RAIL_UPLINK = "CROSS_RAIL_UPLINK"
    TIER_VIOLATION = "TIER_VIOLATION"
    MISSING_LINK = "MISSING_LINK"
    PORT_REUSE = "PORT_REUSE"
    SPEED_MISMATCH = "SPEED_MISMATCH"
    UNKNOWN_DEVICE = "UNKNOWN_DEVICE"
    OVERSUBSCRIBED = "OVERSUBSCRIBED"
    DCI_NOT_ON_DR = "DCI_NOT_ON_DR"
    DCI_LENGTH_MISSING = "DCI_LENGTH_MISSING"


@dataclass(frozen=True, slots=True)
class Violation:
    code: Code
    message: str
    fix: str
    devices: list[str] = field(default_factory=list)
    ports: list[str] = field(default_factory=list)
    severity: str = "error"

    def to_dict(self) -> dict[str, object]:
        return {
            "code": self.code.value,
            "severity": self.severity,
            "devices": self.devices,
            "ports": self.ports,
            "message": self.message,
            "fix": self.fix,
        }
