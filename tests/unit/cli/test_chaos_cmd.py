"""`fabricd lab chaos`: bad arguments are one line and exit 2 before anything is touched; `--plan` prints the
schedule a seed makes, the same every time."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest

from fabricd.cli import main
from lab.chaos.schedule import FAULT_KINDS
from tests.conftest import EXAMPLES, REPO

SMALL = str(EXAMPLES / "small-pod.yaml")
KINDS = ", ".join(FAULT_KINDS)


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


@pytest.mark.parametrize(
    ("args", "line"),
    [
        (["--minutes", "inf"], "--minutes inf: must be more than 0 and at most 1440"),
        (["--minutes", "1e9"], "--minutes 1000000000: must be more than 0 and at most 1440"),
        (["--minutes", "nan"], "--minutes nan: must be more than 0 and at most 1440"),
        (["--minutes", "-3"], "--minutes -3: must be more than 0 and at most 1440"),
        (["--minutes", "0"], "--minutes 0: must be more than 0 and at most 1440"),
        (["--faults-per-min", "inf"], "--faults-per-min inf: must be at least 0 and at most 60"),
        (["--faults-per-min", "inf", "--plan"], "--faults-per-min inf: must be at least 0 and at most 60"),
        (["--minutes", "inf", "--plan"], "--minutes inf: must be more than 0 and at most 1440"),
        (["--faults-per-min", "-1"], "--faults-per-min -1: must be at least 0 and at most 60"),
        (["--process-per-min", "nan"], "--process-per-min nan: must be at least 0 and at most 10"),
        (["--operator-per-min", "1e3"], "--operator-per-min 1000: must be at least 0 and at most 10"),
        (["--grace", "inf"], "--grace inf: must be at least 0 and at most 3600"),
        (["--grace", "-1"], "--grace -1: must be at least 0 and at most 3600"),
        (["--min-uplink-fraction", "0"], "--min-uplink-fraction 0: must be more than 0 and at most 1"),
        (["--min-uplink-fraction", "nan"], "--min-uplink-fraction nan: must be more than 0 and at most 1"),
        (["--seed", "-5"], "--seed -5: must be at least 0 and at most 9223372036854775807"),
        (["--service-pid", "0"], "--service-pid 0: must be at least 1 and at most 4194304"),
        (["--service-pid", "-1"], "--service-pid -1: must be at least 1 and at most 4194304"),
        (["--kinds", ","], f"--kinds names no fault kind: use some of {KINDS}"),
        (["--kinds", ",", "--plan"], f"--kinds names no fault kind: use some of {KINDS}"),
        (["--kinds", "flap", "--plan"], f"unknown fault kind flap: use some of {KINDS}"),
        (
            ["--process", ","],
            "--process names no process fault: use some of kill, pause, gc_pause, twin_restart, "
            "restart (or --process-per-min 0 for none)",
        ),
    ],
)
def test_numbers_out_of_range_and_empty_lists_are_one_line_and_exit_2_at_once(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, args: list[str], line: str
) -> None:
    started = time.monotonic()
    code, out, err = run(capsys, "lab", "chaos", "--spec", SMALL, "--state-dir", str(tmp_path), *args)
    assert code == 2 and out == ""
    assert err == f"fabricd: error: {line}\n"
    assert time.monotonic() - started < 10  # nothing was made of it first


def test_an_endless_run_is_refused_in_a_process_that_returns(tmp_path: Path) -> None:
    # `--minutes inf --plan` looped making an endless schedule (memory growing ~40 MB/s): a process that must end
    r = subprocess.run([sys.executable, "-m", "fabricd", "lab", "chaos", "--spec", SMALL, "--minutes", "inf", "--plan"],
                       cwd=REPO, capture_output=True, text=True, timeout=60)  # fmt: skip
    assert (r.returncode, r.stdout) == (2, "")
    assert r.stderr == "fabricd: error: --minutes inf: must be more than 0 and at most 1440\n"


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
