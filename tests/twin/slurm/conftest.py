"""The small pod's Slurm, once per test module: every server a node, three of them (two groups) with their slurmd
running, slurmrestd up."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from fabricd.cli import main
from tests.conftest import EXAMPLES
from tests.twin.slurm_cluster import SlurmCluster, started
from topology.exports.hostlist import expand_hostlist

RUNNING = ("gpu-g0-000", "gpu-g0-001", "gpu-g1-000")  # the servers whose slurmd runs (slurmd -N NAME)
SMALL_POD_NODES = expand_hostlist("gpu-g0-[000-003],gpu-g1-[000-003]")


@pytest.fixture(scope="module")
def small_slurm(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SlurmCluster]:
    conf: Path = tmp_path_factory.mktemp("slurm") / "topology.conf"
    assert main(["topology", "export", "--spec", str(EXAMPLES / "small-pod.yaml"), "--format", "slurm",
                 "-o", str(conf)]) == 0  # fmt: skip
    with started(SMALL_POD_NODES, conf.read_text(), running=RUNNING, rest=True) as slurm:
        yield slurm
