"""The twin's EOS config engine through its CLI: grammar, modes, sessions, commit timers and port effects."""

from __future__ import annotations

import json
import re

import pytest

from lab.counters import COL
from lab.eos_cli import CliError, CliSession
from lab.eos_config import ConfigStore
from lab.model import PortConfig, Twin
from tests.conftest import DATA
from topology.fabric import Fabric
from topology.model import Cabling
from topology.units import NS

GOLDEN = DATA / "golden" / "small-pod_leaf-g0-r0.cfg"
DEVICE = "leaf-g0-r0"


class Clock:
    def __init__(self) -> None:
        self.t = 1_700_000_000 * NS

    def __call__(self) -> int:
        return self.t


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def twin(small_blueprint: Cabling, clock: Clock) -> Twin:
    return Twin(Fabric(small_blueprint), clock=clock)


@pytest.fixture
def store(twin: Twin) -> ConfigStore:
    return ConfigStore(twin)


def cli(twin: Twin, store: ConfigStore, *lines: str, device: str = DEVICE) -> CliSession:
    session = CliSession(twin, store, device, privileged=True)
    for line in lines:
        session.run(line)
    return session


def running(store: ConfigStore) -> str:
    return CliSession(store.twin, store, DEVICE, privileged=True).run("show running-config")


def test_initial_config_is_plausible_eos(store: ConfigStore, twin: Twin) -> None:
    text = running(store)
    assert text.startswith("! Command: show running-config\n")
    assert text.endswith("!\nend\n")
    assert f"hostname {DEVICE}\n" in text
    assert "username admin privilege 15 role network-admin secret sha512 $6$" in text
    assert "secret admin" not in text
    assert "management api http-commands\n   no shutdown\n" in text
    assert "management api gnmi\n   transport grpc default\n" in text
    for port in twin.switch(DEVICE).ports:
        assert f"\ninterface {port}\n" in text


def test_golden_config_is_accepted_and_shows_in_running_config(store: ConfigStore, twin: Twin) -> None:
    golden = GOLDEN.read_text()
    session = cli(twin, store, "configure session fab")
    for line in golden.splitlines():
        session.run(line.strip())
    session.run("commit")
    text = running(store)
    # Every golden section appears with its lines, in order and indentation.
    for block in golden.split("!\n"):
        block = block.strip("\n")
        if block.startswith("interface "):
            # the twin's own lines around fabricd's: routed port, its underlay address (lab/bgp.py)
            assert block in re.sub(r"   (no switchport|ip address \S+)\n", "", text)
        else:
            for line in block.splitlines():
                assert f"\n{line}\n" in text
    twin.advance()
    cfg = twin.port_config(DEVICE, "Ethernet1/1")
    assert cfg == PortConfig(
        admin_up=True, pfc_enabled=True, no_drop=frozenset({3}), ecn={3: (600_000, 6_000_000, 5)}, watchdog=True
    )


def test_watchdog_timers_come_from_the_global_defaults_and_a_port_timer_overrides_them(
    store: ConfigStore, twin: Twin
) -> None:
    cli(
        twin,
        store,
        "configure",
        "priority-flow-control pause watchdog default timeout 0.500",
        "priority-flow-control pause watchdog default recovery-time 1.250",
        "interface Ethernet1/1",
        "priority-flow-control on",
        "priority-flow-control priority 3 no-drop",
        "interface Ethernet2/1",
        "priority-flow-control on",
        "priority-flow-control priority 3 no-drop",
        "priority-flow-control pause watchdog port timer timeout 0.050 polling-interval auto recovery-time 0.300",
        "end",
    )
    twin.advance()
    first, second = twin.port_config(DEVICE, "Ethernet1/1"), twin.port_config(DEVICE, "Ethernet2/1")
    assert first.watchdog and (first.watchdog_timeout_ns, first.watchdog_recovery_ns) == (500_000_000, 1_250_000_000)
    assert second.watchdog and (second.watchdog_timeout_ns, second.watchdog_recovery_ns) == (50_000_000, 300_000_000)


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ("foo", "% Invalid input (at token 0: 'foo')"),
        ("qos map dscp 26 to", "% Incomplete command"),
        ("qos map dscp 64 to traffic-class 3", "% Invalid input (at token 3: '64')"),
        ("interface Ethernet1/1 bogus", "% Invalid input (at token 2: 'bogus')"),
        ("interface Ethernet99/1", "% Interface Ethernet99/1 does not exist on this switch"),
        ("priority-flow-control pause watchdog default timeout soon", "% Invalid input (at token 5: 'soon')"),
    ],
)
def test_invalid_lines_are_rejected_like_eos(store: ConfigStore, twin: Twin, line: str, message: str) -> None:
    session = cli(twin, store, "configure")
    with pytest.raises(CliError) as err:
        session.run(line)
    assert err.value.message == message


