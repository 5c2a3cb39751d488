"""slurmctld 22.05 takes the topology.conf `fabricd topology export --format slurm` writes, for the small pod and a
1,024-GPU campus (examples/dci-120km.yaml: 4 aggregation groups x 32 servers x 8 rails) and the 16,384-GPU pod, and
`scontrol show topology` is the fabric: one level-0 switch per aggregation group holding exactly its servers, one
top switch over them (docs/topology.md). Slurm's own `scontrol show hostnames` expands every hostlist fabricd writes
to the names fabricd means."""

from __future__ import annotations

from pathlib import Path

import pytest

from fabricd.cli import main
from tests.conftest import EXAMPLES
from tests.twin.slurm_cluster import SlurmCluster, need_slurm, started
from topology.blueprint import generate_blueprint
from topology.errors import FabricdError
from topology.exports.hostlist import compress_hostlist, expand_hostlist
from topology.exports.slurm import ag_switch_name
from topology.fabric import Fabric
from topology.labels import complete_labels
from topology.model import Role
from topology.spec import load_spec

pytestmark = pytest.mark.slurm


def servers_by_group(spec: Path) -> dict[int, list[str]]:
    fabric = Fabric(complete_labels(generate_blueprint(load_spec(spec))))
    out: dict[int, list[str]] = {}
    for d in fabric.devices():
        if d.role is Role.SERVER and d.group is not None:
            out.setdefault(d.group, []).append(d.name)
    return {g: sorted(names) for g, names in sorted(out.items())}


def shown_topology(slurm: SlurmCluster) -> dict[str, tuple[int, list[str], list[str]]]:
    """`scontrol show topology`: {switch: (level, nodes, child switches)}, hostlists expanded by Slurm itself."""
    out = {}
    for line in slurm.run("scontrol", "show", "topology").stdout.splitlines():
        fields = dict(tok.partition("=")[::2] for tok in line.split())
        out[fields["SwitchName"]] = (int(fields["Level"]), slurm_names(slurm, fields.get("Nodes")),
                                     slurm_names(slurm, fields.get("Switches")))  # fmt: skip
    return out


def slurm_names(slurm: SlurmCluster, hostlist: str | None) -> list[str]:
    if not hostlist or hostlist == "(null)":
        return []
    return slurm.run("scontrol", "show", "hostnames", hostlist).stdout.split()


@pytest.mark.parametrize("spec", ["small-pod.yaml", "dci-120km.yaml", "pod-16k.yaml"])
def test_slurmctld_takes_fabricds_topology(spec: str, tmp_path: Path) -> None:
    need_slurm()  # before the export of the 16,384-GPU pod, which takes seconds
    conf = tmp_path / "topology.conf"
    assert main(["topology", "export", "--spec", str(EXAMPLES / spec), "--format", "slurm", "-o", str(conf)]) == 0
    groups = servers_by_group(EXAMPLES / spec)
    everyone = sorted(n for names in groups.values() for n in names)
    top = load_spec(EXAMPLES / spec).name
    with started(everyone, conf.read_text()) as slurm:
        shown = shown_topology(slurm)
    expected: dict[str, tuple[int, list[str], list[str]]] = {
        ag_switch_name(g): (0, names, []) for g, names in groups.items()
    }
    expected[top] = (1, everyone, sorted(expected))
    assert {k: (lvl, sorted(n), sorted(s)) for k, (lvl, n, s) in shown.items()} == expected


@pytest.mark.parametrize(
    "hostlist",
    [
        compress_hostlist(n for names in servers_by_group(EXAMPLES / "dci-120km.yaml").values() for n in names),
        compress_hostlist(["gpu-g0-000", "gpu-g0-001", "gpu-g0-002", "gpu-g0-005", "gpu-g0-010", "gpu-g1-003"]),
        compress_hostlist(["n9", "n10", "n099", "n100", "login", "ag-g0"]),  # unpadded and padded runs of one prefix
        "n[9-10]",  # the width is lo's: 9, 10
        "x[01-3],x[1-03]",
        "x[1-2]y[0-1]",  # text between brackets
        "r-[1-2],b, c[07]",  # a space after a comma is dropped
    ],
)
def test_slurm_expands_fabricds_hostlists_to_the_same_names(hostlist: str, small_slurm: SlurmCluster) -> None:
    assert slurm_names(small_slurm, hostlist) == expand_hostlist(hostlist)


@pytest.mark.parametrize("hostlist", ["r[1-2]-a", "x[1-2]y", "n[2-1]"])
def test_what_slurm_rejects_fabricd_rejects(hostlist: str, small_slurm: SlurmCluster) -> None:
    done = small_slurm.run("scontrol", "show", "hostnames", hostlist, check=False)
    assert "Invalid hostlist" in done.stdout + done.stderr
    with pytest.raises(FabricdError, match="hostlist"):
        expand_hostlist(hostlist)
