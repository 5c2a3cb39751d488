"""Rail-optimized layout rules: each returns violations in the docs/formats.md shape."""

from topology.rules.violation import Code, Violation

__all__ = ["Code", "Violation"]
