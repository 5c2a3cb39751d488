"""The house has floors: topology -> policies -> drivers and lab -> fabricd. Nothing imports upward, nothing below the
CLI imports the CLI, and no module imports itself back at run time (imports under TYPE_CHECKING do not count)."""

from __future__ import annotations

import ast
from pathlib import Path

import networkx as nx

from tests.conftest import REPO

FLOOR = {"topology": 0, "policies": 1, "drivers": 2, "lab": 2, "fabricd": 3}
# ../shared/DESIGN.md, "may import": the twin sees only the model, so tests of fabricd against it are not circular
MAY_IMPORT = {
    "topology": set(),
    "policies": {"topology"},
    "drivers": {"topology", "policies"},
    "lab": {"topology"},
    "fabricd": {"topology", "policies", "drivers", "lab"},
}


def _modules() -> dict[str, Path]:
    out = {}
    for pkg in FLOOR:
        for f in (REPO / pkg).rglob("*.py"):
            parts = list(f.relative_to(REPO).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            out[".".join(parts)] = f
    return out


MODULES = _modules()


def _runtime_imports(name: str, path: Path, typing: bool = False) -> set[str]:
    """The modules of ours that `name` imports when it runs (the nearest module for a `from m import attr`); with
    `typing`, also those it imports only for the type checker (under TYPE_CHECKING)."""
    tree = ast.parse(path.read_text())
    typing_only = {
        id(x) for n in ast.walk(tree) if isinstance(n, ast.If) and "TYPE_CHECKING" in ast.unparse(n.test)
        for x in ast.walk(n)
    }  # fmt: skip
    package = name if path.name == "__init__.py" else name.rsplit(".", 1)[0]
    out: set[str] = set()
    for n in ast.walk(tree):
        if id(n) in typing_only and not typing:
            continue
        wanted: list[str] = []
        if isinstance(n, ast.Import):
            wanted = [a.name for a in n.names]
        elif isinstance(n, ast.ImportFrom):
            base = n.module or ""
            if n.level:
                up = package.split(".")
                up = up[: len(up) - (n.level - 1)]
                base = ".".join([*up, *([n.module] if n.module else [])])
            names = [f"{base}.{a.name}" for a in n.names]
            # `from . import sibling` loads the sibling, not (again) the package it sits in
            wanted = [m for m in names if m in MODULES] or [base]
        for w in wanted:
            while w and w not in MODULES:
                w = w.rpartition(".")[0]
            if w and w != name:
                out.add(w)
    return out


GRAPH = nx.DiGraph([(m, t) for m, p in MODULES.items() for t in _runtime_imports(m, p)])
# with the imports made only for the type checker: a circle there is still two modules that know each other
TYPED = nx.DiGraph([(m, t) for m, p in MODULES.items() for t in _runtime_imports(m, p, typing=True)])


def test_nothing_imports_a_floor_above_its_own() -> None:
    up = sorted(
        f"{m} -> {t}" for m, t in GRAPH.edges
        if t.split(".")[0] != m.split(".")[0] and t.split(".")[0] not in MAY_IMPORT[m.split(".")[0]]
    )  # fmt: skip
    assert up == []


def test_only_the_cli_imports_the_cli() -> None:
    bad = sorted(
        f"{m} -> {t}" for m, t in GRAPH.edges
        if t.startswith("fabricd.cli") and not m.startswith("fabricd.cli") and m != "fabricd.__main__"
    )  # fmt: skip
    assert bad == []


def test_no_import_cycles() -> None:
    cycles = [sorted(c) for c in nx.strongly_connected_components(TYPED) if len(c) > 1]
    assert cycles == []


def test_the_walker_sees_imports() -> None:
    # guards the test itself: it must see a module's real imports, relative and absolute
    assert "fabricd.detectors.dci_ports" in GRAPH.successors("fabricd.detectors.runner")
    assert "policies.dci_loss" in GRAPH.successors("policies.nccl_tuning")
    # the API sees a surface only
    assert "fabricd.service.daemon" not in set(TYPED.successors("fabricd.service.surface.api"))
    assert "fabricd.service.surface.surface" in set(TYPED.successors("fabricd.service.surface.web"))
    assert set(GRAPH.edges) <= set(TYPED.edges)
