"""The CLI end to end: outputs, exit codes (0 clean, 1 violations, 2 bad input) and one-line errors."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from fabricd.cli import main
from tests.conftest import EXAMPLES
from topology.cabling_io import load_cabling_file

SMALL = str(EXAMPLES / "small-pod.yaml")
ASBUILT = str(EXAMPLES / "small-pod-asbuilt.yaml")


def run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(list(args))
    out, err = capsys.readouterr()
    return code, out, err


def test_validate_blueprint_is_clean(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "validate", "--spec", SMALL, "--format", "json")
    assert code == 0
    result = json.loads(out)
    assert result["ok"] is True and result["violations"] == []
    assert result["summary"]["devices"]["leaf"] == 8


def test_validate_asbuilt_reports_the_swap_and_the_missing_uplink(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "validate", "--spec", SMALL, "--cabling", ASBUILT, "--format", "json")
    assert code == 1
    result = json.loads(out)
    assert result["ok"] is False
    by_code = {v["code"]: v for v in result["violations"]}
    assert set(by_code) == {"RAIL_MISMATCH", "MISSING_LINK", "OVERSUBSCRIBED"}
    assert by_code["RAIL_MISMATCH"]["fix"] == "swap the cables on leaf-g0-r2:Ethernet2/1 and leaf-g0-r1:Ethernet2/1"
    assert by_code["MISSING_LINK"]["devices"] == ["leaf-g1-r3", "spine-r3-0"]
    for v in result["violations"]:
        assert set(v) == {"code", "severity", "devices", "ports", "message", "fix"}


def test_validate_table_output(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "validate", "--spec", SMALL, "--cabling", ASBUILT)
    assert code == 1
    assert "RAIL_MISMATCH" in out and "swap the cables" in out
    assert "3 error(s), 0 warning(s)" in out


def test_blueprint_writes_json_and_yaml_that_load_back(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    for name in ("bp.json", "bp.yaml"):
        target = tmp_path / name
        code, _, err = run(capsys, "topology", "blueprint", "--spec", SMALL, "-o", str(target))
        assert code == 0, err
        cabling = load_cabling_file(target)
        assert len(cabling.links) == 96 and len(cabling.devices) == 26
        code, out, _ = run(capsys, "validate", "--spec", SMALL, "--cabling", str(target), "--format", "json")
        assert code == 0 and json.loads(out)["ok"]


@pytest.mark.parametrize("fmt", ["slurm", "hostfile", "clab", "json"])
def test_export_formats(capsys: pytest.CaptureFixture[str], fmt: str) -> None:
    code, out, err = run(capsys, "topology", "export", "--spec", SMALL, "--format", fmt)
    assert code == 0, err
    expected = {
        "slurm": "Nodes=gpu-g1-[000-003]",
        "hostfile": "gpu-g1-003 slots=4",
        "clab": "kind: arista_ceos",
        "json": '"name": "gpu-g1-003"',
    }[fmt]
    assert expected in out
    if fmt == "clab":
        assert "gpu-" not in out


BAD_SPEC = "name: t\nrails: 2\naggregation_groups: 2\nservers_per_group: 2\nspines_per_rail: 1\nspine: 3\n"
DANGLING = """\
devices:
  - {name: leaf-g0-r0, role: leaf, rail: 0, group: 0}
links:
  - {a: {device: gpu-g0-000, port: nic0}, b: {device: leaf-g0-r0, port: Ethernet1/1}}
