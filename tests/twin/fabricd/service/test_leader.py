"""The leader lease on a real nats-server (JetStream key-value) and the fencing token in a real PostgreSQL."""

from __future__ import annotations

import asyncio
import contextlib
import time
from pathlib import Path

import pytest

from fabricd.bus import LocalBus
from fabricd.service.config import BusSettings, HaSettings
from fabricd.service.leader import Leadership
from fabricd.service.state import StateStore
from tests.twin.processes import bus_down, bus_up

pytestmark = [pytest.mark.distributed, pytest.mark.slow]
TTL = 1.5


HA = HaSettings(enabled=True, lease_ttl_s=TTL)


def member(bus: LocalBus, name: str, elected: list[tuple[str, int]], url: str | None = None) -> Leadership:
    from fabricd.bus import connect

    async def on_elected(token: int) -> None:
        elected.append((name, token))

    where = BusSettings(urls=[url or bus.url])
    return Leadership(HA, lambda: connect(where, None, name), on_elected, instance=name)


async def until(cond: object, timeout_s: float) -> float:
    """Seconds until cond() holds (fails the test past timeout_s)."""
    start = time.monotonic()
    while not cond():  # type: ignore[operator]
        if time.monotonic() - start > timeout_s:
            raise AssertionError(f"not within {timeout_s} s")
        await asyncio.sleep(0.05)
    return time.monotonic() - start


def test_one_leader_and_a_standby_takes_over_within_the_lease(nats_bus: LocalBus) -> None:
    async def scenario() -> None:
        elected: list[tuple[str, int]] = []
        a, b = member(nats_bus, "a", elected), member(nats_bus, "b", elected)
        stop_a, stop_b = asyncio.Event(), asyncio.Event()
        ta = asyncio.create_task(a.run(stop_a))
        await until(a.acting, 5)
        tb = asyncio.create_task(b.run(stop_b))
        await until(lambda: b.holder == "a", 5)
        await asyncio.sleep(2 * TTL)  # renewals keep a's lease; b stands by
        assert a.acting() and not b.acting() and a.changes == 1
        assert elected == [("a", a.token)]
        token_a = a.token
        assert token_a is not None

        ta.cancel()  # a dies: no more renewals (it does not hand the lease over)
        took = await until(b.acting, TTL + 3)
        assert took < TTL + 2.5
        assert b.token is not None and b.token > token_a
        assert elected == [("a", token_a), ("b", b.token)]
        stop_b.set()
        await tb

    asyncio.run(scenario())


