"""`fabricd check deadlock-risk`: exit 0 no risk, 1 risk (cycle and cause named), 2 bad input (the link named)."""

from __future__ import annotations

import json

import pytest

from fabricd.cli import main
from tests.conftest import EXAMPLES

SMALL = str(EXAMPLES / "small-pod.yaml")
SPLIT = ["spine-r0-0--ssp-1", "spine-r0-1--ssp-1", "spine-r1-0--ssp-0", "spine-r1-1--ssp-0"]


def check(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(["check", "deadlock-risk", "--spec", SMALL, *args])
    out, err = capsys.readouterr()
    return code, out, err


def failed(*links: str) -> list[str]:
    return [a for link in links for a in ("--failed", link)]


def test_no_failure_is_no_risk(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = check(capsys, "--format", "json")
    assert code == 0
    assert json.loads(out) == {"ok": True, "failed": [], "risks": []}


def test_one_failure_is_no_risk(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = check(capsys, *failed("leaf-g0-r0--spine-r0-0"))
    assert code == 0
    assert "no deadlock risk with leaf-g0-r0--spine-r0-0" in out


def test_risk_names_the_cycle_and_the_failed_links(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = check(capsys, *failed(*SPLIT), "--max-cycles", "2", "--format", "json")
    assert code == 1
    doc = json.loads(out)
    assert doc["ok"] is False and doc["failed"] == SPLIT
    assert len(doc["risks"]) == 2
    first = doc["risks"][0]
    assert set(first) == {"cycle", "devices", "parallel", "bounces", "failed", "pairs", "summary"}
    assert first["cycle"] == [
        "spine-r2-0:Ethernet5/1",
        "ssp-0:Ethernet13/1",
        "spine-r3-0:Ethernet7/1",
        "ssp-1:Ethernet9/1",
    ]
    assert first["failed"] == sorted(SPLIT)
    assert first["summary"].startswith("deadlock cycle spine-r2-0:Ethernet5/1 -> ssp-0:Ethernet13/1 -> ")


def test_table_output(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = check(capsys, *failed(*SPLIT), "--max-cycles", "1")
    assert code == 1
    assert "spine-r2-0:Ethernet5/1 -> ssp-0:Ethernet13/1" in out and "spine-r0-0--ssp-1" in out
    assert "1 deadlock cycle(s) with spine-r0-0--ssp-1" in out


@pytest.mark.parametrize(
    ("link", "message"),
    [
        ("leaf-g0-r0", "leaf-g0-r0: not a link name"),
        ("leaf-g0-r0--spine-r9-0", "leaf-g0-r0--spine-r9-0: no device 'spine-r9-0' in this fabric"),
        ("leaf-g0-r0--leaf-g1-r0", "leaf-g0-r0--leaf-g1-r0: leaf-g0-r0 and leaf-g1-r0 are not cabled"),
    ],
)
def test_bad_link_exits_2_naming_it(capsys: pytest.CaptureFixture[str], link: str, message: str) -> None:
    code, out, err = check(capsys, *failed(link), "--format", "json")
    assert code == 2 and out == ""
    assert err.startswith(f"fabricd: error: {message}")
    assert len(err.strip().splitlines()) == 1
