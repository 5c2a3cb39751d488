"""The twin's EOS beyond the fabric, through its CLI (what eAPI runs): operator services follow the running-config
(SNMP, DNS, logging, error-disable recovery, entropy), what is not configured answers as not configured, syslog takes
`send log` and the switch's link changes, pipes EOS has (`| tail`, `| grep`), the routing table and BGP table over
the underlay, and ping/traceroute over it: round trips from the cables (1.2 ms across 120 km), loss where a link
corrupts, unreachable where no route leads."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from lab.eos_cli import CliSession
from lab.eos_config import ConfigStore
from lab.eos_grammar import CliError
from lab.faults import FaultInjector
from lab.model import Twin
from tests.conftest import EXAMPLES
from topology.load import load_fabric
from topology.units import NS

LEAF, DR = "leaf-g0-r0", "dr-campus-b-0"


class Clock:
    def __init__(self) -> None:
        self.t = 1_700_000_000 * NS

    def __call__(self) -> int:
        return self.t


@pytest.fixture
def lab() -> Iterator[tuple[Twin, ConfigStore, Clock]]:
    clock = Clock()
    twin = Twin(load_fabric(EXAMPLES / "small-dci.yaml", None)[1], clock=clock)
    yield twin, ConfigStore(twin), clock


def cli(lab: tuple[Twin, ConfigStore, Clock], device: str = LEAF) -> CliSession:
    return CliSession(lab[0], lab[1], device, privileged=True)


def configure(s: CliSession, *lines: str) -> None:
    s.run("configure session ops")
    for line in lines:
        s.run(line)
    s.run("commit")


def test_services_answer_not_configured_then_follow_the_config(lab: tuple[Twin, ConfigStore, Clock]) -> None:
    s = cli(lab)
    snmp = s.run_json("show snmp")
    assert (snmp["enabled"], snmp["contact"], snmp["location"]) == (False, {"contact": ""}, {"location": ""})
    assert s.run_json("show ip name-server") == {"nameServerConfigs": []}
    assert s.run_json("show management security")["hardwareEntropyEnabled"] is False
    assert s.run_json("show banner login") == {"loginBanner": ""} and s.run_json("show ptp") == {}
    assert s.run_json("show management telnet")["serverState"] == "disabled"
    api = s.run_json("show management api http-commands")
    assert api["enabled"] and api["httpsServer"]["running"] and not api["httpServer"]["running"]
    configure(s, "snmp-server contact noc@example.com", "snmp-server location hall 3 row 7",
              "snmp-server community fabric ro", "ip name-server vrf default 10.0.0.53 priority 1",
              "management security", "entropy source hardware", "exit",
              "errdisable recovery cause link-flap", "errdisable recovery interval 60")  # fmt: skip
    snmp = s.run_json("show snmp")
    assert snmp["enabled"] and snmp["vrfs"]["snmpVrfs"] == ["default"]
    assert snmp["contact"]["contact"] == "noc@example.com" and snmp["location"]["location"] == "hall 3 row 7"
    assert s.run_json("show snmp v2-mib location") == {"location": "hall 3 row 7"}
    assert s.run_json("show ip name-server") == {
        "nameServerConfigs": [{"ipAddr": "10.0.0.53", "vrf": "default", "priority": 1}]
    }
    assert s.run_json("show management security")["hardwareEntropyEnabled"] is True
    rows = {ln.split()[0]: ln.split()[1:] for ln in s.run("show errdisable recovery").splitlines()[2:] if ln.strip()}
    assert rows["link-flap"] == ["Enabled", "60"] and rows["bpduguard"] == ["Disabled", "60"]
    running = s.run("show running-config")
    assert (
        "snmp-server contact noc@example.com" in running
        and "management security\n   entropy source hardware" in running
    )


def test_syslog_takes_send_log_link_changes_and_its_config(lab: tuple[Twin, ConfigStore, Clock]) -> None:
    twin, _, clock = lab
    s = cli(lab)
    state = s.run("show logging")
    assert "Syslog logging: enabled" in state and "Persistent logging: disabled" in state
    assert s.run("show logging threshold errors 100") == ""
    FaultInjector(twin).inject("link_down", {"port": f"{LEAF}:Ethernet1/1"})
    s.run("send log level informational message ANTA check")
    assert s.run("show logging informational last 30 seconds | grep ANTA").endswith(
        f"{LEAF} Cli: %SYS-6-LOGMSG_INFORMATIONAL: Message from admin on vty: ANTA check\n"
    )
    assert "Line protocol on Interface Ethernet1/1, changed state to down" in s.run("show logging 10")
    assert s.run("show logging 10 errors") == ""
    assert "cmd=show aaa accounting logs" in s.run("show aaa accounting logs | tail")
    assert len(s.run("show logging | tail -n 2").splitlines()) == 2
    configure(s, "logging host 10.0.0.99", "logging source-interface Management1", "logging persistent",
              "logging format timestamp high-resolution")  # fmt: skip
    state = s.run("show logging")
    assert "Logging to '10.0.0.99' port 514 in VRF default via udp" in state
    assert "Logging source-interface 'Management1' in VRF default" in state
    clock.t += NS
    s.run("send log message stamped")
    (line,) = s.run("show logging 1").splitlines()
    assert line.startswith("2023-11-14T22:13:21.000000+00:00 ") and line.endswith("stamped")
    size = int(s.run("dir flash:/persist/messages").split("-rw-")[1].split()[0])
    assert size > 0
    with pytest.raises(CliError):
        s.run("show logging 10 loud")


def test_routes_and_the_bgp_table_follow_the_underlay(lab: tuple[Twin, ConfigStore, Clock]) -> None:
    twin = lab[0]
    s = cli(lab)
    summary = s.run_json("show ip route summary")
    assert summary["protoModelStatus"] == {"configuredProtoModel": "multi-agent", "operatingProtoModel": "multi-agent"}
    uplinks = twin.bgp.underlay.sessions(LEAF)
    spine_loopback = twin.bgp.underlay.speakers[uplinks[0].peer.device].router_id
    route = s.run_json(f"show ip route vrf default {spine_loopback}")["vrfs"]["default"]["routes"]
    ((prefix, r),) = route.items()
    assert prefix == f"{spine_loopback}/32" and r["routeType"] == "eBGP"
    to_spine = sorted(x.peer_address for x in uplinks if x.peer.device == uplinks[0].peer.device)
    assert sorted(v["nexthopAddr"] for v in r["vias"]) == to_spine
    table = s.run_json("show ip bgp vrf all")["vrfs"]["default"]["bgpRouteEntries"][f"{spine_loopback}/32"]
    assert sorted(p["nextHop"] for p in table["bgpRoutePaths"]) == to_spine
    assert [p["routeType"]["ecmpHead"] for p in table["bgpRoutePaths"]].count(True) == 1
    assert table["bgpRoutePaths"][0]["asPathEntry"]["asPath"] == f"{uplinks[0].peer_asn} i"
    FaultInjector(twin).inject("bgp_down", {"port": str(uplinks[0].local)})
    r = s.run_json(f"show ip route vrf default {spine_loopback}")["vrfs"]["default"]["routes"][f"{spine_loopback}/32"]
    assert uplinks[0].peer_address not in {v["nexthopAddr"] for v in r["vias"]} and len(r["vias"]) == len(to_spine) - 1
    # the session's connected /31 stays (its link is up) and every route still has another path: nothing lost
    assert s.run_json("show ip route summary")["vrfs"] == summary["vrfs"]
    assert s.run_json("show ip route vrf BLUE") == {"vrfs": {}}


def test_ping_and_traceroute_across_the_dci_and_under_faults(lab: tuple[Twin, ConfigStore, Clock]) -> None:
    twin = lab[0]
    u = twin.bgp.underlay
    far = next(n for n in u.speakers if n.startswith("remote-"))
    out = cli(lab, DR).run(f"ping {u.speakers[far].router_id} repeat 4")
    rtts = [float(ln.split("time=")[1].split()[0]) for ln in out.splitlines() if "time=" in ln]
    assert len(rtts) == 4 and all(1.2 <= r <= 1.4 for r in rtts), out  # 120 km: 1.2 ms, plus the far end answering
    assert "4 packets transmitted, 4 received, 0% packet loss" in out
    s = cli(lab)
    near = u.sessions(LEAF)[0]
    out = s.run(f"ping {near.peer_address}")
    assert all(float(x.split("time=")[1].split()[0]) < 0.2 for x in out.splitlines() if "time=" in x)
    trace = s.run(f"bash timeout 510 traceroute {u.speakers[far].router_id} -m 255 -w 2").splitlines()
    assert (
        trace[0].startswith(f"traceroute to {u.speakers[far].router_id}") and len(trace) == 5
    )  # leaf spine ssp dr far
    assert trace[-1].split()[1] == u.speakers[far].router_id
    # a link that corrupts 30 % of frames loses probes; a session down takes its route away
    FaultInjector(twin).inject("link_corruption", {"port": str(near.peer), "rate": 0.3, "direction": "both"})
    lossy = s.run(f"ping {near.peer_address} repeat 10")
    assert "10 packets transmitted" in lossy and " 0% packet loss" not in lossy
    assert s.run("ping 192.0.2.1") == "connect: Network is unreachable\n"
