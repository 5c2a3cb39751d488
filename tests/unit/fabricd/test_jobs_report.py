"""A job's ports and its slow node: outliers among its own ports (pure), and `fabricd jobs` on a recorded trace."""

from __future__ import annotations

import json

import pytest

from fabricd.cli import main
from fabricd.jobs.report import PortView, outliers
from tests.conftest import DATA, EXAMPLES

TRACES = DATA / "traces"


def view(i: int, gbps: float = 300.0, paused: float = 0.0, errors: float = 0.0) -> PortView:
    return PortView(f"leaf:Ethernet{i}/1", f"gpu-{i}:nic0", i % 4, gbps / 2, gbps / 2, paused, 0.0, 0.0, errors)


# a job's usual spread: per-port throughput within +-15 %
SPREAD = [260.0, 280.0, 300.0, 310.0, 320.0, 290.0, 305.0, 295.0, 285.0, 315.0, 275.0, 330.0]


@pytest.mark.parametrize(
    ("views", "expected"),
    [
        ([view(i, g) for i, g in enumerate(SPREAD)], []),  # healthy spread: nothing
        ([view(i, g) for i, g in enumerate([*SPREAD[:-1], 60.0])], [("leaf:Ethernet11/1", "throughput")]),
        ([view(i, g, paused=0.4 if i == 3 else 0.0) for i, g in enumerate(SPREAD)], [("leaf:Ethernet3/1", "paused")]),
        (
            [view(i, g, errors=1e-5 if i == 7 else 0.0) for i, g in enumerate(SPREAD)],
            [("leaf:Ethernet7/1", "error_rate")],
        ),
        ([view(i, g, errors=1e-9 if i == 7 else 0.0) for i, g in enumerate(SPREAD)], []),  # under CorrOpt's floor
        ([view(i, g, paused=0.005 * (i % 2)) for i, g in enumerate(SPREAD)], []),  # everyone pauses a little
        ([view(0), view(1, 10.0)], []),  # too few ports to call one an outlier
    ],
    ids=["healthy", "slow-port", "paused-by-nic", "corrupting", "below-floor", "common-pause", "too-few"],
)
def test_outliers(views: list[PortView], expected: list[tuple[str, str]]) -> None:
    assert [(o.port, o.metric) for o in outliers(views)] == expected


def test_a_port_both_slow_and_corrupting_lists_errors_first() -> None:
    views = [view(i, g) for i, g in enumerate(SPREAD)]
    views[5] = view(5, 50.0, errors=1e-4)
    assert [o.metric for o in outliers(views)] == ["error_rate", "throughput"]


def _jobs(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    base = ["jobs", "--spec", str(EXAMPLES / "small-pod.yaml"), "--jobs", str(EXAMPLES / "small-pod-jobs.yaml")]
    code = main([*base, "--trace", str(TRACES / "jobs.jsonl"), *args])
    out, err = capsys.readouterr()
    return code, out, err


def test_jobs_from_a_recording_point_at_the_corrupting_rank(capsys: pytest.CaptureFixture[str]) -> None:
    # traces/jobs.jsonl: the small-pod twin, `lab inject link_corruption --port leaf-g0-r2:Ethernet4/1 --rate 1e-5`
    # (it faces gpu-g0-003:nic2, a rank of job-b), 5 s of the leaves' server ports
    code, out, _ = _jobs(capsys, "--format", "json")
    assert code == 1
    rows = {r["id"]: r for r in json.loads(out)["jobs"]}
    assert [o["nic"] for o in rows["job-b"]["outliers"]] == ["gpu-g0-003:nic2"]
    assert rows["job-a"]["outliers"] == [] and rows["job-c"]["outliers"] == []
    assert rows["job-b"]["gpus"] == 16 and rows["job-b"]["groups"] == [0, 1] and len(rows["job-b"]["spines"]) == 8
    assert set(rows["job-b"]["per_rail_gbps"]) == {"0", "1", "2", "3"}


def test_show_one_job(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = _jobs(capsys, "--show", "job-b")
    assert code == 1
    assert "slow node / rail" in out and "gpu-g0-003:nic2 on leaf-g0-r2:Ethernet4/1" in out
    assert "a bad link or optic on this rank" in out
    code, out, _ = _jobs(capsys, "--show", "job-b", "--format", "json")
    d = json.loads(out)
    assert len(d["ports"]) == 16 and d["attention"] == ["leaf-g0-r2:Ethernet4/1"]


def test_offline_needs_all_three_and_a_known_job(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["jobs", "--spec", str(EXAMPLES / "small-pod.yaml")]) == 2
    assert "offline needs all of --spec, --jobs and --trace" in capsys.readouterr().err
    code, _, err = _jobs(capsys, "--show", "job-z")
    assert code == 2 and "--show job-z: no such job" in err
