"""Shared fixtures: small fabrics only (the suite must stay fast on 2 cores)."""

from __future__ import annotations

from pathlib import Path

import pytest

from topology.blueprint import generate_blueprint
from topology.model import Cabling
from topology.spec import FabricSpec, load_spec

REPO = Path(__file__).resolve().parent.parent
EXAMPLES = REPO / "examples"


@pytest.fixture(scope="session")
def small_spec() -> FabricSpec:
    return load_spec(EXAMPLES / "small-pod.yaml")


@pytest.fixture(scope="session")
def small_blueprint(small_spec: FabricSpec) -> Cabling:
    return generate_blueprint(small_spec)


@pytest.fixture(scope="session")
def dci_spec() -> FabricSpec:
    return load_spec(EXAMPLES / "dci-120km.yaml")
