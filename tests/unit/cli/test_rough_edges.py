"""Bad input a new user trips on: each gets one clear line on stderr and exit 2, never silence, a misleading reason
or a traceback; and commands that need no API token do not ask for one."""

from __future__ import annotations

from pathlib import Path

import pytest

from fabricd.cli import main
from tests.conftest import EXAMPLES, REPO

SMALL = str(EXAMPLES / "small-pod.yaml")


def run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(list(args))
    out, err = capsys.readouterr()
    return code, out, err


def one_line(err: str) -> str:
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert "Traceback" not in err
    return lines[0]


def test_a_policy_override_naming_a_device_the_fabric_lacks(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    policy = tmp_path / "policy.yaml"
    policy.write_text("overrides:\n  - match: {device: leaf-g9-r9}\n    set: {ecn: {min_us: 20}}\n")
    code, _, err = run(capsys, "intent", "--spec", SMALL, "--policy", str(policy))
    assert code == 2
    assert one_line(err) == (
        f"fabricd: error: {policy}: field 'overrides[0].match.device': 'leaf-g9-r9' is not a switch of this fabric; "
        "check the name (`fabricd topology blueprint` lists them)"
    )


def test_a_nan_in_the_spec_is_named_as_not_a_number(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    spec = tmp_path / "spec.yaml"
    text = (EXAMPLES / "small-pod.yaml").read_text()
    assert "oversubscription: 1.0" in text
    spec.write_text(text.replace("oversubscription: 1.0", "oversubscription: .nan"))
    code, _, err = run(capsys, "validate", "--spec", str(spec))
    assert code == 2
    assert one_line(err).endswith("field 'oversubscription': Input should be a finite number")


def test_a_trace_line_naming_an_unknown_device(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    trace = tmp_path / "t.jsonl"
    trace.write_text('{"ts": 1000, "device": "leaf-zz", "path": "/interfaces/interface[name=Ethernet1/1]/state/'
                     'oper-status", "value": "UP"}\n')  # fmt: skip
    code, _, err = run(capsys, "detect", "--spec", SMALL, "--trace", str(trace))
    assert code == 2
    assert one_line(err) == (
        f"fabricd: error: {trace}:1: 'device': 'leaf-zz' is not a device of this fabric (a trace of another fabric, "
        "or another --spec/--cabling?)"
    )


def test_plan_with_an_inventory_lacking_a_username_says_so_on_stderr(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    secret = tmp_path / "sw.secret"
    secret.write_text("x")
    secret.chmod(0o600)
    inv = tmp_path / "inv.yaml"
    inv.write_text(
        f"defaults:\n  password_file: {secret}\ndevices:\n  leaf-g0-r0: {{host: 127.0.0.1, platform: eos}}\n"
    )
    code, out, err = run(capsys, "plan", "--spec", SMALL, "--inventory", str(inv), "--device", "leaf-g0-r0")
    assert code == 2
    assert one_line(err) == (
        f"fabricd: error: leaf-g0-r0: {inv}: no username: set defaults.username or the device's username"
    )
    assert "leaf-g0-r0" in out  # the plan's table still says which device failed


def test_token_create_needs_no_api_token(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("FABRICD_API_TOKEN", raising=False)
    cfg = tmp_path / "fabricd.yaml"
    cfg.write_text(f"spec: {SMALL}\ninventory: {tmp_path / 'inv.yaml'}\nstate: {tmp_path / 'state.db'}\n"
                   "api: {token: {env: FABRICD_API_TOKEN}}\n")  # fmt: skip
    code, out, err = run(capsys, "token", "create", "--user", "alice", "--role", "viewer", "--config", str(cfg))
    assert code == 0, err
    assert out.startswith("token 1 for alice (viewer)")
    code, _, err = run(capsys, "run", "--config", str(cfg))  # the service itself still refuses to start without it
    assert code == 2 and "FABRICD_API_TOKEN is not set" in one_line(err)


def test_lab_up_refuses_a_python_package_as_its_state_dir(capsys: pytest.CaptureFixture[str]) -> None:
    before = sorted(p.name for p in (REPO / "lab").iterdir())
    code, _, err = run(capsys, "lab", "up", "--spec", SMALL, "--state-dir", str(REPO / "lab"))
    assert code == 2
    assert "is a Python package" in one_line(err) and "use a folder of its own" in err
    assert sorted(p.name for p in (REPO / "lab").iterdir()) == before  # nothing written into it


def test_force_goes_with_new_state(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    code, _, err = run(capsys, "run", "--config", str(tmp_path / "none.yaml"), "--force")
    assert code == 2
    assert "--force" in err and "goes with --new-state" in err and "Traceback" not in err
