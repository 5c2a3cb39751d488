"""fabricd's error root (defined in topology, which imports nothing of ours) and its service-side subclasses."""

from topology.errors import CablingError, FabricdError, InputError, OutputError, SpecError

__all__ = ["CablingError", "FabricdError", "InputError", "OutputError", "SpecError"]
