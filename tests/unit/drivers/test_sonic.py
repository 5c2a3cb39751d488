"""SONiC config_db rendering against golden files (FABRICD_REGEN_GOLDEN=1 rewrites them) and the JSON patch."""

from __future__ import annotations

import json
import os
from typing import Any

import pytest

from drivers.sonic.patch import (
    apply_patch,
    json_patch,
    owned_tables,
    owned_view,
    patch_commands,
    patch_from_commands,
)
from drivers.sonic.render import SonicRenderError, render_config_db, sonic_port_name
from policies.intent import DeviceIntent, derive_intent
from policies.policy import Policy
from tests.conftest import DATA, EXAMPLES
from topology.blueprint import generate_blueprint
from topology.fabric import Fabric
from topology.spec import FabricSpec, Platforms, load_spec

GOLDEN = DATA / "golden" / "sonic"
SONIC = Platforms(leaf="sonic", spine="sonic", superspine="sonic", dr="sonic")
CASES = [
    ("small-pod.yaml", "leaf-g0-r0", False, "small-pod_leaf-g0-r0.json"),
    ("small-pod.yaml", "spine-r1-0", False, "small-pod_spine-r1-0.json"),
    ("dci-120km.yaml", "dr-campus-b-0", False, "dci-120km_dr-campus-b-0.json"),
    ("dci-120km.yaml", "dr-campus-b-0", True, "dci-120km-shallow_dr-campus-b-0.json"),
]
DCI_PORTS = ["Ethernet64", "Ethernet72", "Ethernet80", "Ethernet88"]  # Ethernet9/1..12/1


def _intent(example: str, device: str, shallow_dr: bool = False) -> DeviceIntent:
    spec: FabricSpec = load_spec(EXAMPLES / example).model_copy(update={"platforms": SONIC})
    if shallow_dr:
        spec = spec.model_copy(update={"dci": [spec.dci[0].model_copy(update={"dr_buffer_mb": 64})]})
    [dev] = derive_intent(Fabric(generate_blueprint(spec)), spec, Policy(), {device}).devices
    assert dev.platform == "sonic"
    return dev


@pytest.mark.parametrize(("example", "device", "shallow_dr", "golden"), CASES)
def test_render_matches_golden(example: str, device: str, shallow_dr: bool, golden: str) -> None:
    text = json.dumps(render_config_db(_intent(example, device, shallow_dr)), indent=2) + "\n"
    path = GOLDEN / golden
    if os.environ.get("FABRICD_REGEN_GOLDEN"):
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    assert text == path.read_text()


def test_render_is_sorted_and_all_strings() -> None:
    db = render_config_db(_intent("small-pod.yaml", "leaf-g0-r0"))
    assert list(db) == sorted(db)
    for entries in db.values():
        assert list(entries) == sorted(entries)
        for entry in entries.values():
            assert list(entry) == sorted(entry)
            assert all(isinstance(v, str) for v in entry.values())


def test_port_names_speed_and_alias() -> None:
    assert [sonic_port_name(f"Ethernet{n}/1") for n in (1, 2, 9, 64)] == [
        "Ethernet0",
        "Ethernet8",
        "Ethernet64",
        "Ethernet504",
    ]
    assert sonic_port_name("Ethernet16") == "Ethernet16"
    with pytest.raises(SonicRenderError):
        sonic_port_name("Ethernet1/2")
    port = render_config_db(_intent("small-pod.yaml", "leaf-g0-r0"))["PORT"]["Ethernet8"]
    assert port == {"admin_status": "up", "alias": "Ethernet2/1", "fec": "rs", "mtu": "9100", "speed": "400000"}


