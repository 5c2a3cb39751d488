"""EOS features a data-center switch has beyond the fabric: management services, security, SNMP, DNS, logging, PTP,
spanning tree, error-disable recovery, hardware profiles and the routing model, answered from the switch's running
config, in the shapes real EOS returns and ANTA's tests read (anta/tests/{services,security,snmp,logging,ptp,stp,
profiles,greent}.py name the keys). What is configured shows; what is not shows as not configured (SNMP disabled, no
PTP, no banner, no ACL), so a check fails or skips for the reason a real switch would give, never errors.

Config lines these read (the grammar accepts them, running-config shows them): `snmp-server contact|location|
community|vrf|host`, `ip name-server`, `logging host|source-interface|buffered|persistent|format ...`,
`errdisable recovery cause|interval`, `management security` / `entropy source hardware`.
"""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from topology.model import Role
from topology.units import NS

from . import eos_bgp
from .eos_grammar import CliError
from .eos_identity import model_name
from .model import Switch, Twin

Json = dict[str, Any]
SEVERITIES = ("emergencies", "alerts", "critical", "errors", "warnings", "notifications", "informational", "debugging")
# EOS's error-disable causes and whether each has a configurable recovery timer (`show errdisable recovery`)
ERRDISABLE = ("acl", "arp-inspection", "bpduguard", "dot1x", "dot1x-session-replace", "hitless-reload-down",
              "lacp-rate-limit", "link-flap", "no-internal-vlan", "portchannelguard", "portsec", "speed-misconfigured",
              "storm-control", "stp-no-portchannel", "uplink-failure-detection", "xcvr-misconfigured",
              "xcvr-overheat", "xcvr-power-unsupported", "xcvr-unsupported")  # fmt: skip
DEFAULT_RECOVERY_S = 300
PROTO_MODEL = eos_bgp.PROTO_MODEL


@dataclass
class LogEntry:
    ts_ns: int
    severity: int  # 0 emergencies .. 7 debugging
    text: str  # "%FACILITY-SEV-MNEMONIC: message"


@dataclass
class SwitchLog:
    """A switch's syslog buffer: what `send log` adds, with its link changes and reboots from the twin."""

    entries: list[LogEntry] = field(default_factory=list)
    accounting: list[tuple[int, str]] = field(default_factory=list)  # (ts, command) of every command run

    def add(self, ts: int, severity: int, text: str) -> None:
        self.entries.append(LogEntry(ts, severity, text))
        del self.entries[:-2000]


@dataclass
class Ctx:
    twin: Twin
    sw: Switch
    lines: list[str]  # the running-config's top-level lines
    sections: dict[str, list[str]]  # a mode's head line -> its lines
    now: int
    log: SwitchLog


def top(ctx: Ctx, *words: str) -> list[list[str]]:
    """Top-level config lines that start with `words`, as tokens."""
    n = len(words)
    return [t for line in ctx.lines if (t := line.split())[:n] == list(words)]


def _unconverted() -> CliError:
    return CliError("% This is an unconverted command", "unconverted command")


# --- management services and security ------------------------------------------------------------------------------
def api_http(ctx: Ctx, as_json: bool) -> str | Json:
    enabled = "no shutdown" in ctx.sections.get("management api http-commands", [])
    data = {
        "enabled": enabled, "httpServer": {"configured": False, "running": False, "port": 80},
        "httpsServer": {"configured": True, "running": enabled, "port": 443},
        "localHttpServer": {"configured": False, "running": False, "port": 8080},
        "unixSocketServer": {"configured": False, "running": False}, "tlsProtocol": ["1.2", "1.3"],
        "vrfs": {"default": {"serverState": "active" if enabled else "inactive"}}, "hitCount": 0, "requestCount": 0,
        "commandCount": 0, "bytesInCount": 0, "bytesOutCount": 0, "urls": [],
    }  # fmt: skip
    if as_json:
        return data
    state = "running" if enabled else "shutdown"
    return "\n".join([
        f"Enabled:            {'Yes' if enabled else 'No'}", f"HTTPS server:       {state}, set to use port 443",
        "HTTP server:        shutdown, set to use port 80",
        "Local HTTP server:  shutdown, no authentication, set to use port 8080",
        "Unix Socket server: shutdown, no authentication", "VRFs:               default",
    ]) + "\n"  # fmt: skip


def acl_summary(key: str) -> Callable[[Ctx, bool], Json]:
    def handler(ctx: Ctx, as_json: bool) -> Json:
        return {key: {"aclList": []}}

    return handler


