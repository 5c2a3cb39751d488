"""ANTA, Arista's own network test framework, run unmodified (`anta nrfu`) against the twin's EOS switches over
eAPI on HTTPS 443 with the twin's self-signed certificate: on a healthy fabric every test of the catalog succeeds
(none errors on a command the twin does not know); a corrupting link fails VerifyInterfaceErrors on its switch, and a
PFC storm from a NIC fails VerifyInterfacesPFCCounters on the leaf port facing it."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from drivers.inventory import load_inventory
from lab.control_client import inject
from lab.eos_releases import DEFAULT_EOS_VERSION
from tests.conftest import EXAMPLES
from tests.lab.twin_thread import TwinThread
from topology.load import load_fabric
from topology.spec import load_spec

pytestmark = [pytest.mark.twin, pytest.mark.slow]
SWITCHES = ["leaf-g0-r0", "spine-r0-0"]
# What a RoCE operator checks daily that the twin models; each entry names ANTA's module and test.
CATALOG: dict[str, list[dict[str, object]]] = {
    "anta.tests.software": [{"VerifyEOSVersion": {"versions": [DEFAULT_EOS_VERSION]}}],
    "anta.tests.system": [
        {"VerifyUptime": {"minimum": 1}},
        {"VerifyReloadCause": None},
        {"VerifyCPUUtilization": None},
        {"VerifyMemoryUtilization": None},
    ],
    "anta.tests.hardware": [
        {"VerifyEnvironmentPower": {"states": ["ok"]}},
        {"VerifyEnvironmentCooling": {"states": ["ok"]}},
        {"VerifyTemperature": None},
        {"VerifyTransceiversTemperature": None},
    ],
    "anta.tests.interfaces": [
        {"VerifyInterfaceErrors": None},
        {"VerifyInterfaceDiscards": None},
        {"VerifyInterfaceErrDisabled": None},
        {"VerifyInterfacesPFCCounters": None},
        {"VerifyInterfacesECNCounters": None},
        {"VerifyInterfacesSpeed": {"interfaces": [{"name": "Ethernet1/1", "speed": 400}]}},
        {"VerifyL2MTU": None},
    ],
    "anta.tests.configuration": [{"VerifyRunningConfigDiffs": None}],
}


@pytest.fixture(scope="module")
def twin(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TwinThread]:
    t = TwinThread(load_spec(EXAMPLES / "small-pod.yaml"), tmp_path_factory.mktemp("anta-twin")).start()
    yield t
    t.stop()


def cabling_checks() -> list[dict[str, object]]:
    """ANTA's LLDP check of each switch against the fabric's cabling (the blueprint the twin is built from)."""
    fabric = load_fabric(EXAMPLES / "small-pod.yaml", None)[1]
    out: list[dict[str, object]] = []
    for name in SWITCHES:
        neighbors = []
        for link in fabric.links_of(name):
            here, peer = (link.a, link.b) if link.a.device == name else (link.b, link.a)
            if (d := fabric.get(peer.device)) is not None and d.is_switch:
                neighbors.append({"port": here.port, "neighbor_device": peer.device, "neighbor_port": peer.port})
        assert neighbors, name
        out.append({"VerifyLLDPNeighbors": {"neighbors": neighbors, "filters": {"tags": [name]}}})
    return out


def nrfu(twin: TwinThread, tmp: Path) -> dict[tuple[str, str], tuple[str, list[str]]]:
    """{(switch, test): (result, messages)} of one `anta nrfu` run."""
    inv = load_inventory(twin.inventory)
    hosts = [{"host": inv.access(n).host, "name": n, "port": inv.access(n).eapi.port, "tags": [n]} for n in SWITCHES]
    assert {inv.access(n).eapi.transport for n in SWITCHES} == {"https"}
    (tmp / "inventory.yml").write_text(yaml.safe_dump({"anta_inventory": {"hosts": hosts}}))
    (tmp / "catalog.yml").write_text(yaml.safe_dump({**CATALOG, "anta.tests.connectivity": cabling_checks()}))
    anta = Path(sys.executable).parent / "anta"
    password = inv.access(SWITCHES[0]).password.get_secret_value()
    run = subprocess.run(
        [str(anta), "nrfu", "-u", "admin", "-p", password, "-i", str(tmp / "inventory.yml"), "-c",
         str(tmp / "catalog.yml"), "--insecure", "json", "-o", str(tmp / "results.json")],
        capture_output=True, text=True, timeout=180,
    )  # fmt: skip
    assert (tmp / "results.json").exists(), run.stdout[-2000:] + run.stderr[-2000:]
    rows = json.loads((tmp / "results.json").read_text())
    return {(r["name"], r["test"]): (r["result"], r.get("messages") or []) for r in rows}


def test_anta_on_a_healthy_fabric_all_success_then_corruption_fails_interface_errors(
    twin: TwinThread, tmp_path: Path
) -> None:
    time.sleep(1.2)  # VerifyUptime: the twin's switches booted just now
    results = nrfu(twin, tmp_path)
    tests = sum(len(v) for v in CATALOG.values())
    assert len(results) == (tests + 1) * len(SWITCHES)  # + each switch's LLDP check of its cabling
    bad = {k: v for k, v in results.items() if v[0] != "success"}
    assert bad == {}, bad

    inject(twin.state_dir, "link_corruption", {"port": "leaf-g0-r0:Ethernet5/1", "rate": 1e-4, "direction": "rx"})
    inject(twin.state_dir, "pfc_storm", {"nic": "gpu-g0-000:nic0", "priority": 3})  # faces leaf-g0-r0:Ethernet1/1
    time.sleep(1.5)  # errored frames and pause frames accumulate
    after = nrfu(twin, tmp_path)
    result, messages = after[("leaf-g0-r0", "VerifyInterfaceErrors")]
    assert result == "failure" and "Ethernet5/1" in " ".join(messages), messages
    result, messages = after[("leaf-g0-r0", "VerifyInterfacesPFCCounters")]
    assert result == "failure" and "Interface: Ethernet1/1 - Counters above threshold" in " ".join(messages), messages
    assert after[("spine-r0-0", "VerifyInterfaceErrors")][0] == "success"
    assert all(r != "error" for r, _ in after.values())
