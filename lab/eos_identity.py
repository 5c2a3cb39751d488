"""Who a twin EOS switch says it is: model, serial number, MAC addresses, image version strings. One place, so
`show version`, `show inventory`, LLDP and SONiC's `show version` agree on a switch's identity."""

from __future__ import annotations

import zlib

from topology.model import Role

from .model import Switch


def internal_version(version: str) -> str:
    return f"{version}-35442176.{version.replace('.', '')}"


def model_name(sw: Switch) -> str:
    # DR routers sit on long-haul links and need deep (HBM) buffers: a Jericho-based 7280R3.
    return "DCS-7280R3-32D4-M" if sw.role == Role.DR else "DCS-7060X5-64S"


def _h(text: str) -> int:
    return zlib.crc32(text.encode())


def system_mac(device: str) -> str:
    """A stable Arista-OUI MAC per device (00:1c:73 is Arista's)."""
    h = _h(device)
    return f"00:1c:73:{(h >> 16) & 0xFF:02x}:{(h >> 8) & 0xFF:02x}:{h & 0xF0:02x}"


def port_mac(device: str, row: int) -> str:
    base = int(system_mac(device).replace(":", ""), 16) + row + 1
    raw = f"{base:012x}"
    return ":".join(raw[i : i + 2] for i in range(0, 12, 2))


def serial_number(device: str) -> str:
    return f"JPE{_h(device) % 10**8:08d}"