def test_qos_maps() -> None:
    db = render_config_db(_intent("small-pod.yaml", "leaf-g0-r0"))
    dscp = db["DSCP_TO_TC_MAP"]["AZURE"]
    assert len(dscp) == 64 and dscp["26"] == "3" and dscp["48"] == "6" and dscp["0"] == "0" and dscp["46"] == "0"
    assert db["TC_TO_QUEUE_MAP"]["AZURE"] == {str(i): str(i) for i in range(8)}
    assert db["MAP_PFC_PRIORITY_TO_QUEUE"]["AZURE"] == {str(i): str(i) for i in range(8)}
    assert db["TC_TO_PRIORITY_GROUP_MAP"]["AZURE"]["3"] == "3"
    assert db["TC_TO_PRIORITY_GROUP_MAP"]["AZURE"]["6"] == "0"
    assert db["PORT_QOS_MAP"]["Ethernet0"] == {
        "dscp_to_tc_map": "AZURE",
        "pfc_enable": "3",
        "pfc_to_queue_map": "AZURE",
        "pfcwd_sw_enable": "3",
        "tc_to_pg_map": "AZURE",
        "tc_to_queue_map": "AZURE",
    }


def test_shallow_dr_dci_ports_are_lossy() -> None:
    dev = _intent("dci-120km.yaml", "dr-campus-b-0", shallow_dr=True)
    db = render_config_db(dev)
    for port in DCI_PORTS:
        assert "pfc_enable" not in db["PORT_QOS_MAP"][port]
        assert "pfcwd_sw_enable" not in db["PORT_QOS_MAP"][port]
        assert port not in db["PFC_WD"]
        profile = db["BUFFER_PROFILE"][db["BUFFER_PG"][f"{port}|3"]["profile"]]
        assert profile["pool"] == "ingress_lossy_pool"
        assert profile["size"] == "0"
        assert "wred_profile" in db["QUEUE"][f"{port}|3"]  # ECN stays on a lossy port
    assert all(int(p.get("size", 0)) < 1_000_000 for p in db["BUFFER_PROFILE"].values())  # no 61 MB headroom
    assert db["PORT_QOS_MAP"]["Ethernet0"]["pfc_enable"] == "3"  # campus ports stay lossless


def test_deep_dr_dci_ports_carry_long_haul_headroom() -> None:
    dev = _intent("dci-120km.yaml", "dr-campus-b-0")
    db = render_config_db(dev)
    intent = {p.port: p for p in dev.ports}
    for port in DCI_PORTS:
        assert db["PORT_QOS_MAP"][port]["pfc_enable"] == "3"
        profile = db["BUFFER_PROFILE"][db["BUFFER_PG"][f"{port}|3"]["profile"]]
        assert profile["pool"] == "ingress_lossless_pool"
        size, xon, xoff = int(profile["size"]), int(profile["xon"]), int(profile["xoff"])
        assert size == intent[db["PORT"][port]["alias"]].pfc.headroom_bytes
        assert 60e6 < size < 62e6  # ~61 MB for 120 km at 400G (domain.md)
        assert xon == 18432 and xoff == size - xon and profile["dynamic_th"] == "-2"


def test_ecn_thresholds_are_the_intent_bytes() -> None:
    dev = _intent("dci-120km.yaml", "dr-campus-b-0")
    db = render_config_db(dev)
    for p in dev.ports:
        wred = db["WRED_PROFILE"][db["QUEUE"][f"{sonic_port_name(p.port)}|3"]["wred_profile"]]
        assert wred["green_min_threshold"] == str(p.ecn.min_bytes)
        assert wred["green_max_threshold"] == str(p.ecn.max_bytes)
        assert wred["green_drop_probability"] == str(p.ecn.max_probability)
        assert wred["ecn"] == "ecn_all" and wred["wred_green_enable"] == "true"
    assert "FABRICD_LOSSLESS_600K_6000K_P5" in db["WRED_PROFILE"]
    assert len(db["WRED_PROFILE"]) == 2  # campus and long-haul thresholds


def test_ecn_disabled_port_gets_no_queue_binding() -> None:
    dev = _intent("small-pod.yaml", "leaf-g0-r0")
    dev.ports[0].ecn.enabled = False
    db = render_config_db(dev)
    assert "Ethernet0|3" not in db["QUEUE"] and "Ethernet8|3" in db["QUEUE"]


