"""Shared fixtures: small fabrics only (the suite must stay fast on 2 cores)."""

from __future__ import annotations

import os
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


@pytest.fixture(autouse=True, scope="session")
def private_plan_cache(tmp_path_factory: pytest.TempPathFactory) -> None:
    """Offline plans cache under $XDG_CACHE_HOME; keep the tests' entries out of the user's cache."""
    os.environ["XDG_CACHE_HOME"] = str(tmp_path_factory.mktemp("xdg-cache"))
