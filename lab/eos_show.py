"""EOS `show` commands of a twin switch, as eAPI JSON (this module) and as CLI text (`eos_show_text`).

Shapes follow real EOS output (recorded examples in shared/reference/eos-outputs) closely enough for napalm's
`eos` driver and ntc-templates to parse them. Values come from the twin: admin/oper state, lazy counters,
optics, cabled LLDP peers. Identity (MACs, serials) is derived from names so it is stable across runs.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable
from typing import Any

import numpy as np

from topology.model import Role
from topology.units import NS

from . import eos_bgp as bgp
from . import eos_environment as environment
from . import eos_interfaces as interfaces
from . import eos_platform as platform
from . import eos_services as services
from .counters import COL
from .eos_identity import _h, internal_version, model_name, port_mac, serial_number, system_mac
from .eos_show_text import dotted_mac, media_type, render
from .model import Switch, Twin
from .sonic_config import lldp_port_id, system_description

MTU = 9214
LLDP_TTL = 120
MEM_TOTAL_KB = 16_092_376
SERVER_DESCRIPTION = "Ubuntu 22.04.4 LTS Linux 5.15.0-105-generic #115-Ubuntu SMP x86_64"

Json = dict[str, Any]


# --- port state --------------------------------------------------------------------------------------
def link_status(twin: Twin, sw: Switch, row: int) -> str:
    """EOS `interfaceStatus`/`linkStatus`: disabled (admin down), connected, or notconnect (oper down)."""
    if not sw.config[row].admin_up:
        return "disabled"
    return "connected" if bool(sw.oper_up[row]) else "notconnect"


def last_changes(twin: Twin, device: str) -> dict[str, int]:
    """Last oper change time (ns) of each port of `device` that has changed since the twin started."""
    out: dict[str, int] = {}
    for ts, dev, port, _up in twin.oper_events:
        if dev == device:
            out[port] = ts
    return out


def _now(twin: Twin, now_ns: int) -> int:
    # State changes made since the last tick (a shutdown in this very session) must show at once.
    return twin.advance(max(now_ns, twin.now))


# --- commands ------------------------------------------------------------------------------------------
def show_version(twin: Twin, sw: Switch, now: int, rows: list[int]) -> Json:
    mac = system_mac(sw.name)
    return {
        "mfgName": "Arista",
        "modelName": model_name(sw),
        "hardwareRevision": "11.00",
        "serialNumber": serial_number(sw.name),
        "systemMacAddress": mac,
        "hwMacAddress": mac,
        "configMacAddress": "00:00:00:00:00:00",
        "version": sw.os_version,
        "architecture": "x86_64",
        "internalVersion": internal_version(sw.os_version),
        "internalBuildId": str(uuid.uuid5(uuid.NAMESPACE_DNS, f"{sw.name}.{sw.os_version}")),
        "imageFormatVersion": "3.0",
        "imageOptimization": "Sand-4GB" if sw.role == Role.DR else "Strata-4GB",
        "kernelVersion": f"5.10.165.Ar-34768226.{sw.os_version.replace('.', '')}",
        "bootupTimestamp": sw.boot_ns / NS,
        "uptime": max(0.0, (now - sw.boot_ns) / NS),
        "memTotal": MEM_TOTAL_KB,
        "memFree": MEM_TOTAL_KB // 3 + _h(sw.name) % 100_000,
        "isIntlVersion": False,
    }


def show_hostname(twin: Twin, sw: Switch, now: int, rows: list[int]) -> Json:
    return {"hostname": sw.hostname, "fqdn": sw.hostname}


def _interface(twin: Twin, sw: Switch, row: int, now: int, counters: np.ndarray, changed: dict[str, int]) -> Json:
    port = sw.ports[row]
    c = [int(v) for v in counters]
    rate = sw.rate[row]
    status = link_status(twin, sw, row)
    peer = twin.peer(sw.name, port)
    routed = peer is not None and twin.is_switch(peer.device)
    mac = port_mac(sw.name, row)
    return {
        "name": port,
        "forwardingModel": "routed" if routed else "bridged",
        "lineProtocolStatus": "up" if status == "connected" else "down",
        "interfaceStatus": status,
        "hardware": "ethernet",
        "interfaceAddress": [],
        "physicalAddress": mac,
        "burnedInAddress": mac,
        "description": sw.config[row].description,
        "bandwidth": int(sw.speeds[row] * 1e9),
        "mtu": MTU,
        "l3MtuConfigured": False,
        "l2Mru": 0,
        "lastStatusChangeTimestamp": changed.get(port, sw.boot_ns) / NS,
        "loopbackMode": "loopbackNone",
        "autoNegotiate": "off",
        "duplex": "duplexFull",
        "lanes": 8,
        "interfaceCounters": {
            "inOctets": c[COL["if.in-octets"]],
            "inUcastPkts": c[COL["if.in-unicast-pkts"]],
            "inMulticastPkts": c[COL["if.in-pkts"]] - c[COL["if.in-unicast-pkts"]],
            "inBroadcastPkts": 0,
            "inDiscards": c[COL["if.in-discards"]],
            "inTotalPkts": c[COL["if.in-pkts"]],
            "outOctets": c[COL["if.out-octets"]],
            "outUcastPkts": c[COL["if.out-unicast-pkts"]],
            "outMulticastPkts": c[COL["if.out-pkts"]] - c[COL["if.out-unicast-pkts"]],
            "outBroadcastPkts": 0,
            "outDiscards": c[COL["if.out-discards"]],
            "totalInErrors": c[COL["if.in-errors"]],
            "inputErrorsDetail": {
                "runtFrames": 0,
                "giantFrames": 0,
                "fcsErrors": c[COL["if.in-fcs-errors"]],
                "alignmentErrors": 0,
                "symbolErrors": c[COL["eth.in-symbol-error"]],
                "rxPause": c[COL["eth.in-mac-pause-frames"]],
            },
            "totalOutErrors": 0,
            "outputErrorsDetail": {
                "collisions": 0,
                "lateCollisions": 0,
                "deferredTransmissions": 0,
                "txPause": c[COL["eth.out-mac-pause-frames"]],
            },
            "linkStatusChanges": c[COL["if.carrier-transitions"]],
            "counterRefreshTime": now / NS,
        },
        "interfaceStatistics": {
            "updateInterval": 300.0,
            "inBitsRate": float(rate[COL["if.in-octets"]] * 8),
            "inPktsRate": float(rate[COL["if.in-pkts"]]),
            "outBitsRate": float(rate[COL["if.out-octets"]] * 8),
            "outPktsRate": float(rate[COL["if.out-pkts"]]),
        },
    }


def show_interfaces(twin: Twin, sw: Switch, now: int, rows: list[int]) -> Json:
    values = sw.values(now, np.array(rows, dtype=np.int64))
    changed = last_changes(twin, sw.name)
    return {
        "interfaces": {sw.ports[row]: _interface(twin, sw, row, now, values[i], changed) for i, row in enumerate(rows)}
    }


def show_interfaces_status(twin: Twin, sw: Switch, now: int, rows: list[int]) -> Json:
    out: Json = {}
    for row in rows:
        peer = twin.peer(sw.name, sw.ports[row])
        mode = "routed" if peer is not None and twin.is_switch(peer.device) else "bridged"
        status = link_status(twin, sw, row)
        out[sw.ports[row]] = {
            "description": sw.config[row].description,
            "linkStatus": status,
            "lineProtocolStatus": "up" if status == "connected" else "down",
            "vlanInformation": {"interfaceMode": mode, "interfaceForwardingModel": mode},
            "bandwidth": int(sw.speeds[row] * 1e9),
            "interfaceType": media_type(float(sw.speeds[row])),
            "duplex": "duplexFull",
            "autoNegotiateActive": False,
        }
    return {"interfaceStatuses": out}


def show_interfaces_counters_errors(twin: Twin, sw: Switch, now: int, rows: list[int]) -> Json:
    values = sw.values(now, np.array(rows, dtype=np.int64))
    out: Json = {}
    for i, row in enumerate(rows):
        c = values[i]
        out[sw.ports[row]] = {
            "fcsErrors": int(c[COL["if.in-fcs-errors"]]),
            "alignmentErrors": 0,
            "symbolErrors": int(c[COL["eth.in-symbol-error"]]),
            "inErrors": int(c[COL["if.in-errors"]]),
            "frameTooLongs": 0,
            "frameTooShorts": 0,
            "outErrors": 0,
        }
    return {"interfaceErrorCounters": out}


def _lldp_neighbours(twin: Twin, sw: Switch, rows: list[int]) -> list[tuple[int, str, str]]:
    """(row, neighbour device, neighbour port) for ports whose LLDP knows a neighbour: LLDP only runs over a live
    link, and learns the neighbour from its first LLDPDU after link up (Twin.lldp_heard)."""
    out = []
    for row in rows:
        peer = twin.lldp_heard(sw, row)
        if peer is not None:
            out.append((row, peer.device, lldp_port_id(twin, peer)))
    return out


def show_lldp_neighbors(twin: Twin, sw: Switch, now: int, rows: list[int]) -> Json:
    neighbours = _lldp_neighbours(twin, sw, rows)
    changed = last_changes(twin, sw.name)
    return {
        "tablesLastChangeTime": max([sw.boot_ns, *changed.values()]) / NS,
        "tablesAgeOuts": 0,
        "tablesInserts": len(neighbours) + sum(1 for _ in changed),
        "tablesDeletes": sum(1 for _ in changed),
        "tablesDrops": 0,
        "lldpNeighbors": [
            {"port": sw.ports[row], "neighborDevice": dev, "neighborPort": port, "ttl": LLDP_TTL}
            for row, dev, port in neighbours
        ],
    }


def _system_description(twin: Twin, device: str) -> str:
    if twin.is_switch(device):
        sw = twin.switch(device)
        if sw.platform == "sonic":
            return system_description(sw)
        return f"Arista Networks EOS version {sw.os_version} running on an Arista {model_name(sw)}"
    return SERVER_DESCRIPTION


def show_lldp_neighbors_detail(twin: Twin, sw: Switch, now: int, rows: list[int]) -> Json:
    changed = last_changes(twin, sw.name)
    out: Json = {sw.ports[row]: {"lldpNeighborInfo": []} for row in rows}
    for row, dev, port in _lldp_neighbours(twin, sw, rows):
        is_switch = twin.is_switch(dev)
        since = changed.get(sw.ports[row], sw.boot_ns) / NS
        out[sw.ports[row]]["lldpNeighborInfo"].append(
            {
                "chassisIdType": "macAddress",
                "chassisId": dotted_mac(system_mac(dev)),
                "systemName": dev,
                "systemDescription": _system_description(twin, dev),
                "systemCapabilities": {
                    "bridge": is_switch,
                    "router": is_switch,
                    "wlanAccessPoint": False,
                    "station": not is_switch,
                },
                "ttl": LLDP_TTL,
                "neighborDiscoveryTime": since,
                "lastChangeTime": since,
                # LLDP advertisements arrive every 30 s.
                "lastContactTime": now / NS - (now // NS) % 30,
                "managementAddresses": [],
                "neighborInterfaceInfo": {
                    "interfaceIdType": "interfaceName",
                    "interfaceId": f'"{port}"',
                    "interfaceId_v2": port,
                    "interfaceDescription": port,
                    "maxFrameSize": MTU + 4 if is_switch else 9000,
                    "autoNegCapability": "notCapable",
                    "autoNegAdvertisedCapabilities": [],
                    "operMauType": "unknown",
                    "linkAggregationStatus": "capableAndDisabled",
                    "linkAggregationInterfaceId": 0,
                    "portAndProtocolVlanEnabled": {},
                    "portAndProtocolVlanSupported": {},
                    "vlanNames": {},
                    "protocolIdentityInfo": [],
                    "unknownTlvs": [],
                    "unknownOrgDefinedTlvs": [],
                },
            }
        )
    return {"lldpNeighbors": out}


def show_interfaces_counters_discards(twin: Twin, sw: Switch, now: int, rows: list[int]) -> Json:
    values = sw.values(now, np.array(rows, dtype=np.int64))
    out: Json = {}
    for i, row in enumerate(rows):
        c = values[i]
        out[sw.ports[row]] = {
            "inDiscards": int(c[COL["if.in-discards"]]),
            "outDiscards": int(c[COL["if.out-discards"]]),
        }
    return {"interfaces": out, "inDiscardsTotal": sum(v["inDiscards"] for v in out.values()),
            "outDiscardsTotal": sum(v["outDiscards"] for v in out.values())}  # fmt: skip


def show_interfaces_status_errdisabled(twin: Twin, sw: Switch, now: int, rows: list[int]) -> Json:
    return {"interfaceStatuses": {}}  # the twin err-disables no port


def show_ecn_counters(twin: Twin, sw: Switch, now: int, rows: list[int]) -> Json:
    """ECN-marked packets per egress queue; "-" for a queue without `random-detect ecn` (EOS prints the same)."""
    values = sw.values(now, np.array(rows, dtype=np.int64))
    out: Json = {}
    for i, row in enumerate(rows):
        ecn = sw.config[row].ecn
        out[sw.ports[row]] = {"queueCounters": {
            str(q): str(int(values[i][COL[f"q{q}.ecn-marked-pkts"]])) if q in ecn else "-" for q in range(8)
        }}  # fmt: skip
    return {"intfQueueCounters": out}


def show_reload_cause(twin: Twin, sw: Switch, now: int, rows: list[int]) -> Json:
    """Why the switch last booted: every twin boot (and a `reboot` fault) is a reload someone asked for."""
    return {"resetCauses": [{"description": "Reload requested by the user.", "timestamp": sw.boot_ns / NS,
                             "recommendedAction": "No action necessary.", "debugInfoIsDir": False}],
            "full": False}  # fmt: skip


def show_uptime(twin: Twin, sw: Switch, now: int, rows: list[int]) -> Json:
    return {"upTime": max(0.0, (now - sw.boot_ns) / NS), "loadAvg": [0.61, 0.55, 0.52], "users": 0,
            "currentTime": now / NS}  # fmt: skip


# A transceiver's temperature limits (SFF-8636 / CMIS module alarm thresholds of a typical 400G-DR4 QSFP-DD).
XCVR_OVERHEAT_C, XCVR_CRITICAL_C = 70.0, 75.0


def show_transceiver_temperature(twin: Twin, sw: Switch, now: int, rows: list[int]) -> Json:
    sensors = []
    for row in rows:
        t = round(twin.temperature(sw, row), 2)
        port = sw.ports[row]
        sensors.append({"name": f"DomTemperatureSensor{port.removeprefix('Ethernet')}", "description": f"{port}",
                        "relPos": port.removeprefix("Ethernet"), "currentTemperature": t,
                        "maxTemperature": t, "overheatThreshold": XCVR_OVERHEAT_C,
                        "criticalThreshold": XCVR_CRITICAL_C, "hwStatus": "ok", "alertCount": 0,
                        "inAlertState": t > XCVR_OVERHEAT_C, "targetTemperature": 0.0, "isPidDriver": False,
                        "pidDriverCount": 0})  # fmt: skip
    return {"tempSensors": sensors, "cardSlots": []}


def show_interfaces_transceiver(twin: Twin, sw: Switch, now: int, rows: list[int]) -> Json:
    out: Json = {}
    for row in rows:
        h = _h(f"{sw.name}:{sw.ports[row]}")
        out[sw.ports[row]] = {
            "mediaType": media_type(float(sw.speeds[row])),
            "vendorSn": f"XKP{h % 10**8:08d}",
            "rxPower": round(twin.rx_power(sw, row), 4),
            "txPower": round(0.5 + (h % 100) / 200.0, 4),
            "txBias": round(6.0 + (h % 80) / 100.0, 3),
            "temperature": round(twin.temperature(sw, row), 2),
            "voltage": round(3.25 + (h % 8) / 100.0, 4),
            "updateTime": now / NS - (now // NS) % 5,
        }
    return {"interfaces": out}


def _pfc(sw: Switch, now: int, rows: list[int], detail: bool) -> Json:
    values = sw.values(now, np.array(rows, dtype=np.int64))
    out: Json = {}
    for i, row in enumerate(rows):
        c = values[i]
        rx = [int(c[COL[f"pfc{p}.in-frames"]]) for p in range(8)]
        tx = [int(c[COL[f"pfc{p}.out-frames"]]) for p in range(8)]
        entry: Json = {"rxFrames": sum(rx), "txFrames": sum(tx)}
        if detail:
            entry["priorities"] = {str(p): {"rxFrames": rx[p], "txFrames": tx[p]} for p in range(8)}
        out[sw.ports[row]] = entry
    return {"interfaceCounters": out}


def show_pfc_counters(twin: Twin, sw: Switch, now: int, rows: list[int]) -> Json:
    return _pfc(sw, now, rows, detail=False)


def show_pfc_counters_detail(twin: Twin, sw: Switch, now: int, rows: list[int]) -> Json:
    return _pfc(sw, now, rows, detail=True)


def version_detail(twin: Twin, sw: Switch, now: int, rows: list[int]) -> Json:
    packages = {"TerminAttr-core": {"version": platform.TERMINATTR_VERSION, "release": "1"},
                "EOS": {"version": sw.os_version, "release": "1"}}  # fmt: skip
    details = {"packages": packages, "deviations": [], "components": [], "switchType": "fixedSystem"}
    return {**show_version(twin, sw, now, rows), "details": details}


# --- parsing --------------------------------------------------------------------------------------------
Handler = Callable[[Twin, Switch, int, list[int]], Json]

# Keyword sequences -> (command key, handler); `IF` marks where an optional interface name may stand.
IF = "<interface>"
REST = "<arguments>"  # the rest of the line, whatever it is (a route's vrf, prefix and options)
COMMANDS: dict[tuple[str, ...], tuple[str, Handler]] = {
    ("show", "version"): ("version", show_version),
    ("show", "hostname"): ("hostname", show_hostname),
    ("show", "interfaces", IF): ("interfaces", show_interfaces),
    ("show", "interfaces", IF, "status"): ("interfaces status", show_interfaces_status),
    ("show", "interfaces", IF, "counters", "errors"): ("interfaces counters errors", show_interfaces_counters_errors),
    ("show", "interfaces", IF, "transceiver"): ("interfaces transceiver", show_interfaces_transceiver),
    ("show", "lldp", "neighbors", IF): ("lldp neighbors", show_lldp_neighbors),
    ("show", "lldp", "neighbors", IF, "detail"): ("lldp neighbors detail", show_lldp_neighbors_detail),
    ("show", "priority-flow-control", IF, "counters"): ("pfc counters", show_pfc_counters),
    ("show", "priority-flow-control", IF, "counters", "detail"): ("pfc counters detail", show_pfc_counters_detail),
    ("show", "interfaces", IF, "counters", "discards"): (
        "interfaces counters discards",
        show_interfaces_counters_discards,
    ),
    ("show", "interfaces", IF, "status", "errdisabled"): (
        "interfaces status errdisabled",
        show_interfaces_status_errdisabled,
    ),
    ("show", "uptime"): ("uptime", show_uptime),
    ("show", "reload", "cause"): ("reload cause", show_reload_cause),
    ("show", "qos", "interfaces", IF, "ecn", "counters", "queue"): ("ecn counters", show_ecn_counters),
    ("show", "system", "environment", "temperature", "transceiver"): (
        "transceiver temperature",
        show_transceiver_temperature,
    ),
    ("show", "system", "environment", "cooling"): ("environment cooling", environment.cooling),
    ("show", "system", "environment", "temperature"): ("environment temperature", environment.temperature),
    ("show", "system", "environment", "power"): ("environment power", environment.power),
    ("show", "processes", "top", "once"): ("processes top", environment.processes_top),
    # services the twin does not model: a real switch's answer where they are not configured (eos_services.py)
    ("show", "vlan"): ("vlan", services.vlans),
    ("show", "users", "accounts"): ("users accounts", services.users),
    ("show", "snmp", "v2-mib", "chassis"): ("snmp chassis", services.snmp_chassis),
    ("show", "snmp", "v2-mib", "location"): ("snmp location", services.snmp_location),
    ("show", "snmp", "v2-mib", "contact"): ("snmp contact", services.snmp_contact),
    ("show", "ntp", "associations"): ("ntp associations", services.ntp_associations),
    ("show", "mac", "address-table"): ("mac address-table", services.mac_table),
    ("show", "vrf"): ("vrf", services.vrfs),
    ("show", "ip", "interface"): ("ip interface", services.ip_interfaces),
    ("show", "ipv6", "interface"): ("ip interface", services.ip_interfaces),
    # the BGP underlay (eos_bgp.py over lab/bgp.py)
    ("show", "ip", "bgp", "summary"): ("ip bgp summary", bgp.ip_summary),
    ("show", "bgp", "summary"): ("bgp summary", bgp.summary),
    ("show", "ipv6", "bgp", "summary"): ("ipv6 bgp summary", bgp.ipv6_summary),
    ("show", "ip", "bgp", "neighbors"): ("bgp neighbors", bgp.neighbors),
    ("show", "bgp", "neighbors"): ("bgp neighbors", bgp.neighbors),
    ("show", "ipv6", "bgp", "peers"): ("bgp neighbors", bgp.ipv6_peers),
    ("show", "ip", "bgp", "summary", "vrf", "all"): ("ip bgp summary", bgp.ip_summary),
    ("show", "bgp", "summary", "vrf", "all"): ("bgp summary", bgp.summary),
    ("show", "ipv6", "bgp", "summary", "vrf", "all"): ("ipv6 bgp summary", bgp.ipv6_summary),
    ("show", "ip", "bgp", "neighbors", "vrf", "all"): ("bgp neighbors", bgp.neighbors),
    ("show", "bgp", "neighbors", "vrf", "all"): ("bgp neighbors", bgp.neighbors),
    ("show", "ipv6", "bgp", "peers", "vrf", "all"): ("bgp neighbors", bgp.ipv6_peers),
    ("show", "ip", "bgp", "summary", "vrf", "default"): ("ip bgp summary", bgp.ip_summary),
    ("show", "bgp", "summary", "vrf", "default"): ("bgp summary", bgp.summary),
    ("show", "ipv6", "bgp", "summary", "vrf", "default"): ("ipv6 bgp summary", bgp.ipv6_summary),
    ("show", "ip", "bgp", "neighbors", "vrf", "default"): ("bgp neighbors", bgp.neighbors),
    ("show", "bgp", "neighbors", "vrf", "default"): ("bgp neighbors", bgp.neighbors),
    ("show", "ipv6", "bgp", "peers", "vrf", "default"): ("bgp neighbors", bgp.ipv6_peers),
    ("show", "ip", "route", REST): ("ip route", services.routes),
    ("show", "ipv6", "route", REST): ("ip route", services.routes),
    # more interface commands (eos_interfaces.py)
    ("show", "interfaces", IF, "description"): ("interfaces description", interfaces.descriptions),
    ("show", "interfaces", IF, "counters", "rates"): ("interfaces counters rates", interfaces.counter_rates),
    ("show", "interfaces", IF, "counters", "queue", "detail"): ("queue detail", interfaces.queue_detail),
    ("show", "interfaces", IF, "counters", "queue", "drops"): ("queue drops", interfaces.queue_drops),
    ("show", "interfaces", IF, "transceiver", "dom", "thresholds"): ("dom thresholds", interfaces.dom_thresholds),
    ("show", "interfaces", IF, "phy", "detail"): ("phy detail", interfaces.phy_detail),
    # hardware and system (eos_platform.py)
    ("show", "inventory"): ("inventory", platform.inventory),
    ("show", "module"): ("module", platform.modules),
    ("show", "module", "power"): ("module power", platform.module_power),
    ("show", "redundancy", "status"): ("redundancy status", platform.redundancy),
    ("show", "pci"): ("pci", platform.pci),
    ("show", "system", "coredump"): ("coredump", platform.coredump),
    ("show", "maintenance"): ("maintenance", platform.maintenance),
    ("show", "file", "systems"): ("file systems", platform.file_systems),
    ("show", "version", "detail"): ("version detail", version_detail),
    ("show", "extensions"): ("extensions", platform.extensions),
    ("show", "boot-extensions"): ("boot-extensions", platform.boot_extensions),
    ("show", "zerotouch"): ("zerotouch", platform.zerotouch),
    ("show", "hardware", "capacity", "alert", "threshold"): ("capacity thresholds", platform.capacity_thresholds),
    ("show", "hardware", "capacity", "utilization", REST): ("capacity utilization", platform.capacity_exceeding),
    ("show", "hardware", "counter", "drop", "rates"): ("drop rates", platform.drop_rates),
    ("show", "platform", "fap", "mapping"): ("fap mapping", platform.fap_mapping),
    ("show", "platform", "sand", "health"): ("sand health", platform.sand_health),
    ("show", "platform", "trident", "counters"): ("trident counters", platform.trident_counters),
    ("show", "storm-control"): ("storm-control", platform.storm_control),
    ("show", "port-channel"): ("port-channel", platform.port_channels),
    ("show", "lacp", "counters", "all-ports"): ("lacp", platform.lacp),
    ("show", "lacp", "interface", "detailed"): ("lacp", platform.lacp),
    ("show", "ip", "interface", "brief"): ("ip interface brief", platform.ip_interface_brief),
    ("show", "ip", "virtual-router"): ("virtual-router", platform.virtual_router),
}
# Abbreviations EOS accepts because they are unambiguous among its keywords; only the common ones.
MIN_PREFIX = {
    "show": 2,
    "interfaces": 3,
    "status": 4,
    "counters": 3,
    "errors": 3,
    "transceiver": 5,
    "lldp": 4,
    "neighbors": 5,
    "detail": 3,
    "priority-flow-control": 8,
    "version": 3,
    "hostname": 4,
    "ethernet": 2,
    "system": 3,
    "environment": 3,
    "cooling": 4,
    "temperature": 4,
    "power": 3,
    "processes": 4,
    "accounts": 4,
    "associations": 5,
    "address-table": 7,
    "interface": 4,
    "summary": 3,
    "discards": 4,
    "errdisabled": 4,
    "uptime": 2,
}


def _keyword(token: str, keyword: str) -> bool:
    return keyword.startswith(token) and len(token) >= MIN_PREFIX.get(keyword, len(keyword))


def interface_name(token: str) -> str | None:
    """`ethernet1/1`, `eth1/1`, `et1/1` -> `Ethernet1/1`; None if it is not an interface name."""
    low = token.lower()
    for prefix in ("ethernet", "eth", "et"):
        if low.startswith(prefix) and low[len(prefix) : len(prefix) + 1].isdigit():
            return "Ethernet" + low[len(prefix) :]
    return None


def _match(pattern: tuple[str, ...], tokens: list[str]) -> tuple[bool, str | None]:
    """Does `tokens` fit `pattern`? Returns (fits, interface named or None)."""
    iface: str | None = None
    i = 0
    for kw in pattern:
        if kw == REST:
            return True, iface
        if kw == IF:
            if i < len(tokens) and (name := interface_name(tokens[i])) is not None:
                iface = name
                i += 1
            elif i + 1 < len(tokens) and _keyword(tokens[i], "ethernet") and tokens[i + 1][:1].isdigit():
                iface = "Ethernet" + tokens[i + 1]  # `ethernet 1/1`
                i += 2
            continue
        if i >= len(tokens) or not _keyword(tokens[i], kw):
            return False, None
        i += 1
    return i == len(tokens), iface


def parse(command: str) -> tuple[str, Handler, str | None] | None:
    """(command key, handler, interface or None) of a known command, else None."""
    tokens = command.lower().split()
    for pattern, (key, handler) in COMMANDS.items():
        fits, iface = _match(pattern, tokens)
        if fits:
            return key, handler, iface
    return None


def _run(twin: Twin, device: str, command: str, now_ns: int) -> tuple[str, Json, int] | None:
    parsed = parse(command)
    if parsed is None:
        return None
    key, handler, iface = parsed
    sw = twin.switch(device)
    now = _now(twin, now_ns)
    if iface is None:
        rows = list(range(len(sw.ports)))
    elif iface in sw.index:
        rows = [sw.index[iface]]
    else:
        return None
    return key, handler(twin, sw, now, rows), now


def show_json(twin: Twin, device: str, command: str, now_ns: int) -> dict[str, Any] | None:
    """The eAPI JSON answer of `command` on `device`; None if this module does not know the command
    (or it names an interface the switch does not have)."""
    done = _run(twin, device, command, now_ns)
    return None if done is None else done[1]


def show_text(twin: Twin, device: str, command: str, now_ns: int) -> str | None:
    """The CLI text of `command` on `device` (`... | json` prints the JSON, as EOS does); None if unknown."""
    base, _, pipe = command.partition("|")
    as_json = pipe.strip() == "json"
    if pipe and not as_json:
        return None
    done = _run(twin, device, base, now_ns)
    if done is None:
        return None
    key, data, now = done
    return json.dumps(data, indent=2) + "\n" if as_json else render(key, data, now)
