"""`fabricd plan` offline from saved running configs: diffs, commands, scope, and per-device failures."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from drivers.eos.render import render
from fabricd.cli import main
from policies.intent import derive_intent
from policies.policy import Policy
from tests.conftest import EXAMPLES
from topology.blueprint import generate_blueprint
from topology.fabric import Fabric
from topology.spec import load_spec

SMALL = str(EXAMPLES / "small-pod.yaml")
DEVICES = ["leaf-g0-r0", "spine-r0-0"]
UNRELATED = "router bgp 65001\n   neighbor 10.0.0.1 remote-as 65000\n!\n"


def plan(capsys: pytest.CaptureFixture[str], running_dir: Path) -> tuple[int, dict[str, dict[str, object]]]:
    args = ["plan", "--spec", SMALL, "--running-dir", str(running_dir), "--format", "json"]
    for d in DEVICES:
        args += ["--device", d]
    code = main(args)
    data = json.loads(capsys.readouterr().out)
    return code, {d["device"]: d for d in data["devices"]}


def test_plan_shows_changes_only_within_fabricd_scope(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    for d in DEVICES:
        (tmp_path / f"{d}.cfg").write_text(
            f"hostname {d}\n!\ninterface Ethernet1/1\n   description keep-me\n!\n" + UNRELATED
        )
    code, plans = plan(capsys, tmp_path)
    assert code == 1
    leaf = plans["leaf-g0-r0"]
    commands = leaf["commands"]
    assert isinstance(commands, list)
    assert "interface Ethernet1/1" in commands
    assert "   priority-flow-control priority 3 no-drop" in commands
    assert "qos map dscp 26 to traffic-class 3" in commands
    assert not any("bgp" in c or "description" in c or "hostname" in c for c in commands)
    assert "+   priority-flow-control on" in str(leaf["diff"])


def test_plan_after_apply_shows_no_changes(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    spec = load_spec(SMALL)
    intent = derive_intent(Fabric(generate_blueprint(spec)), spec, Policy(), set(DEVICES))
    for dev in intent.devices:  # the running config once the plan is applied: ours plus what was there
        (tmp_path / f"{dev.device}.cfg").write_text(UNRELATED + render(dev))
    code, plans = plan(capsys, tmp_path)
    assert code == 0
    assert all(p["changed"] is False and p["commands"] == [] for p in plans.values())


def test_a_device_without_running_config_fails_alone(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    (tmp_path / "leaf-g0-r0.cfg").write_text("hostname leaf-g0-r0\n")
    code, plans = plan(capsys, tmp_path)
    assert code == 2
    assert plans["leaf-g0-r0"]["changed"] is True and plans["leaf-g0-r0"]["error"] is None
    assert "spine-r0-0.cfg: no saved running config" in str(plans["spine-r0-0"]["error"])


def test_plan_without_inventory_or_running_dir_says_what_to_do(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["plan", "--spec", SMALL]) == 2
    assert "pass --inventory FILE to plan live, or --running-dir DIR" in capsys.readouterr().err


def test_an_unparsable_running_config_fails_alone(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    (tmp_path / "leaf-g0-r0.cfg").write_text("hostname a\nhostname a\n")
    (tmp_path / "spine-r0-0.cfg").write_text("hostname spine-r0-0\n")
    code, plans = plan(capsys, tmp_path)
    assert code == 2
    assert "cannot parse the running config" in str(plans["leaf-g0-r0"]["error"])
    assert plans["spine-r0-0"]["error"] is None and plans["spine-r0-0"]["changed"] is True


@pytest.mark.parametrize(
    ("show", "diff", "commands"), [("diff", True, False), ("commands", False, True), ("both", True, True)]
)
def test_text_shows_the_diff_or_the_commands_unless_asked_for_both(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, show: str, diff: bool, commands: bool
) -> None:
    (tmp_path / "leaf-g0-r0.cfg").write_text("hostname leaf-g0-r0\n!\n")
    args = ["plan", "--spec", SMALL, "--running-dir", str(tmp_path), "--device", "leaf-g0-r0", "--no-cache"]
    assert main([*args, "--show", show]) == 1
    out = capsys.readouterr().out
    assert ("+   priority-flow-control on" in out) is diff  # a diff line
    assert any(line == "   priority-flow-control on" for line in out.splitlines()) is commands  # a command line
    assert ("commands:" in out) is (show == "both")


def test_an_unknown_show_is_a_one_line_error(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    assert main(["plan", "--spec", SMALL, "--running-dir", str(tmp_path), "--show", "all"]) == 2
    assert "--show 'all' is unknown; use diff, commands, both" in capsys.readouterr().err


def _ledger(tmp_path: Path, kmin_from: int, kmin_to: int) -> Path:
    """A service config whose state holds one confirmed change of leaf-g0-r0:Ethernet1/1's Kmin."""
    from fabricd.service.config import load_config
    from fabricd.service.state import open_state
    from fabricd.service.state.tuning import NewTune

    cfg = tmp_path / "fabricd.yaml"
    cfg.write_text(f"spec: {SMALL}\ninventory: inventory.yaml\nstate:\n  path: {tmp_path / 'state.db'}\n")
    state = open_state(load_config(cfg, {}), owner=True)
    change: list[dict[str, int | str]] = [
        {"knob": "ecn.min_bytes", "before": kmin_from, "after": kmin_to, "low": 1, "high": 10**8}
    ]
    new = NewTune("k1", "leaf-g0-r0:Ethernet1/1", "leaf-g0-r0", "server", "pfc_before_ecn", "pause_us_per_s",
                  change, "why", "auto", "verifying", "", {})  # fmt: skip
    rec = state.tuning.add(new, 1)
    state.tuning.update(rec.id, "confirmed", "better", applied_ts=2, ended_ts=1_800_000_000 * 10**9)
    state.close()
    return cfg


