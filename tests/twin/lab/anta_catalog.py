"""A broad ANTA catalog, as an operator of a RoCE fabric would run it in production, for the twin of small-dci: every
module of ANTA 1.10 that applies to a fixed-config data-center switch (services, security, logging, SNMP, PTP, STP,
hardware profiles, field notices, AAA, system, software, interfaces, hardware, configuration, connectivity, routing,
BGP), with inputs that describe the fabric (the underlay's peers and routes come from topology/underlay.py)."""

from __future__ import annotations

from typing import Any

from topology.fabric import Fabric
from topology.underlay import Underlay

ROLES = ("leaf-g0-r0", "spine-r0-0", "ssp-0", "dr-campus-b-0")
NTP = "10.0.0.100"
SYSLOG = "10.0.0.99"
# What an operator configures beyond fabricd's policy for these checks: time, SNMP, syslog, DNS, hardware entropy,
# queue monitoring, error-disable recovery.
OPERATOR_CONFIG = [
    f"ntp server {NTP} prefer", "queue-monitor length", "snmp-server contact noc@example.com",
    "snmp-server location hall-3", "snmp-server community fabric-ro ro", f"logging host {SYSLOG}",
    "logging source-interface Management1", "logging persistent", "logging format timestamp high-resolution",
    "ip name-server vrf default 10.0.0.53", "errdisable recovery cause link-flap", "errdisable recovery interval 300",
    "management security", "entropy source hardware", "exit",
]  # fmt: skip
V4 = {"afi": "ipv4", "safi": "unicast"}


def per_device(fabric: Fabric) -> dict[str, list[dict[str, Any]]]:
    """The checks whose inputs differ per switch (by module): its BGP peers, a neighbour to ping, a route to find."""
    u = Underlay(fabric)
    out: dict[str, list[dict[str, Any]]] = {"bgp": [], "connectivity": [], "generic": []}
    for name in ROLES:
        sessions = u.sessions(name)
        peers = sorted(s.peer_address for s in sessions)
        first = sessions[0]
        far_loopback = u.speakers[first.peer.device].router_id
        tag = {"filters": {"tags": [name]}}
        bgp_peers = [{"peer_address": p, "vrf": "default"} for p in peers]
        out["bgp"] += [
            {"VerifyBGPPeersHealth": {"address_families": [{**V4, "peers": peers}], **tag}},
            {
                "VerifyBGPPeerCount": {
                    "address_families": [{**V4, "num_peers": len(peers), "check_peer_state": True}],
                    **tag,
                }
            },
            {"VerifyBGPSpecificPeers": {"address_families": [{**V4, "peers": peers}], **tag}},
            {"VerifyBGPPeerSession": {"bgp_peers": bgp_peers, **tag}},
            {"VerifyBGPPeerMPCaps": {"bgp_peers": [{**p, "capabilities": ["ipv4Unicast"]} for p in bgp_peers], **tag}},
            {"VerifyBGPPeerASNCap": {"bgp_peers": bgp_peers, **tag}},
            {"VerifyBGPTimers": {"bgp_peers": [{**p, "hold_time": 9, "keep_alive_time": 3} for p in bgp_peers], **tag}},
            {"VerifyBGPPeerDropStats": {"bgp_peers": bgp_peers, **tag}},
            {"VerifyBGPPeerUpdateErrors": {"bgp_peers": bgp_peers, **tag}},
            {
                "VerifyBGPRouteECMP": {
                    "route_entries": [
                        {
                            "prefix": f"{far_loopback}/32",
                            "vrf": "default",
                            "ecmp_count": sum(1 for s in sessions if s.peer.device == first.peer.device),
                        }
                    ],
                    **tag,
                }
            },
        ]
        out["connectivity"] += [
            {
                "VerifyReachability": {
                    "hosts": [
                        {
                            "destination": first.peer_address,
                            "source": first.local_address,
                            "vrf": "default",
                            "repeat": 2,
                        }
                    ],
                    **tag,
                }
            },
        ]
        out["generic"] += [
            {"VerifyRoutingTableEntry": {"vrf": "default", "routes": [far_loopback], **tag}},
            {
                "VerifyIPv4RouteType": {
                    "routes_entries": [{"prefix": f"{far_loopback}/32", "vrf": "default", "route_type": "eBGP"}],
                    **tag,
                }
            },
        ]
    return out


