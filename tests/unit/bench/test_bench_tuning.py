"""bench/bench_tuning.py's loop over the congestion model (simulated time, no clock, no socket): 30 simulated minutes
of a steady workload change nothing, and a change verified on a window whose workload changed is rolled back (issue
51's "0 changes in a 30-minute steady run" and "a change made worse after its commit is rolled back")."""

from __future__ import annotations

import pytest

from fabricd.tuning.kpis import Kpi
from fabricd.tuning.verify import Decision, Result
from tests.conftest import load_bench

bench = load_bench("bench_tuning")
SHORT = 1e-3  # 1 ms of simulated time per window (the long haul runs 40 feedback delays, 2 ms)
INCAST = next(s for s in bench.SCENARIOS if s.name.startswith("incast 8:1"))
DR = next(s for s in bench.SCENARIOS if s.name == "DCI 120 km bulk, DR-CNP")


@pytest.mark.parametrize(
    ("scenario", "start"),
    [
        pytest.param(INCAST, "static intent", id="incast 8:1 from the static intent"),
        pytest.param(
            DR, "Kmin far too low", id="120 km DR port, converged from Kmin far too low", marks=pytest.mark.slow
        ),  # a dozen 2 ms long-haul model runs: CI runs it
    ],
)
def test_a_steady_workload_changes_nothing_for_30_minutes(scenario: object, start: str) -> None:
    plant, port = bench._setup(scenario, SHORT)
    _, loop = bench.converge(plant, bench.starts(plant, port)[start])
    rounds = loop.rounds
    assert bench.steady(loop, minutes=30) == 0
    assert loop.rounds - rounds == 30 * 60 / bench.WINDOW_S  # every 5-minute window of the 30 minutes was judged


def test_the_steady_run_counts_changes_when_there_is_something_to_change() -> None:
    """The same function on the DR port still at "Kmin far too low" (not converged first): it tries changes."""
    plant, port = bench._setup(DR, SHORT)
    assert bench.steady(bench.Loop.start(plant, bench.starts(plant, port)["Kmin far too low"]), minutes=5) > 0


@pytest.mark.parametrize(
    ("after_load", "decision", "kmin"),
    [
        pytest.param(bench.AFTER_LOAD, Decision.ROLL_BACK, 50_000, id="load halved in the verify window: rolled back"),
        pytest.param(1.0, Decision.CONFIRM, 100_000, id="the same load: the same change is kept"),
    ],
)
def test_a_change_made_worse_inside_its_verify_window_is_rolled_back(
    after_load: float, decision: Decision, kmin: int
) -> None:
    plant, port = bench._setup(DR, SHORT)
    got = bench.worse_inside_verify(plant, bench.starts(plant, port)["Kmin far too low"], after_load)
    assert got is not None
    check, loop = got
    assert check.decision is decision, check.why
    entry = loop.ledger[-1]
    assert not entry.corrective
    assert entry.result is (Result.ROLLED_BACK if decision is Decision.ROLL_BACK else Result.CONFIRMED)
    assert loop.port.ecn.min_bytes == kmin  # rolled back: the running setting is the one before the change
    if decision is Decision.ROLL_BACK:
        assert Kpi.THROUGHPUT in check.regressions and not check.no_effect  # held off, not stepped past
