"""Issue 49 end to end on the small-pod twin (real gNMI in, real eAPI sessions out): a flap train on an uplink of
leaf-g0-r1 ends, fabricd holds the port (3 of 4 uplinks kept, 75 %); then another uplink of that leaf loses its BGP
session (or its link): the held port comes back within seconds, through the repair's enable, its ticket open with the
reason; when the other fault clears it stays up if clean, and goes down again through the guard if it flaps again."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest

from lab.control_client import call, inject
from tests.twin.lab.twin_thread import TwinThread
from tests.twin.processes import admin_enabled, twin_fixture

from .service_thread import ServiceThread, wait_for, write_config

pytestmark = [pytest.mark.slow]
LEAF = "leaf-g0-r1"
HELD = "Ethernet6/1"
OTHER = "Ethernet5/1"

twin = twin_fixture(scope="module")


def actions(svc: ServiceThread, **match: Any) -> list[dict[str, Any]]:
    return [a for a in svc.get("/api/v1/actions")["actions"] if all(a.get(k) == v for k, v in match.items())]


def floor_config(tmp: Path, twin: TwinThread, **sections: Any) -> Path:
    """fabricd.yaml for these tests: a flap train is over after 2 s of quiet, a returned port is up 2 s at least
    before it may go down again; `sections` merged in (write_config)."""
    remediation = {"return_quiet_s": 2, "min_up_s": 2, **sections.pop("remediation", {})}
    return write_config(tmp, twin.inventory, remediation=remediation, **sections)


def start(tmp: Path, twin: TwinThread, **sections: Any) -> ServiceThread:
    return ServiceThread(floor_config(tmp, twin, **sections)).start()


def hold(svc: ServiceThread, twin: TwinThread) -> dict[str, Any]:
    wait_for(lambda: svc.get("/api/v1/health")["telemetry"]["synced"], 20)
    inject(twin.state_dir, "link_flap", {"port": f"{LEAF}:{HELD}", "count": 8, "period_s": 0.3})
    a: dict[str, Any]
    (a,) = wait_for(lambda: actions(svc, op="disable", status="done"), 20)
    assert (a["device"], a["port"]) == (LEAF, HELD)
    assert not admin_enabled(twin, LEAF, HELD)
    return a


@pytest.mark.parametrize("fault", ["bgp_down", "link_down"])
def test_a_held_port_returns_when_another_uplink_goes_and_stays_up_when_clean(
    twin: TwinThread, tmp_path: Path, fault: str
) -> None:
    svc = start(tmp_path, twin)
    try:
        disable = hold(svc, twin)
        other = inject(twin.state_dir, fault, {"port": f"{LEAF}:{OTHER}"})
        lost = "Ethernet5/1's BGP session is down" if fault == "bgp_down" else "Ethernet5/1 is down"
        why = f"returned to keep leaf-g0-r1 at 3 of 4 uplinks ({lost})"
        # within 5 s of the other fault being seen (2 s quiet + a tick or two + the enable's verify)
        (back,) = wait_for(lambda: actions(svc, op="enable", status="done"), 15)
        assert back["reason"] == why and back["ticket_id"] == disable["ticket_id"]
        assert admin_enabled(twin, LEAF, HELD)
        t = svc.get(f"/api/v1/tickets/{disable['ticket_id']}")
        assert t["status"] == "open" and any(why in n for n in t["body"]["notes"])
        health = svc.get("/api/v1/health")
        assert [r["port"] for r in health["floor"]["returned"]] == [f"{LEAF}:{HELD}"]
        assert svc.get("/api/v1/ports/disabled")["ports"] == []
        call(twin.state_dir, "DELETE", f"/faults/{other['id']}")  # the other fault clears
        time.sleep(4)  # past min_up_s: a clean port stays up
        assert admin_enabled(twin, LEAF, HELD)
        assert len(actions(svc, op="enable")) == 1 and len(actions(svc, op="disable", status="done")) == 1
        floor = svc.get("/api/v1/health")["floor"]
        assert [r["port"] for r in floor["returned"]] == [f"{LEAF}:{HELD}"] and floor["under_floor"] == []
    finally:
        svc.stop()


def test_a_returned_port_that_flaps_again_goes_down_once_the_floor_allows(twin: TwinThread, tmp_path: Path) -> None:
    svc = start(tmp_path, twin)
    try:
        disable = hold(svc, twin)
        other = inject(twin.state_dir, "bgp_down", {"port": f"{LEAF}:{OTHER}"})
        wait_for(lambda: actions(svc, op="enable", status="done"), 15)
        call(twin.state_dir, "DELETE", f"/faults/{other['id']}")
        wait_for(lambda: svc.get("/api/v1/health")["telemetry"]["synced"], 5)
        time.sleep(3)  # BGP back and the port up past min_up_s
        inject(twin.state_dir, "link_flap", {"port": f"{LEAF}:{HELD}", "count": 8, "period_s": 0.3})
        again = wait_for(lambda: [a for a in actions(svc, op="disable", status="done") if a["id"] != disable["id"]], 20)
        assert again[0]["ticket_id"] == disable["ticket_id"]
        assert not admin_enabled(twin, LEAF, HELD)
    finally:
        svc.stop()
