"""Tests with real sockets: the twin, the service, napalm/netmiko/pygnmi/ANTA against it, a browser, nats-server and
PostgreSQL. Every test here is marked `twin` by its folder (`pytest tests/unit` is the fast loop without them)."""

from __future__ import annotations

from pathlib import Path

import pytest

HERE = Path(__file__).parent


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        if HERE in Path(str(item.path)).parents:
            item.add_marker(pytest.mark.twin)
