"""What the CLI checks of its arguments beyond their types (loading the fabric is `topology.load`)."""

from __future__ import annotations

from topology.errors import FabricdError
from topology.fabric import Fabric


def selected_switches(fabric: Fabric, names: list[str]) -> set[str] | None:
    """The --device selection (None: every switch); a name that is not a switch of the fabric is an error."""
    unknown = [d for d in names if d not in fabric or not fabric.device(d).is_switch]
    if unknown:
        raise FabricdError(f"--device {', '.join(unknown)}: not a switch of this fabric; check the name")
    return set(names) if names else None
