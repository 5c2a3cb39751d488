"""plan/apply/rollback end to end: fabricd's drivers against the twin over eAPI (napalm) and gNMI."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from drivers.eos.session import EosSession
from drivers.inventory import load_inventory
from fabricd.cli import main
from fabricd.rollout import ApplyOptions, Target, apply_all, plan_all, targets
from lab.control_client import inject
from policies.intent import derive_intent
from policies.policy import load_policy
from tests.conftest import EXAMPLES
from tests.twin.lab.twin_child import TwinChild
from topology.blueprint import generate_blueprint
from topology.fabric import Fabric
from topology.spec import FabricSpec

SPEC = EXAMPLES / "small-pod.yaml"
DEVICES = ["leaf-g0-r0", "leaf-g0-r1", "spine-r0-0"]


@pytest.fixture(scope="module")
def twin(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TwinChild]:
    # Its own process: in the same interpreter as a long suite, eAPI answers sometimes stalled past pyeapi's 30 s.
    t = TwinChild(EXAMPLES / "small-pod.yaml", tmp_path_factory.mktemp("twin")).start()
    yield t
    t.stop()


def make_targets(spec: FabricSpec, inventory: Path, devices: list[str]) -> list[Target]:
    fabric = Fabric(generate_blueprint(spec))
    intent = derive_intent(fabric, spec, load_policy(None), set(devices))
    by_name = {t.device: t for t in targets(intent.devices, load_inventory(inventory))}
    return [by_name[d] for d in devices]


def running(twin: TwinChild, device: str) -> str:
    session = EosSession(load_inventory(twin.inventory).access(device))
    try:
        return session.running_config()
    finally:
        session.close()


def test_clean_apply_then_plan_shows_no_changes(twin: TwinChild, small_spec: FabricSpec) -> None:
    items = make_targets(small_spec, twin.inventory, ["leaf-g1-r0", "spine-r1-0"])
    assert all(p.changed for p in plan_all(items))
    results = apply_all(items, ApplyOptions(revert_in_s=60, batch=2))
    assert [r.status for r in results] == ["applied", "applied"], [r.error for r in results]
    assert results[0].steps[-1] == "confirmed"
    assert "priority-flow-control priority 3 no-drop" in results[0].device_diff
    assert not any(p.changed or p.error for p in plan_all(items))
    assert "random-detect ecn minimum-threshold" in running(twin, "leaf-g1-r0")


def test_unconfirmed_commit_reverts_on_its_timer(twin: TwinChild) -> None:
    access = load_inventory(twin.inventory).access("leaf-g1-r3")
    before = running(twin, "leaf-g1-r3")
    session = EosSession(access)
    session.load(["interface Ethernet1/1", "   priority-flow-control on"])
    session.commit(revert_in_s=1)
    assert "priority-flow-control on" in running(twin, "leaf-g1-r3")
    time.sleep(1.6)  # the twin's own timer, not fabricd, reverts it
    assert running(twin, "leaf-g1-r3") == before
    session.close()  # closing after the switch reverted is harmless
    assert running(twin, "leaf-g1-r3") == before


def test_rejected_line_rolls_back_that_device_and_stops_the_rollout(twin: TwinChild, small_spec: FabricSpec) -> None:
    items = make_targets(small_spec, twin.inventory, ["leaf-g0-r2", "leaf-g0-r3", "spine-r0-1"])
    before = running(twin, "leaf-g0-r2")
    bad = items[0]
    bad.intended = bad.intended.replace("priority-flow-control on", "priority-flow-control sideways", 1)
    results = apply_all(items, ApplyOptions(revert_in_s=60, batch=2))
    assert results[0].status == "rejected"
    assert "Invalid input" in (results[0].error or "")
    assert [r.status for r in results[1:]] == ["skipped", "skipped"]
    assert running(twin, "leaf-g0-r2") == before


def test_failed_verification_rolls_back(twin: TwinChild, small_spec: FabricSpec) -> None:
    items = make_targets(small_spec, twin.inventory, ["leaf-g1-r1"])
    before = running(twin, "leaf-g1-r1")
    inject(twin.state_dir, "gnmi_drop", {"device": "leaf-g1-r1", "seconds": 30})
    [result] = apply_all(items, ApplyOptions(revert_in_s=60))
    assert result.status == "rolled_back", result.error
    assert "gNMI" in (result.error or "")
    assert result.steps[-1] == "rolled back"
    assert running(twin, "leaf-g1-r1") == before


def test_unreachable_device_fails_alone(twin: TwinChild, small_spec: FabricSpec, tmp_path: Path) -> None:
    inv = yaml.safe_load(twin.inventory.read_text())
    inv["devices"]["spine-r2-0"]["host"] = "127.0.0.254"  # nothing listens there
    path = tmp_path / "inventory.yaml"
    path.write_text(yaml.safe_dump(inv))
    items = make_targets(small_spec, path, ["spine-r2-0", "spine-r2-1"])
    results = apply_all(items, ApplyOptions(revert_in_s=60, timeout_s=3))
    assert results[0].status == "unreachable"
    assert "spine-r2-0" in (results[0].error or "")
    assert results[1].status == "applied"


def test_cli_apply_needs_yes_without_a_terminal_and_then_plans_clean(
    twin: TwinChild, capsys: pytest.CaptureFixture[str]
) -> None:
    args = ["--spec", str(SPEC), "--inventory", str(twin.inventory), "--device", "leaf-g1-r2"]
    assert main(["apply", *args]) == 2
    assert "rerun with --yes" in capsys.readouterr().err
    assert main(["apply", *args, "--yes", "--revert-in", "60", "--format", "json"]) == 1
    assert main(["plan", *args]) == 0
    assert "no change" in capsys.readouterr().out
