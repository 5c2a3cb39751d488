"""Exports of a fabric for other tools: Slurm topology, MPI/NCCL host order, containerlab, JSON.

Each exporter is a pure function `(fabric, spec) -> str`; `export` picks one by format name.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from types import MappingProxyType

from topology.errors import FabricdError
from topology.exports.clab import clab_to_eos_iface, clab_topology, eos_to_clab_iface
from topology.exports.fabric_json import fabric_json
from topology.exports.hostfile import host_order
from topology.exports.schedulers import k8s_labels, slurm_blocks, volcano_hypernodes
from topology.exports.slurm import parse_slurm_topology, slurm_topology
from topology.fabric import Fabric
from topology.spec import FabricSpec

Exporter = Callable[[Fabric, FabricSpec], str]

EXPORT_FORMATS = ("slurm", "slurm-block", "k8s-labels", "volcano", "hostfile", "clab", "json")

_EXPORTERS: Mapping[str, Exporter] = MappingProxyType(
    {
        "slurm": slurm_topology,
        "slurm-block": slurm_blocks,
        "k8s-labels": k8s_labels,
        "volcano": volcano_hypernodes,
        "hostfile": host_order,
        "clab": clab_topology,
        "json": fabric_json,
    }
)


def export(fmt: str, fabric: Fabric, spec: FabricSpec) -> str:
    """The fabric in export format `fmt` (one of EXPORT_FORMATS)."""
    exporter = _EXPORTERS.get(fmt)
    if exporter is None:
        raise FabricdError(f"unknown export format '{fmt}'; use one of: {', '.join(EXPORT_FORMATS)}")
    return exporter(fabric, spec)


__all__ = [
    "EXPORT_FORMATS",
    "Exporter",
    "clab_to_eos_iface",
    "clab_topology",
    "eos_to_clab_iface",
    "export",
    "fabric_json",
    "host_order",
    "parse_slurm_topology",
    "slurm_topology",
]
