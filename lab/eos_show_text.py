"""CLI text of the twin's EOS `show` commands, rendered from their eAPI JSON (so the two never disagree).

Layouts follow EOS closely enough for ntc-templates (what netmiko's `use_textfsm` runs) to parse them.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from topology.units import NS

from . import eos_bgp as bgp
from . import eos_environment as environment
from . import eos_services as services

Json = dict[str, Any]


def short_name(port: str) -> str:
    return port.replace("Ethernet", "Et", 1) if port.startswith("Ethernet") else port


def media_type(gbps: float) -> str:
    return {400.0: "400GBASE-DR4", 800.0: "800GBASE-2DR4", 200.0: "200GBASE-FR4", 100.0: "100GBASE-DR"}.get(
        gbps, f"{speed_label(gbps)}BASE-CR"
    )


def speed_label(gbps: float) -> str:
    return f"{gbps:g}G" if gbps >= 1 else f"{gbps * 1000:g}M"


def dotted_mac(mac: str) -> str:
    """EOS prints MACs in text as 001c.7300.0001."""
    raw = mac.replace(":", "")
    return f"{raw[0:4]}.{raw[4:8]}.{raw[8:12]}"


def ago(seconds: float) -> str:
    """EOS's `0:10:32 ago` / `3 days, 4:05:06 ago`."""
    s = max(0, int(seconds))
    days, s = divmod(s, 86400)
    clock = f"{s // 3600}:{s % 3600 // 60:02d}:{s % 60:02d}"
    return f"{days} days, {clock} ago" if days else f"{clock} ago"


def _plural(n: int, unit: str) -> str:
    return f"{n} {unit}" + ("" if n == 1 else "s")


def uptime_words(seconds: float) -> str:
    """`1 week, 2 days, 3 hours and 4 minutes`, as `show version` says it."""
    m = int(seconds) // 60
    weeks, m = divmod(m, 7 * 1440)
    days, m = divmod(m, 1440)
    hours, minutes = divmod(m, 60)
    return (
        f"{_plural(weeks, 'week')}, {_plural(days, 'day')}, {_plural(hours, 'hour')} and {_plural(minutes, 'minute')}"
    )


