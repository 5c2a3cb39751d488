"""fabricd against a twin playing an older EOS (4.31.2F): it subscribes to what that release serves, and a switch
that refuses one path still streams the rest. Real sockets, the twin's gNMI, the service's TelemetryClient."""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import random
import re
from collections.abc import AsyncIterator, Iterator

import grpc
import pytest
from pygnmi.spec.v080 import gnmi_pb2

from drivers.inventory import DeviceAccess, load_inventory
from fabricd.telemetry import CounterStore, Ingestor, Snapshot, TelemetryClient
from fabricd.telemetry.paths import eos_profile
from lab.control_client import inject
from tests.twin.lab.twin_thread import TwinThread
from topology.spec import FabricSpec

from .helpers import running, until
from .test_client import local_device, local_gnmi

INTERVAL = 0.4
OLD = "4.31.2F"
FEC = "/interfaces/interface[name=*]/ethernet/phys/phy[index=*]/ingress/fec/state"
SWITCHES = ["leaf-g0-r0", "spine-r0-0"]
STREAMED = ("oper-status", "if.in-pkts", "eth.in-crc-errors", "pfc.in-frames", "queue.transmit-pkts",
            "wd.stuck-count", "optics.input-power", "optics.temperature", "lldp.system-name")  # fmt: skip
ABSENT = ("fec.corrected-codewords", "fec.pre-fec-ber", "eth.in-symbol-error", "pfc.pfc-on-total-rx-time")


@pytest.fixture(scope="module")
def old_twin(small_spec: FabricSpec, tmp_path_factory: pytest.TempPathFactory) -> Iterator[TwinThread]:
    t = TwinThread(small_spec, tmp_path_factory.mktemp("twin-old-eos"), eos_version=OLD).start()
    yield t
    t.stop()


def devices(twin: TwinThread) -> list[DeviceAccess]:
    inv = load_inventory(twin.inventory)
    return [inv.access(n) for n in SWITCHES]


def make_client(devs: list[DeviceAccess]) -> TelemetryClient:
    return TelemetryClient(
        devs, Ingestor(CounterStore()), profile={"eos": eos_profile(INTERVAL)}, interval_s=INTERVAL,
        backoff_base_s=0.05, backoff_cap_s=0.4, rng=random.Random(3), flush_s=0.1,
    )  # fmt: skip


def leaves(snap: Snapshot, device: str) -> set[str]:
    return {snap.key(int(i))[2] for i in snap.select(device=device)}


def streams(snap: Snapshot, device: str, leaf: str) -> bool:
    rows = snap.select(device=device, leaf=leaf)
    return len(rows) > 0


def test_the_inventory_release_picks_the_profile_and_nothing_is_refused(
    old_twin: TwinThread, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="fabricd")
    devs = devices(old_twin)
    assert {d.os_version for d in devs} == {OLD}  # the lab's inventory says what the switches run
    c = make_client(devs)

    async def go() -> None:
        async with running(c):
            assert await c.wait_synced(15)
            await asyncio.sleep(2.5 * INTERVAL)
            snap = c.ingestor.snapshot()
            for name in SWITCHES:
                got = leaves(snap, name)
                assert set(STREAMED) <= got, set(STREAMED) - got
                assert not got & set(ABSENT)
                assert c.state(name).rejected == () and c.state(name).attempts == 1  # never refused, one connect
                assert FEC not in [s.path for s in c.plan(name).subscriptions]

    asyncio.run(go())
    skipped = [r.getMessage() for r in caplog.records if "not subscribing to" in r.getMessage()]
    assert skipped == [f"telemetry: not subscribing to {FEC} on {', '.join(SWITCHES)}: not in EOS 4.31.2F "
                       "(absent on 4.31.2F per issue 15; the first release serving it is UNVERIFIED)"]  # fmt: skip
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING and r.name.startswith("fabricd")]