def ssh(ctx: Ctx, as_json: bool) -> str:
    """The twin's SSH server runs (netmiko uses it), FIPS off."""
    if as_json:
        raise _unconverted()
    return "\n".join([
        "SSHD status for Default VRF is enabled", "SSH connection limit is 50", "SSH per host connection limit is 20",
        "FIPS status: disabled", "", "SSH Configuration:", "  Ciphers: aes256-gcm@openssh.com aes128-gcm@openssh.com",
    ]) + "\n"  # fmt: skip


def telnet(ctx: Ctx, as_json: bool) -> Json:
    return {"serverState": "disabled", "vrfName": "default", "maxTelnetSessions": 20, "maxTelnetSessionsPerHost": 20}


def security(ctx: Ctx, as_json: bool) -> Json:
    hw = "entropy source hardware" in ctx.sections.get("management security", [])
    return {
        "hardwareEntropyEnabled": hw, "entropySourceHardware": hw, "entropySourceHaveged": False,
        "blockedNetworkProtocols": [], "minPasswordLength": 0, "passwordEncryptionKeyCommonEnabled": False,
    }  # fmt: skip


def certificates(ctx: Ctx, as_json: bool) -> Json:
    return {"certificates": {}}


def clock(ctx: Ctx, as_json: bool) -> str | Json:
    now_s = ctx.now / NS
    ntp = [t[2] for t in top(ctx, "ntp", "server") if len(t) > 2]
    source = {"local": not ntp, "ntpServer": ntp[0]} if ntp else {"local": True}
    data = {"utcTime": now_s, "timezone": "UTC", "clockSource": source,
            "localTime": _local(now_s)}  # fmt: skip
    if as_json:
        return data
    when = dt.datetime.fromtimestamp(now_s, tz=dt.UTC).strftime("%a %b %d %H:%M:%S %Y")
    src = f"NTP server ({ntp[0]})" if ntp else "local"
    return f"{when}\nTimezone: UTC\nClock source: {src}\n"


def _local(now_s: float) -> Json:
    t = dt.datetime.fromtimestamp(now_s, tz=dt.UTC)
    return {"year": t.year, "month": t.month, "dayOfMonth": t.day, "hour": t.hour, "min": t.minute, "sec": t.second,
            "dayOfWeek": t.strftime("%A"), "dayOfYear": t.timetuple().tm_yday}  # fmt: skip


def banner(key: str) -> Callable[[Ctx, bool], Json]:
    def handler(ctx: Ctx, as_json: bool) -> Json:
        return {key: ""}  # no banner configured (the twin's config takes none)

    return handler


def empty(key: str, value: Any) -> Callable[[Ctx, bool], Json]:
    def handler(ctx: Ctx, as_json: bool) -> Json:
        return {key: value() if callable(value) else value}

    return handler


def aaa_methods(kind: str) -> Callable[[Ctx, bool], Json]:
    """Only the local user database, no TACACS+ or RADIUS: EOS's defaults."""

    def handler(ctx: Ctx, as_json: bool) -> Json:
        if kind == "authentication":
            return {"loginAuthenMethods": {"default": {"methods": ["local"]}, "login": {"methods": ["local"]}},
                    "enableAuthenMethods": {"default": {"methods": ["local"]}},
                    "dot1xAuthenMethods": {"default": {"methods": []}}}  # fmt: skip
        if kind == "authorization":
            return {"commandsAuthzMethods": {"privilege0-15": {"methods": ["none"]}},
                    "execAuthzMethods": {"exec": {"methods": ["none"]}}}  # fmt: skip
        return {"commandsAcctMethods": {"privilege0-15": {"defaultMethods": [], "consoleMethods": []}},
                "execAcctMethods": {"exec": {"defaultMethods": [], "consoleMethods": []}},
                "systemAcctMethods": {"system": {"defaultMethods": [], "consoleMethods": []}},
                "dot1xAcctMethods": {"dot1x": {"defaultMethods": [], "consoleMethods": []}}}  # fmt: skip

    return handler


# --- DNS, error-disable recovery -------------------------------------------------------------------------------
def name_servers(ctx: Ctx, as_json: bool) -> Json:
    """`ip name-server [vrf V] ADDR [priority N]` lines."""
    out = []
    for t in top(ctx, "ip", "name-server"):
        rest = t[2:]
        vrf = "default"
        if rest[:1] == ["vrf"] and len(rest) > 2:
            vrf, rest = rest[1], rest[2:]
        priority = int(rest[2]) if rest[1:2] == ["priority"] and len(rest) > 2 else 0
        if rest:
            out.append({"ipAddr": rest[0], "vrf": vrf, "priority": priority})
    return {"nameServerConfigs": out}