def _duration(seconds: float) -> str:
    """`Up 2 hours, 3 minutes, 4 seconds` in `show interfaces`."""
    s = max(0, int(seconds))
    parts = []
    for unit, size in (("day", 86400), ("hour", 3600), ("minute", 60)):
        if s >= size:
            parts.append(_plural(s // size, unit))
            s %= size
    parts.append(_plural(s, "second"))
    return ", ".join(parts)


def _table(header: list[str], rows: list[list[str]], widths: list[int], dashes: bool = False) -> list[str]:
    def line(cells: list[str]) -> str:
        cells = cells + [""] * (len(widths) - len(cells))
        return " ".join(c.ljust(w) for c, w in zip(cells, widths, strict=True)).rstrip()

    out = [line(header)]
    if dashes:
        out.append(" ".join("-" * w for w in widths))
    out += [line(r) for r in rows]
    return out


# --- renderers ---------------------------------------------------------------------------------------------
def version(d: Json, now: int) -> list[str]:
    mem = d["memTotal"]
    return [
        f"Arista {d['modelName']}",
        f"Hardware version: {d['hardwareRevision']}",
        f"Serial number: {d['serialNumber']}",
        f"Hardware MAC address: {dotted_mac(d['hwMacAddress'])}",
        f"System MAC address: {dotted_mac(d['systemMacAddress'])}",
        "",
        f"Software image version: {d['version']}",
        f"Architecture: {d['architecture']}",
        f"Internal build version: {d['internalVersion']}",
        f"Internal build ID: {d['internalBuildId']}",
        f"Image format version: {d['imageFormatVersion']}",
        f"Image optimization: {d['imageOptimization']}",
        "",
        f"Kernel version: {d['kernelVersion']}",
        "",
        f"Uptime: {uptime_words(d['uptime'])}",
        f"Total memory: {mem} kB",
        f"Free memory: {d['memFree']} kB",
    ]


def hostname(d: Json, now: int) -> list[str]:
    return [f"Hostname: {d['hostname']}", f"FQDN:     {d['fqdn']}"]


def _status_words(status: str) -> tuple[str, str]:
    if status == "disabled":
        return "administratively down", "down (disabled)"
    if status == "connected":
        return "up", "up (connected)"
    return "down", f"down ({status})"


def _rate_line(direction: str, bits: float, pkts: float, bandwidth: int) -> str:
    share = 100 * bits / max(bandwidth, 1)
    return (
        f"  5 minutes {direction} rate {bits / 1e9:.1f} Gbps ({share:.1f}% with framing overhead), "
        f"{pkts:.0f} packets/sec"
    )


def interfaces(d: Json, now: int) -> list[str]:
    out: list[str] = []
    for name, i in d["interfaces"].items():
        c = i["interfaceCounters"]
        err = c["inputErrorsDetail"]
        oerr = c["outputErrorsDetail"]
        st = i["interfaceStatistics"]
        link, proto = _status_words(i["interfaceStatus"])
        gbps = i["bandwidth"] / 1e9
        since = now / NS - i["lastStatusChangeTimestamp"]
        in_pkts = c["inUcastPkts"] + c["inMulticastPkts"] + c["inBroadcastPkts"]
        out_pkts = c["outUcastPkts"] + c["outMulticastPkts"] + c["outBroadcastPkts"]
        out += [
            f"{name} is {link}, line protocol is {proto}",
            f"  Hardware is Ethernet, address is {dotted_mac(i['physicalAddress'])} "
            f"(bia {dotted_mac(i['burnedInAddress'])})",
        ]
        if i["description"]:
            out.append(f"  Description: {i['description']}")
        out += [
            f"  Ethernet MTU {i['mtu']} bytes, BW {i['bandwidth'] // 1000} kbit",
            f"  Full-duplex, {gbps:g}Gb/s, auto negotiation: off, uni-link: n/a",
            f"  {'Up' if i['lineProtocolStatus'] == 'up' else 'Down'} {_duration(since)}",
            "  Loopback Mode : None",
            f"  {c['linkStatusChanges']} link status changes since last clear",
            '  Last clearing of "show interface" counters never',
            _rate_line("input", st["inBitsRate"], st["inPktsRate"], i["bandwidth"]),
            _rate_line("output", st["outBitsRate"], st["outPktsRate"], i["bandwidth"]),
            f"     {in_pkts} packets input, {c['inOctets']} bytes",
            f"     Received {c['inBroadcastPkts']} broadcasts, {c['inMulticastPkts']} multicast",
            f"     {err['runtFrames']} runts, {err['giantFrames']} giants",
            f"     {c['totalInErrors']} input errors, {err['fcsErrors']} CRC, {err['alignmentErrors']} alignment, "
            f"{err['symbolErrors']} symbol, {c['inDiscards']} input discards",
            f"     {err['rxPause']} PAUSE input",
            f"     {out_pkts} packets output, {c['outOctets']} bytes",
            f"     Sent {c['outBroadcastPkts']} broadcasts, {c['outMulticastPkts']} multicast",
            f"     {c['totalOutErrors']} output errors, {oerr['collisions']} collisions",
            f"     {oerr['lateCollisions']} late collision, {oerr['deferredTransmissions']} deferred, "
            f"{c['outDiscards']} output discards",
            f"     {oerr['txPause']} PAUSE output",
        ]
    return out


def interfaces_status(d: Json, now: int) -> list[str]:
    rows = [
        [
            short_name(name),
            s["description"],
            s["linkStatus"],
            s["vlanInformation"]["interfaceMode"],
            "full",
            speed_label(s["bandwidth"] / 1e9),
            s["interfaceType"],
        ]
        for name, s in d["interfaceStatuses"].items()
    ]
    return _table(["Port", "Name", "Status", "Vlan", "Duplex", "Speed", "Type", "Flags", "Encapsulation"], rows,
                  [10, 18, 12, 8, 6, 6, 14, 5, 13])  # fmt: skip


def interfaces_counters_errors(d: Json, now: int) -> list[str]:
    keys = ("fcsErrors", "alignmentErrors", "symbolErrors", "inErrors", "frameTooShorts", "frameTooLongs", "outErrors")
    rows = [[short_name(p), *(str(c[k]) for k in keys)] for p, c in d["interfaceErrorCounters"].items()]
    header = ["Port", "FCS", "Align", "Symbol", "Rx", "Runts", "Giants", "Tx"]
    widths = [10, *[12] * 7]

    def line(cells: list[str]) -> str:
        return cells[0].ljust(widths[0]) + "".join(c.rjust(w) for c, w in zip(cells[1:], widths[1:], strict=True))

    return [line(header), *(line(r) for r in rows)]


def lldp_neighbors(d: Json, now: int) -> list[str]:
    rows = [[short_name(n["port"]), n["neighborDevice"], n["neighborPort"], str(n["ttl"])] for n in d["lldpNeighbors"]]
    return [
        f"Last table change time   : {ago(now / NS - d['tablesLastChangeTime'])}",
        f"Number of table inserts  : {d['tablesInserts']}",
        f"Number of table deletes  : {d['tablesDeletes']}",
        f"Number of table drops    : {d['tablesDrops']}",
        f"Number of table age-outs : {d['tablesAgeOuts']}",
        "",
        *_table(["Port", "Neighbor Device ID", "Neighbor Port ID", "TTL"], rows, [10, 24, 22, 3], dashes=True),
    ]


def lldp_neighbors_detail(d: Json, now: int) -> list[str]:
    out: list[str] = []
    for port, entry in d["lldpNeighbors"].items():
        infos = entry["lldpNeighborInfo"]
        out += [f"Interface {port} detected {len(infos)} LLDP neighbors:", ""]
        for n in infos:
            nif = n["neighborInterfaceInfo"]
            caps = ", ".join(k.capitalize() for k, on in n["systemCapabilities"].items() if on)
            age = int(now / NS - n["lastContactTime"])
            out += [
                f"  Neighbor {n['chassisId']}/{nif['interfaceId']}, age {age} seconds",
                f"  Discovered {ago(now / NS - n['neighborDiscoveryTime'])}; "
                f"Last changed {ago(now / NS - n['lastChangeTime'])}",
                "  - Chassis ID type: MAC address (4)",
                f"    Chassis ID     : {n['chassisId']}",
                "  - Port ID type: Interface name (5)",
                f"    Port ID     : {nif['interfaceId']}",
                f"  - Time To Live: {n['ttl']} seconds",
                f'  - Port Description: "{nif["interfaceDescription"]}"',
                f'  - System Name: "{n["systemName"]}"',
                f'  - System Description: "{n["systemDescription"]}"',
                f"  - System Capabilities : {', '.join(k.capitalize() for k in n['systemCapabilities'])}",
                f"    Enabled Capabilities: {caps}",
                f"  - Maximum Frame Size: {nif['maxFrameSize']}",
                "",
            ]
    return out


def interfaces_transceiver(d: Json, now: int) -> list[str]:
    widths = [10, 10, 10, 9, 9, 9, 19]
    rows = [
        [
            short_name(p),
            f"{t['temperature']:.2f}",
            f"{t['voltage']:.2f}",
            f"{t['txBias']:.2f}",
            f"{t['txPower']:.2f}",
            f"{t['rxPower']:.2f}",
            ago(now / NS - t["updateTime"]),
        ]
        for p, t in d["interfaces"].items()
    ]
    return [
        "If device is externally calibrated, only calibrated values are printed.",
        "N/A: not applicable, Tx: transmit, Rx: receive.",
        "mA: milliamperes, dBm: decibels (milliwatts).",
        "                                 Bias      Optical   Optical",
        *_table(["", "Temp", "Voltage", "Current", "Tx Power", "Rx Power"], [], widths),  # first header line
        *_table(["", "(Celsius)", "(Volts)", "(mA)", "(dBm)", "(dBm)", "Last Update"], rows, widths, dashes=True),
    ]


def pfc_counters(d: Json, now: int) -> list[str]:
    rows = [[short_name(p), str(c["rxFrames"]), str(c["txFrames"])] for p, c in d["interfaceCounters"].items()]
    return _table(["Port", "RxPfc", "TxPfc"], rows, [10, 20, 20])


def pfc_counters_detail(d: Json, now: int) -> list[str]:
    rows = [
        [short_name(p), prio, str(pc["rxFrames"]), str(pc["txFrames"])]
        for p, c in d["interfaceCounters"].items()
        for prio, pc in c["priorities"].items()
    ]
    return _table(["Port", "Priority", "RxPfc", "TxPfc"], rows, [10, 8, 20, 20])


RENDERERS: dict[str, Callable[[Json, int], list[str]]] = {
    "version": version,
    "hostname": hostname,
    "interfaces": interfaces,
    "interfaces status": interfaces_status,
    "interfaces counters errors": interfaces_counters_errors,
    "interfaces transceiver": interfaces_transceiver,
    "lldp neighbors": lldp_neighbors,
    "lldp neighbors detail": lldp_neighbors_detail,
    "pfc counters": pfc_counters,
    "pfc counters detail": pfc_counters_detail,
    "environment cooling": environment.cooling_text,
    "environment temperature": environment.temperature_text,
    "environment power": environment.power_text,
    "processes top": environment.processes_top_text,
    "interfaces counters discards": lambda d, now: [
        "Port        InDiscards  OutDiscards",
        "----------  ----------  -----------",
        *(f"{p:<11} {v['inDiscards']:>10}  {v['outDiscards']:>11}" for p, v in d["interfaces"].items()),
    ],
    "interfaces status errdisabled": lambda d, now: [""],
    "ecn counters": lambda d, now: [
        "Port        " + " ".join(f"{'TxQ' + str(q):>8}" for q in range(8)),
        *(
            f"{p:<11} " + " ".join(f"{v['queueCounters'][str(q)]:>8}" for q in range(8))
            for p, v in d["intfQueueCounters"].items()
        ),
    ],
    "reload cause": lambda d, now: [
        "Reload Cause:",
        "-------------",
        *(f"{c['description']}" for c in d["resetCauses"]),
        "",
        "Recommended Action:",
        "-------------------",
        "No action necessary.",
    ],
    "uptime": lambda d, now: [f" up {int(d['upTime']) // 86400} days,  0 users,  load average: 0.61, 0.55, 0.52"],
    "transceiver temperature": lambda d, now: [
        f"{s['description']:<12} {s['currentTemperature']:>6.1f}C  {s['overheatThreshold']:.0f}C  ok"
        for s in d["tempSensors"]
    ],
    "vlan": services.vlans_text,
    "users accounts": services.users_text,
    "snmp chassis": services.empty_text,
    "snmp location": services.empty_text,
    "snmp contact": services.empty_text,
    "ntp associations": services.ntp_text,
    "mac address-table": services.mac_table_text,
    "vrf": services.vrfs_text,
    "ip interface": services.empty_text,
    "ip bgp summary": bgp.ip_summary_text,
    "ip route": services.empty_text,
}


def _generic(data: Any, depth: int = 0) -> list[str]:
    """`key: value` lines, nested by indent: the text of commands whose EOS table layout the twin does not copy
    (clients of these commands read their JSON; a person reading the text still sees every value)."""
    pad = "  " * depth
    out: list[str] = []
    items = data.items() if isinstance(data, dict) else enumerate(data)
    for k, v in items:
        if isinstance(v, dict | list) and v:
            out.append(f"{pad}{k}:")
            out += _generic(v, depth + 1)
        else:
            out.append(f"{pad}{k}: {v}")
    return out


def render(key: str, data: Json, now_ns: int) -> str:
    renderer = RENDERERS.get(key)
    return "\n".join(renderer(data, now_ns) if renderer else _generic(data)) + "\n"
