"""The twin's further EOS show commands (eos_interfaces.py, eos_platform.py) and the config-dependent ones (NTP,
LANZ, `dir`): values that follow twin state and config, one identity across commands, and platform-specific commands
refused where the silicon does not have them. Pure: a Twin object and a CLI session, no sockets."""

from __future__ import annotations

from typing import Any

import pytest

from lab.counters import COL
from lab.eos_cli import CliError, CliSession
from lab.eos_config import ConfigStore
from lab.eos_platform import TERMINATTR_VERSION
from lab.eos_show import show_json, show_text
from lab.model import Twin
from tests.conftest import EXAMPLES
from topology.blueprint import generate_blueprint
from topology.fabric import Fabric
from topology.model import Cabling
from topology.spec import load_spec
from topology.units import NS

LEAF, PORT = "leaf-g0-r0", "Ethernet5/1"
T0 = 1_700_000_000 * NS


@pytest.fixture
def twin(small_blueprint: Cabling) -> Twin:
    return Twin(Fabric(small_blueprint), clock=lambda: T0)


def _json(twin: Twin, command: str, device: str = LEAF) -> dict[str, Any]:
    out = show_json(twin, device, command, T0 + 60 * NS)
    assert out is not None, command
    return out


def test_description_and_rates_follow_the_port(twin: Twin) -> None:
    sw = twin.switches[LEAF]
    row = sw.index[PORT]
    sw.config[row].admin_up = False
    d = _json(twin, "show interfaces description")["interfaceDescriptions"]
    assert d[PORT]["interfaceStatus"] == "adminDown" and d[PORT]["lineProtocolStatus"] == "down"
    assert d["Ethernet1/1"] == {"description": "", "interfaceStatus": "up", "lineProtocolStatus": "up"}
    rates = _json(twin, "show interfaces Ethernet1/1 counters rates")["interfaces"]
    (only,) = rates.values()
    assert only["inBpsRate"] == pytest.approx(sw.rate[sw.index["Ethernet1/1"], COL["if.in-octets"]] * 8)
    assert 0 < only["inBpsRate"] < 400e9


def test_queue_counters_are_the_gnmi_queue_counters(twin: Twin) -> None:
    sw = twin.switches[LEAF]
    row = sw.index[PORT]
    values = sw.values(T0 + 60 * NS)[row]
    detail = _json(twin, "show interfaces counters queue detail")["egressQueueCounters"]["interfaces"][PORT]
    tc3 = detail["ucastQueues"]["trafficClasses"]["TC3"]["dropPrecedences"]["DP0"]
    assert tc3["enqueuedPackets"] == int(values[COL["q3.transmit-pkts"]]) > 0
    assert tc3["droppedPackets"] == int(values[COL["q3.dropped-pkts"]])
    drops = _json(twin, "show interfaces counters queue drops")["interfaces"][PORT]["trafficClasses"]["TC3"]
    assert drops["egressQueueCounters"]["countersSum"]["droppedPackets"] == tc3["droppedPackets"]


def test_dom_thresholds_and_phy_detail_follow_optics_and_fec(twin: Twin) -> None:
    sw = twin.switches[LEAF]
    row = sw.index[PORT]
    sw.pre_fec_ber[row] = 3e-5
    dom = _json(twin, f"show interfaces {PORT} transceiver dom thresholds")["interfaces"][PORT]["parameters"]
    lanes = dom["rxPower"]["channels"]
    assert len(lanes) == 4 and all(abs(v - twin.rx_power(sw, row)) <= 0.21 for v in lanes.values())
    assert dom["rxPower"]["threshold"]["lowAlarm"] < min(lanes.values())
    assert dom["temperature"]["channels"]["-"] == pytest.approx(twin.temperature(sw, row), abs=0.01)
    phy = _json(twin, "show interfaces phy detail")["interfacePhyStatuses"]
    assert phy[PORT]["phyStatuses"][0]["preFecBer"]["value"] == 3e-5
    assert phy["Ethernet1/1"]["phyStatuses"][0]["fec"]["uncorrectedCodewords"]["value"] == 0
    sw.oper_up[row] = False
    dark = _json(twin, f"show interfaces {PORT} transceiver dom thresholds")["interfaces"][PORT]["parameters"]
    assert set(dark["rxPower"]["channels"].values()) == {-40.0}


