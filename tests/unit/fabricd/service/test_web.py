"""The fabric page without a browser: the grid model as a table of cases, login into an HttpOnly SameSite=Strict
session, CSRF on forms, roles, the live fragments, the switch page; the browser tests are in tests/twin/web."""

from __future__ import annotations

import dataclasses
import json
import re
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from fabricd.service.config import load_config
from fabricd.service.daemon import Service
from fabricd.service.state.tuning import NewTune
from fabricd.service.surface.api import create_app
from fabricd.service.surface.fabric_view import build
from tests.conftest import EXAMPLES
from topology.load import load_fabric
from topology.model import Endpoint

from .test_access import SERVICE_TOKEN, make, write

FABRIC = load_fabric(EXAMPLES / "small-pod.yaml", None)[1]


def finding(device: str, severity: str = "warning", kind: str = "link_flap") -> dict[str, object]:
    return {"kind": kind, "device": device, "devices": [device], "severity": severity, "summary": "s"}


@pytest.mark.parametrize(
    ("findings", "held", "down", "stale", "expect"),
    [
        ([], [], [], [], {"leaf-g0-r0": "ok", "spine-r0-0": "ok"}),
        ([finding("leaf-g0-r0")], [], [], [], {"leaf-g0-r0": "warning", "leaf-g0-r1": "ok"}),
        ([finding("leaf-g1-r2", "critical", "pfc_storm")], [], [], [], {"leaf-g1-r2": "critical"}),
        ([], [Endpoint("leaf-g0-r0", "Ethernet1/1")], [], [], {"leaf-g0-r0": "warning"}),
        # a fabric link down degrades both ends' switch; a server-facing port down does not
        ([], [], [Endpoint("leaf-g0-r0", "Ethernet5/1")], [], {"leaf-g0-r0": "degraded"}),
        ([], [], [Endpoint("leaf-g0-r0", "Ethernet1/1")], [], {"leaf-g0-r0": "ok"}),
        ([], [], [], ["spine-r1-0"], {"spine-r1-0": "stale"}),
        ([finding("spine-r1-0", "critical")], [], [], ["spine-r1-0"], {"spine-r1-0": "critical"}),  # worst wins
    ],
    ids=["healthy", "finding", "critical", "held", "fabric-link-down", "server-port-down", "stale", "worst-wins"],
)
def test_switch_health(
    findings: list[dict[str, object]], held: list[Endpoint], down: list[Endpoint], stale: list[str],
    expect: dict[str, str],
) -> None:  # fmt: skip
    v = build(FABRIC, findings, held, down, stale)
    assert {name: v.switches[name].health for name in expect} == expect
    assert v.rails == [0, 1, 2, 3] and v.groups == [0, 1]
    assert v.cells[(2, 1)].name == "leaf-g1-r2" and [s.name for s in v.spines[0]] == ["spine-r0-0", "spine-r0-1"]
    assert {s.role for s in v.top} == {"superspine"}


def login(c: TestClient, token: str) -> str:
    r = c.post("/login", data={"token": token}, follow_redirects=False)
    assert r.status_code == 303
    cookie = r.headers["set-cookie"]
    assert "HttpOnly" in cookie and "SameSite=strict" in cookie and "Path=/" in cookie
    page = c.get("/").text
    m = re.search(r'name="csrf" value="([^"]+)"', page)
    assert m is not None
    return m.group(1)


def test_login_page_session_and_grid(svc: Service) -> None:
    c = TestClient(create_app(svc))
    assert "API token" in c.get("/").text  # not logged in: the login form, nothing of the fabric
    assert "leaf-g0-r0" not in c.get("/").text
    r = c.post("/login", data={"token": "fabricd_wrong"})
    assert r.status_code == 401 and "unknown or revoked token" in r.text
    login(c, make(c, "vera", "viewer"))
    page = c.get("/").text
    assert 'data-device="leaf-g1-r3"' in page and "user:vera (viewer)" in page and "Nothing waits for approval" in page
    live = c.get("/ui/live").json()
    assert set(live) == {"grid", "approvals", "maintenance", "tuning", "findings", "actions", "tickets", "audit"}
    assert "No tuning change (the tuning loop is off: tuning.enabled)." in live["tuning"]
    assert "No planned maintenance." in live["maintenance"]
    assert "logged in to the page" in live["audit"] and "user:vera" in live["audit"]
    sw = c.get("/ui/switch/spine-r0-0").text
    assert "<h1>spine-r0-0" in sw and "Ethernet1/1" in sw and "superspine" not in sw.split("<h2>Ports")[0]
    assert c.get("/ui/switch/nosuch").status_code == 404
    assert TestClient(create_app(svc)).get("/ui/live").status_code == 401  # another browser, no session


