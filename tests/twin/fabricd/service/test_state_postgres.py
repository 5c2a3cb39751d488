"""The state store's contract (tests/unit/fabricd/service/test_state.py) on a real PostgreSQL: every test there
that takes a `store` runs here again with a fresh database of the session's server."""

from __future__ import annotations

import inspect
from collections.abc import Iterator

import pytest

from fabricd.service.state import StateStore
from tests.unit.fabricd.service import test_state as contract

pytestmark = pytest.mark.distributed

globals().update(
    {
        name: fn
        for name, fn in vars(contract).items()
        if name.startswith("test_") and callable(fn) and "store" in inspect.signature(fn).parameters
    }
)


@pytest.fixture
def store(postgres_url: str) -> Iterator[StateStore]:
    s = StateStore(url=postgres_url)
    yield s
    s.close()
