"""Docs stay true to the repository: every file path README.md and docs/*.md name in code spans or links is a
file the repository holds (a doc may not point at a design file elsewhere)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.conftest import REPO

DOCS = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
REF = re.compile(r"`([^`\s]+)`|\]\(([^)\s]+)\)")
FILE = re.compile(r"\.(md|py|yaml|yml|json|jsonl|sh|svg|png|toml|service|cfg|txt)$")


def references(doc: Path) -> list[tuple[int, str, bool]]:
    """(line, path, is a Markdown link) of every file path the doc names."""
    out = []
    for n, line in enumerate(doc.read_text().splitlines(), 1):
        for m in REF.finditer(line):
            ref = (m.group(1) or m.group(2)).split("#")[0].split(":")[0]
            if ref.startswith(("http", "-", "/", "$", "~")) or any(c in ref for c in "<*{"):
                continue  # URLs, options, absolute or templated paths
            if FILE.search(ref) and ("/" in ref or ref.endswith(".md")):
                out.append((n, ref, m.group(2) is not None))
    return out


@pytest.mark.parametrize("doc", DOCS, ids=[d.name for d in DOCS])
def test_every_named_file_exists(doc: Path) -> None:
    missing = [f"{doc.name}:{n}: {ref}" for n, ref, _ in references(doc)
               if not (REPO / ref).exists() and not (doc.parent / ref).exists()]  # fmt: skip
    assert not missing, missing


def test_links_resolve_from_the_doc_itself() -> None:
    # a Markdown link is followed by the reader's viewer relative to the doc, not the repository root
    bad = [
        f"{d.name}:{n}: {ref}" for d in DOCS for n, ref, link in references(d) if link and not (d.parent / ref).exists()
    ]
    assert not bad, bad


def test_the_checker_sees_references() -> None:
    assert any(ref == "docs/operations.md" for _, ref, _ in references(REPO / "README.md"))
    assert any(ref == "img/page-switch-dark.png" for _, ref, _ in references(REPO / "docs" / "operations.md"))
