"""`fabricd lab chaos`: bad arguments are one line and exit 2 before anything is touched; `--plan` prints the
schedule a seed makes, the same every time."""

from __future__ import annotations

from pathlib import Path

import pytest

from fabricd.cli import main
from tests.conftest import EXAMPLES

SMALL = str(EXAMPLES / "small-pod.yaml")


def run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(list(args))
    out, err = capsys.readouterr()
    return code, out, err


@pytest.mark.parametrize(
    ("args", "line"),
    [
        (["--kinds", "link_flap,meteor"], "unknown fault kind meteor: use some of link_flap, link_down, pfc_storm"),
        (
            ["--port", "leaf-g0-r0:Ethernet77/1"],
            "port leaf-g0-r0:Ethernet77/1 is not a cabled switch port of small-pod",
        ),
        (
            ["--process", "kill"],
            "--process kill: needs --service-cmd (kill), --service-pid (pauses) or --restart (restart)",
        ),
        (["--process", "nap"], "unknown process fault nap: use some of kill, pause, gc_pause, twin_restart, restart"),
        (["--restart", "bus"], "--restart: give NAME=COMMAND, e.g. bus="),
        (
            ["--process", "restart"],
            "--process restart: needs --service-cmd (kill), --service-pid (pauses) or --restart",
        ),
        ([], "no twin running with state dir {state}; start one with `fabricd lab up`"),
    ],
)
def test_bad_arguments_are_one_line_and_exit_2(
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    args: list[str],
    line: str,
) -> None:
    monkeypatch.setenv("FABRICD_API_TOKEN", "t")
    code, _, err = run(capsys, "lab", "chaos", "--spec", SMALL, "--state-dir", str(tmp_path), *args)
    assert code == 2
    lines = err.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in err, err
    assert line.format(state=tmp_path) in lines[0]


def test_no_token_is_one_line(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("FABRICD_API_TOKEN", raising=False)
    code, _, err = run(capsys, "lab", "chaos", "--spec", SMALL, "--state-dir", str(tmp_path))
    assert code == 2
    assert err.strip().endswith("no API token: set FABRICD_API_TOKEN or give --token-file (an admin token)")


def test_plan_replays_a_seed(capsys: pytest.CaptureFixture[str]) -> None:
    args = ["lab", "chaos", "--spec", SMALL, "--seed", "17", "--minutes", "3", "--plan"]
    code, first, _ = run(capsys, *args)
    assert code == 0
    code, again, _ = run(capsys, *args)
    assert first == again
    lines = first.splitlines()
    assert len(lines) > 20 and "fault" in first and "clear" in first
    assert run(capsys, *args[:4], "18", *args[5:])[1] != first
