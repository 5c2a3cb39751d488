"""The service end to end against the twin: real gNMI streams in, real eAPI sessions out, tickets in SQLite."""

from __future__ import annotations

import json
import re
import threading
import time
from pathlib import Path

import pytest

from fabricd.service.daemon import Service
from lab.control_client import inject
from lab.model import PortConfig
from tests.twin.lab.twin_thread import TwinThread
from tests.twin.processes import admin_enabled, twin_fixture

from .service_thread import TOKEN, ServiceThread, wait_for, write_config

SERVER_PORT = "leaf-g0-r0:Ethernet1/1"  # faces gpu-g0-000:nic0


twin = twin_fixture(scope="module")


def test_flap_takes_the_port_down_and_files_a_ticket(twin: TwinThread, tmp_path: Path) -> None:
    svc = ServiceThread(write_config(tmp_path, twin.inventory)).start()
    try:
        inject(twin.state_dir, "link_flap", {"port": SERVER_PORT, "count": 8, "period_s": 0.3})
        disabled = wait_for(lambda: svc.get("/api/v1/ports/disabled")["ports"], 15)
        # the twin's current EOS release streams every leaf a detector reads
        assert svc.get("/api/v1/health")["telemetry"]["coverage"] == []
        (finding,) = svc.get("/api/v1/findings")["findings"]
        (action,) = svc.get("/api/v1/actions")["actions"]
        # From the threshold crossing (the tick that raised the finding) to ticket and verified port-down: < 5 s.
        assert action["updated_ts"] - finding["detected_ts"] < 5 * 1e9
        assert [(p["device"], p["port"]) for p in disabled] == [("leaf-g0-r0", "Ethernet1/1")]
        assert not admin_enabled(twin, "leaf-g0-r0", "Ethernet1/1")
        assert svc.on_loop(lambda s: s.view.oper("leaf-g0-r0", "Ethernet1/1")) == "DOWN"  # what gNMI streamed
        (t,) = svc.get("/api/v1/tickets")["tickets"]
        assert t["kind"] == "link_flap" and t["status"] == "open"
        body = svc.get(f"/api/v1/tickets/{t['id']}")["body"]
        assert body["evidence"]["this_end"]["port"] in (SERVER_PORT, "gpu-g0-000:nic0")
        assert "if.carrier-transitions" in str(body["evidence"])
        assert any(a["op"] == "disable" and a["status"] == "done" for a in body["actions"])
        assert t["created_ts"] - finding["detected_ts"] < 5 * 1e9
        assert action["status"] == "done" and action["mode"] == "auto"
        metrics = httpx_text(svc.url + "/metrics")
        assert "fabricd_disabled_ports 1.0" in metrics
        assert 'fabricd_open_tickets{kind="link_flap"} 1.0' in metrics
        # what alert rules read: the finding with its switch, the guard budgets, the port as the switch reports it
        assert re.search(
            r'fabricd_active_findings\{device="leaf-g0-r0",kind="link_flap",severity="\w+"\} 1\.0', metrics
        )
        assert 'fabricd_remediation_budget_used{limit="fabric_budget"} 1.0' in metrics
        assert 'fabricd_remediation_budget_limit{limit="fabric_budget"} 8.0' in metrics
        port = 'device="leaf-g0-r0",group="0",port="Ethernet1/1",rail="0",role="leaf"'
        assert f"fabricd_port_up{{{port}}} 0.0" in metrics
        flaps = re.search(rf"fabricd_port_carrier_transitions_total\{{{port}\}} (\S+)", metrics)
        # at least the flaps that crossed the suppress threshold (fabricd may take the port down mid-burst)
        assert flaps is not None and float(flaps.group(1)) >= 4

        # The repair is done: resolving re-enables the port, on probation.
        assert svc.post(f"/api/v1/tickets/{t['id']}/resolve", token="wrong").status_code == 401
        r = svc.post(f"/api/v1/tickets/{t['id']}/resolve")
        assert r.status_code == 200 and r.json()["status"] == "resolved"
        wait_for(lambda: not svc.get("/api/v1/ports/disabled")["ports"], 10)
        assert admin_enabled(twin, "leaf-g0-r0", "Ethernet1/1")
    finally:
        svc.stop()