class Cable:
    """A TCP forwarder between one instance and the bus that the test can cut (a network partition of that
    instance alone) and mend."""

    def __init__(self, target_port: int) -> None:
        self.target_port = target_port
        self.port = 0
        self.cut = False
        self._server: asyncio.Server | None = None
        self._writers: list[asyncio.StreamWriter] = []

    async def start(self) -> None:
        self._server = await asyncio.start_server(self._client, "127.0.0.1", 0)
        self.port = self._server.sockets[0].getsockname()[1]

    async def _client(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        if self.cut:
            writer.close()
            return
        up_reader, up_writer = await asyncio.open_connection("127.0.0.1", self.target_port)
        self._writers += [writer, up_writer]

        async def pipe(src: asyncio.StreamReader, dst: asyncio.StreamWriter) -> None:
            with contextlib.suppress(OSError, ConnectionError):
                while data := await src.read(65536):
                    if self.cut:
                        break
                    dst.write(data)
                    await dst.drain()
            dst.close()

        await asyncio.gather(pipe(reader, up_writer), pipe(up_reader, writer))

    def sever(self) -> None:
        self.cut = True
        for w in self._writers:
            w.transport.abort()
        self._writers.clear()

    def mend(self) -> None:
        self.cut = False


def test_a_leader_partitioned_from_the_bus_stops_acting_and_the_standby_takes_over(nats_bus: LocalBus) -> None:
    # a reaches the bus through a cable the test cuts; b reaches it directly
    async def scenario() -> None:
        elected: list[tuple[str, int]] = []
        bus_port = int(nats_bus.url.rsplit(":", 1)[1])
        cable = Cable(bus_port)
        await cable.start()
        a = member(nats_bus, "a", elected, url=f"nats://127.0.0.1:{cable.port}")
        b = member(nats_bus, "b", elected)
        stop = asyncio.Event()
        tasks = [asyncio.create_task(a.run(stop))]
        await until(a.acting, 5)
        tasks.append(asyncio.create_task(b.run(stop)))
        await until(lambda: b.holder == "a", 5)
        token_a = a.token
        assert token_a is not None

        cable.sever()
        lost = await until(lambda: not a.acting(), TTL)
        assert lost <= TTL * 2 / 3 + 0.3  # it stops acting before the bus can give the lease away
        assert not b.acting()  # a stopped first: never two leaders at once
        took = lost + await until(b.acting, TTL + 3)
        assert took < TTL + 2.5
        assert not a.acting()
        assert b.token is not None and b.token > token_a

        cable.mend()  # a comes back: its renewal (a compare-and-set on its old revision) fails, it stands by
        await until(lambda: a.holder == "b", 10)
        assert not a.acting() and b.acting()
        assert [name for name, _ in elected] == ["a", "b"]
        stop.set()
        await asyncio.gather(*tasks)

    asyncio.run(scenario())


def test_when_the_bus_itself_goes_away_nobody_acts_until_it_is_back(nats_bus: LocalBus) -> None:
    async def scenario() -> None:
        elected: list[tuple[str, int]] = []
        a = member(nats_bus, "a", elected)
        stop = asyncio.Event()
        task = asyncio.create_task(a.run(stop))
        await until(a.acting, 5)
        bus_down(nats_bus)
        lost = await until(lambda: not a.acting(), TTL + 1)
        assert lost <= TTL * 2 / 3 + 0.6
        bus_up(nats_bus)
        # back: either its key survived (the compare-and-set proves nobody else held the lease) or it expired
        # and a takes it anew
        await until(a.acting, 10)
        stop.set()
        await task

    asyncio.run(scenario())


def test_the_fencing_token_only_moves_forward(postgres_url: str, tmp_path: Path) -> None:
    for store in (StateStore(url=postgres_url), StateStore(tmp_path / "state.db")):
        try:
            assert store.leadership.current() is None
            assert store.leadership.claim("a", 5, 1)
            assert not store.leadership.claim("b", 4, 2)  # a stale lease never takes the state back
            assert store.leadership.current() == ("a", 5)
            assert store.leadership.claim("b", 9, 3)
            assert store.leadership.current() == ("b", 9)
            assert [e["what"] for e in store.audit.entries()] == ["b leads", "a leads"]
        finally:
            store.close()


def test_a_lease_bucket_made_anew_still_gives_a_newer_token(nats_bus: LocalBus, tmp_path: Path) -> None:
    """The bus lost its store (here: the bucket deleted): revisions count from 1 again, and a bare revision would be
    below the token the state holds, so no instance could claim the lead. The token carries the bucket's creation
    time above the revision."""
    store = StateStore(tmp_path / "state.db")

    async def scenario() -> None:
        from fabricd.bus import connect

        elected: list[tuple[str, int]] = []
        where = BusSettings(urls=[nats_bus.url])

        def claiming(name: str) -> Leadership:
            async def on_elected(token: int) -> None:
                elected.append((name, token))

            async def claim(token: int) -> bool:
                return store.leadership.claim(name, token, int(time.time()))

            return Leadership(HA, lambda: connect(where, None, name), on_elected, claim=claim, instance=name)

        from fabricd.bus import kv_bucket

        nc = await connect(where, None, "test")
        try:  # a bucket that has seen leaders before: a takes the lease at a later revision
            kv = await kv_bucket(nc.jetstream(), HA.bucket, HA.lease_ttl_s)
            for _ in range(10):
                await kv.put("earlier", b"x")
        finally:
            await nc.close()
        a = claiming("a")
        stop_a = asyncio.Event()
        ta = asyncio.create_task(a.run(stop_a))
        await until(a.acting, 5)
        token_a = a.token
        assert token_a is not None and store.leadership.current() == ("a", token_a)
        assert token_a & 0xFFFFFFFF > 10
        stop_a.set()
        await ta
        await asyncio.sleep(1.1)  # creation times are whole seconds: the new bucket's is a later one
        nc = await connect(where, None, "test")
        try:
            await nc.jetstream().delete_key_value(HA.bucket)
        finally:
            await nc.close()
        b = claiming("b")
        stop_b = asyncio.Event()
        tb = asyncio.create_task(b.run(stop_b))
        await until(b.acting, 5)
        assert b.token is not None and b.token > token_a
        assert b.token & 0xFFFFFFFF < 10  # the revision did start again
        assert store.leadership.current() == ("b", b.token)
        assert elected == [("a", token_a), ("b", b.token)]
        stop_b.set()
        await tb

    try:
        asyncio.run(scenario())
    finally:
        store.close()