def test_rejected_line_in_a_session_leaves_running_config_alone(store: ConfigStore, twin: Twin) -> None:
    before = running(store)
    session = cli(twin, store, "configure session s1", "interface Ethernet1/1", "shutdown")
    with pytest.raises(CliError):
        session.run("random-detect ecn now")
    session.run("abort")
    assert running(store) == before
    assert twin.port_config(DEVICE, "Ethernet1/1").admin_up


def test_modes_prompts_and_falling_back_to_the_global_mode(store: ConfigStore, twin: Twin) -> None:
    session = CliSession(twin, store, DEVICE)
    assert session.prompt() == f"{DEVICE}>"
    session.run("enable")
    assert session.prompt() == f"{DEVICE}#"
    session.run("configure terminal")
    assert session.prompt() == f"{DEVICE}(config)#"
    session.run("interface Et1/1")
    assert session.prompt() == f"{DEVICE}(config-if-Et1/1)#"
    session.run("tx-queue 3")
    assert session.prompt() == f"{DEVICE}(config-if-Et1/1-txq-3)#"
    # A global command leaves the interface modes, as EOS does with flat (unindented) configs.
    session.run("qos map dscp 26 to traffic-class 3")
    assert session.prompt() == f"{DEVICE}(config)#"
    session.run("end")
    session.run("configure session napalm_123")
    assert session.prompt() == f"{DEVICE}(config-s-napalm)#"
    session.run("management api gnmi")
    assert session.prompt() == f"{DEVICE}(config-s-napalm-mgmt-api-gnmi)#"
    session.run("exit")
    session.run("exit")
    assert session.prompt() == f"{DEVICE}#"


def test_no_forms_remove_or_negate_lines(store: ConfigStore, twin: Twin) -> None:
    cli(
        twin,
        store,
        "configure",
        "interface Ethernet2/1",
        "description to spine",
        "priority-flow-control on",
        "priority-flow-control priority 3 no-drop",
        "tx-queue 3",
        "random-detect ecn minimum-threshold 100 kbytes maximum-threshold 200 kbytes",
        "interface Ethernet2/1",
        "no description",
        "no priority-flow-control priority 3",
        "no priority-flow-control",
        "no tx-queue 3",
        "link-debounce time 500",
    )
    block = CliSession(twin, store, DEVICE, True).run("show running-config interfaces Ethernet2/1")
    assert "description" not in block
    assert "   no priority-flow-control\n" in block
    assert "tx-queue" not in block
    assert "   link-debounce time 500\n" in block


def test_shutdown_in_configure_terminal_takes_the_link_down_on_both_ends(store: ConfigStore, twin: Twin) -> None:
    spine_port = twin.peer(DEVICE, "Ethernet5/1")
    assert spine_port is not None
    cli(twin, store, "configure", "interface Ethernet5/1", "shutdown")
    twin.advance()
    assert not twin.switch(DEVICE).oper_up[twin.switch(DEVICE).index["Ethernet5/1"]]
    peer = twin.switch(spine_port.device)
    assert not peer.oper_up[peer.index[spine_port.port]]
    cli(twin, store, "configure", "interface Ethernet5/1", "no shutdown")
    twin.advance()
    assert peer.oper_up[peer.index[spine_port.port]]


