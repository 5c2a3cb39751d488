"""The twin's eBGP underlay judged by unmodified clients: napalm's get_bgp_neighbors and ANTA's VerifyBGPPeersHealth
and VerifyBGPPeerCount over eAPI, on a healthy fabric and with `bgp_down` on a leaf uplink (the link stays up, the
session does not), and a `neighbor X shutdown` in the config."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from napalm import get_network_driver

from drivers.inventory import load_inventory
from lab.control_client import call, inject
from tests.conftest import EXAMPLES
from tests.twin.lab.twin_thread import TwinThread
from topology.load import load_fabric
from topology.spec import load_spec
from topology.underlay import Underlay

pytestmark = [pytest.mark.slow]
LEAF, SPINE = "leaf-g0-r0", "spine-r0-0"


@pytest.fixture(scope="module")
def twin(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TwinThread]:
    t = TwinThread(load_spec(EXAMPLES / "small-pod.yaml"), tmp_path_factory.mktemp("bgp-twin")).start()
    yield t
    t.stop()


@pytest.fixture(scope="module")
def underlay() -> Underlay:
    return Underlay(load_fabric(EXAMPLES / "small-pod.yaml", None)[1])


def napalm_device(twin: TwinThread, name: str) -> Any:
    a = load_inventory(twin.inventory).access(name)
    dev = get_network_driver("eos")(a.host, a.username, a.password.get_secret_value(),
                                    optional_args={"port": a.eapi.port, "transport": a.eapi.transport})  # fmt: skip
    dev.open()
    return dev


def bgp_neighbors(twin: TwinThread, name: str) -> dict[str, Any]:
    dev = napalm_device(twin, name)
    try:
        out: dict[str, Any] = dev.get_bgp_neighbors()["global"]
        return out
    finally:
        dev.close()


def nrfu(twin: TwinThread, tmp: Path, catalog: dict[str, Any]) -> dict[tuple[str, str], tuple[str, list[str]]]:
    inv = load_inventory(twin.inventory)
    hosts = [{"host": inv.access(n).host, "name": n, "port": inv.access(n).eapi.port, "tags": [n]} for n in (LEAF,)]
    (tmp / "inventory.yml").write_text(yaml.safe_dump({"anta_inventory": {"hosts": hosts}}))
    (tmp / "catalog.yml").write_text(yaml.safe_dump(catalog))
    password = inv.access(LEAF).password.get_secret_value()
    run = subprocess.run(
        [str(Path(sys.executable).parent / "anta"), "nrfu", "-u", "admin", "-p", password, "-i",
         str(tmp / "inventory.yml"), "-c", str(tmp / "catalog.yml"), "--insecure", "json", "-o",
         str(tmp / "results.json")],
        capture_output=True, text=True, timeout=180,
    )  # fmt: skip
    assert (tmp / "results.json").exists(), run.stdout[-2000:] + run.stderr[-2000:]
    rows = json.loads((tmp / "results.json").read_text())
    return {(r["name"], r["test"]): (r["result"], r.get("messages") or []) for r in rows}


def catalog(peers: list[str]) -> dict[str, Any]:
    v4 = {"afi": "ipv4", "safi": "unicast"}
    return {
        "anta.tests.routing.bgp": [
            {"VerifyBGPPeersHealth": {"address_families": [{**v4, "peers": peers}]}},
            {"VerifyBGPPeerCount": {"address_families": [{**v4, "num_peers": len(peers), "check_peer_state": True}]}},
        ]
    }


def test_napalm_sees_every_planned_session_up_with_prefixes(twin: TwinThread, underlay: Underlay) -> None:
    for name in (LEAF, SPINE):
        got = bgp_neighbors(twin, name)
        planned = {s.peer_address: s for s in underlay.sessions(name)}
        assert set(got["peers"]) == set(planned), name
        assert got["router_id"] == underlay.speakers[name].router_id
        for addr, peer in got["peers"].items():
            s = planned[addr]
            assert peer["is_up"] and peer["is_enabled"], (name, addr)
            assert (peer["local_as"], peer["remote_as"]) == (s.local_asn, s.peer_asn)
            assert peer["remote_id"] == underlay.speakers[s.peer.device].router_id
            assert peer["address_family"]["ipv4"]["received_prefixes"] > 0
            assert (
                peer["address_family"]["ipv4"]["accepted_prefixes"]
                == peer["address_family"]["ipv4"]["received_prefixes"]
            )
            assert peer["description"] == f"{s.peer.device} {s.peer.port}"


def test_anta_bgp_checks_pass_then_fail_on_bgp_down_with_the_link_up(
    twin: TwinThread, underlay: Underlay, tmp_path: Path
) -> None:
    sessions = underlay.sessions(LEAF)
    peers = sorted(s.peer_address for s in sessions)
    healthy = nrfu(twin, tmp_path, catalog(peers))
    assert healthy[(LEAF, "VerifyBGPPeersHealth")][0] == "success", healthy
    assert healthy[(LEAF, "VerifyBGPPeerCount")][0] == "success", healthy

    victim = sessions[0]
    fault = inject(twin.state_dir, "bgp_down", {"port": str(victim.local)})
    try:
        assert sorted(fault["ports"]) == sorted([str(victim.local), str(victim.peer)])
        time.sleep(0.2)
        got = nrfu(twin, tmp_path, catalog(peers))
        result, messages = got[(LEAF, "VerifyBGPPeersHealth")]
        assert result == "failure"
        assert messages == [
            f"AFI: ipv4 SAFI: unicast VRF: default Peer: {victim.peer_address} - Incorrect session state - "
            "Expected: Established Actual: Active"
        ]
        result, messages = got[(LEAF, "VerifyBGPPeerCount")]
        assert result == "failure"
        assert messages == [
            f"AFI: ipv4 SAFI: unicast VRF: default - Peer count mismatch - Expected: {len(peers)} "
            f"Actual: {len(peers) - 1}"
        ]
        # napalm: down but enabled; the link itself is still up on both ends
        peer = bgp_neighbors(twin, LEAF)["peers"][victim.peer_address]
        assert not peer["is_up"] and peer["is_enabled"]
        assert peer["address_family"]["ipv4"]["received_prefixes"] == 0
        dev = napalm_device(twin, LEAF)
        try:
            assert dev.get_interfaces()[victim.local.port]["is_up"]
        finally:
            dev.close()
        # the spine's end of the session is down too
        assert not bgp_neighbors(twin, SPINE)["peers"][victim.local_address]["is_up"]
    finally:
        call(twin.state_dir, "DELETE", f"/faults/{fault['id']}")
    assert bgp_neighbors(twin, LEAF)["peers"][victim.peer_address]["is_up"]


def test_neighbor_shutdown_in_the_config_takes_the_session_to_idle(twin: TwinThread, underlay: Underlay) -> None:
    s = underlay.sessions(LEAF)[1]
    dev = napalm_device(twin, LEAF)
    try:
        config = f"router bgp {s.local_asn}\n   neighbor {s.peer_address} shutdown\n"
        dev.load_merge_candidate(config=config)
        assert f"+   neighbor {s.peer_address} shutdown" in dev.compare_config()
        dev.commit_config()
        peer = dev.get_bgp_neighbors()["global"]["peers"][s.peer_address]
        assert not peer["is_up"] and not peer["is_enabled"]  # napalm: Idle, "Administratively shut down"
        assert f"neighbor {s.peer_address} shutdown" in dev.get_config(retrieve="running")["running"]
        dev.load_merge_candidate(config=f"router bgp {s.local_asn}\n   no neighbor {s.peer_address} shutdown\n")
        dev.commit_config()
        assert dev.get_bgp_neighbors()["global"]["peers"][s.peer_address]["is_up"]
    finally:
        dev.close()