def catalog(fabric: Fabric) -> dict[str, list[dict[str, Any]]]:
    """The modules below, with the interfaces, hardware, LANZ, system, software and configuration checks of
    test_anta.py's catalog (the fabric's own) merged in."""
    from tests.twin.lab.test_anta import CATALOG as FABRIC_CHECKS

    device = per_device(fabric)
    extra = _modules(device)
    for module, tests in FABRIC_CHECKS.items():
        names = {next(iter(t)) for t in extra.get(module, [])}
        extra[module] = [*extra.get(module, []), *(dict(t) for t in tests if next(iter(t)) not in names)]
    return extra


def _modules(device: dict[str, list[dict[str, Any]]]) -> dict[str, list[dict[str, Any]]]:
    return {
        "anta.tests.services": [
            {"VerifyDNSServers": {"dns_servers": [{"server_address": "10.0.0.53", "vrf": "default", "priority": 0}]}},
            {"VerifyErrdisableRecovery": {"reasons": [{"reason": "link-flap", "interval": 300, "status": "Enabled"}]}},
        ],
        "anta.tests.security": [
            {"VerifyTelnetStatus": None},
            {"VerifyAPIHttpStatus": None},
            {"VerifyAPIIPv4Acl": {"number": 0}},
            {"VerifyAPIIPv6Acl": {"number": 0}},
            {"VerifySSHIPv4Acl": {"number": 0}},
            {"VerifySSHIPv6Acl": {"number": 0}},
            {"VerifyHardwareEntropy": None},
            {"VerifySSHStatus": None},
            {"VerifyBannerLogin": {"login_banner": "Authorised access only"}},
        ],
        "anta.tests.logging": [
            {"VerifySyslogLogging": None},
            {"VerifyLoggingPersistent": None},
            {"VerifyLoggingSourceIntf": {"interface": "Management1", "vrf": "default"}},
            {"VerifyLoggingHosts": {"hosts": [SYSLOG], "vrf": "default"}},
            {"VerifyLoggingLogsGeneration": None},
            {"VerifyLoggingHostname": None},
            {"VerifyLoggingTimestamp": None},
            {"VerifyLoggingAccounting": None},
            {"VerifyLoggingErrors": None},
        ],
        "anta.tests.snmp": [
            {"VerifySnmpStatus": {"vrf": "default"}},
            {"VerifySnmpIPv4Acl": {"number": 0, "vrf": "default"}},
            {"VerifySnmpLocation": {"location": "hall-3"}},
            {"VerifySnmpContact": {"contact": "noc@example.com"}},
            {"VerifySnmpErrorCounters": None},
        ],
        "anta.tests.ptp": [{"VerifyPtpModeStatus": None}, {"VerifyPtpLockStatus": None}, {"VerifyPtpOffset": None}],
        "anta.tests.stp": [{"VerifySTPBlockedPorts": None}],
        "anta.tests.profiles": [{"VerifyTcamProfile": {"profile": "default"}}],
        "anta.tests.field_notices": [{"VerifyFieldNotice44Resolution": None}, {"VerifyFieldNotice72Resolution": None}],
        "anta.tests.aaa": [
            {"VerifyAuthenMethods": {"methods": ["local"], "types": ["login", "enable"]}},
        ],
        "anta.tests.system": [
            {"VerifyUptime": {"minimum": 1}},
            {"VerifyReloadCause": None},
            {"VerifyCoredump": None},
            {"VerifyAgentLogs": None},
            {"VerifyCPUUtilization": None},
            {"VerifyMemoryUtilization": None},
            {"VerifyFileSystemUtilization": None},
            {"VerifyNTP": None},
            {"VerifyMaintenance": None},
            {"VerifyFlashUtilization": None},
        ],
        "anta.tests.software": [{"VerifyEOSExtensions": None}],
        "anta.tests.configuration": [{"VerifyZeroTouch": None}, {"VerifyRunningConfigDiffs": None}],
        "anta.tests.interfaces": [
            {"VerifyInterfaceErrors": None},
            {"VerifyInterfaceDiscards": None},
            {"VerifyInterfaceErrDisabled": None},
            {"VerifyL3MTU": {"mtu": 9214}},
            {"VerifyInterfacesPFCCounters": None},
        ],
        "anta.tests.hardware": [
            {"VerifyTemperature": None},
            {"VerifyTransceiversTemperature": None},
            {"VerifyEnvironmentPower": {"states": ["ok"]}},
            {"VerifyEnvironmentCooling": {"states": ["ok"]}},
        ],
        "anta.tests.routing.generic": [
            {"VerifyRoutingProtocolModel": {"model": "multi-agent"}},
            {"VerifyRoutingTableSize": {"minimum": 2, "maximum": 1000}},
            {"VerifyRoutingStatus": {"ipv4_unicast": True}},
            *device["generic"],
        ],
        "anta.tests.routing.bgp": device["bgp"],
        "anta.tests.connectivity": device["connectivity"],
    }