def test_a_flap_is_acted_on_between_ticks(twin: TwinThread, tmp_path: Path) -> None:
    """With a 60 s detector tick only the event-driven link_flap pass can take the port down this soon."""
    svc = ServiceThread(write_config(tmp_path, twin.inventory, detectors={"tick_s": 60})).start()
    try:
        inject(twin.state_dir, "link_flap", {"port": "leaf-g1-r1:Ethernet2/1", "count": 8, "period_s": 0.3})
        disabled = wait_for(lambda: svc.get("/api/v1/ports/disabled")["ports"], 15)
        assert [(p["device"], p["port"]) for p in disabled] == [("leaf-g1-r1", "Ethernet2/1")]
        (finding,) = svc.get("/api/v1/findings")["findings"]
        (action,) = svc.get("/api/v1/actions")["actions"]
        crossed = finding["evidence"]["suppressed_ts"]
        assert 0 < crossed <= finding["detected_ts"] < crossed + 5 * 1e9
        assert action["status"] == "done" and action["updated_ts"] - crossed < 10 * 1e9
        assert not admin_enabled(twin, "leaf-g1-r1", "Ethernet2/1")
    finally:
        svc.stop()


def test_a_pfc_storm_is_found_between_ticks(twin: TwinThread, tmp_path: Path) -> None:
    """With a 60 s detector tick, only the pass that runs when samples arrive can find the storm this soon: the
    first whole paused 0.5-s interval after the onset, plus the pass right after that sample."""

    def lossless() -> None:  # what `fabricd apply` of the default policy leaves on every switch port
        t = twin.process.twin
        for name, sw in t.switches.items():
            for port in sw.ports:
                t.set_port_config(name, port, PortConfig(pfc_enabled=True, no_drop=frozenset({3})))

    done = threading.Event()

    def configure() -> None:
        lossless()
        done.set()

    twin.loop.call_soon_threadsafe(configure)
    assert done.wait(5)
    svc = ServiceThread(write_config(tmp_path, twin.inventory, detectors={"tick_s": 60})).start()
    try:
        onset = time.time_ns()
        inject(twin.state_dir, "pfc_storm", {"nic": "gpu-g1-000:nic1"})
        (f,) = wait_for(lambda: [f for f in svc.get("/api/v1/findings")["findings"] if f["kind"] == "pfc_storm"], 10)
        assert (f["device"], f["port"]) == ("leaf-g1-r1", "Ethernet1/1")
        # Two 0.5-s intervals and a pass (~1.1 s on a quiet machine); the 60 s tick is far off. Slack for a loaded CI.
        assert f["detected_ts"] - onset < 5 * 1e9
    finally:
        svc.stop()
        twin.loop.call_soon_threadsafe(lambda: twin.process.faults.clear(None, time.time_ns()))


def test_telemetry_follows_the_policy_and_the_group_intervals(twin: TwinThread, tmp_path: Path) -> None:
    """PFC counters stream for the policy's lossless priority only; optics come at their own, slower interval."""
    policy = tmp_path / "policy.yaml"
    policy.write_text("lossless_priorities: [4]\n")
    cfg = write_config(
        tmp_path, twin.inventory, policy=str(policy), telemetry={"interval_s": 0.5, "intervals": {"optics": 2}}
    )
    svc = ServiceThread(cfg).start()
    try:
        time.sleep(2.5)

        def read(s: Service) -> tuple[set[str | None], int, int]:
            snap = s.ingestor.snapshot()
            pfc = {snap.key(i)[3] for i in snap.select(leaf="pfc.in-frames").tolist()}
            optics = snap.find("leaf-g0-r0", "Ethernet1/1", "optics.input-power", "0")
            counter = snap.find("leaf-g0-r0", "Ethernet1/1", "if.in-pkts")
            assert optics is not None and counter is not None
            return pfc, int(snap.ts[optics] - snap.prev_ts[optics]), int(snap.ts[counter] - snap.prev_ts[counter])

        seen: tuple[set[str | None], int, int] = svc.on_loop(read)
        pfc, optics_gap, counter_gap = seen
        assert pfc == {"4"}  # the policy's lossless priority, not the default 3
        assert 1.5e9 < optics_gap < 2.5e9  # optics at their own 2 s
        assert 0.3e9 < counter_gap < 0.8e9  # counters at the base 0.5 s
    finally:
        svc.stop()


