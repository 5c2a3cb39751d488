"""The twin's two control planes for parametrized tests: the model (default) and the real daemons (FRR and lldpd in a
network namespace per switch, `lab up --daemons real`), which need root and Debian's frr and lldpd: skipped elsewhere
with the reason, except in CI (FABRICD_REQUIRE_FRR=1), where a skip would hide a failure."""

from __future__ import annotations

import os

import pytest

from lab.daemons import missing

REQUIRED = os.environ.get("FABRICD_REQUIRE_FRR") == "1"
WHY = missing()
SKIP_REAL = pytest.mark.skipif(not REQUIRED and WHY is not None, reason=WHY or "")
REAL = pytest.param("real", marks=[pytest.mark.daemons, SKIP_REAL], id="daemons")
MODES = [pytest.param("model", id="model"), REAL]
START_S = {"model": 30.0, "real": 90.0}  # how long a twin may take to be ready (the daemons converge first)
