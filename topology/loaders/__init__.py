"""As-built cabling from any source fabricd reads, chosen by what the path is.

- a directory: LLDP tables, one `<device>.json` per switch (`topology.loaders.lldp`)
- `*.clab.yml` / `*.clab.yaml`, or any YAML/JSON file with a top-level `topology` key: a containerlab
  topology (`topology.loaders.clab`)
- any other file: a cabling file in fabricd's schema, YAML or JSON (`topology.cabling_io`)

Loaders give every device a role; rail and group are filled later by `topology.labels.complete_labels`.
"""

from __future__ import annotations

from pathlib import Path

from topology.cabling_io import cabling_from_data
from topology.errors import CablingError
from topology.loaders.clab import clab_from_data, load_clab
from topology.loaders.lldp import load_lldp_dir
from topology.model import Cabling
from topology.sourcefile import load_document

__all__ = ["load_cabling", "load_clab", "load_lldp_dir"]

_CLAB_SUFFIXES = (".clab.yml", ".clab.yaml")


def load_cabling(path: str | Path) -> Cabling:
    """The as-built cabling at `path`: LLDP directory, containerlab topology or cabling file."""
    p = Path(path)
    if not p.exists():
        raise CablingError(str(p), "file not found; check the path")
    if p.is_dir():
        return load_lldp_dir(p)
    if p.name.lower().endswith(_CLAB_SUFFIXES):
        return load_clab(p)
    data = load_document(p, CablingError)
    if isinstance(data, dict) and "topology" in data:
        return clab_from_data(data, p)
    return cabling_from_data(data, str(p), p)
