"""Every bench under bench/ runs in its --smoke mode (seconds, a tiny fabric), so a bench can never break unseen: a
bench that crashes, hangs or prints no figure fails here. The figures themselves are measured by running the bench
without --smoke (docs/benchmarks.md)."""

from __future__ import annotations

import subprocess
import sys

import pytest

from tests.conftest import REPO

BENCHES = sorted(p.name for p in (REPO / "bench").glob("bench_*.py"))


def test_every_bench_is_here() -> None:
    assert len(BENCHES) >= 14
    for name in BENCHES:
        assert "--smoke" in (REPO / "bench" / name).read_text(), f"{name} has no --smoke mode"


@pytest.mark.parametrize("name", BENCHES)
def test_bench_smoke(name: str) -> None:
    r = subprocess.run([sys.executable, str(REPO / "bench" / name), "--smoke"], capture_output=True, text=True,
                       timeout=300, cwd=REPO)  # fmt: skip
    assert r.returncode == 0, f"{name} --smoke exited {r.returncode}:\n{r.stdout[-3000:]}\n{r.stderr[-3000:]}"
    assert "Traceback" not in r.stderr, r.stderr[-3000:]
    assert any(c.isdigit() for c in r.stdout), f"{name} printed no figure:\n{r.stdout[-2000:]}"
