"""Validate a cabling against a spec: labels completed, every rule run, one result."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

from topology.fabric import Fabric
from topology.labels import complete_labels
from topology.layout import Layout
from topology.model import Cabling, Role
from topology.rules.context import RuleContext
from topology.rules.links import check_links
from topology.rules.mesh import check_mesh
from topology.rules.servers import check_servers
from topology.rules.violation import Violation
from topology.spec import FabricSpec

# How many inferred labels the summary lists one by one (the counts cover all of them).
_INFERRED_SHOWN = 20


@dataclass
class ValidationResult:
    ok: bool
    summary: dict[str, object]
    violations: list[Violation] = field(default_factory=list)

    def to_dict(self) -> dict[str, object]:
        return {"ok": self.ok, "summary": self.summary, "violations": [v.to_dict() for v in self.violations]}


def validate(spec: FabricSpec, cabling: Cabling) -> ValidationResult:
    """Run every rule of the rail-optimized layout over the cabling."""
    cabling = complete_labels(cabling)
    fabric = Fabric(cabling)
    ctx = RuleContext.build(fabric, Layout(spec))
    violations = [*check_servers(ctx), *check_links(ctx), *check_mesh(ctx)]
    violations.sort(key=lambda v: (v.severity != "error", v.code.value, v.devices, v.ports))
    return ValidationResult(
        ok=not any(v.severity == "error" for v in violations),
        summary=_summary(spec, cabling, violations),
        violations=violations,
    )


def _summary(spec: FabricSpec, cabling: Cabling, violations: list[Violation]) -> dict[str, object]:
    roles = Counter(d.role.value for d in cabling.devices if not d.is_remote)
    by_code = Counter(v.code.value for v in violations)
    sources = Counter(str(n["from"]) for n in cabling.inferred)
    graph_notes = [n for n in cabling.inferred if n["from"] == "graph"]
    return {
        "fabric": spec.name,
        "cabling": cabling.source,
        "devices": {r.value: roles.get(r.value, 0) for r in Role},
        "links": len(cabling.links),
        "gpus_expected": spec.gpus,
        "errors": sum(1 for v in violations if v.severity == "error"),
        "warnings": sum(1 for v in violations if v.severity == "warning"),
        "by_code": dict(sorted(by_code.items())),
        "labels_inferred": {"from_name": sources.get("name", 0), "from_graph": sources.get("graph", 0)},
        "inferred_from_graph": graph_notes[:_INFERRED_SHOWN],
    }
