"""`fabricd tune --spec --trace`: verdicts with evidence and source, the proposal as a plan-like diff, NIC advice;
exit 0 nothing to change, 1 proposals, 2 bad input in one line."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from fabricd.cli import main
from tests.conftest import REPO

from . import synth_trace

SPEC = str(REPO / "examples" / "small-pod.yaml")
SUBJECT = f"{synth_trace.LEAF}:{synth_trace.SERVER_PORT}"


def _tune(capsys: pytest.CaptureFixture[str], trace: Path, *args: str) -> tuple[int, str, str]:
    code = main(["tune", "--spec", SPEC, "--trace", str(trace), *args])
    out, err = capsys.readouterr()
    return code, out, err


def test_pausing_without_marks_proposes_kmin_down(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    code, out, _ = _tune(capsys, synth_trace.write(tmp_path / "t.jsonl"), "--format", "json")
    assert code == 1
    got = json.loads(out)
    (v,) = [v for v in got["verdicts"] if v["rule"] == "pfc_before_ecn"]
    assert v["subject"] == SUBJECT and v["evidence"] and "§7.1" in v["source"]
    (p,) = got["proposals"]
    assert p["rule"] == "pfc_before_ecn" and p["target"] == "pause_us_per_s"
    (c,) = [c for c in p["changes"] if c["knob"] == "ecn.min_bytes"]
    assert (c["before"], c["after"]) == (600_000, 300_000)  # one step of max_step 2
    assert p["diff"][0].startswith(f"  {SUBJECT}  ecn.min_bytes: 600000 -> 300000")


def test_table_prints_the_diff(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    code, out, _ = _tune(capsys, synth_trace.write(tmp_path / "t.jsonl"))
    assert code == 1
    assert "pfc_before_ecn" in out and f"{SUBJECT}  ecn.min_bytes: 600000 -> 300000" in out


def test_a_quiet_queue_changes_nothing(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    trace = synth_trace.write(tmp_path / "t.jsonl", pause_ns_per_s=0, marks_per_s=0, watermark=10_000)
    code, out, _ = _tune(capsys, trace, "--format", "json")
    assert code == 0, out
    assert json.loads(out)["proposals"] == []


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--tick", "0"], "--tick must be a positive number"),
        (["--window", "-1"], "--window must be 0"),
        (["--xoff-bytes", "0"], "--xoff-bytes must be a positive"),
    ],
)
def test_bad_input_is_one_line_exit_2(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, args: list[str], message: str
) -> None:
    code, _, err = _tune(capsys, synth_trace.write(tmp_path / "t.jsonl"), *args)
    assert code == 2 and message in err and len(err.strip().splitlines()) == 1


def test_a_trace_of_another_fabric_is_refused(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    trace = tmp_path / "other.jsonl"
    trace.write_text(json.dumps({"ts": 1, "device": "nosuch", "path": "/a", "value": 1}) + "\n")
    code, _, err = _tune(capsys, trace)
    assert code == 2 and "not a device of this fabric" in err and len(err.strip().splitlines()) == 1


def test_offline_needs_both_spec_and_trace(capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["tune", "--spec", SPEC])
    err = capsys.readouterr().err
    assert code == 2 and "offline needs both --spec and --trace" in err and len(err.strip().splitlines()) == 1
