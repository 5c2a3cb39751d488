"""What a twin EOS switch answers about the services the twin does not model: VLANs, local users, SNMP, NTP, the
MAC table, VRFs, IP interfaces, BGP and routes. Each answer is that of a real switch where the service is not
configured (the twin's fabric ports carry no IP addressing or routing protocol), in the JSON shapes real EOS uses,
so a client (napalm's getters, ANTA) gets an empty but well-formed answer instead of "invalid command".
"""

from __future__ import annotations

import zlib
from typing import Any

from .model import Switch, Twin

Json = dict[str, Any]
LAB_USER = "admin"  # the twin's one account (`lab/endpoints.py` Credentials)


def vlans(twin: Twin, sw: Switch, now: int, rows: list[int]) -> Json:
    return {"vlans": {"1": {"name": "default", "dynamic": False, "status": "active", "interfaces": {}}},
            "sourceDetail": ""}  # fmt: skip


def users(twin: Twin, sw: Switch, now: int, rows: list[int]) -> Json:
    # EOS shows the account's sha512-crypt hash; the twin shows a placeholder that no password hashes to (the lab
    # password never leaves the lab in any form)
    placeholder = "$6$twin$" + f"{zlib.crc32(sw.name.encode()):08x}" * 10
    return {"users": {LAB_USER: {"username": LAB_USER, "role": "network-admin", "privLevel": 15, "secret": placeholder,
                                 "sshAuthorizedKey": ""}}}  # fmt: skip


def snmp_chassis(twin: Twin, sw: Switch, now: int, rows: list[int]) -> Json:
    return {"chassisId": ""}


def snmp_location(twin: Twin, sw: Switch, now: int, rows: list[int]) -> Json:
    return {"location": ""}


def snmp_contact(twin: Twin, sw: Switch, now: int, rows: list[int]) -> Json:
    return {"contact": ""}


def ntp_associations(twin: Twin, sw: Switch, now: int, rows: list[int]) -> Json:
    return {"peers": {}}


def mac_table(twin: Twin, sw: Switch, now: int, rows: list[int]) -> Json:
    return {"multicastTable": {"tableEntries": []}, "unicastTable": {"tableEntries": []}}


def vrfs(twin: Twin, sw: Switch, now: int, rows: list[int]) -> Json:
    family = {"supported": True, "protocolState": "up", "routingState": "down"}
    default = {"routeDistinguisher": "", "vrfState": "up", "interfaces": [],
               "protocols": {"ipv4": dict(family), "ipv6": dict(family)}}  # fmt: skip
    return {"vrfs": {"default": default}}


def ip_interfaces(twin: Twin, sw: Switch, now: int, rows: list[int]) -> Json:
    return {"interfaces": {}}


def routes(twin: Twin, sw: Switch, now: int, rows: list[int]) -> Json:
    return {"vrfs": {"default": {"routes": {}, "allRoutesProgrammedHardware": True, "allRoutesProgrammedKernel": True,
                                 "defaultRouteState": "notSet"}}}  # fmt: skip


# --- CLI text -----------------------------------------------------------------------------------------------------
def vlans_text(data: Json, now: int) -> list[str]:
    return [
        "VLAN  Name                             Status    Ports",
        "----- -------------------------------- --------- -------------------------------",
        "1     default                          active",
    ]


def users_text(data: Json, now: int) -> list[str]:
    return [f"{name} is a network-admin with privilege level {u['privLevel']}" for name, u in data["users"].items()]


def empty_text(data: Json, now: int) -> list[str]:
    return [""]


def mac_table_text(data: Json, now: int) -> list[str]:
    return [
        "          Mac Address Table",
        "------------------------------------------------------------------",
        "",
        "Vlan    Mac Address       Type        Ports      Moves   Last Move",
        "----    -----------       ----        -----      -----   ---------",
        "Total Mac Addresses for this criterion: 0",
    ]


def ntp_text(data: Json, now: int) -> list[str]:
    return ["NTP is disabled."]


def vrfs_text(data: Json, now: int) -> list[str]:
    return [
        "Maximum number of VRFs allowed: 1024",
        "   VRF           Protocols       State         Interfaces",
        "------------- --------------- ---------------- ----------",
        "   default       IPv4            routing         ",
    ]