def test_observe_mode_files_a_ticket_and_touches_nothing(twin: TwinThread, tmp_path: Path) -> None:
    svc = ServiceThread(write_config(tmp_path, twin.inventory, remediation={"mode": "observe"})).start()
    try:
        inject(twin.state_dir, "link_flap", {"port": "leaf-g0-r1:Ethernet2/1", "count": 8, "period_s": 0.3})
        (action,) = wait_for(lambda: svc.get("/api/v1/actions")["actions"], 10)
        assert (action["status"], action["device"], action["port"]) == ("observed", "leaf-g0-r1", "Ethernet2/1")
        (t,) = svc.get("/api/v1/tickets")["tickets"]
        assert "observe mode" in t["body"]["status_note"] and "nothing was changed" in t["body"]["status_note"]
        time.sleep(1.0)
        assert svc.get("/api/v1/ports/disabled")["ports"] == []
        assert admin_enabled(twin, "leaf-g0-r1", "Ethernet2/1")
        audit = svc.get("/api/v1/audit")["audit"]
        assert any(row["what"] == "would disable leaf-g0-r1:Ethernet2/1" and row["mode"] == "observe" for row in audit)
    finally:
        svc.stop()


def test_guard_refuses_below_capacity_and_the_ticket_says_why(twin: TwinThread, tmp_path: Path) -> None:
    # leaf-g1-r0 has 4 uplinks; losing one leaves 75%, below the 80% this site asks for.
    cfg = write_config(tmp_path, twin.inventory, safety={"min_uplink_fraction": 0.8})
    svc = ServiceThread(cfg).start()
    try:
        inject(twin.state_dir, "link_flap", {"port": "leaf-g1-r0:Ethernet5/1", "count": 8, "period_s": 0.3})
        (t,) = wait_for(lambda: svc.get("/api/v1/tickets")["tickets"], 10)
        note = t["body"]["status_note"]
        assert "safety guard refused" in note and "leaf-g1-r0" in note and "75%" in note and "80%" in note
        (action,) = svc.get("/api/v1/actions")["actions"]
        assert action["status"] == "refused"
        assert svc.get("/api/v1/ports/disabled")["ports"] == []
        assert admin_enabled(twin, "leaf-g1-r0", "Ethernet5/1")
    finally:
        svc.stop()


def httpx_text(url: str) -> str:
    import httpx

    return httpx.get(url, timeout=10).text


def test_approve_mode_waits_for_fabricd_approve(
    twin: TwinThread, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    from fabricd.cli import main

    svc = ServiceThread(write_config(tmp_path, twin.inventory, remediation={"mode": "approve"})).start()
    try:
        inject(twin.state_dir, "link_flap", {"port": "leaf-g1-r1:Ethernet4/1", "count": 8, "period_s": 0.3})
        (action,) = wait_for(lambda: svc.get("/api/v1/actions")["actions"], 10)
        assert action["status"] == "awaiting_approval"
        assert admin_enabled(twin, "leaf-g1-r1", "Ethernet4/1")  # nothing happens without a person
        cli = ["--api", svc.url]
        monkeypatch.delenv("FABRICD_API_TOKEN", raising=False)
        assert main(["approve", str(action["id"]), *cli]) == 2  # mutating calls need the token
        assert "HTTP 401" in capsys.readouterr().err
        monkeypatch.setenv("FABRICD_API_TOKEN", TOKEN)
        assert main(["approve", str(action["id"]), *cli]) == 0
        assert f"action {action['id']}: running" in capsys.readouterr().out
        wait_for(lambda: svc.get("/api/v1/ports/disabled")["ports"], 10)
        assert not admin_enabled(twin, "leaf-g1-r1", "Ethernet4/1")
        assert main(["approve", str(action["id"]), *cli]) == 2  # already done: refused with the reason
        assert "not awaiting approval" in capsys.readouterr().err
        assert main(["approve", "999", *cli]) == 2
        assert "HTTP 404" in capsys.readouterr().err
        assert main(["tickets", *cli, "--format", "json"]) == 1  # an open ticket
        (t,) = json.loads(capsys.readouterr().out)["tickets"]
        assert t["device"] in ("leaf-g1-r1", "gpu-g1-003") and t["kind"] == "link_flap"
        assert main(["resolve", str(t["id"]), *cli]) == 0
        wait_for(lambda: not svc.get("/api/v1/ports/disabled")["ports"], 10)
        assert admin_enabled(twin, "leaf-g1-r1", "Ethernet4/1")
    finally:
        svc.stop()