def test_session_diff_commit_and_write_memory(store: ConfigStore, twin: Twin) -> None:
    session = cli(twin, store, "configure session s1", "hostname renamed")
    diff = session.run("show session-config diffs")
    lines = diff.splitlines()
    assert lines[0] == "--- system:/running-config"
    assert lines[1] == "+++ session:/s1-session-config"
    assert f"-hostname {DEVICE}" in lines
    assert "+hostname renamed" in lines
    session.run("end")  # leaves the session pending
    sessions = session.run_json("show configuration sessions")
    assert sessions["sessions"]["s1"]["state"] == "pending"
    session.run("configure session s1 commit")
    assert session.prompt() == "renamed#"
    assert "hostname renamed" not in session.run("show startup-config")
    session.run("write memory")
    assert "hostname renamed" in session.run("show startup-config")


def test_commit_timer_reverts_unless_confirmed(store: ConfigStore, twin: Twin, clock: Clock) -> None:
    session = cli(twin, store, "configure session s1", "interface Ethernet1/1", "shutdown", "end")
    session.run("configure session s1 commit timer 00:01:00")
    assert not twin.port_config(DEVICE, "Ethernet1/1").admin_up
    detail = session.run_json("show configuration sessions detail")["sessions"]["s1"]
    uptime = store.device(DEVICE).uptime(clock())
    assert detail["state"] == "pendingCommitTimer"
    assert detail["commitBy"] == pytest.approx(uptime + 60)
    clock.t += 59 * NS
    twin.advance()
    assert not twin.port_config(DEVICE, "Ethernet1/1").admin_up
    clock.t += 2 * NS
    twin.advance()
    assert twin.port_config(DEVICE, "Ethernet1/1").admin_up
    assert "s1" not in store.device(DEVICE).sessions
    assert "   shutdown\n" not in running(store)


def test_confirmed_commit_survives_its_timer(store: ConfigStore, twin: Twin, clock: Clock) -> None:
    session = cli(twin, store, "configure session s1", "interface Ethernet1/1", "shutdown", "end")
    session.run("configure session s1 commit timer 00:00:30")
    session.run("configure session s1 commit")
    clock.t += 60 * NS
    twin.advance()
    assert not twin.port_config(DEVICE, "Ethernet1/1").admin_up
    assert session.run_json("show configuration sessions")["sessions"]["s1"]["state"] == "completed"


def test_abort_of_a_timed_commit_rolls_back_now(store: ConfigStore, twin: Twin) -> None:
    session = cli(twin, store, "configure session s1", "interface Ethernet1/1", "shutdown", "end")
    session.run("configure session s1 commit timer 00:10:00")
    assert not twin.port_config(DEVICE, "Ethernet1/1").admin_up
    session.run("configure session s1 abort")
    assert twin.port_config(DEVICE, "Ethernet1/1").admin_up


def test_clean_config_session_replaces_and_configure_replace_restores(store: ConfigStore, twin: Twin) -> None:
    session = cli(twin, store, "copy running-config flash:rollback-0", "configure session r1", "rollback clean-config")
    session.run("hostname bare")
    session.run("commit")
    text = running(store)
    assert "hostname bare" in text
    assert "management api http-commands" not in text
    assert "interface Ethernet1/1" in text  # physical interfaces always exist
    session.run("configure replace flash:rollback-0")
    assert "management api http-commands" in running(store)
    with pytest.raises(CliError):
        session.run("configure replace flash:missing")


def test_show_pipes(store: ConfigStore, twin: Twin) -> None:
    session = cli(twin, store, "configure", "interface Ethernet3/1", "description uplink", "end")
    section = session.run("show running-config | section Ethernet3/1")
    assert section.splitlines() == ["interface Ethernet3/1", "   description uplink", "   no switchport"]
    assert session.run("show running-config | include hostname") == f"hostname {DEVICE}\n"
    data = json.loads(session.run("show running-config | json"))
    assert "description uplink" in data["cmds"]["interface Ethernet3/1"]["cmds"]


