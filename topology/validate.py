"""Validate a cabling against a spec: labels completed, every rule run, one result."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Collection
from dataclasses import dataclass, field

from topology.fabric import Fabric
from topology.labels import complete_labels
from topology.layout import Layout
from topology.model import SWITCH_ROLES, Cabling, Role
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


def validate(spec: FabricSpec, cabling: Cabling, unread: Collection[str] = ()) -> ValidationResult:
    """Run every rule of the rail-optimized layout over the cabling. `unread`: switches whose own LLDP could not be
    read (`fabricd validate --inventory`); a violation is judged only where a switch that was read could see it."""
    cabling = complete_labels(cabling)
    fabric = Fabric(cabling)
    ctx = RuleContext.build(fabric, Layout(spec))
    violations = [*check_servers(ctx), *check_links(ctx), *check_mesh(ctx)]
    violations.sort(key=lambda v: (v.severity != "error", v.code.value, v.devices, v.ports))
    layout = ctx.layout
    roles = {d.name: d.role for d in cabling.devices}

    def read_switch(name: str) -> bool:
        role = roles.get(name) or getattr(layout.device(name), "role", None)
        return role in SWITCH_ROLES and name not in unread

    judged = [v for v in violations if seen(v, frozenset(unread), read_switch)]
    summary = _summary(spec, cabling, judged)
    if unread:
        summary["not_judged"] = len(violations) - len(judged)  # what only an unread switch could have seen
    return ValidationResult(ok=not any(v.severity == "error" for v in judged), summary=summary, violations=judged)


def seen(v: Violation, unread: frozenset[str], read_switch: Callable[[str], bool]) -> bool:
    """Whether a switch that was read could see what `v` is about: it names no unread switch, or it also names a
    switch that was read (a leaf-spine link is seen from the spine when the leaf is not read). A leaf's server cables
    are seen only from the leaf (servers send no tables): with the leaf unread, a missing one is not judged."""
    if not unread.intersection(v.devices):
        return True
    return any(read_switch(d) for d in v.devices)


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