@pytest.mark.parametrize(("example", "device", "shallow_dr", "golden"), CASES)
def test_every_watchdog_port_has_a_pfc_wd_entry(example: str, device: str, shallow_dr: bool, golden: str) -> None:
    dev = _intent(example, device, shallow_dr)
    db = render_config_db(dev)
    for p in dev.ports:
        name = sonic_port_name(p.port)
        assert name in db["PORT_QOS_MAP"]
        assert (name in db["PFC_WD"]) == p.watchdog.enabled
    assert db["PFC_WD"]["GLOBAL"] == {"POLL_INTERVAL": "200"}
    assert db["PFC_WD"]["Ethernet0"] == {"action": "drop", "detection_time": "200", "restoration_time": "200"}


def test_watchdog_timers_are_clamped_to_sonic_ranges() -> None:
    dev = _intent("small-pod.yaml", "leaf-g0-r0")
    for p in dev.ports:
        p.watchdog.timeout_ms, p.watchdog.recovery_ms, p.watchdog.polling_ms = 10, 90000, 5000
        p.watchdog.action = "no-drop"
    db = render_config_db(dev)
    assert db["PFC_WD"]["Ethernet0"] == {"action": "forward", "detection_time": "100", "restoration_time": "60000"}
    assert db["PFC_WD"]["GLOBAL"] == {"POLL_INTERVAL": "1000"}


# --- JSON patch -------------------------------------------------------------------------------------------------


def _leaf() -> dict[str, Any]:
    return render_config_db(_intent("small-pod.yaml", "leaf-g0-r0"))


def _foreign(intended: dict[str, Any]) -> dict[str, Any]:
    """A running config_db: the intended one plus what others own."""
    running: dict[str, Any] = json.loads(json.dumps(intended))
    running["DEVICE_METADATA"] = {"localhost": {"hostname": "leaf-g0-r0", "hwsku": "Mellanox-SN4700"}}
    running["BGP_NEIGHBOR"] = {"10.0.0.1": {"asn": "65100", "name": "spine-r0-0"}}
    running["PORT"]["Ethernet0"].update(description="to gpu-g0-000:nic0", lanes="0,1,2,3,4,5,6,7")
    running["PORT"]["Ethernet504"] = {"admin_status": "down", "lanes": "504,505,506,507,508,509,510,511"}
    running["QUEUE"]["Ethernet0|0-2"] = {"scheduler": "scheduler.0"}
    running["QUEUE"]["Ethernet0|3"]["scheduler"] = "scheduler.1"
    running["BUFFER_PG"]["Ethernet0|0"] = {"profile": "ingress_lossy_profile"}
    running["PFC_WD"]["GLOBAL"]["BIG_RED_SWITCH"] = "enable"
    return running


def _assert_applies(running: dict[str, Any], intended: dict[str, Any]) -> list[dict[str, Any]]:
    patch = json_patch(running, intended)
    after = apply_patch(running, patch)
    ports = intended["PORT"]
    assert owned_view(after, ports) == owned_view(intended, ports)
    assert json_patch(after, intended) == []
    return patch


def test_patch_on_empty_running_adds_every_table() -> None:
    intended = _leaf()
    patch = _assert_applies({}, intended)
    assert patch == [{"op": "add", "path": f"/{t}", "value": intended[t]} for t in sorted(intended)]
    assert {op["path"][1:] for op in patch} <= set(owned_tables())


def test_patch_is_empty_when_running_matches() -> None:
    intended = _leaf()
    assert json_patch(intended, intended) == []
    assert json_patch(_foreign(intended), intended) == []
    assert patch_commands([]) == []


