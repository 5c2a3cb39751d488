"""A collector takes over a switch whose holder stopped renewing with a compare-and-set on the revision it saw, on a
real nats-server: it wins only if that revision is still the last one (the holder did not renew after all), and a
key the bus has expired meanwhile is created instead."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

import pytest
from nats.aio.client import Client as NATS
from nats.js.kv import KeyValue

from fabricd.bus import LocalBus, kv_bucket
from fabricd.telemetry.collector import SWITCHES, Collector, lease_key
from tests.twin.processes import on_bus

pytestmark = pytest.mark.distributed


def _collector(name: str) -> Collector:
    async def never() -> NATS:
        raise AssertionError("not connected in this test")

    return Collector(
        [], never, instance=name, profile={}, interval_s=1.0, lease_ttl_s=60.0,
        max_age_s=30.0, max_bytes=1 << 20,
    )  # fmt: skip


def _on_bucket(bus: LocalBus, ttl: float, body: Callable[[KeyValue], Awaitable[None]]) -> None:
    async def run(nc: NATS) -> None:
        await body(await kv_bucket(nc.jetstream(), SWITCHES, ttl))

    on_bus(bus, run)


def test_an_abandoned_lease_is_taken_with_the_revision_seen(nats_bus: LocalBus) -> None:
    key = lease_key("leaf-1")

    async def body(kv: KeyValue) -> None:
        rev = await kv.create(key, b"old")
        new = _collector("new")
        await new._claim(kv, "leaf-1", b"new", abandoned_rev=rev)
        assert new.mine["leaf-1"] > rev
        assert (await kv.get(key)).value == b"new"

    _on_bucket(nats_bus, 60.0, body)


def test_a_holder_that_renewed_after_all_keeps_its_lease(nats_bus: LocalBus) -> None:
    key = lease_key("leaf-1")

    async def body(kv: KeyValue) -> None:
        seen = await kv.create(key, b"old")
        await kv.update(key, b"old", last=seen)  # its renewal, not yet seen
        new = _collector("new")
        await new._claim(kv, "leaf-1", b"new", abandoned_rev=seen)
        assert "leaf-1" not in new.mine
        assert (await kv.get(key)).value == b"old"

    _on_bucket(nats_bus, 60.0, body)


def test_a_lease_the_bus_expired_meanwhile_is_created(nats_bus: LocalBus) -> None:
    key = lease_key("leaf-1")

    async def body(kv: KeyValue) -> None:
        seen = await kv.create(key, b"old")
        await asyncio.sleep(1.5)  # past the bucket's 1 s: the bus expired the key
        new = _collector("new")
        await new._claim(kv, "leaf-1", b"new", abandoned_rev=seen)
        assert "leaf-1" in new.mine
        assert (await kv.get(key)).value == b"new"

    _on_bucket(nats_bus, 1.0, body)
