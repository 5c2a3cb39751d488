"""The Prometheus rules in examples/prometheus: promtool accepts them and their unit tests pass, and every metric
they read is one the service exports (or Prometheus' own `up`)."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from tests.conftest import REPO
from tests.exported_metrics import exported

RULES = REPO / "examples" / "prometheus" / "fabricd-rules.yml"
RULE_TESTS = REPO / "examples" / "prometheus" / "fabricd-rules-test.yml"
PROMTOOL = shutil.which("promtool")
# .ci/run installs Debian's prometheus (promtool) and sets this: there a missing promtool fails, never skips
needs_promtool = pytest.mark.skipif(
    PROMTOOL is None and not os.environ.get("FABRICD_REQUIRE_PROMTOOL"),
    reason="promtool not installed (apt-get install prometheus)",
)


def promtool(*args: str) -> subprocess.CompletedProcess[str]:
    assert PROMTOOL is not None, "promtool is required here: apt-get install prometheus"
    return subprocess.run([PROMTOOL, *args], capture_output=True, text=True, timeout=120, check=False)


@needs_promtool
def test_promtool_checks_the_rules() -> None:
    done = promtool("check", "rules", str(RULES))
    assert done.returncode == 0, done.stdout + done.stderr
    assert "SUCCESS: 19 rules found" in done.stdout


@needs_promtool
def test_promtool_unit_tests_pass() -> None:
    done = promtool("test", "rules", str(RULE_TESTS))
    assert done.returncode == 0, done.stdout + done.stderr
    assert "SUCCESS" in done.stdout


@needs_promtool
def test_a_broken_rule_is_caught(tmp_path: Path) -> None:
    # the unit tests can fail: an alert whose threshold moves no longer fires when the tests say it should
    bad = tmp_path / "fabricd-rules.yml"
    bad.write_text(RULES.read_text().replace("fabricd_telemetry_stale == 1", "fabricd_telemetry_stale == 2"))
    (tmp_path / "t.yml").write_text(RULE_TESTS.read_text())
    done = promtool("test", "rules", str(tmp_path / "t.yml"))
    assert done.returncode != 0 and "FabricdTelemetryStale" in done.stdout + done.stderr


def test_every_metric_a_rule_reads_is_exported(tmp_path: Path) -> None:
    doc = yaml.safe_load(RULES.read_text())
    rules = [r for g in doc["groups"] for r in g["rules"]]
    recorded = {r["record"] for r in rules if "record" in r}
    used = {m for r in rules for m in re.findall(r"\b(fabricd_[a-z0-9_]+)", r["expr"])}
    assert len(used) >= 8 and used <= exported(tmp_path), used - exported(tmp_path)
    assert all(r.startswith("fabricd:") for r in recorded)  # level:metric:operations, the recording-rule naming
    alerts = [r for r in rules if "alert" in r]
    assert {a["labels"]["severity"] for a in alerts} <= {"critical", "warning", "info"}
    assert all(a["annotations"]["summary"] for a in alerts)