def test_patch_never_touches_foreign_tables_or_fields() -> None:
    intended = _leaf()
    running = _foreign(intended)
    running["PORT"]["Ethernet0"]["mtu"] = "1500"
    running["PORT_QOS_MAP"]["Ethernet8"]["pfc_enable"] = "3,4"
    del running["QUEUE"]["Ethernet0|3"]["wred_profile"]
    del running["BUFFER_PG"]["Ethernet8|3"]
    patch = _assert_applies(running, intended)
    assert patch == [
        {"op": "add", "path": "/BUFFER_PG/Ethernet8|3", "value": {"profile": "FABRICD_PG_LOSSLESS_77868"}},
        {"op": "replace", "path": "/PORT/Ethernet0/mtu", "value": "9100"},
        {"op": "replace", "path": "/PORT_QOS_MAP/Ethernet8/pfc_enable", "value": "3"},
        {"op": "add", "path": "/QUEUE/Ethernet0|3/wred_profile", "value": "FABRICD_LOSSLESS_600K_6000K_P5"},
    ]
    after = apply_patch(running, patch)
    for table in ("DEVICE_METADATA", "BGP_NEIGHBOR"):
        assert after[table] == running[table]
    assert after["PORT"]["Ethernet0"]["description"] == "to gpu-g0-000:nic0"
    assert after["PORT"]["Ethernet504"] == running["PORT"]["Ethernet504"]
    assert after["QUEUE"]["Ethernet0|0-2"] == {"scheduler": "scheduler.0"}
    assert after["BUFFER_PG"]["Ethernet0|0"] == {"profile": "ingress_lossy_profile"}
    assert after["PFC_WD"]["GLOBAL"]["BIG_RED_SWITCH"] == "enable"


def test_patch_removes_what_is_no_longer_intended() -> None:
    """Deep DR running, shallow DR intended: the long-haul ports lose PFC, watchdog and the 61 MB profile."""
    running = _foreign(render_config_db(_intent("dci-120km.yaml", "dr-campus-b-0")))
    intended = render_config_db(_intent("dci-120km.yaml", "dr-campus-b-0", shallow_dr=True))
    patch = _assert_applies(running, intended)
    paths = {op["path"]: op["op"] for op in patch}
    assert paths["/PFC_WD/Ethernet64"] == "remove"
    assert paths["/PORT_QOS_MAP/Ethernet64/pfc_enable"] == "remove"
    assert paths["/BUFFER_PG/Ethernet64|3/profile"] == "replace"
    assert paths["/BUFFER_PROFILE/FABRICD_PG_LOSSLESS_60682413"] == "remove"
    assert paths["/BUFFER_PROFILE/FABRICD_PG_LOSSY"] == "add"
    assert not any(p.startswith(("/DEVICE_METADATA", "/BGP_NEIGHBOR")) for p in paths)


def test_patch_removes_only_owned_fields_of_a_shared_entry_and_leftover_bindings() -> None:
    intended = _leaf()
    running = _foreign(intended)
    running["QUEUE"]["Ethernet504|3"] = {"wred_profile": "FABRICD_LOSSLESS_1K_2K_P5"}  # a port no longer managed
    running["QUEUE"]["Ethernet0|4"] = {"scheduler": "scheduler.1", "wred_profile": "AZURE_LOSSLESS"}
    running["WRED_PROFILE"]["AZURE_LOSSLESS"] = {"ecn": "ecn_all"}  # SONiC's own profile: not ours
    patch = _assert_applies(running, intended)
    assert patch == [
        {"op": "remove", "path": "/QUEUE/Ethernet0|4/wred_profile"},
        {"op": "remove", "path": "/QUEUE/Ethernet504|3"},
    ]


def test_patch_escapes_slash_and_tilde_in_keys() -> None:
    running = {"PORT": {"Ethernet1/1": {"admin_status": "down", "lanes": "0"}}, "WRED_PROFILE": {}}
    intended = {
        "PORT": {"Ethernet1/1": {"admin_status": "up"}},
        "WRED_PROFILE": {"FABRICD_a/b~c": {"ecn": "ecn_all"}},
    }
    patch = _assert_applies(running, intended)
    assert patch == [
        {"op": "replace", "path": "/PORT/Ethernet1~11/admin_status", "value": "up"},
        {"op": "add", "path": "/WRED_PROFILE/FABRICD_a~1b~0c", "value": {"ecn": "ecn_all"}},
    ]
    assert apply_patch(running, patch)["PORT"]["Ethernet1/1"] == {"admin_status": "up", "lanes": "0"}


