"""Jobs from a file, Slurm and Kubernetes; their footprint on the fabric; which jobs a port carries."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.conftest import DATA, EXAMPLES
from topology.fabric import Fabric
from topology.jobs import Job, JobError, JobMap, footprint, load_jobs, parse_scontrol_jobs

JOBS = EXAMPLES / "small-pod-jobs.yaml"


def test_file_jobs_with_hostlists(small_fabric: Fabric) -> None:
    jobs = load_jobs(JOBS)
    assert [j.id for j in jobs] == ["job-a", "job-b", "job-c"]
    assert jobs[0].nodes == ("gpu-g0-000", "gpu-g0-001") and jobs[0].name == "llama-8b-sft"
    assert jobs[1].priority == "high" and jobs[2].priority is None and jobs[2].source == "file"


def test_footprint_in_one_group_uses_only_its_leaves(small_fabric: Fabric) -> None:
    a = footprint(load_jobs(JOBS)[0], small_fabric)
    assert a.servers == ("gpu-g0-000", "gpu-g0-001") and a.gpus == 8 and a.unknown == ()
    assert a.leaves == ("leaf-g0-r0", "leaf-g0-r1", "leaf-g0-r2", "leaf-g0-r3")
    assert a.groups == (0,) and a.rails == (0, 1, 2, 3) and a.uplinks == () and a.spines == ()
    assert a.leaf_ports[0] == "leaf-g0-r0:Ethernet1/1" and a.nic_of["leaf-g0-r0:Ethernet1/1"] == "gpu-g0-000:nic0"


def test_footprint_across_groups_takes_the_spines_of_its_rails(small_fabric: Fabric) -> None:
    b = footprint(load_jobs(JOBS)[1], small_fabric)
    assert b.groups == (0, 1) and len(b.leaves) == 8 and b.gpus == 16
    assert len(b.spines) == 8 and all(s.startswith("spine-") for s in b.spines)  # 2 per rail x 4 rails
    assert len(b.uplinks) == 8 * 4  # each of its 8 leaves has 4 uplinks


def test_jobmap_names_the_jobs_a_port_or_switch_carries(small_fabric: Fabric) -> None:
    m = JobMap(load_jobs(JOBS), small_fabric)
    assert [j.id for j in m.hit(["leaf-g0-r1:Ethernet3/1"])] == ["job-b"]  # faces gpu-g0-002:nic1
    assert [j.id for j in m.hit(["gpu-g0-000:nic2", "leaf-g0-r2:Ethernet1/1"])] == ["job-a"]
    uplink = next(p for p in m.footprints["job-b"].uplinks if p.startswith("leaf-g0-r0:"))
    assert [j.id for j in m.hit([uplink])] == ["job-b"]  # job-a stays inside group 0: no uplinks
    assert [j.id for j in m.hit([], ["leaf-g1-r3"])] == ["job-b", "job-c"]
    assert m.hit(["ssp-0:Ethernet1/1"]) == []


def test_unknown_nodes_are_named_not_guessed(small_fabric: Fabric) -> None:
    fp = footprint(Job("x", ("gpu-g0-000", "node-999")), small_fabric)
    assert fp.servers == ("gpu-g0-000",) and fp.unknown == ("node-999",)


SQUEUE = {
    "meta": {"plugin": {"type": "openapi/v0.0.40"}},
    "jobs": [
        {"job_id": 4101, "name": "pretrain", "nodes": "gpu-g0-[000-003]", "job_state": ["RUNNING"], "qos": "high"},
        {"job_id": 4102, "name": "queued", "nodes": "", "job_state": ["PENDING"], "qos": "normal"},
        {"job_id": 4103, "name": "eval", "nodes": "gpu-g1-000,gpu-g1-001", "job_state": "RUNNING", "qos": ""},
    ],
}


def test_slurm_squeue_json(tmp_path: Path) -> None:
    path = tmp_path / "squeue.json"
    path.write_text(json.dumps(SQUEUE))
    jobs = load_jobs(path)
    assert [(j.id, j.name, j.priority, j.source) for j in jobs] == [
        ("4101", "pretrain", "high", "slurm"),
        ("4103", "eval", None, "slurm"),
    ]
    assert jobs[0].nodes == ("gpu-g0-000", "gpu-g0-001", "gpu-g0-002", "gpu-g0-003")


# What a real Slurm 22.05.8 printed (tests/twin/slurm): a job running on three servers, one pending, no accounting
SLURM_22 = DATA / "slurm-22.05"


@pytest.mark.parametrize("name", ["squeue.json", "slurmrestd-v0.0.38-jobs.json", "scontrol-o-show-job.txt"])
def test_what_slurm_22_05_prints(name: str) -> None:
    (job,) = load_jobs(SLURM_22 / name)  # the pending one holds no node
    # the name keeps its space; no accounting, no QoS: "" in JSON, "(null)" in scontrol's text
    assert (job.id, job.name, job.nodes, job.priority, job.source) == (
        "1", "llama-70b pretrain", ("gpu-g0-000", "gpu-g0-001", "gpu-g1-000"), None, "slurm")  # fmt: skip


@pytest.mark.parametrize(
    ("text", "jobs"),
    [
        ("No jobs in the system\n", []),
        ("JobId=5 JobName=a b=c QOS=high JobState=RUNNING NodeList=gpu-g0-[000-001] NumNodes=2\n",
         [("5", "a", "high", ("gpu-g0-000", "gpu-g0-001"))]),  # a name holding ' x=' is cut there
        ("JobId=6 JobName=x JobState=COMPLETING NodeList=gpu-g0-000\n\nJobId=7 JobState=RUNNING NodeList=n1\n",
         [("7", "7", None, ("n1",))]),
    ],
)  # fmt: skip
def test_scontrol_text(text: str, jobs: list[tuple[str, str, str | None, tuple[str, ...]]]) -> None:
    assert [(j.id, j.name, j.priority, j.nodes) for j in parse_scontrol_jobs(text, "scontrol")] == jobs


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("JobId=1 JobState=RUNNING NodeList=(null)\n", "scontrol:1: field 'NodeList': a running job needs its"),
        ("JobId=1 JobState=RUNNING NodeList=n[1-2]x\n", "scontrol:1: field 'NodeList': hostlist 'n[1-2]x'"),
        ("JobId=1 JobState=RUNNING NodeList=n1\nJobName=x\n", "scontrol:2: a line without JobId="),
    ],
)
def test_scontrol_text_errors_name_the_line(text: str, message: str) -> None:
    with pytest.raises(JobError) as e:
        parse_scontrol_jobs(text, "scontrol")
    assert str(e.value).startswith(message)


def _pod(name: str, node: str, job: str | None, phase: str = "Running") -> dict[str, object]:
    labels = {"batch.kubernetes.io/job-name": job} if job else {}
    return {
        "metadata": {"name": name, "labels": labels},
        "spec": {"nodeName": node, "priorityClassName": "training-high"},
        "status": {"phase": phase},
    }


def test_kubernetes_pods_grouped_by_job_label(tmp_path: Path) -> None:
    pods = {
        "apiVersion": "v1",
        "kind": "PodList",
        "items": [
            _pod("w-0", "gpu-g0-000", "llm"),
            _pod("w-1", "gpu-g0-001", "llm"),
            _pod("w-2", "gpu-g0-001", "llm"),  # two pods on one node: one node
            _pod("x", "gpu-g1-000", None),  # not a job's pod
            _pod("w-3", "gpu-g1-001", "llm", phase="Succeeded"),
        ],
    }
    path = tmp_path / "pods.json"
    path.write_text(json.dumps(pods))
    (job,) = load_jobs(path)
    assert (job.id, job.nodes, job.priority, job.source) == (
        "llm", ("gpu-g0-000", "gpu-g0-001"), "training-high", "kubernetes"
    )  # fmt: skip


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("jobs:\n  - id: a\n    nodes: []\n", "jobs.yaml:3: field 'jobs[0].nodes': no nodes"),
        ("jobs:\n  - id: a\n    nodes: gpu-[1-\n", "field 'jobs[0].nodes'"),
        ("jobs:\n  - id: a\n    nodes: x\n    nodez: y\n", "jobs.yaml:4: field 'jobs[0].nodez': unknown key"),
        ("jobs:\n  - {id: a, nodes: x}\n  - {id: a, nodes: y}\n", "job id 'a' appears twice"),
        ("- a\n", "a jobs file must be a mapping"),
    ],
)
def test_bad_input_names_the_field(tmp_path: Path, text: str, message: str) -> None:
    path = tmp_path / "jobs.yaml"
    path.write_text(text)
    with pytest.raises(JobError) as e:
        load_jobs(path)
    assert message in str(e.value) and "\n" not in str(e.value)


def test_slurm_job_without_nodes_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "squeue.json"
    path.write_text(json.dumps({"jobs": [{"job_id": 1, "job_state": "RUNNING", "nodes": ""}]}))
    with pytest.raises(JobError, match=r"field 'jobs\[0\]\.nodes': a running job needs its nodes"):
        load_jobs(path)


@pytest.fixture(scope="module")
def small_fabric() -> Fabric:
    from topology.blueprint import generate_blueprint
    from topology.labels import complete_labels
    from topology.spec import load_spec

    return Fabric(complete_labels(generate_blueprint(load_spec(EXAMPLES / "small-pod.yaml"))))
