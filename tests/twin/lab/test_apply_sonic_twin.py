"""plan/apply/rollback on SONiC end to end: fabricd's SONiC driver over real SSH (netmiko `linux`) against the twin's
SONiC personality, in a fabric of SONiC leaves under EOS spines (examples/small-sonic.yaml)."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from netmiko import ConnectHandler

from drivers.base import ConfigRejectedError, DriverError
from drivers.inventory import load_inventory
from drivers.sonic.patch import patch_commands
from drivers.sonic.session import SonicSession
from fabricd.cli import main
from fabricd.rollout import ApplyOptions, Target, apply_all, plan_all, targets
from lab.control_client import inject
from policies.intent import derive_intent
from policies.policy import load_policy
from tests.conftest import EXAMPLES
from tests.twin.lab.twin_thread import TwinThread
from topology.blueprint import generate_blueprint
from topology.fabric import Fabric
from topology.spec import FabricSpec, load_spec

SPEC = EXAMPLES / "small-sonic.yaml"


@pytest.fixture(scope="module")
def spec() -> FabricSpec:
    return load_spec(SPEC)


@pytest.fixture(scope="module")
def twin(spec: FabricSpec, tmp_path_factory: pytest.TempPathFactory) -> Iterator[TwinThread]:
    t = TwinThread(spec, tmp_path_factory.mktemp("sonic-twin")).start()
    yield t
    t.stop()


def make_targets(spec: FabricSpec, inventory: Path, devices: list[str]) -> list[Target]:
    intent = derive_intent(Fabric(generate_blueprint(spec)), spec, load_policy(None), set(devices))
    by_name = {t.device: t for t in targets(intent.devices, load_inventory(inventory))}
    return [by_name[d] for d in devices]


def session(twin: TwinThread, device: str) -> SonicSession:
    return SonicSession(load_inventory(twin.inventory).access(device), timeout_s=10)


def running(twin: TwinThread, device: str) -> dict[str, Any]:
    s = session(twin, device)
    try:
        doc: dict[str, Any] = json.loads(s.running_config())
        return doc
    finally:
        s.close()


def shell(twin: TwinThread, device: str, command: str) -> str:
    """What an operator sees running `command` on the switch."""
    access = load_inventory(twin.inventory).access(device)
    conn = ConnectHandler(
        device_type="linux",
        host=access.host,
        port=access.ssh.port,
        username=access.username,
        password=access.password.get_secret_value(),
    )
    try:
        return str(conn.send_command(command)).strip()
    finally:
        conn.disconnect()


def test_clean_apply_then_plan_shows_no_changes(twin: TwinThread, spec: FabricSpec) -> None:
    items = make_targets(spec, twin.inventory, ["leaf-g0-r0", "spine-r0-0"])  # SONiC canary, then EOS
    assert all(p.changed and not p.error for p in plan_all(items))
    results = apply_all(items, ApplyOptions(revert_in_s=60))
    assert [r.status for r in results] == ["applied", "applied"], [r.error for r in results]
    assert results[0].steps[-1] == "confirmed"
    assert "Patch applied successfully." in results[0].device_diff  # the switch's own dry run
    assert not any(p.changed or p.error for p in plan_all(items))
    db = running(twin, "leaf-g0-r0")
    assert db["PORT_QOS_MAP"]["Ethernet0"]["pfc_enable"] == "3"
    assert db["QUEUE"]["Ethernet0|3"] == {"scheduler": "scheduler.1", "wred_profile": "FABRICD_LOSSLESS_600K_6000K_P5"}
    assert db["BUFFER_PG"]["Ethernet0|0"] == {"profile": "ingress_lossy_profile"}  # SONiC's own, untouched
    assert twin.process.twin.port_config("leaf-g0-r0", "Ethernet1/1").honours_pause(3)  # the model follows
    assert shell(twin, "leaf-g0-r0", "sudo config list-checkpoints") == "[]"  # nothing left behind
    # Confirmed means saved: a reboot brings the change back from /etc/sonic/config_db.json.
    inject(twin.state_dir, "reboot", {"device": "leaf-g0-r0", "down_s": 0.1})
    assert running(twin, "leaf-g0-r0")["PORT_QOS_MAP"] == db["PORT_QOS_MAP"]


def test_rejected_patch_changes_nothing_and_stops_the_rollout(twin: TwinThread, spec: FabricSpec) -> None:
    items = make_targets(spec, twin.inventory, ["leaf-g1-r0", "leaf-g1-r1", "spine-r1-0"])
    bad = items[0]
    want = json.loads(bad.intended)
    want["PFC_WD"]["Ethernet0"]["action"] = "explode"
    bad.intended = json.dumps(want)
    before = running(twin, "leaf-g1-r0")
    results = apply_all(items, ApplyOptions(revert_in_s=60, batch=2))
    assert results[0].status == "rejected"
    assert 'Value "explode" does not satisfy the constraint "drop|forward|alert"' in (results[0].error or "")
    assert [r.status for r in results[1:]] == ["skipped", "skipped"]
    assert running(twin, "leaf-g1-r0") == before
    assert shell(twin, "leaf-g1-r0", "sudo config list-checkpoints") == "[]"


def test_patch_refused_at_commit_is_rolled_back_to_the_checkpoint(twin: TwinThread) -> None:
    """The dry run passed, then someone else changed the switch: the real apply fails and is undone at once."""
    mine = session(twin, "leaf-g1-r0")
    try:
        mine.load(patch_commands([{"op": "replace", "path": "/PORT/Ethernet8/mtu", "value": "9000"}]))
        other = session(twin, "leaf-g1-r0")
        other.load(patch_commands([{"op": "remove", "path": "/PORT/Ethernet8/mtu"}]))
        other.commit(60)
        other.confirm()
        other.close()
        before = running(twin, "leaf-g1-r0")
        with pytest.raises(ConfigRejectedError, match="can't replace a non-existent object 'mtu'"):
            mine.commit(60)
        assert running(twin, "leaf-g1-r0") == before
        assert shell(twin, "leaf-g1-r0", "sudo config list-checkpoints") == "[]"
    finally:
        mine.close()


def test_unconfirmed_commit_reverts_on_the_switch_timer(twin: TwinThread) -> None:
    before = running(twin, "leaf-g1-r1")
    s = session(twin, "leaf-g1-r1")
    s.load(patch_commands([{"op": "add", "path": "/PORT/Ethernet0/admin_status", "value": "down"}]))
    s.commit(revert_in_s=4)
    reverts_at = time.monotonic() + 4
    assert s.interfaces_up()["Ethernet0"] is False
    assert running(twin, "leaf-g1-r1")["PORT"]["Ethernet0"]["admin_status"] == "down"
    time.sleep(max(0.0, reverts_at + 0.6 - time.monotonic()))  # no confirm: the switch's own job reverts it
    assert running(twin, "leaf-g1-r1") == before
    assert shell(twin, "leaf-g1-r1", "sudo config list-checkpoints") == "[]"
    with pytest.raises(DriverError, match="too late to confirm"):
        s.confirm()
    s.close()
    assert running(twin, "leaf-g1-r1") == before


def test_confirmed_port_shutdown_outlives_its_timer(twin: TwinThread) -> None:
    s = session(twin, "leaf-g1-r1")
    try:
        timer_ends = time.monotonic() + 4
        s.set_port_admin("Ethernet2/1", up=False, revert_in_s=4)
        s.confirm()
        time.sleep(max(0.0, timer_ends + 0.5 - time.monotonic()))  # the timer was stopped: nothing reverts
        assert s.interfaces_up()["Ethernet8"] is False
        assert running(twin, "leaf-g1-r1")["PORT"]["Ethernet8"]["admin_status"] == "down"
        s.set_port_admin("Ethernet2/1", up=True, revert_in_s=30)
        s.confirm()
        assert s.interfaces_up()["Ethernet8"] is True
    finally:
        s.close()


def test_failed_verification_rolls_back(twin: TwinThread, spec: FabricSpec) -> None:
    items = make_targets(spec, twin.inventory, ["leaf-g0-r1"])
    before = running(twin, "leaf-g0-r1")
    inject(twin.state_dir, "gnmi_drop", {"device": "leaf-g0-r1", "seconds": 30})
    [result] = apply_all(items, ApplyOptions(revert_in_s=60))
    assert result.status == "rolled_back"
    assert "gNMI" in (result.error or "")
    assert result.steps[-1] == "rolled back"
    assert running(twin, "leaf-g0-r1") == before
    assert shell(twin, "leaf-g0-r1", "sudo config list-checkpoints") == "[]"


def test_unreachable_device_fails_alone(twin: TwinThread, spec: FabricSpec, tmp_path: Path) -> None:
    inv = yaml.safe_load(twin.inventory.read_text())
    inv["devices"]["leaf-g1-r1"]["host"] = "127.0.0.254"  # nothing listens there
    path = tmp_path / "inventory.yaml"
    path.write_text(yaml.safe_dump(inv))
    results = apply_all(make_targets(spec, path, ["leaf-g1-r1", "spine-r1-1"]), ApplyOptions(timeout_s=3))
    assert results[0].status == "unreachable"
    assert "leaf-g1-r1" in (results[0].error or "")
    assert results[1].status == "applied"


def test_cli_apply_then_plan_is_clean(twin: TwinThread, capsys: pytest.CaptureFixture[str]) -> None:
    args = ["--spec", str(SPEC), "--inventory", str(twin.inventory), "--device", "leaf-g1-r1"]
    assert main(["plan", *args, "--show", "commands"]) == 1
    shown = capsys.readouterr().out
    assert "sudo config apply-patch" in shown
    assert main(["apply", *args, "--yes", "--revert-in", "60", "--format", "json"]) == 1
    [result] = json.loads(capsys.readouterr().out)["devices"]
    assert result["status"] == "applied" and result["steps"][-1] == "confirmed"
    assert main(["plan", *args]) == 0
    assert "no change" in capsys.readouterr().out
    assert twin.inventory.parent.joinpath("lab.secret").read_text().strip() not in shown + json.dumps(result)