def test_a_switch_that_refuses_one_path_still_streams_the_rest(
    old_twin: TwinThread, caplog: pytest.LogCaptureFixture
) -> None:
    """No release in the inventory: fabricd asks for everything, the switch refuses the Subscribe for the FEC path
    (NOT_FOUND), and fabricd subscribes again at once without it, naming the path once."""
    caplog.set_level(logging.INFO, logger="fabricd")
    devs = [dataclasses.replace(d, os_version=None) for d in devices(old_twin)]
    c = make_client(devs)

    async def go() -> None:
        async with running(c):
            assert await c.wait_synced(15)
            await asyncio.sleep(2.5 * INTERVAL)
            snap = c.ingestor.snapshot()
            for name in SWITCHES:
                assert set(STREAMED) <= leaves(snap, name)
                assert (snap.rate[snap.select(device=name, leaf="if.in-pkts")] > 0).any()  # counters keep coming
                ((path, why),) = c.state(name).rejected
                assert path == FEC and why.startswith("NOT_FOUND: ") and "fec/state" in why
                assert c.state(name).last_error is None  # streaming, not failing

    asyncio.run(go())
    warned = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert sorted(warned) == sorted(
        f"telemetry from {n}: the switch rejects {FEC} (NOT_FOUND: {c.state(n).rejected[0][1][11:]}); "
        "streaming the rest without it"
        for n in SWITCHES
    )


def test_an_upgraded_switch_is_asked_again_for_what_it_refused(
    old_twin: TwinThread, caplog: pytest.LogCaptureFixture
) -> None:
    """A switch that refused the FEC path goes away and comes back on a release that serves it (a reboot into an
    upgrade): fabricd asks for the whole plan again and streams FEC from it; a switch that still refuses is narrowed
    again without a second warning."""
    caplog.set_level(logging.DEBUG, logger="fabricd")
    devs = [dataclasses.replace(d, os_version=None) for d in devices(old_twin)]
    c = make_client(devs)
    upgraded, kept = SWITCHES
    switch = old_twin.process.twin.switch(upgraded)

    async def go() -> None:
        async with running(c):
            assert await c.wait_synced(15)
            assert [p for p, _ in c.state(upgraded).rejected] == [FEC]
            switch.os_version = "4.36.1F"
            for name in SWITCHES:  # both go away; one comes back upgraded
                await asyncio.to_thread(inject, old_twin.state_dir, "gnmi_drop", {"device": name, "seconds": 0.5})
            for _ in range(100):
                await asyncio.sleep(0.1)
                snap = c.ingestor.snapshot()
                if streams(snap, upgraded, "fec.corrected-codewords") and c.state(kept).rejected:
                    break
            snap = c.ingestor.snapshot()
            assert streams(snap, upgraded, "fec.corrected-codewords") and c.state(upgraded).rejected == ()
            assert not streams(snap, kept, "fec.corrected-codewords")
            assert [p for p, _ in c.state(kept).rejected] == [FEC]

    try:
        asyncio.run(go())
    finally:
        switch.os_version = OLD
    rejects = [r for r in caplog.records if "the switch rejects" in r.getMessage()]
    assert sorted((r.levelno, r.getMessage().split(":")[0]) for r in rejects) == sorted([
        (logging.DEBUG, f"telemetry from {kept}"),  # refused again, the same way: not warned twice
        (logging.WARNING, f"telemetry from {kept}"),
        (logging.WARNING, f"telemetry from {upgraded}"),
    ])  # fmt: skip