def test_unprivileged_exec_cannot_configure(store: ConfigStore, twin: Twin) -> None:
    session = CliSession(twin, store, DEVICE)
    with pytest.raises(CliError, match="privileged"):
        session.run("configure")


def test_reboot_restores_startup_config(store: ConfigStore, twin: Twin) -> None:
    cli(twin, store, "configure", "interface Ethernet1/1", "shutdown")
    assert not twin.port_config(DEVICE, "Ethernet1/1").admin_up
    store.reboot(DEVICE, twin.clock())
    assert twin.port_config(DEVICE, "Ethernet1/1").admin_up


def test_show_hostname_follows_the_running_config_and_a_reboot(store: ConfigStore, twin: Twin) -> None:
    session = cli(twin, store, "configure", "hostname lab-leaf-7", "end")
    assert json.loads(session.run("show hostname | json")) == {"hostname": "lab-leaf-7", "fqdn": "lab-leaf-7"}
    assert "hostname lab-leaf-7" in running(store)
    store.reboot(DEVICE, twin.clock())  # never written to startup: the old name is back
    assert json.loads(session.run("show hostname | json"))["hostname"] == DEVICE


def test_interface_descriptions_follow_the_running_config(store: ConfigStore, twin: Twin) -> None:
    session = cli(twin, store, "configure", "interface Ethernet1/1", "description to spine-r0-0 Et1/1", "end")
    assert twin.port_config(DEVICE, "Ethernet1/1").description == "to spine-r0-0 Et1/1"
    shown = json.loads(session.run("show interfaces Ethernet1/1 | json"))["interfaces"]["Ethernet1/1"]
    assert shown["description"] == "to spine-r0-0 Et1/1"
    status = json.loads(session.run("show interfaces status | json"))["interfaceStatuses"]
    assert status["Ethernet1/1"]["description"] == "to spine-r0-0 Et1/1" and status["Ethernet2/1"]["description"] == ""
    cli(twin, store, "configure", "interface Ethernet1/1", "no description", "end")
    assert twin.port_config(DEVICE, "Ethernet1/1").description == ""


def test_maintenance_mode_moves_traffic_off_the_switch_and_back(twin: Twin, store: ConfigStore, clock: Clock) -> None:
    """EOS `maintenance` / `unit System` / `quiesce` on a spine: its peers de-prefer it (RFC 8326), so its ports
    carry next to nothing while the leaf's other uplinks carry the leaf's traffic; `no quiesce` brings it back."""
    spine = twin.switch("spine-r0-0")
    leaf = twin.switch(DEVICE)
    to_spine = [p for p in leaf.ports if twin.peers[(DEVICE, p)].device == "spine-r0-0"]
    others = [p for p in leaf.ports if twin.peers[(DEVICE, p)].device.startswith("spine-r0-1")]

    def out(sw: object, ports: list[str]) -> float:
        return float(sum(sw.rate[sw.index[p], COL["if.out-octets"]] for p in ports))  # type: ignore[attr-defined]

    clock.t += NS
    twin.advance(clock.t)
    before = out(leaf, to_spine)
    assert before > 0 and out(spine, spine.ports) > 0
    cli(twin, store, "configure", "maintenance", "unit System", "quiesce", "end", device="spine-r0-0")
    assert "maintenance\n   unit System\n      quiesce\n" in CliSession(twin, store, "spine-r0-0", privileged=True).run(
        "show running-config"
    )
    clock.t += NS
    twin.advance(clock.t)
    assert out(leaf, to_spine) < 1e-3 * before and out(spine, spine.ports) < 1e-3 * before
    assert out(leaf, others) == pytest.approx(2 * before, rel=1e-6)  # the 2 cables to the other spine carry it all
    cli(twin, store, "configure", "maintenance", "unit System", "no quiesce", "end", device="spine-r0-0")
    clock.t += NS
    twin.advance(clock.t)
    assert out(leaf, to_spine) == pytest.approx(before, rel=1e-9)


