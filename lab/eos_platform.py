"""What a twin EOS switch says about its hardware and system: inventory, modules, PCIe, core dumps, file systems,
maintenance, ZTP, extensions, hardware tables, the Sand (Jericho) chips' drop counters and health, and the features a
rail-optimized fabric leaves unconfigured (storm-control, port-channels and LACP, SVIs and loopbacks, VARP).

A healthy fixed-configuration switch, in the JSON shapes EOS answers with: the same switch identity as `show version`
and `show system environment` (model, serial number, power supplies, fan trays), and the same transceivers as
`show interfaces transceiver`. Commands that exist on one switching silicon only are refused on the other, with the
message EOS gives (`Unavailable`): the DR routers are Jericho-based (Sand), the leaves and spines Tomahawk-based.
"""

from __future__ import annotations

import zlib
from typing import Any

from topology.model import Role

from .eos_environment import FAN_TRAYS, PSUS
from .eos_identity import model_name, serial_number
from .model import Switch, Twin

Json = dict[str, Any]
# The TerminAttr (CloudVision streaming agent) release a current EOS image bundles; VerifyTerminAttrVersion checks it.
TERMINATTR_VERSION = "v1.34.0"
XCVR_VENDOR = "Arista Networks"
FLASH_SIZE, FLASH_FREE = 3_976_818_688, 2_815_692_800  # a 4 GB flash, as on 7060X5/7280R3


class Unavailable(Exception):
    """A command this switch's hardware does not have; EOS answers `% Unavailable command (...)`."""


def sand(sw: Switch) -> bool:
    """Jericho (Sand) silicon: the DR routers (eos_identity.model_name)."""
    return sw.role == Role.DR


def _serial(sw: Switch, what: str) -> str:
    return f"{what}{zlib.crc32(f'{sw.name}:{what}'.encode()) % 10**8:08d}"


def _slot(port: str) -> str:
    """`Ethernet12/1` -> `12`: the cage (transceiver slot) the port is on."""
    return port.removeprefix("Ethernet").split("/")[0]


def inventory(twin: Twin, sw: Switch, now: int, rows: list[int]) -> Json:
    xcvrs: Json = {}
    for row, port in enumerate(sw.ports):
        h = zlib.crc32(f"{sw.name}:{port}".encode())  # the serial `show interfaces transceiver` reports
        xcvrs[_slot(port)] = {"mfgName": XCVR_VENDOR, "modelName": "QDD-400G-DR4" if sw.speeds[row] >= 400 else
                              "QSFP-100G-DR", "serialNum": f"XKP{h % 10**8:08d}", "hardwareRev": "11"}  # fmt: skip
    return {
        "systemInformation": {"name": model_name(sw), "description": f"Arista {model_name(sw)}",
                              "mfgDate": "2024-03-12", "hardwareRev": "11.00", "serialNum": serial_number(sw.name)},
        "powerSupplySlots": {str(p): {"name": "PWR-1900AC-F", "serialNum": _serial(sw, f"PSU{p}")}
                             for p in range(1, PSUS + 1)},
        "fanTraySlots": {str(t): {"name": "FAN-7022H-RED", "serialNum": _serial(sw, f"FAN{t}"),
                                  "numFans": 1} for t in range(1, FAN_TRAYS + 1)},
        "portCount": len(sw.ports),
        "switchedPortCount": len(sw.ports),
        "internalPortCount": 0,
        "switchedBootstrapPortCount": 0,
        "switchedFortyGOnlyPortCount": 0,
        "managementPortCount": 1,
        "dataLinkPortCount": 0,
        "emmcFlashDevices": {},
        "cardSlots": {},  # a fixed system has no line cards
        "xcvrSlots": xcvrs,
        "storageDevices": {},
    }  # fmt: skip


def modules(twin: Twin, sw: Switch, now: int, rows: list[int]) -> Json:
    return {"modules": {"1": {"modelName": model_name(sw), "serialNumber": serial_number(sw.name), "status": "ok",
                              "portCount": len(sw.ports), "typeDescr": f"{len(sw.ports)}-port switch",
                              "hardwareRevision": "11.00", "softwareVersion": sw.os_version}}}  # fmt: skip


def module_power(twin: Twin, sw: Switch, now: int, rows: list[int]) -> Json:
    return {"modules": {}}  # per-card risers exist on modular chassis only


def redundancy(twin: Twin, sw: Switch, now: int, rows: list[int]) -> Json:
    """One supervisor: its peer is not inserted (ANTA's VerifySupervisorRedundancy skips on that)."""
    return {"myMode": "active", "peerMode": "notInserted", "peerState": "notInserted", "unitDesc": "Primary",
            "configuredProtocol": "sso", "operationalProtocol": "simplex", "switchoverReady": False,
            "communicationDesc": "Down", "lastRedundancyModeChange": sw.boot_ns / 1e9}  # fmt: skip


def pci(twin: Twin, sw: Switch, now: int, rows: list[int]) -> Json:
    chip = "Jericho3" if sand(sw) else "Tomahawk4"
    devices = {"00:00.0": "Host bridge", "01:00.0": f"{chip} switch chip", "02:00.0": "FPGA", "03:00.0": "Ethernet"}
    return {"pciIds": {pid: {"name": name, "correctableErrors": 0, "nonFatalErrors": 0, "fatalErrors": 0,
                             "linkSpeed": "8GT/s", "linkWidth": 4} for pid, name in devices.items()}}  # fmt: skip


