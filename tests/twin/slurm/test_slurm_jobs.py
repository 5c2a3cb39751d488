"""A job sbatch'ed onto three servers of the small pod's real Slurm (gpu-g0-000, gpu-g0-001, gpu-g1-000: two
aggregation groups, so Slurm writes its nodes as `gpu-g0-[000-001],gpu-g1-000`): in fabricd's job map through squeue
--json, scontrol and slurmrestd with a JWT, with its footprint (12 NICs, the leaf ports facing them, both groups, the
spines of its rails); in the service (jobs read with squeue, against the twin), a flap on gpu-g0-000's leaf port names
the job in its finding and ticket, `fabricd drain` of that port lists it, and its end (scancel) takes it out of the
map at the next refresh."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from pydantic import SecretStr

from fabricd.cli import main as cli
from fabricd.jobs.source import JobSource, SlurmRest
from lab.control_client import inject
from tests.conftest import EXAMPLES
from tests.twin.fabricd.service.service_thread import TOKEN, ServiceThread, wait_for, write_config
from tests.twin.lab.twin_thread import TwinThread
from tests.twin.slurm_cluster import SlurmCluster, slurm_version
from topology.blueprint import generate_blueprint
from topology.fabric import Fabric
from topology.labels import complete_labels
from topology.spec import load_spec

from .conftest import RUNNING

pytestmark = pytest.mark.slurm

NAME = "llama-70b pretrain"  # a space: scontrol's text form must keep the name whole
# the leaf ports facing the job's NICs, server by server in NIC order: server s of a group is on Ethernet{s+1}/1
FACING = [f"leaf-g{g}-r{r}:Ethernet{s + 1}/1" for g, s in ((0, 0), (0, 1), (1, 0)) for r in range(4)]
SPINES = tuple(f"spine-r{r}-{i}" for r in range(4) for i in range(2))
FABRIC = Fabric(complete_labels(generate_blueprint(load_spec(EXAMPLES / "small-pod.yaml"))))
V22 = slurm_version().startswith("22.")  # 22.05: scontrol has no --json; slurmrestd serves v0.0.38 at most


@pytest.fixture(scope="module")
def job(small_slurm: SlurmCluster) -> str:
    job_id = small_slurm.submit(NAME, "-N3")
    wait_for(lambda: small_slurm.job_state(job_id) == "RUNNING", 20)
    return job_id


@pytest.fixture
def slurm_env(small_slurm: SlurmCluster, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """squeue and scontrol, as fabricd runs them, find this cluster's slurm.conf."""
    monkeypatch.setenv("SLURM_CONF", str(small_slurm.conf))
    yield


def rest(slurm: SlurmCluster, token: str | None = None, api_version: str = "v0.0.38") -> SlurmRest:
    return SlurmRest(slurm.rest_url, "root", SecretStr(token or slurm.token()), api_version=api_version)


def test_the_job_is_in_the_map_through_all_three_sources(small_slurm: SlurmCluster, job: str, slurm_env: None) -> None:
    waiting = small_slurm.submit("waiting", "-N3")  # the nodes are taken (select/linear): it stays pending
    assert small_slurm.job_state(waiting) == "PENDING"
    # 22.05's scontrol has no --json (`unrecognized option`): its one-line text form is read instead
    scontrol = ["scontrol", "-o", "show", "job"] if V22 else ["scontrol", "show", "job", "--json"]
    sources = {
        "squeue": JobSource(FABRIC, None, ["squeue", "--json"], None, 20),
        "scontrol": JobSource(FABRIC, None, scontrol, None, 20),
        "slurmrestd": JobSource(FABRIC, None, None, None, 20, rest(small_slurm)),
    }
    # Slurm's own hostlist for the three: fabricd expands it
    rows = json.loads(small_slurm.run("squeue", "--json").stdout)["jobs"]
    assert [r["nodes"] for r in rows if str(r["job_id"]) == job] == ["gpu-g0-[000-001],gpu-g1-000"]
    try:
        for name, src in sources.items():
            jobs = src.refresh()
            assert src.status.error is None and jobs is not None, name
            assert list(jobs.footprints) == [job], name  # the pending one holds no node
            fp = jobs.footprints[job]
            assert (fp.job.name, fp.job.nodes, fp.job.source, fp.unknown) == (NAME, RUNNING, "slurm", ()), name
            assert (fp.gpus, list(fp.leaf_ports), fp.groups, fp.rails, fp.spines) == (
                12, FACING, (0, 1), (0, 1, 2, 3), SPINES), name  # fmt: skip
            assert fp.job.priority is None, name  # no accounting, so no QoS: squeue says "", scontrol "(null)"
    finally:
        small_slurm.run("scancel", waiting)