def test_plan_keeps_confirmed_tuning_and_says_so(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    spec = load_spec(SMALL)
    intent = derive_intent(Fabric(generate_blueprint(spec)), spec, Policy(), set(DEVICES))
    for dev in intent.devices:  # the switches run the intent with the tuned Kmin
        (tmp_path / f"{dev.device}.cfg").write_text(UNRELATED + render(dev))
    leaf = intent.device("leaf-g0-r0")
    assert leaf is not None
    base = next(p.ecn.min_bytes for p in leaf.ports if p.port == "Ethernet1/1")
    cfg = _ledger(tmp_path, base, base + 4000)
    args = ["plan", "--spec", SMALL, "--running-dir", str(tmp_path), "--device", "leaf-g0-r0"]

    assert main([*args, "--config", str(cfg)]) == 1  # the running configs lack the tuned value: it is planned
    out = capsys.readouterr().out
    assert (f"tuning: leaf-g0-r0:Ethernet1/1 ecn.min_bytes {base + 4000} (intent {base}): kept from tuning change 1, "
            "confirmed 2027-01-15 08:00:00 UTC") in out  # fmt: skip
    assert main([*args, "--config", str(cfg), "--format", "json"]) == 1  # json: the data on stdout, the note on stderr
    captured = capsys.readouterr()
    assert "kept from tuning change 1" in captured.err
    commands = json.loads(captured.out)["devices"][0]["commands"]
    want = f"random-detect ecn minimum-threshold {(base + 4000) // 1000} kbytes"
    assert any(c.strip().startswith(want) for c in commands), commands  # the tuned value is what the plan pushes

    assert main([*args, "--config", str(cfg), "--without-tuning"]) == 0  # the bare intent is what runs
    out = capsys.readouterr().out
    assert f"ecn.min_bytes {base + 4000} -> {base} (intent): reverts tuning change 1" in out

    assert main(args) == 0
    assert "tuning: tuned values are not known (no --config)" in capsys.readouterr().out


def test_without_tuning_needs_the_config(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    assert main(["plan", "--spec", SMALL, "--running-dir", str(tmp_path), "--without-tuning"]) == 2
    assert "--without-tuning needs --config" in capsys.readouterr().err