def test_forms_need_the_session_csrf_and_the_role(svc: Service) -> None:
    c = TestClient(create_app(svc))
    csrf = login(c, make(c, "vera", "viewer"))
    r = c.post("/ui/actions/1/approve", data={"csrf": csrf})
    assert r.status_code == 403 and "user:vera is viewer; this needs operator" in r.text
    o = TestClient(create_app(svc))
    ocsrf = login(o, make(o, "otto", "operator"))
    assert o.post("/ui/actions/1/approve", data={"csrf": "forged"}).status_code == 403
    r = o.post("/ui/actions/1/approve", data={"csrf": ocsrf})
    assert r.status_code == 200 and "no action 1" in r.text  # through the checks to the remediator
    assert o.post("/logout", data={"csrf": ocsrf}, follow_redirects=False).status_code == 303
    assert o.get("/ui/live").status_code == 401


def test_a_filter_narrows_the_findings(svc: Service) -> None:
    from fabricd.detectors.finding import Finding

    for dev, kind in (("leaf-g0-r0", "link_flap"), ("leaf-g1-r1", "pfc_storm")):
        where = (f"{dev}:Ethernet1/1",)
        f = Finding(kind=kind, device=dev, port="Ethernet1/1", devices=(dev,), ports=where, start_ts=1,
                    detected_ts=1, severity="warning", confidence=1.0, summary=f"{kind} on {dev}")  # fmt: skip
        svc.state.findings.record(f, f"{kind}:{dev}", 1)
    c = TestClient(create_app(svc))
    login(c, SERVICE_TOKEN)
    both = c.get("/ui/live").json()["findings"]
    assert "link_flap on leaf-g0-r0" in both and "pfc_storm on leaf-g1-r1" in both
    one = c.get("/ui/live", params={"kind": "pfc_storm"}).json()["findings"]
    assert "pfc_storm on leaf-g1-r1" in one and "leaf-g0-r0" not in one
    grid = c.get("/ui/live").json()["grid"]
    assert 'data-device="leaf-g1-r1" data-health="warning"' in grid


def test_admins_switch_the_mode_from_the_page(svc: Service) -> None:
    v = TestClient(create_app(svc))
    vcsrf = login(v, make(v, "vera", "viewer"))
    assert "set mode" not in v.get("/").text and "remediation: <strong" in v.get("/").text
    r = v.post("/ui/mode", data={"csrf": vcsrf, "mode": "auto", "reason": "x"})
    assert r.status_code == 403 and "needs admin" in r.text
    a = TestClient(create_app(svc))
    csrf = login(a, make(a, "ada", "admin"))
    assert "set mode" in a.get("/").text
    assert a.post("/ui/mode", data={"csrf": csrf, "mode": "auto", "reason": ""}).status_code == 400
    r = a.post("/ui/mode", data={"csrf": csrf, "mode": "approve", "reason": "night shift"}, follow_redirects=False)
    assert r.status_code == 303 and svc.remediation.requests.mode == "approve"
    assert any(x["actor"] == "user:ada" and x["why"] == "night shift" for x in svc.state.audit.entries())


@pytest.mark.parametrize(
    ("client", "user", "role"),
    [
        ("10.0.0.5", "alice@example.com", "admin"),  # the proxy, a user with a role
        ("10.1.0.77", "bob", "viewer"),  # a proxy in the network, a user without: the default role
        ("10.9.9.9", "alice@example.com", None),  # not the proxy: the header is ignored
        ("10.0.0.5", "x y", None),  # not a user name
        ("10.0.0.5", None, None),  # no header
    ],
)
def test_trusted_proxy(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, client: str, user: str | None,
                       role: str | None) -> None:  # fmt: skip
    monkeypatch.setenv("FABRICD_TEST_PW", "pw")
    extra = (
        "  trusted_proxy:\n    addresses: [10.0.0.5, 10.1.0.0/24]\n    user_header: X-Remote-User\n"
        "    roles: {alice@example.com: admin}\n"
    )
    svc = Service(load_config(write(tmp_path, extra), {}))
    try:
        c = TestClient(create_app(svc), client=(client, 40000))
        headers = {"X-Remote-User": user} if user else {}
        r = c.get("/api/v1/findings", headers=headers)
        assert r.status_code == (200 if role else 401)
        page = c.get("/", headers=headers)
        if role is None:
            assert "API token" in page.text
            return
        assert f"user:{user} ({role})" in page.text and "HttpOnly" in page.headers["set-cookie"]
        # the session the page started carries the CSRF token its forms need; admin may switch the mode
        m = re.search(r'name="csrf" value="([^"]+)"', page.text)
        assert m is not None
        r = c.post("/ui/mode", data={"csrf": m.group(1), "mode": "observe", "reason": "sso"}, follow_redirects=False)
        assert r.status_code == (303 if role == "admin" else 403)
    finally:
        svc.state.close()


