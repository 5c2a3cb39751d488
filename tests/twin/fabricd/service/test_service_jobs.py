"""Jobs in the service, against the small-pod twin with three jobs (examples/small-pod-jobs.yaml): a flap on a port
of job-b names job-b, and not job-a or job-c, in the finding, the ticket and the API; a corrupting rank of job-b is
the outlier `fabricd jobs --show job-b` points at; a bad jobs file keeps the previous map."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import httpx
import pytest

from fabricd.cli import main
from lab.control_client import inject
from tests.conftest import EXAMPLES
from tests.twin.lab.twin_thread import TwinThread
from tests.twin.processes import twin_fixture

from .service_thread import TOKEN, ServiceThread, wait_for, write_config

B_PORT = "leaf-g0-r1:Ethernet3/1"  # faces gpu-g0-002:nic1, a rank of job-b
B_RANK = "leaf-g0-r2:Ethernet4/1"  # faces gpu-g0-003:nic2, another


twin = twin_fixture(scope="module")


def test_a_flap_names_the_job_it_hits_and_jobs_points_at_the_slow_rank(
    twin: TwinThread,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("FABRICD_API_TOKEN", TOKEN)  # a reader's token, as `fabricd ... --api` takes it
    jobs = tmp_path / "jobs.yaml"
    shutil.copy(EXAMPLES / "small-pod-jobs.yaml", jobs)
    cfg = write_config(
        tmp_path, twin.inventory, jobs={"path": str(jobs), "refresh_s": 1}, remediation={"mode": "observe"}
    )
    svc = ServiceThread(cfg).start()
    try:
        assert svc.get("/api/v1/health")["jobs"]["jobs"] == 3
        inject(twin.state_dir, "link_flap", {"port": B_PORT, "count": 8, "period_s": 0.3})
        (f,) = wait_for(lambda: svc.get("/api/v1/findings")["findings"], 15)
        assert [j["id"] for j in f["jobs"]] == ["job-b"]
        (t,) = wait_for(lambda: svc.get("/api/v1/tickets")["tickets"], 10)
        assert t["title"].endswith("(jobs: llama-70b-pretrain)")
        assert [j["id"] for j in svc.get(f"/api/v1/tickets/{t['id']}")["body"]["jobs"]] == ["job-b"]
        text = httpx.get(svc.url + "/metrics", timeout=10).text
        assert re.search(r'^fabricd_job_active_findings\{job="job-b"\} 1\.0$', text, re.M)
        assert 'fabricd_job_active_findings{job="job-a"}' not in text
        assert 'fabricd_job_active_findings{job="job-c"}' not in text
        assert re.search(r'^fabricd_job_gpus\{job="job-b",name="llama-70b-pretrain"\} 16\.0$', text, re.M)

        # a corrupting rank of job-b: the outlier among its ports, from the CLI against the service
        inject(twin.state_dir, "link_corruption", {"port": B_RANK, "rate": 1e-5})

        def slow() -> list[dict[str, object]]:
            outliers: list[dict[str, object]] = svc.get("/api/v1/jobs/job-b")["outliers"]
            return outliers

        (o,) = wait_for(slow, 10)
        assert (o["port"], o["nic"], o["metric"]) == (B_RANK, "gpu-g0-003:nic2", "error_rate")
        capsys.readouterr()
        assert main(["jobs", "--api", svc.url, "--show", "job-b"]) == 1
        assert "gpu-g0-003:nic2 on leaf-g0-r2:Ethernet4/1" in capsys.readouterr().out
        listing = {r["id"]: r for r in svc.get("/api/v1/jobs")["jobs"]}
        assert listing["job-a"]["outliers"] == [] and listing["job-c"]["outliers"] == []

        # a bad jobs file: the previous map stays in force and health names the error
        jobs.write_text("jobs:\n  - id: broken\n")
        status = wait_for(lambda: (h := svc.get("/api/v1/health")["jobs"])["error"] and h, 10)
        assert "jobs[0].nodes" in status["error"] and status["jobs"] == 3
        assert [r["id"] for r in svc.get("/api/v1/jobs")["jobs"]] == ["job-a", "job-b", "job-c"]
    finally:
        svc.stop()
