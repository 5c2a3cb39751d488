"""The policy file's `tuning:` section: per-class ranges with their defaults, strict like the rest, one-line errors."""

from __future__ import annotations

from pathlib import Path

import pytest

from fabricd.cli import main
from policies.policy import Policy, PolicyError, load_policy
from tests.conftest import EXAMPLES


def test_defaults_per_class() -> None:
    t = Policy().tuning
    assert t.classes.server.kmin_us == (1, 120) and t.classes.server.kmax_us == (10, 480)
    assert t.classes.dci.kmax_us == (10, 8000) and t.classes.dci.flowlet_us == (64, 2047)
    assert (t.max_step, t.verify_margin, t.guard_tolerance) == (2.0, 0.10, 0.02)
    assert (t.changes_per_hour, t.changes_per_hour_per_class, t.holdoff_minutes) == (12, 6, 60)


def test_a_class_given_in_part_keeps_its_own_defaults(tmp_path: Path) -> None:
    pol = tmp_path / "policy.yaml"
    pol.write_text("tuning:\n  classes:\n    dci: {pmax_percent: [1, 50]}\n    server: {kmin_us: [2, 60]}\n")
    t = load_policy(pol).tuning
    assert t.classes.dci.pmax_percent == (1, 50) and t.classes.dci.kmax_us == (10, 8000)  # dci's, not the campus's
    assert t.classes.server.kmin_us == (2, 60) and t.classes.server.kmax_us == (10, 480)
    assert t.classes.leaf_spine == Policy().tuning.classes.leaf_spine


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("tuning: {classes: {server: {kmin_us: [200, 100]}}}\n",
         "field 'tuning.classes.server.kmin_us': Value error, [200, 100] is not a range: give [low, high]"),
        ("tuning: {classes: {server: {kmin_us: [0, 100]}}}\n", "0 < low <= high"),
        ("tuning: {classes: {server: {flowlet_us: [1, 3000]}}}\n",
         "flowlet_us must lie within 2..2047 us (SONiC flowlet_idle_time)"),
        ("tuning: {classes: {dci: {pmax_percent: [1, 200]}}}\n", "pmax_percent is a percentage: at most 100"),
        ("tuning: {classes: {servers: {kmin_us: [1, 2]}}}\n", "field 'tuning.classes.servers': unknown key"),
        ("tuning: {classes: {server: {kmin: [1, 2]}}}\n", "field 'tuning.classes.server.kmin': unknown key"),
        ("tuning: {max_step: 1.0}\n", "field 'tuning.max_step'"),
        ("tuning: {verify_margin: 1.5}\n", "field 'tuning.verify_margin'"),
        ("tuning: {changes_per_hour: -1}\n", "field 'tuning.changes_per_hour'"),
        ("tuning: {campus_feedback_us: .nan}\n", "field 'tuning.campus_feedback_us'"),
    ],
)  # fmt: skip
def test_bad_tuning_section(tmp_path: Path, text: str, expected: str) -> None:
    pol = tmp_path / "policy.yaml"
    pol.write_text(text)
    with pytest.raises(PolicyError) as exc:
        load_policy(pol)
    assert expected in str(exc.value) and "policy.yaml:1" in str(exc.value) and "\n" not in str(exc.value)


def test_a_bad_tuning_section_is_one_line_and_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    pol = tmp_path / "p.yaml"
    pol.write_text("tuning:\n  classes:\n    dci:\n      kmax_us: [9000, 10]\n")
    assert main(["intent", "--spec", str(EXAMPLES / "dci-120km.yaml"), "--policy", str(pol)]) == 2
    err = capsys.readouterr().err.strip()
    assert "p.yaml:4: field 'tuning.classes.dci.kmax_us'" in err and len(err.splitlines()) == 1
