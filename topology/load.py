"""Loading what most commands and the service start from: the spec, and the fabric from a cabling or the
blueprint (labels completed, so an LLDP or containerlab as-built works as well as a labelled file)."""

from __future__ import annotations

from pathlib import Path

from topology.blueprint import generate_blueprint
from topology.fabric import Fabric
from topology.labels import complete_labels
from topology.loaders import load_cabling
from topology.model import Cabling
from topology.spec import FabricSpec, load_spec


def load_as_built(spec: FabricSpec, cabling: Path | None) -> Cabling:
    """The as-built cabling, or the spec's own blueprint when none is given."""
    return load_cabling(cabling) if cabling is not None else generate_blueprint(spec)


def load_fabric(spec_path: Path, cabling: Path | None) -> tuple[FabricSpec, Fabric]:
    spec = load_spec(spec_path)
    return spec, Fabric(complete_labels(load_as_built(spec, cabling)))