def test_trusted_proxy_addresses_are_checked(tmp_path: Path) -> None:
    from fabricd.service.config import ConfigError

    with pytest.raises(ConfigError) as e:
        load_config(write(tmp_path, "  trusted_proxy: {addresses: [proxy.example.com]}\n"), {})
    assert "api.trusted_proxy.addresses" in str(e.value) and "not an IP address or network" in str(e.value)


def test_the_grid_of_a_16k_gpu_fabric_is_one_row_per_rail() -> None:
    big = load_fabric(EXAMPLES / "pod-16k.yaml", None)[1]
    v = build(big, [finding("leaf-g40-r7", "critical")], [], [], [])
    assert len(v.rails) == 8 and len(v.groups) == 64 and len(v.cells) == 512
    assert v.cells[(7, 40)].health == "critical" and v.counts()["critical"] == 1
    assert all(len(v.spines[r]) == len(v.spines[0]) for r in v.rails)


def test_live_revalidates_with_an_etag(svc: Service) -> None:
    c = TestClient(create_app(svc))
    login(c, SERVICE_TOKEN)
    first = c.get("/ui/live")
    tag = first.headers["etag"]
    assert first.status_code == 200 and first.headers["cache-control"] == "no-cache, private"
    same = c.get("/ui/live", headers={"If-None-Match": tag})
    assert same.status_code == 304 and same.content == b"" and same.headers["etag"] == tag
    svc.state.audit.record(1, "something happened", "test", actor="t")  # the audit section changes
    changed = c.get("/ui/live", headers={"If-None-Match": tag})
    assert changed.status_code == 200 and changed.headers["etag"] != tag and "something happened" in changed.text


def test_a_page_session_outlives_a_restart_and_dies_with_its_token(svc: Service, tmp_path: Path) -> None:
    c = TestClient(create_app(svc))
    token = make(c, "vera", "viewer")
    login(c, token)
    assert c.get("/ui/live").status_code == 200
    # the session is in the state: another service on the same state (a restart, a standby) knows it
    again = TestClient(create_app(svc))
    again.cookies.update(c.cookies)
    assert again.get("/ui/live").status_code == 200
    raw = svc.state.database.all("SELECT sid_hash FROM page_sessions")
    assert len(raw) == 1 and c.cookies.get("fabricd_session") not in str(raw[0][0])  # kept hashed
    # revoking the token ends its sessions at once
    (row,) = [t for t in svc.state.access.tokens() if t.user == "vera"]
    assert svc.state.access.revoke_token(row.id, 1, "test")
    assert c.get("/ui/live").status_code == 401
    assert "API token" in c.get("/").text


def test_switch_page_shows_what_lldp_hears_and_each_sessions_state(svc: Service, tmp_path: Path) -> None:
    """A port facing the wrong neighbour is marked; a BGP session that is not up is marked; /metrics counts both
    session states (fabricd_bgp_sessions) and each session on its port."""
    from fabricd.telemetry import render, replay
    from topology.underlay import Underlay

    s = Underlay(FABRIC).sessions("leaf-g0-r0")[0]
    ts = 1_700_000_000 * 10**9
    lines = [
        (s.local.port, "ipv4.ip", None, s.local_address),
        (s.local.port, "ipv4.prefix-length", None, 31),
        (s.peer_address, "bgp.session-state", None, "ACTIVE"),
        ("Ethernet1/1", "lldp.system-name", "1", "gpu-g0-000"),
        ("Ethernet1/1", "lldp.port-id", "1", "nic1"),  # the blueprint has nic0 there
        ("Ethernet2/1", "lldp.system-name", "1", "gpu-g0-001"),
        ("Ethernet2/1", "lldp.port-id", "1", "nic0"),
    ]
    trace = tmp_path / "t.jsonl"
    trace.write_text("".join(
        json.dumps({"ts": ts, "device": "leaf-g0-r0", "path": render(p, leaf, ix), "value": v}) + "\n"
        for p, leaf, ix, v in lines
    ))  # fmt: skip
    replay(trace, svc.ingestor)
    c = TestClient(create_app(svc))
    login(c, make(c, "vera", "viewer"))
    page = c.get("/ui/switch/leaf-g0-r0").text
    assert '<td class="wrong" title="not the blueprint\'s neighbour">gpu-g0-000:nic1</td>' in page
    assert "<td>gpu-g0-001:nic0</td>" in page
    assert '<td class="wrong">ACTIVE</td>' in page
    metrics = c.get("/metrics").text
    assert 'fabricd_bgp_sessions{device="leaf-g0-r0",state="ACTIVE"} 1.0' in metrics
    assert (
        f'fabricd_bgp_session_established{{device="leaf-g0-r0",group="0",peer_address="{s.peer_address}",'
        f'port="{s.local.port}",rail="0",role="leaf"}} 0.0'
    ) in metrics