def test_a_refusal_that_names_no_path_is_found_by_halving() -> None:
    """A switch whose error text names nothing: fabricd splits the refused subscription until the one path is
    isolated, and keeps every other subscription."""
    seen: list[list[str]] = []
    bad = "/interfaces/interface/ethernet/pfc/watchdog"  # key-less, as the server prints it

    async def subscribe(requests: AsyncIterator[bytes], context: grpc.aio.ServicerContext[bytes, bytes]) -> None:
        async for raw in requests:
            req = gnmi_pb2.SubscribeRequest.FromString(raw)
            paths = ["/" + "/".join(e.name for e in s.path.elem) for s in req.subscribe.subscription]
            seen.append(paths)
            if any(p.startswith(bad) for p in paths):
                await context.abort(grpc.StatusCode.INVALID_ARGUMENT, "unsupported path")
            await context.write(gnmi_pb2.SubscribeResponse(sync_response=True).SerializeToString())
            break
        await asyncio.Event().wait()

    async def go() -> TelemetryClient:
        async with local_gnmi(subscribe) as gnmi:
            c = TelemetryClient(
                [local_device("a", gnmi)], Ingestor(CounterStore()), profile={"eos": eos_profile(INTERVAL)},
                interval_s=INTERVAL, connect_spread_s=0, spread_samples=False, backoff_base_s=0.05,
            )  # fmt: skip
            async with running(c):
                await until(lambda: c.state("a").synced, 10)
            return c

    c = asyncio.run(go())
    rejected = c.state("a").rejected
    assert [p for p, _ in rejected] == [
        "/interfaces/interface[name=*]/ethernet/pfc/watchdog/tx-queues/tx-queue[index=3][queue-type=UNICAST]/state"
    ]
    assert rejected[0][1] == "INVALID_ARGUMENT: unsupported path"
    calls = len(c._devices["a"].groups)  # Subscribe calls of the final, synced connection
    assert 2 < calls <= 5  # ON_CHANGE, and the SAMPLE subscriptions in the halves that were not refused
    last = {p for paths in seen[-calls:] for p in paths}
    every = {re.sub(r"\[[^]]*\]", "", s.path) for s in eos_profile(INTERVAL)}
    assert last == {p for p in every if not p.startswith(bad)}  # all but the one refused


def test_a_switch_that_refuses_proto_is_subscribed_with_json_ietf(caplog: pytest.LogCaptureFixture) -> None:
    """gNMI targets must serve JSON_IETF; some serve no PROTO. fabricd asks again with JSON_IETF, keeps every path,
    and reads the RFC 7951 values (64-bit counters as strings)."""
    encodings: list[int] = []

    async def subscribe(requests: AsyncIterator[bytes], context: grpc.aio.ServicerContext[bytes, bytes]) -> None:
        async for raw in requests:
            req = gnmi_pb2.SubscribeRequest.FromString(raw)
            encodings.append(req.subscribe.encoding)
            if req.subscribe.encoding != gnmi_pb2.JSON_IETF:
                await context.abort(grpc.StatusCode.UNIMPLEMENTED, "unsupported encoding: PROTO")
            note = gnmi_pb2.Notification(timestamp=1_700_000_000 * 10**9)
            for name, val in (("state/counters/in-pkts", b'"18446744073709551000"'), ("state/oper-status", b'"UP"')):
                upd = note.update.add(val=gnmi_pb2.TypedValue(json_ietf_val=val))
                for elem in name.split("/"):
                    upd.path.elem.add(name=elem)
            note.prefix.elem.add(name="interfaces")
            note.prefix.elem.add(name="interface", key={"name": "Ethernet1/1"})
            await context.write(gnmi_pb2.SubscribeResponse(update=note).SerializeToString())
            await context.write(gnmi_pb2.SubscribeResponse(sync_response=True).SerializeToString())
            break
        await asyncio.Event().wait()

    async def go() -> TelemetryClient:
        async with local_gnmi(subscribe) as gnmi:
            c = TelemetryClient(
                [local_device("a", gnmi)], Ingestor(CounterStore()), profile={"eos": eos_profile(INTERVAL)},
                interval_s=INTERVAL, connect_spread_s=0, spread_samples=False, backoff_base_s=0.05,
            )  # fmt: skip
            async with running(c):
                await until(lambda: c.state("a").synced, 10)
            return c

    caplog.set_level(logging.WARNING, logger="fabricd")
    c = asyncio.run(go())
    # the first connection's calls asked for PROTO; every call after the refusal for JSON_IETF
    first = encodings.index(gnmi_pb2.JSON_IETF)
    assert 1 <= first <= 2 and set(encodings[:first]) == {gnmi_pb2.PROTO}
    assert set(encodings[first:]) == {gnmi_pb2.JSON_IETF} and len(encodings) - first == 2
    snap = c.ingestor.snapshot()
    i = snap.find("a", "Ethernet1/1", "if.in-pkts")
    assert i is not None and snap.current(i) == 18446744073709551000
    assert c.state("a").rejected == ()  # no path was given up
    assert [r.getMessage() for r in caplog.records if "JSON_IETF" in r.getMessage()] == [
        "telemetry from a: the switch refuses PROTO encoding (UNIMPLEMENTED: unsupported encoding: PROTO); "
        "subscribing with JSON_IETF"
    ]
