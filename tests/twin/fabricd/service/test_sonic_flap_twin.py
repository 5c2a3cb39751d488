"""A flap on a SONiC leaf's server port is found and acted on, on the model and on the real daemons: the service
takes the port down through SONiC's config (its CONFIG_DB `admin_status`), the switch reports it down, and with the
real daemons the port's veth goes down, so lldpd on both ends forgets the neighbour (802.1AB); resolving the ticket
brings the port back and lldpd relearns the neighbour from its first LLDPDU."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from lab.control_client import inject
from tests.conftest import EXAMPLES
from tests.twin.lab.real_daemons import MODES, START_S
from tests.twin.lab.twin_thread import TwinThread
from topology.spec import load_spec

from .service_thread import ServiceThread, wait_for, write_config

pytestmark = [pytest.mark.slow]
SPEC = EXAMPLES / "small-sonic.yaml"
LEAF, PORT = "leaf-g0-r0", "Ethernet1/1"  # a SONiC leaf's port facing gpu-g0-000:nic0


@pytest.fixture(params=MODES)
def twin(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[TwinThread]:
    t = TwinThread(load_spec(SPEC), tmp_path_factory.mktemp("sonic-flap"), daemons=request.param)
    yield t.start(START_S[request.param])
    t.stop()


def heard(twin: TwinThread) -> tuple[str, str] | None:
    """Who lldpd on the leaf hears on the port (None: no neighbour)."""
    d = twin.process.twin.daemons
    assert d is not None
    got = d.lldp.get(LEAF, {}).get(PORT)
    return (got.system, got.port_id) if got is not None else None


def test_a_flap_on_a_sonic_leaf_is_found_and_the_port_taken_down(twin: TwinThread, tmp_path: Path) -> None:
    tw = twin.process.twin
    real = tw.daemons is not None
    if real:
        assert heard(twin) == ("gpu-g0-000", "nic0")
    svc = ServiceThread(write_config(tmp_path, twin.inventory, spec=str(SPEC))).start()
    try:
        wait_for(lambda: svc.get("/api/v1/health")["telemetry"]["synced"] == len(tw.switches), 20)
        inject(twin.state_dir, "link_flap", {"port": f"{LEAF}:{PORT}", "count": 8, "period_s": 0.3})
        disabled = wait_for(lambda: svc.get("/api/v1/ports/disabled")["ports"], 20)
        assert [(p["device"], p["port"]) for p in disabled] == [(LEAF, PORT)]
        (action,) = svc.get("/api/v1/actions")["actions"]
        assert action["op"] == "disable" and action["status"] == "done"
        assert not tw.port_config(LEAF, PORT).admin_up  # CONFIG_DB PORT|Ethernet0 admin_status down
        wait_for(lambda: svc.on_loop(lambda s: s.view.oper(LEAF, PORT)) == "DOWN", 5)
        if real:  # the veth is down: lldpd forgot the neighbour on both ends
            wait_for(lambda: heard(twin) is None, 5)
        (t,) = [t for t in svc.get("/api/v1/tickets")["tickets"] if t["kind"] == "link_flap"]
        assert svc.post(f"/api/v1/tickets/{t['id']}/resolve").status_code == 200
        wait_for(lambda: not svc.get("/api/v1/ports/disabled")["ports"], 15)
        assert tw.port_config(LEAF, PORT).admin_up
        if real:  # back up: relearned from the host's first LLDPDU
            wait_for(lambda: heard(twin) == ("gpu-g0-000", "nic0"), 5)
    finally:
        svc.stop()
