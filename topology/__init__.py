"""The fabric model: spec, blueprint, cabling loaders, rail/aggregation-group rules, paths and exports.

Pure: data in, data out; imports nothing else of fabricd.
"""

from topology.blueprint import generate_blueprint
from topology.errors import CablingError, FabricdError, InputError, OutputError, SpecError
from topology.fabric import Fabric
from topology.layout import Layout
from topology.model import Cabling, Device, Endpoint, Link, Role
from topology.spec import FabricSpec, load_spec
from topology.validate import ValidationResult, validate

__all__ = [
    "Cabling",
    "CablingError",
    "Device",
    "Endpoint",
    "Fabric",
    "FabricSpec",
    "FabricdError",
    "InputError",
    "Layout",
    "Link",
    "OutputError",
    "Role",
    "SpecError",
    "ValidationResult",
    "generate_blueprint",
    "load_spec",
    "validate",
]
