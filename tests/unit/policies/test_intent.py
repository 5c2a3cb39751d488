"""Intent over whole fabrics: DCI with deep and shallow DR buffers, platform support, overrides, policy errors."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from fabricd.cli import main
from policies.intent import derive_intent
from policies.policy import Policy, PolicyError, load_policy
from tests.conftest import EXAMPLES
from topology.blueprint import generate_blueprint
from topology.fabric import Fabric
from topology.spec import FabricSpec


def dci_intent(spec: FabricSpec, policy: Policy | None = None) -> dict[str, dict[str, Any]]:
    intent = derive_intent(Fabric(generate_blueprint(spec)), spec, policy or Policy(), {"dr-campus-b-0"})
    [dev] = intent.devices
    return {p.port: p.model_dump(mode="json") for p in dev.ports}


def long_haul(ports: dict[str, dict[str, Any]]) -> list[dict[str, Any]]:
    return [p for p in ports.values() if p["link_class"] == "dci"]


def test_deep_buffer_dr_keeps_pfc_and_generates_cnp(dci_spec: FabricSpec) -> None:
    lh = long_haul(dci_intent(dci_spec))
    assert len(lh) == 4
    for p in lh:
        assert p["pfc"] == {"enabled": True, "no_drop": [3], "headroom_bytes": pytest.approx(60.7e6, rel=0.01)}
        assert p["cnp"] == {"source": "dr"}
        assert p["watchdog"]["enabled"] is True
        assert "PFC on" in p["reasons"]["pfc.enabled"]


def test_shallow_buffer_dr_runs_lossy_with_dr_cnp(dci_spec: FabricSpec) -> None:
    shallow = dci_spec.model_copy(update={"dci": [dci_spec.dci[0].model_copy(update={"dr_buffer_mb": 64})]})
    ports = dci_intent(shallow)
    for p in long_haul(ports):
        assert p["pfc"] == {"enabled": False, "no_drop": [], "headroom_bytes": 0}
        assert p["cnp"] == {"source": "dr"}
        assert p["watchdog"]["enabled"] is False
        assert p["ecn"]["enabled"] is True
        assert "PFC off (lossy, CNP from the DR)" in p["reasons"]["pfc.enabled"]
    campus = [p for p in ports.values() if p["link_class"] == "fabric"]
    assert campus and all(p["pfc"]["enabled"] for p in campus)


def test_dr_platform_without_cnp_support_warns(dci_spec: FabricSpec) -> None:
    sonic_dr = dci_spec.model_copy(update={"platforms": dci_spec.platforms.model_copy(update={"dr": "sonic"})})
    for p in long_haul(dci_intent(sonic_dr)):
        assert p["cnp"] == {"source": "endpoint"}
        assert p["reasons"]["cnp.source"].startswith("WARNING")


def test_every_derived_number_has_a_reason(small_spec: FabricSpec) -> None:
    intent = derive_intent(Fabric(generate_blueprint(small_spec)), small_spec, Policy())
    assert len(intent.devices) == 8 + 8 + 2
    for dev in intent.devices:
        for p in dev.ports:
            assert {"pfc.headroom_bytes", "ecn", "cnp.source", "dlb"} <= set(p.reasons)
            assert p.cnp.source == "endpoint"
    leaf = intent.device("leaf-g0-r0")
    assert leaf is not None
    uplinks = [p for p in leaf.ports if p.peer.startswith("spine")]
    assert len(uplinks) == 4 and all(p.dlb.mode == "flowlet" and p.dlb.inactivity_us == 256 for p in uplinks)
    assert all(p.dlb.mode == "off" for p in leaf.ports if p.link_class == "server")


def test_overrides_apply_by_specificity(tmp_path: Path, small_spec: FabricSpec) -> None:
    pol = tmp_path / "policy.yaml"
    pol.write_text(
        "overrides:\n"
        "  - match: {device: leaf-g0-r0}\n"
        "    set: {ecn: {min_us: 40}}\n"
        "  - match: {role: leaf, link_class: server}\n"
        "    set: {ecn: {min_us: 20, max_probability: 20}}\n"
    )
    intent = derive_intent(Fabric(generate_blueprint(small_spec)), small_spec, load_policy(pol))
    by = {(d.device, p.port): p for d in intent.devices for p in d.ports}
    assert by[("leaf-g0-r0", "Ethernet1/1")].ecn.min_bytes == 40 * 50_000  # device beats role; 400G = 50 KB/us
    assert by[("leaf-g0-r0", "Ethernet1/1")].ecn.max_probability == 20  # role/class still applies
    assert by[("leaf-g1-r0", "Ethernet1/1")].ecn.min_bytes == 20 * 50_000
    assert by[("spine-r0-0", "Ethernet1/1")].ecn.min_bytes == 12 * 50_000  # defaults elsewhere


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("settings: {ecn: {min_us: 200}}\n", "min_us must be below max_us"),
        ("cnp_priority: 3\n", "cnp_priority must not be a lossless priority"),
        ("settings:\n  pfc: {mtu: 9000}\n", "policy.yaml:2: field 'settings.pfc.mtu': unknown key"),
        ("overrides:\n  - match: {role: leaf}\n    set: {ecm: {min_us: 3}}\n", "unknown section(s) ['ecm']"),
    ],
)
def test_bad_policy(tmp_path: Path, text: str, expected: str) -> None:
    pol = tmp_path / "policy.yaml"
    pol.write_text(text)
    with pytest.raises(PolicyError) as exc:
        load_policy(pol)
    assert expected in str(exc.value) and "policy.yaml" in str(exc.value)


def test_intent_cli_json_and_errors(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    spec = str(EXAMPLES / "dci-120km.yaml")
    assert main(["intent", "--spec", spec, "--device", "dr-campus-b-1", "--format", "json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert [d["device"] for d in data["devices"]] == ["dr-campus-b-1"]
    port = data["devices"][0]["ports"][-1]
    assert set(port) >= {"port", "peer", "link_class", "length_m", "speed_gbps", "pfc", "ecn", "cnp", "watchdog", "dlb"}
    assert port["reasons"]["pfc.headroom_bytes"].startswith("headroom 60.7 MB = 2 x 120 km x 400 Gb/s / c")
    assert main(["intent", "--spec", spec, "--device", "gpu-g0-000"]) == 2
    assert "not a switch of this fabric" in capsys.readouterr().err
    bad = tmp_path / "p.yaml"
    bad.write_text("lossless_priorities: [9]\n")
    assert main(["intent", "--spec", spec, "--policy", str(bad)]) == 2
    assert "lossless priority 9 is not 0-7" in capsys.readouterr().err
