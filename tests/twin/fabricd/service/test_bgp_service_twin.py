"""The service watches the underlay: `bgp_down` on a leaf uplink (the link stays up) is one bgp_session finding with a
ticket, and a flap on another uplink of that leaf is then refused by the guard, because only the sessions still up
count as capacity (without the BGP fault the same flap is allowed: 3 of 4 uplinks = 75%, the default limit).
On small-pod every switch is EOS (OpenConfig BGP); on small-sonic the leaves are SONiC, whose view comes from STATE_DB's
NEIGH_STATE_TABLE (bgpmon, up to 15 s late): the finding is seen from the leaf too. With the real daemons the
leaves' STATE_DB is what bgpmon reads from FRR, where `bgp_down` is `neighbor X shutdown` at the spine's end."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from fabricd.cli import main
from lab.control_client import call, inject
from tests.conftest import EXAMPLES
from tests.twin.lab.real_daemons import MODES, REAL, START_S
from tests.twin.lab.twin_thread import TwinThread
from tests.twin.processes import admin_enabled
from topology.load import load_fabric
from topology.spec import load_spec
from topology.underlay import Underlay

from .service_thread import ServiceThread, wait_for, write_config

pytestmark = [pytest.mark.slow]
LEAF = "leaf-g0-r0"
# spec -> (the leaf's uplinks, the capacity the second uplink's flap would leave)
CASES = {
    "small-pod": (4, "would keep 800 of 1600 Gb/s uplink capacity (50%)"),
    "small-sonic": (2, "would keep 0 of 800 Gb/s uplink capacity (0%)"),
}


@pytest.fixture(
    params=[
        pytest.param(("small-pod", "model"), id="small-pod"),
        pytest.param(("small-sonic", "model"), id="sonic"),
        pytest.param(("small-sonic", "real"), id="sonic-daemons", marks=REAL.marks),
    ]
)
def case(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[TwinThread, str]]:
    name, daemons = request.param
    t = TwinThread(load_spec(EXAMPLES / f"{name}.yaml"), tmp_path_factory.mktemp("bgp-svc-twin"), daemons=daemons)
    yield t.start(START_S[daemons]), name
    t.stop()


def bgp_findings(svc: ServiceThread) -> list[dict[str, Any]]:
    return [f for f in svc.get("/api/v1/findings")["findings"] if f["kind"] == "bgp_session"]


def enabled(twin: TwinThread, device: str, port: str) -> bool:
    if twin.process.twin.switch(device).platform == "eos":
        return admin_enabled(twin, device, port)
    return twin.process.twin.port_config(device, port).admin_up  # CONFIG_DB PORT admin_status, as applied


def test_bgp_down_is_one_finding_and_the_guard_counts_the_session_as_lost_capacity(
    case: tuple[TwinThread, str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    twin, name = case
    count, capacity = CASES[name]
    spec = EXAMPLES / f"{name}.yaml"
    uplinks = Underlay(load_fabric(spec, None)[1]).sessions(LEAF)
    assert len(uplinks) == count
    session = uplinks[0]
    other = next(s for s in uplinks if s.peer.device != session.peer.device)  # not the same bundle
    svc = ServiceThread(write_config(tmp_path, twin.inventory, spec=str(spec))).start()
    try:
        wait_for(lambda: svc.get("/api/v1/health")["telemetry"]["synced"], 20)
        assert bgp_findings(svc) == []
        fault = inject(twin.state_dir, "bgp_down", {"port": str(session.local)})
        (f,) = wait_for(lambda: bgp_findings(svc), 15)
        assert (f["device"], f["port"]) == (LEAF, session.local.port)
        assert sorted(f["ports"]) == sorted([str(session.local), str(session.peer)])
        assert f["evidence"]["reason"] == "down" and f["evidence"]["link"] == "UP"
        assert f["evidence"]["peer_address"] == session.peer_address
        assert f["summary"].startswith(
            f"BGP session {session.local} -> {session.peer} ({session.peer_address}) is ACTIVE for "
        )
        (t,) = [t for t in svc.get("/api/v1/tickets")["tickets"] if t["kind"] == "bgp_session"]
        assert t["device"] == LEAF
        assert enabled(twin, LEAF, session.local.port)  # nothing to shut: the session is the fault
        # both ends see it: the leaf's own view (on SONiC from STATE_DB, bgpmon's 15 s later at most) joins
        wait_for(lambda: LEAF in bgp_findings(svc)[0]["evidence"]["seen_from"], 25)
        if name == "small-sonic":  # `fabricd status` says how late a SONiC switch's own view is
            main(["status", "--api", svc.url])
            line = next(ln for ln in capsys.readouterr().out.splitlines() if "bgp_session late on" in ln)
            assert LEAF in line and "bgpmon writes from FRR every 15 s" in line, line

        inject(twin.state_dir, "link_flap", {"port": str(other.local), "count": 8, "period_s": 0.3})
        (action,) = wait_for(lambda: [a for a in svc.get("/api/v1/actions")["actions"] if a["op"] == "disable"], 15)
        assert action["status"] == "refused", action
        assert (action["device"], action["port"]) == (LEAF, other.local.port)
        flap = next(t for t in svc.get("/api/v1/tickets")["tickets"] if t["kind"] == "link_flap")
        note = flap["body"]["status_note"]
        assert capacity in note, note
        assert "1 uplink(s) counted lost because their BGP session is down" in note, note
        assert enabled(twin, LEAF, other.local.port)
        assert len(bgp_findings(svc)) == 1
        call(twin.state_dir, "DELETE", f"/faults/{fault['id']}")
    finally:
        svc.stop()


@pytest.fixture(params=MODES)
def unified(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[TwinThread]:
    """small-sonic whose SONiC switches' STATE_DB has no NEIGH_STATE_TABLE rows (FRR in unified mode), on the model
    and on the real daemons (where `vtysh` is the switch's own FRR)."""
    spec = load_spec(EXAMPLES / "small-sonic.yaml")
    t = TwinThread(spec, tmp_path_factory.mktemp("bgp-ssh-twin"), no_neigh_state=True, daemons=request.param)
    yield t.start(START_S[request.param])
    t.stop()


def test_without_neigh_state_rows_sonic_bgp_is_read_over_ssh_and_bgp_down_is_one_finding(
    unified: TwinThread, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Where bgpmon writes nothing, fabricd reads each SONiC leaf's `vtysh -c 'show bgp summary json'` over SSH:
    `bgp_down` on a leaf uplink is one bgp_session finding, seen from the leaf too (only SSH gives the leaf's view),
    and `fabricd status` names the switches read over SSH and the delay."""
    spec = EXAMPLES / "small-sonic.yaml"
    twin = unified.process.twin
    leaves = sorted(n for n, sw in twin.switches.items() if sw.platform == "sonic")
    session = Underlay(load_fabric(spec, None)[1]).sessions(LEAF)[0]
    ssh = {"bgp_ssh_after_s": 2, "bgp_ssh_interval_s": 1}
    svc = ServiceThread(write_config(tmp_path, unified.inventory, spec=str(spec), telemetry=ssh)).start()
    try:
        wait_for(lambda: svc.get("/api/v1/health")["telemetry"]["synced"], 20)
        over = wait_for(lambda: svc.get("/api/v1/health")["telemetry"]["bgp_over_ssh"]["devices"] == leaves, 20)
        assert over
        assert all(twin.bgpmon.tables[d] == {} for d in leaves)  # STATE_DB held no row: every state came over SSH
        assert bgp_findings(svc) == []  # every session read Established
        inject(unified.state_dir, "bgp_down", {"port": str(session.local)})
        (f,) = wait_for(lambda: bgp_findings(svc), 15)
        assert (f["device"], f["port"]) == (LEAF, session.local.port)
        assert f["evidence"]["reason"] == "down" and f["evidence"]["peer_address"] == session.peer_address
        wait_for(lambda: LEAF in bgp_findings(svc)[0]["evidence"]["seen_from"], 15)  # the leaf's SSH read
        assert len(bgp_findings(svc)) == 1
        main(["status", "--api", svc.url])
        line = next(ln for ln in capsys.readouterr().out.splitlines() if "bgp_session late on" in ln)
        assert LEAF in line and "read over SSH (vtysh -c 'show bgp summary json') every 1 s" in line, line
        health = svc.get("/api/v1/health")["telemetry"]["bgp_over_ssh"]
        assert health == {"devices": leaves, "interval_s": 1.0, "delay_s": 1.0, "errors": {}}
    finally:
        svc.stop()