def errdisable_recovery(ctx: Ctx, as_json: bool) -> str:
    if as_json:
        raise _unconverted()
    causes = {t[3] for t in top(ctx, "errdisable", "recovery", "cause") if len(t) > 3}
    interval = next(
        (t[3] for t in top(ctx, "errdisable", "recovery", "interval") if len(t) > 3), str(DEFAULT_RECOVERY_S)
    )
    lines = ["Errdisable Reason              Timer Status   Timer Interval",
             "------------------------------ -------------- --------------"]  # fmt: skip
    for cause in ERRDISABLE:
        timed = cause not in ("hitless-reload-down", "no-internal-vlan", "uplink-failure-detection")
        status = "Enabled" if cause in causes else "Disabled"
        lines.append(f"{cause:<30} {status:<14} {interval if timed else 'N/A'}")
    return "\n".join(lines) + "\n\n"


# --- SNMP -------------------------------------------------------------------------------------------------------
def _snmp(ctx: Ctx) -> tuple[bool, list[str], str, str]:
    """(enabled, VRFs, contact, location): EOS runs its agent once a community or user is configured."""
    enabled = bool(top(ctx, "snmp-server", "community") or top(ctx, "snmp-server", "user"))
    vrfs = ["default"] + [t[2] for t in top(ctx, "snmp-server", "vrf") if len(t) > 2]
    contact = " ".join(next((t[2:] for t in top(ctx, "snmp-server", "contact")), []))
    location = " ".join(next((t[2:] for t in top(ctx, "snmp-server", "location")), []))
    return enabled, vrfs if enabled else [], contact, location


def snmp(ctx: Ctx, as_json: bool) -> str | Json:
    enabled, vrfs, contact, location = _snmp(ctx)
    hosts = {t[2]: {"port": 162, "vrf": ""} for t in top(ctx, "snmp-server", "host") if len(t) > 2}
    counters = dict.fromkeys(("inPkts", "inVersionErrs", "inBadCommunityNames", "inBadCommunityUses",
                              "inParseErrs", "inRequestVars", "inSetVars", "inGetPdus", "inGetNextPdus", "inSetPdus",
                              "outPkts", "outTooBigErrs", "outNoSuchNameErrs", "outBadValueErrs", "outGeneralErrs",
                              "outGetResponsePdus", "outTrapPdus", "outTrapDrops"), 0)  # fmt: skip
    data = {
        "enabled": enabled, "vrfs": {"snmpVrfs": vrfs}, "contact": {"contact": contact},
        "location": {"location": location}, "chassisId": {"chassisId": ""}, "counters": counters,
        "logging": {"loggingEnabled": bool(hosts), "hosts": hosts}, "srcIntf": {"sourceInterfaces": {}},
    }  # fmt: skip
    if as_json:
        return data
    if not enabled:
        return "SNMP agent disabled: no communities or users are configured\n"
    return f"Chassis: \nContact: {contact}\nLocation: {location}\n\n0 SNMP packets input\n0 SNMP packets output\n"


def snmp_v2mib(key: str) -> Callable[[Ctx, bool], Json]:
    def handler(ctx: Ctx, as_json: bool) -> Json:
        _, _, contact, location = _snmp(ctx)
        return {key: {"contact": contact, "location": location, "chassisId": ""}[key]}

    return handler


# --- logging ----------------------------------------------------------------------------------------------------
def _log_lines(ctx: Ctx, entries: list[LogEntry]) -> list[str]:
    high_res = bool(top(ctx, "logging", "format", "timestamp", "high-resolution"))
    host = ctx.sw.hostname  # its FQDN too: the twin's switches have no domain name
    out = []
    for e in entries:
        t = dt.datetime.fromtimestamp(e.ts_ns / NS, tz=dt.UTC)
        stamp = t.isoformat(timespec="microseconds") if high_res else t.strftime("%b %d %H:%M:%S")
        out.append(f"{stamp} {host} {e.text}")
    return out


