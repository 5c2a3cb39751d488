"""Issue 49's variants end to end on the small-pod twin (real gNMI in, real eAPI sessions out), beside
test_floor_twin.py and with its helpers: two corrupting held uplinks and room to return one (the lowest loss rate comes
back); a drained uplink (never returned; the shortfall it leaves is said); and a hot pair (two `fabricd run` on
PostgreSQL and a NATS bus) whose leader is killed -9 as it returns the hold (the port comes back once: one enable
action, one audit line, one ticket note; the port up once on the switch)."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import httpx
import pytest

from fabricd.bus import LocalBus
from lab.control_client import inject
from tests.twin.lab.twin_thread import TwinThread
from tests.twin.processes import TTL, Fabricd, admin_enabled, eos_driver, eos_sessions, hot_pair, twin_fixture

from .service_thread import TOKEN, ServiceThread, wait_for
from .test_floor_twin import HELD, LEAF, OTHER, actions, floor_config, start

pytestmark = [pytest.mark.slow]
SEVEN, EIGHT = "Ethernet7/1", "Ethernet8/1"
HALF = {"min_uplink_fraction": 0.5}  # room for two holds on a leaf of four uplinks

twin = twin_fixture()  # a twin of its own per test: each leaves ports shut and drained (it starts in 0.1 s)


def came_up(twin: TwinThread) -> int:
    """How often the held port's line protocol came up, as the switch logged it (`show logging`)."""
    with eos_driver(twin, LEAF) as drv:
        log = drv.device.run_commands(["show logging"], encoding="text")[0]["output"]
    return int(log.count(f"Interface {HELD}, changed state to up"))


def floor_of(svc: ServiceThread | Fabricd) -> dict[str, Any]:
    floor: dict[str, Any] = svc.get("/api/v1/health")["floor"]
    return floor


def test_two_corrupting_holds_the_lowest_loss_rate_returns_first(twin: TwinThread, tmp_path: Path) -> None:
    """Both uplinks corrupt below max_return_loss (1e-5): each held while the leaf keeps half its uplinks; when a
    third uplink's BGP session drops (1 of 4, 25 % < 50 %) one return restores the floor: the one losing less."""
    svc = start(tmp_path, twin, safety=HALF)
    try:
        wait_for(lambda: svc.get("/api/v1/health")["telemetry"]["synced"], 20)
        inject(twin.state_dir, "link_corruption", {"port": f"{LEAF}:{HELD}", "rate": 8e-6, "direction": "rx"})
        inject(twin.state_dir, "link_corruption", {"port": f"{LEAF}:{SEVEN}", "rate": 1e-6, "direction": "rx"})
        held = wait_for(lambda: len(d := actions(svc, op="disable", status="done")) == 2 and d, 60)
        assert sorted(a["port"] for a in held) == [HELD, SEVEN]
        loss = {f["port"]: f["evidence"]["loss_rate"] for f in svc.get("/api/v1/findings")["findings"]
                if f["kind"] == "link_corruption" and f["device"] == LEAF}  # fmt: skip
        assert loss[SEVEN] < loss[HELD] <= 1e-5, loss  # what fabricd measured orders them
        inject(twin.state_dir, "bgp_down", {"port": f"{LEAF}:{OTHER}"})
        (back,) = wait_for(lambda: actions(svc, op="enable", status="done"), 20)
        assert back["port"] == SEVEN
        assert back["reason"] == "returned to keep leaf-g0-r1 at 2 of 4 uplinks (Ethernet5/1's BGP session is down)"
        assert admin_enabled(twin, LEAF, SEVEN) and not admin_enabled(twin, LEAF, HELD)
        time.sleep(2)  # more passes: the other stays held (the floor holds with one back)
        assert len(actions(svc, op="enable")) == 1
        assert [p["port"] for p in svc.get("/api/v1/ports/disabled")["ports"]] == [HELD]
    finally:
        svc.stop()


