"""Fixtures of the service tests: fabrics, the remediator harness, and a service for the API and page tests (`svc`)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from fabricd.service.config import SafetyLimits, load_config
from fabricd.service.daemon import Service
from fabricd.service.state import StateStore, Ticket
from tests.conftest import EXAMPLES
from topology.fabric import Fabric
from topology.load import load_fabric

from .harness import Clock, Harness, World, make_remediator, pod_variant
from .test_access import write


@pytest.fixture(scope="module")
def small() -> Fabric:
    return load_fabric(EXAMPLES / "small-pod.yaml", None)[1]


@pytest.fixture(scope="module")
def wide(tmp_path_factory: pytest.TempPathFactory) -> Fabric:
    """8 servers per group: 8 server ports per leaf."""
    return pod_variant(tmp_path_factory.mktemp("wide"), servers_per_group=8)


@pytest.fixture
def make(tmp_path: Path, small: Fabric) -> Iterator[Callable[..., Harness]]:
    stores: list[StateStore] = []

    def factory(fabric: Fabric | None = None, limits: SafetyLimits | None = None, **settings: Any) -> Harness:
        fab = fabric or small
        state = StateStore(tmp_path / f"state-{len(stores)}.db")
        stores.append(state)
        world, clock = World(), Clock()
        published: list[Ticket] = []
        rem = make_remediator(fab, state, world, clock, published, limits, **settings)
        return Harness(fab, state, world, clock, rem, published)

    yield factory
    for s in stores:
        s.close()


@pytest.fixture
def svc(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Service]:
    monkeypatch.setenv("FABRICD_TEST_PW", "pw")
    s = Service(load_config(write(tmp_path), {}))
    try:
        yield s
    finally:
        s.state.close()