def show_logging(ctx: Ctx, args: list[str], as_json: bool) -> str:
    """`show logging`, `show logging N [SEV]`, `show logging SEV [last N seconds]`, `show logging threshold SEV N`."""
    if as_json:
        raise _unconverted()
    entries = _synced_log(ctx)
    if not args:
        return _logging_state(ctx) + "\n".join(_log_lines(ctx, entries)) + "\n"
    worst = 7
    if args[0] == "threshold" and len(args) >= 2 and args[1] in SEVERITIES:
        worst, args = SEVERITIES.index(args[1]), args[2:]
        entries = [e for e in entries if e.severity <= worst]
        if args and args[0].isdigit():
            entries = entries[-int(args[0]) :]
        return "".join(line + "\n" for line in _log_lines(ctx, entries))
    count: int | None = None
    if args and args[0].isdigit():
        count, args = int(args[0]), args[1:]
    if args and args[0] in SEVERITIES:
        worst, args = SEVERITIES.index(args[0]), args[1:]
    if args[:1] == ["last"] and len(args) >= 3 and args[1].isdigit():
        unit = {"seconds": 1, "minutes": 60, "hours": 3600, "days": 86400}.get(args[2], 0)
        if not unit:
            raise CliError(f"% Invalid input (at token 4: '{args[2]}')")
        since = ctx.now - int(args[1]) * unit * NS
        entries = [e for e in entries if e.ts_ns >= since]
        args = args[3:]
    if args:
        raise CliError(f"% Invalid input (at token 2: '{args[0]}')")
    entries = [e for e in entries if e.severity <= worst]
    if count is not None:
        entries = entries[-count:]
    return "".join(line + "\n" for line in _log_lines(ctx, entries))


def _logging_state(ctx: Ctx) -> str:
    persistent = bool(top(ctx, "logging", "persistent"))
    hosts = [t for t in top(ctx, "logging", "host") if len(t) > 2]
    source = next((t for t in top(ctx, "logging", "source-interface") if len(t) > 2), None)
    lines = ["Syslog logging: enabled", "    Buffer logging: level debugging", "    Console logging: level errors",
             f"    Persistent logging: {'level debugging' if persistent else 'disabled'}",
             "    Monitor logging: level errors", "    Synchronous logging: disabled",
             "    Trap logging: level informational"]  # fmt: skip
    for t in hosts:
        port = t[t.index("port") + 1] if "port" in t[3:] else "514"
        lines.append(f"    Logging to '{t[2]}' port {port} in VRF default via udp")
    if source is not None:
        lines.append(f"    Logging source-interface '{source[2]}' in VRF default")
    fqdn = bool(top(ctx, "logging", "format", "hostname", "fqdn"))
    lines += ["    Sequence numbers: disabled", "    Syslog facility: local4",
              f"    Hostname format: {'Fully qualified domain name' if fqdn else 'Hostname only'}",
              "    Repeat logging interval: disabled", "    Repeat messages: disabled",
              "    Root login logging: disabled",
              "", "External configuration:", "    active:", "    inactive:", "",
              "Facility                   Severity            Effective Severity",
              "--------------------       -------------       ------------------",
              "aaa                        debugging           debugging", "", "Log Buffer:"]  # fmt: skip
    return "\n".join(lines) + "\n"


def _synced_log(ctx: Ctx) -> list[LogEntry]:
    """The buffer with the twin's link changes folded in (as Ebra logs them), in time order."""
    log = ctx.log
    seen = {(e.ts_ns, e.text) for e in log.entries}
    for ts, dev, port, up in ctx.twin.oper_events:
        if dev != ctx.sw.name:
            continue
        text = (f"Ebra: %LINEPROTO-5-UPDOWN: Line protocol on Interface {port}, changed state to "
                f"{'up' if up else 'down'}")  # fmt: skip
        if (ts, text) not in seen:
            log.add(ts, 5, text)
    log.entries.sort(key=lambda e: e.ts_ns)
    return log.entries


def send_log(ctx: Ctx, args: list[str]) -> str:
    """`send log [level SEV] message TEXT`."""
    severity = 6
    if args[:1] == ["level"] and len(args) > 1:
        if args[1] not in SEVERITIES:
            raise CliError(f"% Invalid input (at token 3: '{args[1]}')")
        severity, args = SEVERITIES.index(args[1]), args[2:]
    if args[:1] != ["message"] or len(args) < 2:
        raise CliError("% Incomplete command")
    ctx.log.add(ctx.now, severity, f"Cli: %SYS-{severity}-LOGMSG_{SEVERITIES[severity].upper()}: Message from "
                                    f"admin on vty: {' '.join(args[1:])}")  # fmt: skip
    return ""