def test_switch_page_shows_the_lossless_queue_as_the_congestion_model_drives_it(svc: Service, tmp_path: Path) -> None:
    """Issue 50: per port, the share of time it paused its peer (PFC sent), its ECN marks per second and the lossless
    queue's high-water mark, from the counters switches stream (two samples a second apart)."""
    from fabricd.telemetry import render, replay

    ts = 1_700_000_000 * 10**9
    lines = []
    for k, (sent, marks) in enumerate([(0, 0), (400_000_000, 2500)]):
        lines += [
            (ts + k * 10**9, "pfc.pfc-on-total-tx-time", "3", sent),
            (ts + k * 10**9, "queue.ecn-marked-pkts", "3", marks),
            (ts + k * 10**9, "queue.max-queue-len", "3", 131072),
            (ts + k * 10**9, "queue.max-queue-len", "0", 9_999_999),  # a lossy queue: not the one shown
        ]
    trace = tmp_path / "t.jsonl"
    trace.write_text("".join(
        json.dumps({"ts": t, "device": "leaf-g0-r0", "path": render("Ethernet1/1", leaf, ix), "value": v}) + "\n"
        for t, leaf, ix, v in lines
    ))  # fmt: skip
    replay(trace, svc.ingestor)
    c = TestClient(create_app(svc))
    login(c, make(c, "vera", "viewer"))
    page = c.get("/ui/switch/leaf-g0-r0").text
    row = next(r for r in page.split("<tr") if "<td>Ethernet1/1</td>" in r)
    assert "<td>40.0%</td><td>2500.0</td><td>128.0</td>" in row, row


def test_a_tuning_change_on_the_page_and_in_the_history(svc: Service) -> None:
    # what the tuning loop writes in approve mode (service/tuning/job.py), and one confirmed with its KPIs
    a = svc.state.actions.add("tune", "leaf-g0-r0", "tuning leaf-g0-r0:Ethernet1/1", "approve", "awaiting_approval",
                              "Kmin down", 1)  # fmt: skip
    changes: list[dict[str, int | str]] = [{"knob": "ecn.min_bytes", "before": 600000, "after": 300000, "low": 1,
                                            "high": 10**7}]  # fmt: skip
    new = NewTune("k1", "leaf-g0-r0:Ethernet1/1", "leaf-g0-r0", "server", "pfc_before_ecn", "pause_us_per_s",
                  changes, "pauses, no marks", "approve", "awaiting_approval", "waiting",
                  {"pause_us_per_s": 5000.0})  # fmt: skip
    svc.state.tuning.add(new, 1, action_id=a.id)
    done = svc.state.tuning.add(dataclasses.replace(new, key="k2", status="applying"), 2)
    svc.state.tuning.update(done.id, "confirmed", "target down", ended_ts=3, kpis_after={"pause_us_per_s": 12.5})
    c = TestClient(create_app(svc))
    csrf = login(c, make(c, "otto", "operator"))
    page = c.get("/").text
    tuning = page.split('aria-label="tuning"')[1].split("</section>")[0]
    assert "ecn.min_bytes 600000 -&gt; 300000" in tuning and "confirmed" in tuning and "awaiting_approval" in tuning
    assert "pause_us_per_s=5000" in tuning and "pause_us_per_s=12.5" in tuning  # before and after
    approval = page.split(f'id="action-{a.id}"')[1].split("</article>")[0]
    assert "ecn.min_bytes 600000" in approval and "ecn.min_bytes 300000" in approval  # the knobs as its diff
    # approving it with the loop off: refused with the reason, nothing changes
    r = c.post(f"/ui/actions/{a.id}/approve", data={"csrf": csrf})
    assert "its loop is off (tuning.enabled)" in r.text
    assert svc.state.actions.get(a.id).status == "awaiting_approval"  # type: ignore[union-attr]
    bearer = {"Authorization": f"Bearer {SERVICE_TOKEN}"}
    got = c.get("/api/v1/tuning/history", params={"changes": "true"}, headers=bearer)
    assert [x["status"] for x in got.json()["changes"]] == ["confirmed", "awaiting_approval"]