def test_a_drained_uplink_is_never_returned_and_the_shortfall_is_said(twin: TwinThread, tmp_path: Path) -> None:
    """Ethernet7/1 drained by an operator, Ethernet6/1 held (2 of 4: the floor of 50 %); then Ethernet8/1 goes down
    and Ethernet5/1's BGP session drops: the hold comes back (all fabricd can give), the drain stays, and fabricd says
    once that the leaf is under its floor, naming the drain."""
    svc = start(tmp_path, twin, safety=HALF)
    try:
        wait_for(lambda: svc.get("/api/v1/health")["telemetry"]["synced"], 20)
        r = httpx.post(f"{svc.url}/api/v1/maintenance", headers={"Authorization": f"Bearer {TOKEN}"}, timeout=30,
                       json={"kind": "port", "target": f"{LEAF}:{SEVEN}", "reason": "optic swap"})  # fmt: skip
        assert r.status_code == 200, r.text
        wait_for(lambda: [x for x in svc.get("/api/v1/maintenance")["maintenance"] if x["state"] == "drained"], 60)
        inject(twin.state_dir, "link_flap", {"port": f"{LEAF}:{HELD}", "count": 8, "period_s": 0.3})
        wait_for(lambda: actions(svc, op="disable", status="done", port=HELD), 20)
        time.sleep(3)  # the train quiet for return_quiet_s (2 s): returnable
        inject(twin.state_dir, "link_down", {"port": f"{LEAF}:{EIGHT}"})
        inject(twin.state_dir, "bgp_down", {"port": f"{LEAF}:{OTHER}"})
        (back,) = wait_for(lambda: actions(svc, op="enable", status="done"), 20)
        assert back["port"] == HELD and back["reason"].startswith("returned to keep leaf-g0-r1 at ")
        why = ("leaf-g0-r1 under its floor (1 of 4 uplinks, 25% < 50%): no hold of fabricd's left to return "
               "(Ethernet5/1's BGP session is down; Ethernet7/1 is drained; Ethernet8/1 is down)")  # fmt: skip
        wait_for(lambda: floor_of(svc)["under_floor"] == [{"device": LEAF, "why": why}], 20)
        time.sleep(2)  # more passes: said once, the drain untouched
        audit = svc.get("/api/v1/audit")["audit"]
        assert [e["why"] for e in audit if e["what"] == f"{LEAF} under its floor"] == [why]
        assert not admin_enabled(twin, LEAF, SEVEN) and admin_enabled(twin, LEAF, HELD)
        assert [x["state"] for x in svc.get("/api/v1/maintenance")["maintenance"]] == ["drained"]
        assert [(a["port"], a["op"]) for a in actions(svc, port=SEVEN)] == [(SEVEN, "disable")]  # the drain's shut
    finally:
        svc.stop()


def test_a_return_across_a_failover_happens_once(
    twin: TwinThread, nats_bus: LocalBus, postgres_url: str, tmp_path: Path
) -> None:
    """A hot pair on shared state: the leader holds Ethernet6/1; another uplink's BGP session drops and the leader
    is killed -9 as soon as its return is recorded (its enable under way, or just done). The standby takes over and
    finishes what is under way instead of returning it again: one enable action (key return:...), done; one audit
    line and one ticket note; on the switch the port is up, its mark gone, no session of fabricd's left."""
    config = floor_config(tmp_path, twin, state={"url": postgres_url}, bus={"urls": [nats_bus.url]},
                          ha={"enabled": True, "lease_ttl_s": TTL})  # fmt: skip
    with hot_pair(config, tmp_path) as (a, b):
        inject(twin.state_dir, "link_flap", {"port": f"{LEAF}:{HELD}", "count": 8, "period_s": 0.3})
        (hold,) = wait_for(lambda: [x for x in a.get("/api/v1/actions")["actions"] if x["status"] == "done"], 30)
        assert (hold["device"], hold["port"], hold["op"]) == (LEAF, HELD, "disable")
        ups = came_up(twin)
        inject(twin.state_dir, "bgp_down", {"port": f"{LEAF}:{OTHER}"})
        wait_for(lambda: [x for x in a.get("/api/v1/actions")["actions"] if x["op"] == "enable"], 20, every_s=0.02)
        a.kill()
        wait_for(lambda: b.role() == "leader", 10, every_s=0.05)
        (back,) = wait_for(lambda: [x for x in b.get("/api/v1/actions")["actions"]
                                    if x["op"] == "enable" and x["status"] == "done"], 30)  # fmt: skip
        time.sleep(3)  # more passes of the new leader: nothing returned twice
        enables = [x for x in b.get("/api/v1/actions")["actions"] if x["op"] == "enable"]
        assert [x["id"] for x in enables] == [back["id"]] and back["key"].startswith(f"return:{LEAF}:{HELD}:")
        assert admin_enabled(twin, LEAF, HELD)
        why = "returned to keep leaf-g0-r1 at 3 of 4 uplinks (Ethernet5/1's BGP session is down)"
        audit = b.get("/api/v1/audit")["audit"]
        assert [e["what"] for e in audit if e["what"].startswith("returned ")] == [f"returned {LEAF}:{HELD}"]
        notes = b.get(f"/api/v1/tickets/{hold['ticket_id']}")["body"]["notes"]
        assert sum(why in n for n in notes) == 1, notes
        # on the switch: the port came up once since the hold if a finished its enable before it was killed; twice
        # when b, taking over an enable under way, ended a's transaction (the port down again) and committed the
        # enable anew under its own token (docs/ha.md, "Fencing"), never more; it carries no mark of fabricd's, and
        # no config session of fabricd's is left uncommitted or under its timer
        again = came_up(twin) - ups
        assert again == 1 or (again == 2 and back["token"] == b.get("/api/v1/health")["ha"]["token"]), (again, back)
        with eos_driver(twin, LEAF) as drv:
            assert "[fabricd:" not in drv.get_interfaces()[HELD]["description"]
        left = {n: s for n, s in eos_sessions(twin, LEAF).items() if n.startswith("fabricd_") and s != "completed"}
        assert left == {}, left
