"""napalm's eos driver, unmodified, on every role of the small-dci twin (leaf, spine, superspine, DR): every getter
answers, `cli` runs commands, `ping` to a neighbour parses with round trips from the cable and across the 120 km DCI
(1.2 ms), `traceroute` to the far campus lists each hop, and get_bgp_neighbors_detail reads every session from EOS's
text."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from napalm import get_network_driver

from drivers.inventory import load_inventory
from tests.conftest import EXAMPLES
from tests.twin.lab.test_eapi_napalm import NAPALM_UNIMPLEMENTED
from tests.twin.lab.twin_thread import TwinThread
from topology.load import load_fabric
from topology.spec import load_spec
from topology.underlay import Underlay

pytestmark = [pytest.mark.slow]
ROLES = ("leaf-g0-r0", "spine-r0-0", "ssp-0", "dr-campus-b-0")
UNDERLAY = Underlay(load_fabric(EXAMPLES / "small-dci.yaml", None)[1])


@pytest.fixture(scope="module")
def twin(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TwinThread]:
    t = TwinThread(load_spec(EXAMPLES / "small-dci.yaml"), tmp_path_factory.mktemp("napalm-roles")).start()
    yield t
    t.stop()


def device(twin: TwinThread, name: str) -> Any:
    a = load_inventory(twin.inventory).access(name)
    dev = get_network_driver("eos")(a.host, a.username, a.password.get_secret_value(),
                                    optional_args={"port": a.eapi.port, "transport": a.eapi.transport})  # fmt: skip
    dev.open()
    return dev


@pytest.mark.parametrize("name", ROLES)
def test_every_getter_cli_ping_and_traceroute_on_every_role(twin: TwinThread, name: str) -> None:
    dev = device(twin, name)
    try:
        for getter in sorted(g for g in dir(dev) if g.startswith("get_") and g not in NAPALM_UNIMPLEMENTED):
            args = ("10.0.0.0/8",) if getter == "get_route_to" else ()
            assert getattr(dev, getter)(*args) is not None, getter
        out = dev.cli(["show version", "show hostname"])
        assert f"FQDN:     {name}" in out["show hostname"] and "Arista" in out["show version"]
        sessions = UNDERLAY.sessions(name)
        near = dev.ping(sessions[0].peer_address, count=3)["success"]
        assert (near["probes_sent"], near["packet_loss"]) == (3, 0) and len(near["results"]) == 3
        assert 0 < near["rtt_min"] <= near["rtt_avg"] <= near["rtt_max"] < 0.5
        assert {r["ip_address"] for r in near["results"]} == {sessions[0].peer_address}
        far = next(n for n in UNDERLAY.speakers if n.startswith("remote-"))
        far_id = UNDERLAY.speakers[far].router_id
        rtt = dev.ping(far_id, count=2)["success"]
        assert rtt["packet_loss"] == 0 and 1.2 < rtt["rtt_avg"] < 1.5  # the 120 km DCI: 1.2 ms of fibre
        hops = dev.traceroute(far_id, timeout=1, ttl=16)["success"]
        assert hops[max(hops)]["probes"][1]["ip_address"] == far_id
        assert all(h["probes"][1]["rtt"] > 0 for h in hops.values())
        detail = dev.get_bgp_neighbors_detail()["default"]  # napalm keys this getter by the VRF name
        peers = {p["remote_address"]: p for group in detail.values() for p in group}
        assert set(peers) == {s.peer_address for s in sessions}
        for s in sessions:
            p = peers[s.peer_address]
            assert p["up"] and p["remote_as"] == s.peer_asn and p["local_as"] == s.local_asn
            assert p["local_address"] == s.local_address and p["holdtime"] == 9 and p["keepalive"] == 3
            assert p["received_prefix_count"] > 0
    finally:
        dev.close()
