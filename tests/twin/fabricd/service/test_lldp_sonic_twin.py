"""LLDP on SONiC as SONiC serves it: a SONiC leaf's neighbours over gNMI come from APPL_DB's LLDP_ENTRY_TABLE, and
its ports are advertised to its neighbours by alias (`etpN`, as lldpmgrd does), which the EOS spines' LLDP shows.
The service reads both back to the topology's names: the blueprint is no finding, and a miscable of two SONiC
leaves' server cables (seen from the leaves alone: servers are not switches) is one miscabled finding with
validate's fix. The same with the real daemons: lldpd's view, the miscable moving the veths' ends."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from lab.control_client import inject
from lab.sonic_config import lldp_port_id
from lab.sonic_gnmi import LLDP, rows
from tests.conftest import EXAMPLES
from tests.twin.lab.real_daemons import MODES, START_S
from tests.twin.lab.twin_thread import TwinThread
from topology.spec import load_spec

from .service_thread import ServiceThread, wait_for, write_config

pytestmark = [pytest.mark.slow]
SPEC = EXAMPLES / "small-sonic.yaml"


@pytest.fixture(params=MODES)
def twin(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[TwinThread]:
    t = TwinThread(load_spec(SPEC), tmp_path_factory.mktemp("lldp-sonic"), daemons=request.param)
    yield t.start(START_S[request.param])
    t.stop()


def miscabled(svc: ServiceThread) -> list[dict[str, Any]]:
    return [f for f in svc.get("/api/v1/findings")["findings"] if f["kind"] == "miscabled"]


def test_sonic_lldp_names_are_read_back_and_a_miscable_is_found(twin: TwinThread, tmp_path: Path) -> None:
    tw = twin.process.twin
    # what the leaf's lldpd hears from the spine (its interface name) and what the spine hears from it (the alias)
    ((_, entry),) = rows(tw, tw.switch("leaf-g0-r0"), "APPL_DB", [LLDP, "Ethernet16"], tw.now)
    assert (entry["lldp_rem_sys_name"], entry["lldp_rem_port_id"]) == ("spine-r0-0", "Ethernet1/1")
    spine = tw.switch("spine-r0-0")
    far = tw.lldp_peer("spine-r0-0", spine.ports[0])
    assert far is not None and lldp_port_id(tw, far) == "etp3"  # leaf-g0-r0:Ethernet3/1

    svc = ServiceThread(write_config(tmp_path, twin.inventory, spec=str(SPEC))).start()
    try:
        wait_for(lambda: svc.get("/api/v1/health")["telemetry"]["synced"] == len(tw.switches), 20)
        time.sleep(2.5)  # past miscabled's settle time: the blueprint as LLDP shows it is nothing
        assert miscabled(svc) == []
        inject(twin.state_dir, "miscable", {"port": "leaf-g0-r0:Ethernet2/1", "other": "leaf-g0-r1:Ethernet2/1"})
        (f,) = wait_for(lambda: miscabled(svc), 15)
        assert f["evidence"]["code"] == "RAIL_MISMATCH"
        assert f["evidence"]["fix"] in (  # named from whichever end LLDP showed wrong first
            "swap the cables on leaf-g0-r0:Ethernet2/1 and leaf-g0-r1:Ethernet2/1",
            "swap the cables on leaf-g0-r1:Ethernet2/1 and leaf-g0-r0:Ethernet2/1",
        )
    finally:
        svc.stop()
