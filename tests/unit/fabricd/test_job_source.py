"""The service's job map source: a file or a command, re-read; a bad read keeps the previous map and is named."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from fabricd.jobs.source import JobSource
from tests.conftest import DATA, EXAMPLES
from topology.load import load_fabric

FABRIC = load_fabric(EXAMPLES / "small-pod.yaml", None)[1]
SQUEUE = {"jobs": [{"job_id": 7, "name": "p", "nodes": "gpu-g1-[000-001]", "job_state": ["RUNNING"], "qos": "high"}]}


def test_a_command_printing_squeue_json(tmp_path: Path) -> None:
    out = tmp_path / "squeue.json"
    out.write_text(json.dumps(SQUEUE))
    src = JobSource(FABRIC, None, [sys.executable, "-c", f"print(open({str(out)!r}).read())"], None, 10)
    jobs = src.refresh()
    assert jobs is not None and list(jobs.footprints) == ["7"] and jobs.footprints["7"].gpus == 8
    assert src.status.error is None and src.status.jobs == 1


def test_a_command_printing_scontrol_text() -> None:
    """`scontrol -o show job`, as Slurm 22.05 (no --json) printed it for a job on three servers and a pending one."""
    text = DATA / "slurm-22.05" / "scontrol-o-show-job.txt"
    src = JobSource(FABRIC, None, [sys.executable, "-c", f"print(open({str(text)!r}).read())"], None, 10)
    jobs = src.refresh()
    assert src.status.error is None and jobs is not None and list(jobs.footprints) == ["1"]
    assert jobs.footprints["1"].job.name == "llama-70b pretrain" and jobs.footprints["1"].gpus == 12


def test_a_bad_read_keeps_the_previous_map(tmp_path: Path) -> None:
    path = tmp_path / "jobs.yaml"
    path.write_text((EXAMPLES / "small-pod-jobs.yaml").read_text())
    src = JobSource(FABRIC, path, None, None, 10)
    first = src.refresh()
    assert first is not None and len(first) == 3
    path.write_text("jobs:\n  - id: x\n    nodes: gpu-[1-\n")
    assert src.refresh() is first
    assert src.status.error is not None and "jobs[0].nodes" in src.status.error and src.status.jobs == 3


def test_a_failing_command_is_named_not_raised(tmp_path: Path) -> None:
    src = JobSource(FABRIC, None, [sys.executable, "-c", "import sys; sys.exit(3)"], None, 10)
    assert src.refresh() is None
    assert src.status.error is not None and "exited 3" in src.status.error
    src = JobSource(FABRIC, None, [sys.executable, "-c", "print('not json')"], None, 10)
    assert src.refresh() is None and "did not print JSON" in str(src.status.error)
    src = JobSource(FABRIC, None, ["/nonexistent/squeue"], None, 10)
    assert src.refresh() is None and "cannot run it" in str(src.status.error)


def test_unconfigured_is_no_map() -> None:
    src = JobSource(FABRIC, None, None, None, 10)
    assert not src.configured and src.refresh() is None and src.status.error is None


def test_the_config_takes_one_source_and_reads_the_token(tmp_path: Path) -> None:
    from fabricd.service.config import ConfigError, load_config

    cfg_path = tmp_path / "fabricd.yaml"
    cfg_path.write_text(
        f"spec: {EXAMPLES / 'small-pod.yaml'}\ninventory: inventory.yaml\n"
        "jobs:\n  slurmrestd:\n    url: https://slurm:6820\n    user: fabricd\n    token: {env: SLURM_JWT}\n"
    )
    with pytest.raises(ConfigError) as e:
        load_config(cfg_path, environ={})
    assert "SLURM_JWT is not set" in str(e.value) and "jobs.slurmrestd.token" in str(e.value)
    cfg = load_config(cfg_path, environ={"SLURM_JWT": "x"})
    assert cfg.jobs.slurmrestd is not None and cfg.jobs.slurmrestd.api_version == "v0.0.40"
    cfg_path.write_text(cfg_path.read_text() + "  path: jobs.yaml\n")
    with pytest.raises(ConfigError) as e:
        load_config(cfg_path, environ={"SLURM_JWT": "x"})
    assert "give one of path, command or slurmrestd" in str(e.value)