def test_a_drained_sessions_route_map_moves_the_links_traffic_and_back(
    twin: Twin, store: ConfigStore, clock: Clock
) -> None:
    """RFC 8326 on one session: the spine tags what it advertises to the leaf over one link with GRACEFUL_SHUTDOWN
    and prepends its AS; the leaf stops sending on that link (its other uplinks carry it). The leaf's end does the
    same for the spine's direction. Removing the route map from the neighbour brings the traffic back; a route map
    that neither tags nor prepends moves nothing."""
    leaf = twin.switch(DEVICE)
    port = next(p for p in leaf.ports if twin.peers[(DEVICE, p)].device == "spine-r0-0")
    far = twin.peers[(DEVICE, port)]
    spine = twin.switch(far.device)
    s = twin.bgp.underlay.session(DEVICE, port)
    assert s is not None
    asn = twin.bgp.underlay.speakers[far.device].asn

    def rate(sw: object, p: str) -> float:
        return float(sw.rate[sw.index[p], COL["if.out-octets"]])  # type: ignore[attr-defined]

    def tick() -> None:
        clock.t += NS
        twin.advance(clock.t)

    tick()
    before_up, before_down = rate(leaf, port), rate(spine, far.port)
    assert before_up > 0 and before_down > 0
    cli(twin, store, "configure", "route-map KEEP permit 10", "set community 65000:1 additive", "exit",
        f"router bgp {asn}", f"neighbor {s.local_address} route-map KEEP out", "end", device=far.device)  # fmt: skip
    tick()
    assert rate(leaf, port) == pytest.approx(before_up, rel=1e-9)  # not a drain: nothing moves
    session = cli(twin, store, "configure", "route-map FABRICD-DRAIN permit 10", "set community 65535:0 additive",
                  f"set as-path prepend {asn} {asn} {asn}", "exit", f"router bgp {asn}",
                  f"neighbor {s.local_address} route-map FABRICD-DRAIN out", "end", device=far.device)  # fmt: skip
    shown = session.run("show running-config")
    assert (
        "route-map FABRICD-DRAIN permit 10\n   set community 65535:0 additive\n"
        f"   set as-path prepend {asn} {asn} {asn}\n" in shown
    ), shown
    assert f"   neighbor {s.local_address} route-map FABRICD-DRAIN out\n" in shown
    assert "route-map KEEP out" not in shown  # one route map per neighbour in the twin (EOS: one per direction)
    tick()
    assert rate(leaf, port) < 1e-3 * before_up  # the leaf stops sending up this link
    assert rate(spine, far.port) == pytest.approx(before_down, rel=1e-9)  # the spine still sends down it
    cli(twin, store, "configure", f"router bgp {asn}", f"no neighbor {s.local_address} route-map FABRICD-DRAIN out",
        "end", device=far.device)  # fmt: skip
    tick()
    assert rate(leaf, port) == pytest.approx(before_up, rel=1e-9)
    with pytest.raises(CliError, match="Incomplete command"):  # the twin wants permit/deny and a sequence number
        cli(twin, store, "configure", "route-map X", device=far.device)


def test_dlb_in_the_config_turns_the_switchs_flowlets_on_and_off(store: ConfigStore, twin: Twin) -> None:
    """`ip hardware fib load-balance distribution dynamic` (what fabricd renders for flowlet DLB) puts the switch's
    ECMP groups under the flowlet model; `no` takes it off."""
    cli(twin, store, "configure", "ip hardware fib load-balance distribution dynamic", "end")
    twin.advance()
    assert DEVICE in twin.dlb
    cli(twin, store, "configure", "no ip hardware fib load-balance distribution dynamic", "end")
    twin.advance()
    assert DEVICE not in twin.dlb
