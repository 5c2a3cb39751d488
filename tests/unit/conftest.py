"""Pure tests: no network socket. A test here that opens a TCP or UDP connection or listens on one fails and names
what it tried: such a test belongs in tests/twin."""

from __future__ import annotations

import socket
from collections.abc import Iterator
from typing import Any

import pytest

_NETWORK = (socket.AF_INET, socket.AF_INET6)


class SocketInUnitTest(AssertionError):
    pass


@pytest.fixture(autouse=True)
def no_network(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    def refuse(name: str, real: Any) -> Any:
        def guarded(self: socket.socket, *args: Any, **kwargs: Any) -> Any:
            if self.family in _NETWORK:
                raise SocketInUnitTest(f"socket.{name}{args!r} in a unit test: move the test to tests/twin")
            return real(self, *args, **kwargs)

        return guarded

    for name in ("connect", "connect_ex", "bind"):
        monkeypatch.setattr(socket.socket, name, refuse(name, getattr(socket.socket, name)))
    yield
