"""A ticket's version is handed to the backend once, however many callers hand it at once: a new leader's takeover
sync and the scheduled sync both read the ticket unsynced and both handed it to Jira within 6 ms (the label
look-up before the create kept it one issue; a webhook receiver would have had two posts)."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from fabricd.service.config import load_config
from fabricd.service.daemon import Service
from fabricd.service.state.records import Ticket

from .test_access import write

T0 = 1_700_000_000_000_000_000


class SlowBackend:
    """A backend whose hand-off takes a while (a remote call), recording each (ticket, version) it was sent."""

    name = "webhook"

    def __init__(self) -> None:
        self.sent: list[tuple[int, int]] = []
        self.lock = threading.Lock()

    def publish(self, ticket: Ticket, guard: Callable[[], None] | None = None) -> str | None:
        time.sleep(0.05)
        with self.lock:
            self.sent.append((ticket.id, ticket.updated_ts))
        return f"webhook:{ticket.id}"

    def resolved(self, tickets: list[Ticket]) -> list[int]:
        return []


def test_two_hand_offs_of_one_version_at_once_send_it_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FABRICD_TEST_PW", "pw")
    svc = Service(load_config(write(tmp_path), {}))
    try:
        backend = svc.tickets.backend = SlowBackend()
        t = svc.state.tickets.create("f1", "link_flap", "leaf-g0-r0", "Ethernet1/1", "flap", {}, T0)
        other = svc.state.tickets.create("f2", "link_flap", "leaf-g0-r0", "Ethernet2/1", "flap", {}, T0)

        async def both() -> None:
            await asyncio.gather(svc.publish(t), svc.publish(t), svc.publish(other))

        asyncio.run(both())
        assert sorted(backend.sent) == [(t.id, T0), (other.id, T0)]
        assert [x.id for x in svc.state.tickets.unsynced()] == []
        assert svc.tickets._handing == {}  # nothing kept per ticket once handed off

        t = svc.state.tickets.update(t.id, T0 + 5, body={"more": 1})  # a new version is handed off again
        asyncio.run(both())
        assert sorted(backend.sent) == [(t.id, T0), (t.id, T0 + 5), (other.id, T0)]
    finally:
        svc.pool.shutdown()
        svc.state.close()
