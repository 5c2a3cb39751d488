"""TelemetryPortView.wait_oper: an action waits to see its port go down (or up) in telemetry. The store wakes it on
each oper-status event; it reads the events since its snapshot from the store's ring, so it sees the change when the
event lands, not when its cached snapshot (refresh_s) next ages out."""

from __future__ import annotations

import asyncio
import time

from fabricd.service.port_view import TelemetryPortView
from fabricd.telemetry import CounterStore, Ingestor

from ..detectors.test_link_flap_events import LEAF, PORT, T0, Ports

NS = 1_000_000_000


def view(capacity: int = 1024) -> tuple[TelemetryPortView, Ports]:
    store = CounterStore(event_capacity=capacity)
    ports = Ports(store)
    ports.write(LEAF, PORT, "UP", T0)
    ports.write(LEAF, "Ethernet6/1", "UP", T0)
    # A snapshot cached for a minute: only the events can tell the view the port changed.
    return TelemetryPortView(Ingestor(store), time.monotonic, refresh_s=60.0), ports


def test_sees_the_event_that_lands_while_it_waits() -> None:
    v, ports = view()
    assert v.oper(LEAF, PORT) == "UP"  # the snapshot is cached now

    async def main() -> tuple[bool, float]:
        waiting = asyncio.create_task(v.wait_oper(LEAF, PORT, False, 5.0))
        await asyncio.sleep(0.05)
        ports.write(LEAF, "Ethernet6/1", "DOWN", T0 + NS)  # another port: not it
        await asyncio.sleep(0.05)
        assert not waiting.done()
        t = time.monotonic()
        ports.write(LEAF, PORT, "DOWN", T0 + 2 * NS)
        seen = await asyncio.wait_for(waiting, 5)
        return seen, time.monotonic() - t

    seen, took = asyncio.run(main())
    assert seen and took < 0.5
    assert v.ingestor.store.on_event == []  # it let go of the store


def test_an_event_that_landed_before_the_wait_counts_and_the_last_one_wins() -> None:
    v, ports = view()
    assert v.oper(LEAF, PORT) == "UP"
    ports.write(LEAF, PORT, "DOWN", T0 + NS)  # the commit returned, the event came in before the wait began
    assert asyncio.run(v.wait_oper(LEAF, PORT, False, 1.0))
    ports.write(LEAF, PORT, "UP", T0 + 2 * NS)
    assert asyncio.run(v.wait_oper(LEAF, PORT, True, 1.0))
    ports.write(LEAF, PORT, "DOWN", T0 + 3 * NS)
    ports.write(LEAF, PORT, "UP", T0 + 4 * NS)  # down and up again: it is up now
    t = time.monotonic()
    assert not asyncio.run(v.wait_oper(LEAF, PORT, False, 0.2))
    assert time.monotonic() - t >= 0.2


def test_a_ring_that_lost_events_since_the_snapshot_is_read_again_from_a_snapshot() -> None:
    v, ports = view(capacity=4)
    assert v.oper(LEAF, PORT) == "UP"
    ports.write(LEAF, PORT, "DOWN", T0 + NS)
    for k in range(6):  # another port's events push this port's out of the ring
        ports.write(LEAF, "Ethernet6/1", "DOWN" if k % 2 == 0 else "UP", T0 + (2 + k) * NS)
    assert asyncio.run(v.wait_oper(LEAF, PORT, False, 1.0))