def test_scontrol_json_and_slurmrestd_errors_on_22_05(small_slurm: SlurmCluster, job: str, slurm_env: None) -> None:
    if not V22:
        pytest.skip(f"checks what Slurm 22.05 answers; this is {slurm_version()}")
    src = JobSource(FABRIC, None, ["scontrol", "show", "job", "--json"], None, 20)
    assert src.refresh() is None and "unrecognized option '--json'" in str(src.status.error)
    # the newest API version fabricd knows is not there: the error names the one slurmrestd serves
    src = JobSource(FABRIC, None, None, None, 20, rest(small_slurm, api_version="v0.0.40"))
    assert src.refresh() is None
    assert "no such endpoint (404); it serves v0.0.38: set jobs.slurmrestd.api_version" in str(src.status.error)
    # 22.05's slurmrestd leaves the token to slurmctld, which refuses it; slurmrestd answers 500, not 401
    forged = small_slurm.token()[:-4] + "AAAA"
    src = JobSource(FABRIC, None, None, None, 20, rest(small_slurm, token=forged))
    assert src.refresh() is None
    assert "Failed while looking for jobs; slurmctld refused the request: is jobs.slurmrestd.token valid" in str(
        src.status.error
    )
    assert forged not in str(src.status.error)


@pytest.fixture(scope="module")
def twin(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TwinThread]:
    t = TwinThread(load_spec(EXAMPLES / "small-pod.yaml"), tmp_path_factory.mktemp("twin")).start()
    yield t
    t.stop()


def test_a_flap_and_a_drain_name_the_job_and_its_end_clears_it(
    small_slurm: SlurmCluster,
    job: str,
    slurm_env: None,
    twin: TwinThread,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.setenv("FABRICD_API_TOKEN", TOKEN)
    jobs = {"command": ["squeue", "--json"], "refresh_s": 1}
    svc = ServiceThread(write_config(tmp_path, twin.inventory, jobs=jobs, remediation={"mode": "observe"})).start()
    port = FACING[0]  # faces gpu-g0-000:nic0
    try:
        assert svc.get("/api/v1/health")["jobs"]["jobs"] == 1
        assert [(j["id"], j["name"], j["gpus"]) for j in svc.get("/api/v1/jobs")["jobs"]] == [(job, NAME, 12)]
        inject(twin.state_dir, "link_flap", {"port": port, "count": 8, "period_s": 0.3})
        (f,) = wait_for(lambda: svc.get("/api/v1/findings")["findings"], 15)
        assert (f["kind"], [j["id"] for j in f["jobs"]]) == ("link_flap", [job])
        (t,) = wait_for(lambda: svc.get("/api/v1/tickets")["tickets"], 10)
        assert t["title"].endswith(f"(jobs: {NAME})")
        assert [(j["id"], j["gpus"]) for j in svc.get(f"/api/v1/tickets/{t['id']}")["body"]["jobs"]] == [(job, 12)]
        capsys.readouterr()
        assert cli(["drain", "port", port, "--reason", "optic swap", "--dry-run", "--api", svc.url]) == 0
        assert f"jobs whose traffic it carries: {NAME}\n" in capsys.readouterr().out
        # the job ends: gone from the map at the next refresh, and a drain carries nothing
        small_slurm.run("scancel", job)
        wait_for(lambda: svc.get("/api/v1/jobs")["jobs"] == [], 15)
        assert svc.get("/api/v1/health")["jobs"]["error"] is None
        assert cli(["drain", "port", port, "--reason", "optic swap", "--dry-run", "--api", svc.url]) == 0
        assert "jobs whose traffic it carries: none known" in capsys.readouterr().out
    finally:
        svc.stop()