def accounting_logs(ctx: Ctx, as_json: bool) -> str:
    if as_json:
        raise _unconverted()
    out = []
    for ts, command in ctx.log.accounting[-200:]:
        t = dt.datetime.fromtimestamp(ts / NS, tz=dt.UTC).strftime("%a %b %d %H:%M:%S %Y")
        out.append(f"{t}\tadmin\tcommand-api\t127.0.0.1\tstop\ttask_id=1 service=shell priv-lvl=15 cmd={command}")
    return "\n".join(out) + ("\n" if out else "")


# --- PTP, STP, profiles, GreenT --------------------------------------------------------------------------------
def ptp(ctx: Ctx, as_json: bool) -> Json:
    return {}  # PTP not configured: no ptpMode, no clock summary


def ptp_monitor(ctx: Ctx, as_json: bool) -> Json:
    return {"ptpMonitorData": []}


def stp_empty(key: str) -> Callable[[Ctx, bool], Json]:
    """Every fabric port is routed (`no switchport`): spanning tree runs on none of them."""

    def handler(ctx: Ctx, as_json: bool) -> Json:
        return {key: {}}

    return handler


def tcam_profile(ctx: Ctx, as_json: bool) -> Json:
    return {"pmfProfiles": {"FixedSystem": {"config": "default", "status": "default", "mode": "tcam"}},
            "lastProgrammingStatus": {}}  # fmt: skip


def postcard_profiles(ctx: Ctx, as_json: bool) -> Json:
    return {"profiles": {"default": {"samplePolicy": "default", "interfaces": []}}}


def postcard_counters(ctx: Ctx, as_json: bool) -> Json:
    return {"sampleRcvd": 0, "sampleDiscarded": 0, "multiDstSampleRcvd": 0, "grePktSent": 0, "sampleSent": 0}


def routing_model(ctx: Ctx, as_json: bool) -> Json:
    """`show ip`: IPv4 routing on, the multi-agent routing model (the default of current releases)."""
    return {
        "v4RoutingEnabled": True, "v6RoutingEnabled": False, "v6IntfForwarding": False,
        "multicastRouting": {"ipMulticastEnabled": False, "ipMulticastIntfEnabled": False},
        "protoModelStatus": PROTO_MODEL,
    }  # fmt: skip


def uft_mode(ctx: Ctx, as_json: bool) -> Json:
    if model_name(ctx.sw).startswith("DCS-7060X5") or ctx.sw.role is Role.DR:
        raise CliError("% Unavailable command (not supported on this hardware platform)")
    return {"uftMode": "2", "profiles": {}}


