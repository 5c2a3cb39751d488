"""The twin's EOS `show` output: shapes against recorded EOS JSON, values against twin state, text against
ntc-templates (what netmiko users parse with), and napalm's eos driver reading the JSON."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from napalm.eos.eos import EOSDriver
from ntc_templates.parse import parse_output

from lab.eos_releases import DEFAULT_EOS_VERSION
from lab.eos_show import show_json, show_text
from lab.model import PauseSource, PortConfig, Twin
from topology.blueprint import generate_blueprint
from topology.fabric import Fabric
from topology.model import Cabling, Endpoint
from topology.units import NS

REFERENCE = Path("/work/shared/reference/eos-outputs")
LEAF = "leaf-g0-r0"
SERVER_PORT = "Ethernet1/1"  # cabled to gpu-g0-000:nic0
UPLINK = "Ethernet5/1"  # cabled to spine-r0-0:Ethernet1/1
T0 = 1_700_000_000 * NS


@pytest.fixture
def show_twin(small_blueprint: Cabling) -> Twin:
    return Twin(Fabric(small_blueprint), clock=lambda: T0)


def _reference(name: str) -> Any:
    path = REFERENCE / name
    if not path.exists():
        pytest.skip(f"reference output {path} not available")
    return json.loads(path.read_text())


def assert_shape(ref: Any, ours: Any, where: str = "") -> None:
    """Every key of the recorded EOS output exists in ours, with the same JSON type, recursively."""
    if isinstance(ref, dict):
        assert isinstance(ours, dict), where
        missing = set(ref) - set(ours)
        assert not missing, f"{where}: missing {sorted(missing)}"
        for k, v in ref.items():
            assert_shape(v, ours[k], f"{where}.{k}")
    elif isinstance(ref, list):
        assert isinstance(ours, list), where
        if ref and ours:
            assert_shape(ref[0], ours[0], f"{where}[0]")
    elif isinstance(ref, bool):
        assert isinstance(ours, bool), where
    elif isinstance(ref, (int, float)):
        assert isinstance(ours, (int, float)) and not isinstance(ours, bool), where
        if isinstance(ref, int):
            assert isinstance(ours, int), f"{where}: {ours!r} should be an integer"
    else:
        assert isinstance(ours, type(ref)), f"{where}: {ours!r} is not {type(ref).__name__}"


def _json(twin: Twin, command: str, now: int = T0, device: str = LEAF) -> dict[str, Any]:
    out = show_json(twin, device, command, now)
    assert out is not None, command
    return out


# --- shapes -----------------------------------------------------------------------------------------------
def test_show_version_shape_and_identity(show_twin: Twin) -> None:
    ours = _json(show_twin, "show version", T0 + 3600 * NS)
    assert_shape(_reference("show_version.json"), ours)
    assert ours["version"] == DEFAULT_EOS_VERSION
    assert ours["modelName"] == "DCS-7060X5-64S"
    assert ours["uptime"] == pytest.approx(3600.0)
    assert ours["serialNumber"] and ours["systemMacAddress"].startswith("00:1c:73:")
    assert _json(show_twin, "show version", device="ssp-0")["modelName"] == "DCS-7060X5-64S"


def test_deep_buffer_model_for_dr(dci_spec: Any) -> None:
    twin = Twin(Fabric(generate_blueprint(dci_spec)), clock=lambda: T0)
    dr = next(n for n, s in twin.switches.items() if s.role == "dr")
    assert _json(twin, "show version", device=dr)["modelName"].startswith("DCS-7280R3")


def test_show_hostname_shape(show_twin: Twin) -> None:
    ours = _json(show_twin, "show hostname")
    assert_shape(_reference("show_hostname.json"), ours)
    assert ours == {"hostname": LEAF, "fqdn": LEAF}


def test_show_interfaces_shape(show_twin: Twin) -> None:
    ref = _reference("show_interfaces.json")["interfaces"]["Ethernet2"]
    ours = _json(show_twin, "show interfaces")["interfaces"]
    assert list(ours) == show_twin.switches[LEAF].ports
    for intf in ours.values():
        assert_shape(ref, intf)
    one = _json(show_twin, "show interfaces ethernet1/1")["interfaces"]
    assert list(one) == [SERVER_PORT]
    assert one[SERVER_PORT]["bandwidth"] == 400_000_000_000
    assert one[SERVER_PORT]["mtu"] == 9214
    assert one[SERVER_PORT]["interfaceStatus"] == "connected"


def test_lldp_shapes(show_twin: Twin) -> None:
    ours = _json(show_twin, "show lldp neighbors")
    assert_shape(_reference("show_lldp_neighbors.json"), ours)
    by_port = {n["port"]: n for n in ours["lldpNeighbors"]}
    assert by_port[SERVER_PORT]["neighborDevice"] == "gpu-g0-000"
    assert by_port[SERVER_PORT]["neighborPort"] == "nic0"
    assert (by_port[UPLINK]["neighborDevice"], by_port[UPLINK]["neighborPort"]) == ("spine-r0-0", "Ethernet1/1")

    ref = _reference("show_lldp_neighbors__detail.json")["lldpNeighbors"]
    detail = _json(show_twin, "show lldp neighbors detail")["lldpNeighbors"]
    assert_shape(ref["Ethernet8"], detail[UPLINK])
    assert detail[UPLINK]["lldpNeighborInfo"][0]["systemName"] == "spine-r0-0"


def test_transceiver_shape_follows_rx_power(show_twin: Twin) -> None:
    ref = _reference("show_interfaces_transceiver.json")["interfaces"]["Ethernet3/1/1"]
    ours = _json(show_twin, "show interfaces transceiver")["interfaces"]
    sw = show_twin.switches[LEAF]
    for port, t in ours.items():
        assert_shape(ref, t)
        assert t["rxPower"] == pytest.approx(show_twin.rx_power(sw, sw.index[port]), abs=1e-3)  # with its wander


def test_pfc_and_error_counters_shapes(show_twin: Twin) -> None:
    errors = _json(show_twin, "show interfaces counters errors")["interfaceErrorCounters"]
    keys = {"fcsErrors", "alignmentErrors", "symbolErrors", "inErrors", "frameTooLongs", "frameTooShorts", "outErrors"}
    assert all(set(e) == keys for e in errors.values())
    pfc = _json(show_twin, "show priority-flow-control counters")["interfaceCounters"]
    assert set(pfc[SERVER_PORT]) == {"rxFrames", "txFrames"}
    detail = _json(show_twin, "show priority-flow-control counters detail")["interfaceCounters"][SERVER_PORT]
    assert set(detail["priorities"]) == {str(p) for p in range(8)}


def test_unknown_commands_and_interfaces(show_twin: Twin) -> None:
    assert show_json(show_twin, LEAF, "show bogus", T0) is None
    assert show_json(show_twin, LEAF, "show interfaces Ethernet99/1", T0) is None
    assert show_text(show_twin, LEAF, "show version | bogus", T0) is None
    # Common abbreviations.
    assert show_json(show_twin, LEAF, "sh int et1/1 status", T0) == show_json(
        show_twin, LEAF, "show interfaces Ethernet1/1 status", T0
    )
    assert show_json(show_twin, LEAF, "show lldp neighbors  detail", T0) is not None


# --- values follow the twin --------------------------------------------------------------------------------
def test_admin_down_shows_disabled_and_peer_notconnect(show_twin: Twin) -> None:
    show_twin.set_port_config(LEAF, UPLINK, PortConfig(admin_up=False))
    now = T0 + 5 * NS
    mine = _json(show_twin, f"show interfaces {UPLINK}", now)["interfaces"][UPLINK]
    assert (mine["interfaceStatus"], mine["lineProtocolStatus"]) == ("disabled", "down")
    peer = _json(show_twin, "show interfaces status", now, device="spine-r0-0")["interfaceStatuses"]["Ethernet1/1"]
    assert peer["linkStatus"] == "notconnect"
    assert mine["interfaceCounters"]["linkStatusChanges"] == 1
    assert mine["lastStatusChangeTimestamp"] == pytest.approx(now / NS)
    # LLDP needs a live link: the neighbour is gone on both ends.
    assert UPLINK not in {n["port"] for n in _json(show_twin, "show lldp neighbors", now)["lldpNeighbors"]}
    assert _json(show_twin, "show lldp neighbors detail", now)["lldpNeighbors"][UPLINK]["lldpNeighborInfo"] == []
    assert "disabled" in (show_text(show_twin, LEAF, "show interfaces status", now) or "")


def test_counters_grow_with_time(show_twin: Twin) -> None:
    def counters(now: int) -> dict[str, Any]:
        out: dict[str, Any] = _json(show_twin, f"show interfaces {SERVER_PORT}", now)["interfaces"][SERVER_PORT]
        counters: dict[str, Any] = out["interfaceCounters"]
        return counters

    a, b = counters(T0 + NS), counters(T0 + 11 * NS)
    for key in ("inOctets", "outOctets", "inUcastPkts", "outUcastPkts"):
        assert b[key] > a[key] > 0
    assert b["totalInErrors"] == a["totalInErrors"] == 0


def test_corruption_shows_in_error_counters(show_twin: Twin) -> None:
    show_twin.corruption[(LEAF, UPLINK)] = 1e-3
    show_twin.touch()
    show_twin.advance(T0)
    errs = _json(show_twin, "show interfaces counters errors", T0 + 10 * NS)["interfaceErrorCounters"]
    assert errs[UPLINK]["fcsErrors"] > 0 and errs[UPLINK]["symbolErrors"] > 0
    assert errs[SERVER_PORT]["fcsErrors"] == 0
    detail = _json(show_twin, f"show interfaces {UPLINK}", T0 + 10 * NS)["interfaces"][UPLINK]["interfaceCounters"]
    assert detail["inputErrorsDetail"]["fcsErrors"] == errs[UPLINK]["fcsErrors"]


def test_pfc_counters_follow_pause_sources(show_twin: Twin) -> None:
    # A NIC storming priority 3 toward the leaf: the leaf port receives pause frames on that priority only.
    show_twin.pause_sources["storm"] = [PauseSource(Endpoint("gpu-g0-000", "nic0"), priority=3)]
    show_twin.touch()
    show_twin.advance(T0)
    pfc = _json(show_twin, "show priority-flow-control counters detail", T0 + 10 * NS)["interfaceCounters"]
    prios = pfc[SERVER_PORT]["priorities"]
    assert prios["3"]["rxFrames"] > 0 and pfc[SERVER_PORT]["rxFrames"] == prios["3"]["rxFrames"]
    assert all(prios[str(p)]["rxFrames"] == 0 for p in range(8) if p != 3)
    assert pfc["Ethernet2/1"]["rxFrames"] == 0
    text = show_text(show_twin, LEAF, "show priority-flow-control counters", T0 + 10 * NS) or ""
    assert f"Et1/1      {prios['3']['rxFrames']}" in text


# --- text (what netmiko users read and parse) ----------------------------------------------------------------
@pytest.mark.parametrize(
    ("command", "template"),
    [
        ("show version", "show version"),
        ("show hostname", "show hostname"),
        ("show interfaces", "show interfaces"),
        ("show interfaces status", "show interfaces status"),
        ("show lldp neighbors", "show lldp neighbors"),
        ("show lldp neighbors detail", "show lldp neighbors detail"),
        ("show interfaces transceiver", "show interfaces transceiver"),
    ],
)
def test_text_parses_with_ntc_templates(show_twin: Twin, command: str, template: str) -> None:
    text = show_text(show_twin, LEAF, command, T0 + 90 * NS)
    assert text is not None
    rows = parse_output(platform="arista_eos", command=template, data=text)
    assert rows, text


def test_text_values(show_twin: Twin) -> None:
    now = T0 + 90 * NS
    version = parse_output(
        platform="arista_eos", command="show version", data=show_text(show_twin, LEAF, "show version", now)
    )
    assert version[0]["model"] == "DCS-7060X5-64S" and version[0]["image"] == DEFAULT_EOS_VERSION
    status = show_text(show_twin, LEAF, "show interfaces status", now) or ""
    rows = parse_output(platform="arista_eos", command="show interfaces status", data=status)
    assert {r["port"] for r in rows} == {p.replace("Ethernet", "Et") for p in show_twin.switches[LEAF].ports}
    assert all(r["status"] == "connected" and r["speed"] == "400G" for r in rows)
    lldp = parse_output(
        platform="arista_eos",
        command="show lldp neighbors",
        data=show_text(show_twin, LEAF, "show lldp neighbors", now),
    )
    assert {"neighbor_name": "gpu-g0-000", "local_interface": "Et1/1", "neighbor_interface": "nic0"} in lldp
    pfc = show_text(show_twin, LEAF, "show priority-flow-control counters", now) or ""
    assert pfc.splitlines()[0].split() == ["Port", "RxPfc", "TxPfc"]
    assert json.loads(show_text(show_twin, LEAF, "show hostname | json", now) or "") == {"hostname": LEAF, "fqdn": LEAF}


# --- napalm's eos driver over our JSON ----------------------------------------------------------------------
@pytest.fixture
def napalm_driver(show_twin: Twin) -> EOSDriver:
    driver = EOSDriver(LEAF, "admin", "secret")

    def run(commands: list[str], encoding: str = "json") -> list[dict[str, Any]]:
        assert encoding == "json"
        return [_json(show_twin, c, T0 + 60 * NS) for c in commands]

    driver._run_commands = run
    return driver


def test_napalm_getters(napalm_driver: EOSDriver, show_twin: Twin) -> None:
    ports = show_twin.switches[LEAF].ports
    facts = napalm_driver.get_facts()
    assert facts["hostname"] == LEAF and facts["os_version"].startswith(DEFAULT_EOS_VERSION)
    assert facts["model"] == "DCS-7060X5-64S" and set(facts["interface_list"]) == set(ports)
    assert isinstance(facts["uptime"], float)

    interfaces = napalm_driver.get_interfaces()
    assert interfaces[SERVER_PORT]["is_up"] and interfaces[SERVER_PORT]["speed"] == 400_000.0
    assert interfaces[SERVER_PORT]["mtu"] == 9214 and interfaces[SERVER_PORT]["mac_address"].startswith("00:1C:73")

    counters = napalm_driver.get_interfaces_counters()
    assert counters[SERVER_PORT]["rx_octets"] > 0 and counters[SERVER_PORT]["rx_errors"] == 0

    lldp = napalm_driver.get_lldp_neighbors()
    assert lldp[SERVER_PORT] == [{"hostname": "gpu-g0-000", "port": "nic0"}]
    detail = napalm_driver.get_lldp_neighbors_detail()
    uplink = detail[UPLINK][0]
    assert (uplink["remote_system_name"], uplink["remote_port"]) == ("spine-r0-0", "Ethernet1/1")
    assert uplink["remote_system_enable_capab"] == ["bridge", "router"]

    optics = napalm_driver.get_optics()
    assert optics[SERVER_PORT]["physical_channels"]["channel"][0]["state"]["input_power"]["instant"] < 0


def test_napalm_sees_admin_down(napalm_driver: EOSDriver, show_twin: Twin) -> None:
    show_twin.set_port_config(LEAF, SERVER_PORT, PortConfig(admin_up=False))
    iface = napalm_driver.get_interfaces()[SERVER_PORT]
    assert (iface["is_up"], iface["is_enabled"]) == (False, False)
    assert SERVER_PORT not in napalm_driver.get_lldp_neighbors()


def test_environment_follows_the_switch_load_and_is_text_too(show_twin: Twin) -> None:
    temp = _json(show_twin, "show system environment temperature")
    chip = next(s for s in temp["tempSensors"] if s["name"] == "TempSensor2")
    assert chip["currentTemperature"] < chip["overheatThreshold"] < chip["criticalThreshold"]
    power = _json(show_twin, "show system environment power")["powerSupplies"]
    assert {p["state"] for p in power.values()} == {"ok"}
    cooling = _json(show_twin, "sh sys env cool")  # EOS's abbreviations
    assert [s["label"] for s in cooling["fanTraySlots"]] == ["1", "2", "3", "4"]
    # a switch with no traffic runs cooler and draws less than the same switch under load
    sw = show_twin.switch(LEAF)
    loaded = sum(p["outputPower"] for p in power.values())
    saved = sw.rate.copy()
    sw.rate[:] = 0
    try:
        idle = _json(show_twin, "show system environment power")["powerSupplies"]
        assert sum(p["outputPower"] for p in idle.values()) < loaded
        idle_chip = next(s for s in _json(show_twin, "show system environment temperature")["tempSensors"]
                         if s["name"] == "TempSensor2")  # fmt: skip
        assert idle_chip["currentTemperature"] < chip["currentTemperature"]
    finally:
        sw.rate[:] = saved
    # `show processes top once`: JSON (ANTA) and text (napalm) say the same idle share
    idle = _json(show_twin, "show processes top once")["cpuInfo"]["%Cpu(s)"]["idle"]
    top = show_text(show_twin, LEAF, "show processes top once", T0)
    assert top is not None and f"{idle:4.1f} id," in top
    assert top is not None and top.splitlines()[2].startswith("%Cpu(s):") and " id," in top.splitlines()[2]
    text = show_text(show_twin, LEAF, "show system environment temperature", T0)
    assert text is not None and "System temperature status is: Ok" in text and "TempSensorP1/1" in text


UNMODELLED = [
    "show vlan",
    "show users accounts",
    "show snmp v2-mib chassis",
    "show ntp associations",
    "show mac address-table",
    "show vrf",
    "show ip interface",
    "show ip bgp summary vrf all",
    "show ip route vrf default 10.0.0.0/8 longer-prefixes detail",
    "show system environment power",
]


@pytest.mark.parametrize("command", UNMODELLED)
def test_services_the_twin_does_not_model_answer_well_formed(show_twin: Twin, command: str) -> None:
    # a real switch where the service is not configured: JSON of the EOS shape and CLI text, never "invalid"
    data = _json(show_twin, command)
    assert isinstance(data, dict) and data
    assert show_text(show_twin, LEAF, command, T0) is not None
    assert show_text(show_twin, LEAF, command + " | json", T0) is not None


def test_ecn_counters_show_a_dash_where_ecn_is_not_configured(show_twin: Twin) -> None:
    sw = show_twin.switch(LEAF)
    row = sw.index["Ethernet1/1"]
    plain = _json(show_twin, "show qos interfaces ecn counters queue")["intfQueueCounters"]
    assert plain["Ethernet1/1"]["queueCounters"] == {str(q): "-" for q in range(8)}
    cfg = sw.config[row]
    saved = dict(cfg.ecn)
    cfg.ecn[3] = (1_000_000, 4_000_000, 10)
    try:
        marked = _json(show_twin, "show qos interfaces ethernet1/1 ecn counters queue")["intfQueueCounters"]
        queues = marked["Ethernet1/1"]["queueCounters"]
        assert queues["3"].isdigit() and all(queues[str(q)] == "-" for q in range(8) if q != 3)
    finally:
        cfg.ecn.clear()
        cfg.ecn.update(saved)