def test_apply_patch_is_pure_and_rejects_bad_ops() -> None:
    from drivers.sonic.patch import PatchError

    doc = {"PORT": {"Ethernet0": {"mtu": "9100"}}}
    assert apply_patch(doc, [{"op": "remove", "path": "/PORT/Ethernet0"}]) == {"PORT": {}}
    assert doc == {"PORT": {"Ethernet0": {"mtu": "9100"}}}
    for bad in (
        {"op": "remove", "path": "/PORT/Ethernet8"},
        {"op": "replace", "path": "/PORT/Ethernet0/speed", "value": "1"},
        {"op": "add", "path": "/QUEUE/Ethernet0|3", "value": {}},
        {"op": "move", "path": "/PORT/Ethernet0", "from": "/PORT/Ethernet8"},
    ):
        with pytest.raises(PatchError):
            apply_patch(doc, [bad])


def test_patch_commands_write_the_file_with_a_quoted_heredoc_and_apply_it() -> None:
    patch: list[dict[str, Any]] = [
        {"op": "replace", "path": "/PORT/Ethernet0/mtu", "value": "9100"},
        {"op": "add", "path": "/WRED_PROFILE/FABRICD_$HOME'x", "value": {"ecn": "ecn_all"}},
    ]
    write, apply = patch_commands(patch)
    first, *body, end = write.split("\n")
    assert first == "cat > /tmp/fabricd-config-patch.json <<'FABRICD_PATCH_END'" and end == "FABRICD_PATCH_END"
    assert body == [
        "[",
        json.dumps(patch[0], separators=(",", ":")) + ",",
        json.dumps(patch[1], separators=(",", ":")),
        "]",
    ]
    assert apply == "sudo config apply-patch /tmp/fabricd-config-patch.json"
    assert patch_from_commands([write, apply]) == patch  # what a plan shows is what a session pushes


def test_patch_from_commands_refuses_commands_without_a_patch() -> None:
    from drivers.sonic.patch import PatchError

    with pytest.raises(PatchError, match="no config patch"):
        patch_from_commands(["sudo config save -y"])
    with pytest.raises(PatchError, match="not JSON"):
        patch_from_commands(["cat > /tmp/x <<'FABRICD_PATCH_END'\n[{\nFABRICD_PATCH_END"])
    with pytest.raises(PatchError, match="RFC 6902"):
        patch_from_commands(["cat > /tmp/x <<'FABRICD_PATCH_END'\n{}\nFABRICD_PATCH_END"])


def test_patch_removes_a_table_it_would_leave_empty() -> None:
    """The updater refuses a patch whose result has an empty table, so the table goes as a whole."""
    intended = _leaf()
    running = _foreign(intended)
    running["WRED_PROFILE"] = {"FABRICD_LOSSLESS_1K_2K_P5": {"ecn": "ecn_all"}}
    running["QUEUE"] = {"Ethernet504|3": {"wred_profile": "FABRICD_LOSSLESS_1K_2K_P5"}}  # only ours, on no port
    del intended["WRED_PROFILE"], intended["QUEUE"]  # ECN off everywhere
    patch = json_patch(running, intended)
    assert {"op": "remove", "path": "/WRED_PROFILE"} in patch and {"op": "remove", "path": "/QUEUE"} in patch
    assert not any(op["path"].startswith(("/WRED_PROFILE/", "/QUEUE/")) for op in patch)
    after = apply_patch(running, patch)
    assert "WRED_PROFILE" not in after and "QUEUE" not in after
    assert json_patch(after, intended) == []