# --- the table -----------------------------------------------------------------------------------------------------
Handler = Callable[[Ctx, bool], Any]
FEATURES: dict[str, Handler] = {
    "show management api http-commands": api_http,
    "show management api http-commands ip access-list summary": acl_summary("ipAclList"),
    "show management api http-commands ipv6 access-list summary": acl_summary("ipv6AclList"),
    "show management ssh": ssh,
    "show management ssh ip access-list summary": acl_summary("ipAclList"),
    "show management ssh ipv6 access-list summary": acl_summary("ipv6AclList"),
    "show management telnet": telnet,
    "show management security": security,
    "show management security ssl certificate": certificates,
    "show clock": clock,
    "show banner login": banner("loginBanner"),
    "show banner motd": banner("motd"),
    "show ip access-lists": empty("aclList", list),
    "show ip security connection vrf all": empty("connections", dict),
    "show aaa methods authentication": aaa_methods("authentication"),
    "show aaa methods authorization": aaa_methods("authorization"),
    "show aaa methods accounting": aaa_methods("accounting"),
    "show tacacs": empty("tacacsServers", list),
    "show ip name-server": name_servers,
    "show errdisable recovery": errdisable_recovery,
    "show snmp": snmp,
    "show snmp v2-mib contact": snmp_v2mib("contact"),
    "show snmp v2-mib location": snmp_v2mib("location"),
    "show snmp v2-mib chassis": snmp_v2mib("chassisId"),
    "show snmp ipv4 access-list summary": acl_summary("ipAclList"),
    "show snmp ipv6 access-list summary": acl_summary("ipv6AclList"),
    "show snmp user": empty("usersByVersion", dict),
    "show snmp group": empty("groups", dict),
    "show snmp notification host": empty("hosts", list),
    "show aaa accounting logs": accounting_logs,
    "show ptp": ptp,
    "show ptp monitor": ptp_monitor,
    "show spanning-tree blockedports": stp_empty("spanningTreeInstances"),
    "show spanning-tree counters": stp_empty("interfaces"),
    "show spanning-tree root detail": stp_empty("instances"),
    "show spanning-tree topology status detail": stp_empty("topologies"),
    "show spanning-tree vlan detail": stp_empty("spanningTreeVlanInstances"),
    "show hardware tcam profile": tcam_profile,
    "show platform trident forwarding-table partition": uft_mode,
    "show monitor telemetry postcard policy profile": postcard_profiles,
    "show monitor telemetry postcard counters": postcard_counters,
    "show ip": routing_model,
    # what a rail-optimized fabric switch does not run, answered as EOS does where it is not configured
    "show mlag": empty("state", "disabled"),
    "show mlag detail": empty("state", "disabled"),
    "show mlag config-sanity": lambda ctx, as_json: {"mlagActive": False, "mlagConnected": False},
    "show bfd peers": empty("vrfs", dict),
    "show bfd peers detail": empty("vrfs", dict),
    "show ip ospf": empty("vrfs", dict),
    "show ip ospf neighbor": empty("vrfs", dict),
    "show isis neighbors vrf all": empty("vrfs", dict),
    "show isis interface brief vrf all": empty("vrfs", dict),
    "show isis graceful-restart vrf all": empty("vrfs", dict),
    "show isis segment-routing": empty("vrfs", dict),
    "show isis segment-routing adjacency-segments": empty("vrfs", dict),
    "show isis segment-routing tunnel": empty("entries", dict),
    "show vxlan config-sanity": empty("categories", dict),
    "show vxlan vni": empty("vxlanIntfs", dict),
    "show vxlan vtep": empty("interfaces", dict),
    "show ip igmp snooping": lambda ctx, as_json: {"igmpSnoopingState": "disabled", "vlans": {}},
    "show vlan dynamic": empty("dynamicVlans", dict),
    "show vlan internal allocation policy": lambda ctx, as_json: {
        "policy": "ascending",
        "startVlanId": 1006,
        "endVlanId": 4094,
    },
}


def answer(ctx: Ctx, command: str, as_json: bool) -> str | Json | None:
    """The answer to a feature `show` command, or None when it is not one of these."""
    if command.startswith("show logging"):
        return show_logging(ctx, command.split()[2:], as_json)
    if command.startswith("show spanning-tree topology vlan ") or command.startswith("show spanning-tree vlan "):
        return {"topologies": {}} if "topology" in command else {"spanningTreeVlanInstances": {}}
    words = command.split()
    if words[:3] == ["show", "ip", "bgp"] and (len(words) == 3 or words[3] == "vrf" or "/" in words[3]
                                               or words[3][:1].isdigit()):  # fmt: skip
        return _json_only(eos_bgp.bgp_table(ctx.twin, ctx.sw, words[3:]), as_json)
    if words[:3] == ["show", "bgp", "neighbors"] and len(words) > 4:
        return _json_only(eos_bgp.neighbor_routes(ctx.twin, ctx.sw, [w for w in words[3:] if w not in ("vrf",)][:2]),
                          as_json)  # fmt: skip
    if not as_json and command in ("show ip bgp neighbors", "show ip bgp neighbors vrf all", "show bgp neighbors",
                                    "show bgp neighbors vrf all"):  # fmt: skip
        return eos_bgp.neighbors_text(ctx.twin, ctx.sw, ctx.now)
    if command in ("show bgp instance vrf all", "show bgp instance"):
        return _json_only(eos_bgp.instance(ctx.twin, ctx.sw, ctx.now, []), as_json)
    if command.startswith("show ip route"):
        routes = eos_bgp.show_route(ctx.twin, ctx.sw, command.split()[3:])
        if routes is not None and not as_json:
            return eos_bgp.routes_text(routes, command)
        return routes
    handler = FEATURES.get(command)
    return None if handler is None else handler(ctx, as_json)


def _json_only(data: Json | None, as_json: bool) -> str | Json | None:
    """A JSON answer; its text is the JSON (the twin prints these tables in no EOS text layout)."""
    if data is None or as_json:
        return data
    return json.dumps(data, indent=2) + "\n"


def context(twin: Twin, sw: Switch, running: Any, now: int, log: SwitchLog) -> Ctx:
    lines = [c.line for c in running.ordered()]
    sections = {c.line: [g.line for g in c.ordered()] for c in running.ordered() if c.children}
    return Ctx(twin, sw, lines, sections, now, log)