def coredump(twin: Twin, sw: Switch, now: int, rows: list[int]) -> Json:
    return {"mode": "compressedDeferred", "coreFiles": []}


def maintenance(twin: Twin, sw: Switch, now: int, rows: list[int]) -> Json:
    return {"units": {}, "interfaces": {}}


def file_systems(twin: Twin, sw: Switch, now: int, rows: list[int]) -> Json:
    return {"fileSystems": [
        {"prefix": "flash:", "fsType": "flash", "permission": "rw", "size": FLASH_SIZE, "free": FLASH_FREE,
         "mediaType": "flash", "linkedFileSystem": "", "isCurrentBootFs": True},
        {"prefix": "system:", "fsType": "system", "permission": "rw", "size": 0, "free": 0, "mediaType": "system",
         "linkedFileSystem": "", "isCurrentBootFs": False},
    ]}  # fmt: skip


def extensions(twin: Twin, sw: Switch, now: int, rows: list[int]) -> Json:
    return {"extensions": {}, "warnings": ["No extensions are available"]}


def boot_extensions(twin: Twin, sw: Switch, now: int, rows: list[int]) -> Json:
    return {"extensions": []}


def zerotouch(twin: Twin, sw: Switch, now: int, rows: list[int]) -> Json:
    return {"mode": "disabled"}  # the switch booted from its startup-config


def capacity_thresholds(twin: Twin, sw: Switch, now: int, rows: list[int]) -> Json:
    return {"thresholds": {}}


def capacity_exceeding(twin: Twin, sw: Switch, now: int, rows: list[int]) -> Json:
    return {"tables": []}  # no hardware table is near full: the fabric is routed point-to-point


def _fap(sw: Switch) -> str:
    if not sand(sw):
        raise Unavailable("% Unavailable command (not supported on this hardware platform)")
    return "Jericho3/0"


def drop_rates(twin: Twin, sw: Switch, now: int, rows: list[int]) -> Json:
    counters = (("IngressCongestion", "Congestion"), ("ReassemblyErrors", "Adverse"), ("IptCrcErrCnt", "Adverse"),
                ("FdaCellDrops", "PacketProcessor"))  # fmt: skip
    events = [{"counterId": k, "counterName": name, "counterType": kind, "dropCount": 0, "dropInLastMinute": 0,
               "dropInLastTenMinute": 0, "dropInLastOneHour": 0, "dropInLastOneDay": 0, "dropInLastOneWeek": 0}
              for k, (name, kind) in enumerate(counters)]  # fmt: skip
    return {"dropEvents": {_fap(sw): {"dropEvent": events}}, "totalAdverseDrops": 0, "totalCongestionDrops": 0,
            "totalPacketProcessorDrops": 0}  # fmt: skip


def fap_mapping(twin: Twin, sw: Switch, now: int, rows: list[int]) -> Json:
    fap = _fap(sw)
    ports = {str(k): {"interface": port, "fapPort": k} for k, port in enumerate(sw.ports)}
    return {"aradMappings": [{"fapName": fap, "portMappings": ports}]}  # a list of FAPs (JSON revision 5)


def sand_health(twin: Twin, sw: Switch, now: int, rows: list[int]) -> Json:
    _fap(sw)
    return {"linecardsNotInitialized": [], "fabricCardsNotInitialized": [], "fabricInterruptOccurrences": {},
            "initializationStatus": "initialized"}  # fmt: skip


def trident_counters(twin: Twin, sw: Switch, now: int, rows: list[int]) -> Json:
    raise Unavailable("% Unavailable command (not supported on this hardware platform)")  # no Trident in the twin


# --- features the fabric does not configure ---------------------------------------------------------------
def storm_control(twin: Twin, sw: Switch, now: int, rows: list[int]) -> Json:
    return {"interfaces": {}, "aggregateTrafficClasses": {}}


def port_channels(twin: Twin, sw: Switch, now: int, rows: list[int]) -> Json:
    return {"portChannels": {}}


def lacp(twin: Twin, sw: Switch, now: int, rows: list[int]) -> Json:
    return {"portChannels": {}, "orphanPorts": {}}


def ip_interface_brief(twin: Twin, sw: Switch, now: int, rows: list[int]) -> Json:
    return {"interfaces": {}}  # no IP addressing (eos_services.ip_interfaces)


def virtual_router(twin: Twin, sw: Switch, now: int, rows: list[int]) -> Json:
    return {"virtualMacs": [], "virtualRouters": []}


# --- text-only commands ------------------------------------------------------------------------------------
DF_TEXT = """Filesystem      Size  Used Avail Use% Mounted on
none            7.8G  1.1G  6.8G  14% /
none            7.8G  1.1G  6.8G  14% /.overlay
tmpfs           7.8G  4.0K  7.8G   1% /dev/shm
/dev/sda1       3.7G  1.1G  2.7G  29% /mnt/flash
"""
NPROC_TEXT = "4\n"