"""
BAD_ROLE = "devices:\n  - {name: x, role: router}\nlinks: []\n"


@pytest.mark.parametrize(
    ("files", "args", "message"),
    [
        ({}, ["validate", "--spec", "{tmp}/missing.yaml"], "missing.yaml: file not found"),
        ({"s.yaml": "name: [x\n"}, ["validate", "--spec", "{tmp}/s.yaml"], "s.yaml:2: invalid YAML"),
        (
            {"s.yaml": BAD_SPEC},
            ["validate", "--spec", "{tmp}/s.yaml"],
            "s.yaml:6: field 'spine': unknown key",
        ),
        (
            {"c.yaml": BAD_ROLE},
            ["validate", "--spec", SMALL, "--cabling", "{tmp}/c.yaml"],
            "c.yaml:2: field 'devices[0].role': Input should be",
        ),
        (
            {"c.yaml": DANGLING},
            ["validate", "--spec", SMALL, "--cabling", "{tmp}/c.yaml"],
            "c.yaml:4: field 'links[0].a.device': link refers to device 'gpu-g0-000', which is not in 'devices'",
        ),
        (
            {"c.json": '{"devices": [], "links": [}'},
            ["validate", "--spec", SMALL, "--cabling", "{tmp}/c.json"],
            "c.json:1: invalid JSON",
        ),
        ({}, ["topology", "export", "--spec", SMALL, "--format", "dot"], "--format 'dot' is unknown"),
        ({}, ["topology", "blueprint", "--spec", SMALL, "-o", "{tmp}/bp.txt"], "unknown output format"),
        ({}, ["topology", "blueprint", "--spec", SMALL, "-o", "{tmp}/no/such/dir/bp.json"], "cannot write"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, files: dict[str, str], args: list[str], message: str
) -> None:
    for name, text in files.items():
        (tmp_path / name).write_text(text)
    code, out, err = run(capsys, *[a.replace("{tmp}", str(tmp_path)) for a in args])
    assert code == 2
    assert out == ""
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith("fabricd: error: ") and message in lines[0]
    assert not list(tmp_path.glob("**/bp.*")) and not list(tmp_path.glob("**/.*.tmp"))  # nothing half-written


def test_usage_error_exits_2(capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run(capsys, "validate")
    assert code == 2
    assert "--spec" in err


def test_console_script_exit_code_and_debug_traceback(tmp_path: Path) -> None:
    exe = Path(sys.executable).parent / "fabricd"
    cmd = [str(exe)] if exe.exists() else [sys.executable, "-m", "fabricd"]
    missing = str(tmp_path / "nope.yaml")
    plain = subprocess.run([*cmd, "validate", "--spec", missing], capture_output=True, text=True, check=False)
    assert plain.returncode == 2
    assert "Traceback" not in plain.stderr and "file not found" in plain.stderr
    debug = subprocess.run(
        [*cmd, "--debug", "validate", "--spec", missing], capture_output=True, text=True, check=False
    )
    assert debug.returncode == 2 and "Traceback" in debug.stderr


def test_exported_json_validates_as_cabling(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    target = tmp_path / "fabric.json"
    code, _, err = run(capsys, "topology", "export", "--spec", SMALL, "--format", "json", "-o", str(target))
    assert code == 0, err
    code, out, _ = run(capsys, "validate", "--spec", SMALL, "--cabling", str(target), "--format", "json")
    assert code == 0 and json.loads(out)["summary"]["links"] == 96


def test_intent_table_groups_ports_that_share_settings_and_reasons(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["intent", "--spec", str(EXAMPLES / "small-pod.yaml"), "--device", "leaf-g0-r0"]) == 0
    out = capsys.readouterr().out
    rows = [line for line in out.splitlines() if line.startswith("│")]
    assert len(rows) == 2  # the 4 server ports, the 4 uplinks
    assert "Ethernet1/1 .. Ethernet4/1" in rows[0] and "server" in rows[0] and "4 peers" in rows[0]
    assert "Ethernet5/1 .. Ethernet8/1" in rows[1] and "fabric" in rows[1]
    assert out.count("pfc.headroom_bytes: headroom") == 2  # each group's reasons, once
    assert "2 x 3 m x 400 Gb/s" in out and "2 x 30 m x 400 Gb/s" in out


def test_every_error_class_exits_2_through_the_one_root() -> None:
    # the CLI's exit code comes from the error hierarchy's root: whatever fails on purpose is "could not do the job"
    import fabricd.service.remediation.errors as remediation
    from drivers.base import DriverError
    from fabricd.bus import BusError
    from fabricd.cli.output import EXIT_TROUBLE
    from fabricd.service.state.db import StateError
    from topology.errors import FabricdError, InputError

    for cls in (InputError, DriverError, BusError, StateError, remediation.StandbyError, remediation.ActionError):
        assert issubclass(cls, FabricdError) and cls.exit_code == EXIT_TROUBLE
