"""Port-down commits go before confirms (fabricd/service/commits_first.py): a confirm waits while another port is
being taken down, at most the cap, so when links cross together the later ones are not queued behind the earlier
ones' confirms."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

from fabricd.service.commits_first import CommitsFirst
from topology.model import Endpoint

from .harness import Harness, flap, report


def test_a_confirm_with_no_commit_in_flight_goes_at_once() -> None:
    async def main() -> float:
        gate = CommitsFirst()
        t = time.monotonic()
        await gate.yield_to_commits(5.0)
        return time.monotonic() - t

    assert asyncio.run(main()) < 0.05


def test_a_confirm_waits_for_the_commits_in_flight_and_goes_when_the_last_ends() -> None:
    async def main() -> list[str]:
        gate = CommitsFirst()
        order: list[str] = []
        released = [asyncio.Event(), asyncio.Event()]

        async def commit(k: int) -> None:
            with gate.commit():
                await released[k].wait()
                order.append(f"commit {k}")

        async def confirm() -> None:
            await gate.yield_to_commits(5.0)
            order.append("confirm")

        tasks = [asyncio.create_task(commit(0)), asyncio.create_task(commit(1))]
        await asyncio.sleep(0)
        waiting = asyncio.create_task(confirm())
        await asyncio.sleep(0.05)
        released[1].set()
        await asyncio.sleep(0.05)
        assert not waiting.done()  # commit 0 is still in flight
        released[0].set()
        await asyncio.gather(*tasks, waiting)
        assert gate.in_flight == 0
        return order

    assert asyncio.run(main()) == ["commit 1", "commit 0", "confirm"]


def test_a_confirm_waits_no_longer_than_the_cap() -> None:
    async def main() -> float:
        gate = CommitsFirst()
        stuck = asyncio.Event()

        async def commit() -> None:
            with gate.commit():
                await stuck.wait()

        task = asyncio.create_task(commit())
        await asyncio.sleep(0)
        t = time.monotonic()
        await gate.yield_to_commits(0.1)
        took = time.monotonic() - t
        stuck.set()
        await task
        return took

    assert 0.1 <= asyncio.run(main()) < 1.0


def test_a_gate_used_from_a_new_event_loop_starts_clean() -> None:
    gate = CommitsFirst()

    async def once() -> None:
        with gate.commit():
            await asyncio.sleep(0)
        await asyncio.wait_for(gate.yield_to_commits(5.0), 1.0)

    asyncio.run(once())
    asyncio.run(once())  # an asyncio.Event from the first loop would not do here


def test_the_first_actions_confirm_waits_for_the_second_ports_commit(make: Callable[..., Harness]) -> None:
    h = make()
    pool = ThreadPoolExecutor(4)
    h.rem.switch.executor = pool
    first, second = Endpoint("leaf-g0-r0", "Ethernet1/1"), Endpoint("leaf-g0-r1", "Ethernet1/1")
    in_commit, release = threading.Event(), threading.Event()

    def hold() -> None:  # the first set_port_admin, the second port's, is held in the driver thread
        in_commit.set()
        assert release.wait(10)

    h.world.hooks["set_port_admin"] = hold

    async def main() -> list[tuple[object, ...]]:
        going = asyncio.create_task(report(h, flap(h.fabric, second)))
        await asyncio.to_thread(in_commit.wait, 10)
        first_done = asyncio.create_task(report(h, flap(h.fabric, first)))
        await asyncio.sleep(0.3)
        # The first port is down (committed) but not confirmed while the second's commit is in flight.
        calls = list(h.world.calls)
        assert ("set_port_admin", first.device, first.port, False, 120) in calls
        assert ("confirm", first.device) not in calls
        release.set()
        await asyncio.gather(going, first_done)
        return h.world.calls

    try:
        calls = asyncio.run(main())
    finally:
        release.set()
        pool.shutdown()
    touched = [c for c in calls if c[0] in ("set_port_admin", "confirm")]
    assert touched.index(("set_port_admin", second.device, second.port, False, 120)) < touched.index(
        ("confirm", first.device)
    )
    assert [a.status for a in h.state.actions.all()] == ["done", "done"]