def test_inventory_names_the_same_transceivers_and_switch(twin: Twin) -> None:
    inv = _json(twin, "show inventory")
    xcvr = _json(twin, "show interfaces transceiver")["interfaces"]
    version = _json(twin, "show version")
    assert inv["systemInformation"]["serialNum"] == version["serialNumber"]
    assert inv["systemInformation"]["name"] == version["modelName"]
    assert inv["xcvrSlots"]["5"]["serialNum"] == xcvr[PORT]["vendorSn"]
    assert inv["cardSlots"] == {} and len(inv["powerSupplySlots"]) == 2


def test_sand_only_commands_are_refused_on_tomahawk_and_served_on_jericho() -> None:
    twin = Twin(Fabric(generate_blueprint(load_spec(EXAMPLES / "small-dci.yaml"))), clock=lambda: T0)
    dr = next(n for n, sw in twin.switches.items() if sw.role.value == "dr")
    store = ConfigStore(twin)
    leaf = CliSession(twin, store, LEAF, privileged=True)
    for cmd in ("show platform sand health", "show hardware counter drop rates", "show platform fap mapping"):
        with pytest.raises(CliError) as info:
            leaf.run_json(cmd)
        assert info.value.message == "% Unavailable command (not supported on this hardware platform)"
    on_dr = CliSession(twin, store, dr, privileged=True)
    assert on_dr.run_json("show platform sand health")["linecardsNotInitialized"] == []
    (fap,) = on_dr.run_json("show platform fap mapping")["aradMappings"]
    assert fap["fapName"] == "Jericho3/0"
    mapped = fap["portMappings"]
    assert {m["interface"] for m in mapped.values()} == set(twin.switches[dr].ports)
    assert on_dr.run_json("show queue-monitor length status")["lanzEnabled"] is True  # on by default on Sand
    assert leaf.run_json("show queue-monitor length status")["lanzEnabled"] is False


def test_ntp_and_lanz_follow_the_running_config(twin: Twin) -> None:
    cli = CliSession(twin, ConfigStore(twin), LEAF, privileged=True)
    assert cli.run("show ntp status").startswith("unsynchronised\n")
    assert cli.run_json("show ntp associations") == {"peers": {}}
    for line in ("configure", "ntp server 10.0.0.101", "ntp server 10.0.0.100 prefer", "queue-monitor length", "end"):
        cli.run(line)
    assert cli.run("show ntp status").startswith("synchronised to NTP server (10.0.0.100) at stratum 3\n")
    peers = cli.run_json("show ntp associations")["peers"]
    assert {a: p["condition"] for a, p in peers.items()} == {"10.0.0.101": "candidate", "10.0.0.100": "sys.peer"}
    assert "*10.0.0.100" in cli.run("show ntp associations")
    assert cli.run_json("show queue-monitor length status")["lanzEnabled"] is True
    assert "ntp server 10.0.0.100 prefer\n" in cli.run("show running-config")
    with pytest.raises(CliError):
        cli.run_json("show ntp status")  # EOS has no JSON for it either


def test_dir_flash_and_text_only_commands(twin: Twin) -> None:
    cli = CliSession(twin, ConfigStore(twin), LEAF, privileged=True)
    entries = cli.run_json("dir flash:/")["urls"]["flash:/"]["entries"]
    assert "startup-config" in entries and f"EOS-{twin.switches[LEAF].os_version}.swi" in entries
    assert "startup-config" in cli.run("dir flash:")
    with pytest.raises(CliError):
        cli.run("dir usb1:")
    assert cli.run("show agent logs crash") == ""
    df = cli.run("bash timeout 10 df -h").splitlines()
    assert df[0].split()[4] == "Use%" and all(int(ln.split()[4].rstrip("%")) < 75 for ln in df[1:])


@pytest.mark.parametrize(
    ("command", "shown"),
    [("show inventory", "QDD-400G-DR4"), ("show interfaces description", "Ethernet1/1"),
     ("show interfaces phy detail", "preFecBer"), ("show version detail", TERMINATTR_VERSION),
     ("show interfaces transceiver dom thresholds", "lowAlarm"), ("show pci", "Tomahawk4"),
     ("show module", "DCS-7060X5-64S")],
)  # fmt: skip
def test_every_new_command_has_text_too(twin: Twin, command: str, shown: str) -> None:
    text = show_text(twin, LEAF, command, T0)
    assert text is not None and shown in text
