"""ON_CHANGE oper-status carries the state at the time of the change, even when the port changed again before the
stream got to send it (a flap shorter than one turn of a busy event loop)."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator
from typing import Any

import grpc
import pytest
from pygnmi.spec.v080 import gnmi_pb2, gnmi_pb2_grpc

from lab import gnmi_paths as gp
from lab.endpoints import Credentials, DeviceEndpoints
from lab.gnmi_server import GnmiServers, start_gnmi_servers
from lab.model import Twin, link_key
from topology.fabric import Fabric
from topology.model import Cabling, Endpoint

MD = [("username", "admin"), ("password", "s3cret")]
DEVICE, PORT = "leaf-g0-r0", "Ethernet5/1"


@pytest.fixture(scope="module")
def served(small_blueprint: Cabling) -> Iterator[tuple[Twin, GnmiServers, asyncio.AbstractEventLoop]]:
    twin = Twin(Fabric(small_blueprint))
    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    endpoints = {DEVICE: DeviceEndpoints(DEVICE, "127.0.0.1", gnmi_port=0)}
    creds = Credentials("admin", "s3cret")
    servers = asyncio.run_coroutine_threadsafe(start_gnmi_servers(twin, endpoints, creds), loop).result(30)
    yield twin, servers, loop
    asyncio.run_coroutine_threadsafe(servers.close(), loop).result(10)
    loop.call_soon_threadsafe(loop.stop)
    thread.join(5)


def _on_change(port: str) -> Any:
    p = gnmi_pb2.Path()
    for name, keys in gp.parse_path_string(f"/interfaces/interface[name={port}]/state/oper-status"):
        p.elem.add(name=name, key=dict(keys))
    sub = gnmi_pb2.Subscription(path=p, mode=gnmi_pb2.ON_CHANGE)
    return gnmi_pb2.SubscribeRequest(subscribe=gnmi_pb2.SubscriptionList(subscription=[sub], mode=0))


def _values(responses: Any, n: int) -> list[tuple[int, str]]:
    out: list[tuple[int, str]] = []
    for r in responses:
        if r.HasField("update"):
            out += [(r.update.timestamp, u.val.string_val) for u in r.update.update]
        if len(out) >= n:
            return out
    raise AssertionError(f"stream ended after {out}")


def test_a_flap_faster_than_the_stream_is_sent_down_then_up(
    served: tuple[Twin, GnmiServers, asyncio.AbstractEventLoop],
) -> None:
    twin, servers, loop = served
    host, port = servers.addresses[DEVICE]
    with grpc.insecure_channel(f"{host}:{port}") as channel:
        responses = gnmi_pb2_grpc.gNMIStub(channel).Subscribe(iter([_on_change(PORT)]), metadata=MD, timeout=10)
        assert [v for _, v in _values(responses, 1)] == ["UP"]  # the initial state
        peer = twin.peer(DEVICE, PORT)
        assert peer is not None
        key = link_key(Endpoint(DEVICE, PORT), peer)

        async def flap() -> int:
            # down and up again within one turn of the loop: the stream encodes both changes after the up
            now = twin.clock()
            twin.link_down.add(key)
            twin.touch()
            twin.advance(now)
            twin.link_down.discard(key)
            twin.touch()
            twin.advance(now + 1_000_000)
            return now

        down_at = asyncio.run_coroutine_threadsafe(flap(), loop).result(10)
        assert _values(responses, 2) == [(down_at, "DOWN"), (down_at + 1_000_000, "UP")]
        responses.cancel()


def test_on_change_sends_only_the_leaf_that_changed(
    served: tuple[Twin, GnmiServers, asyncio.AbstractEventLoop],
) -> None:
    """Subscribed to a port's oper-status and admin-status ON_CHANGE: a link going down sends oper-status alone, a
    shutdown sends admin-status alone (as EOS does), never the unchanged other leaf again."""
    twin, servers, loop = served
    host, port = servers.addresses[DEVICE]
    subs = []
    for leaf in ("oper-status", "admin-status"):
        p = gnmi_pb2.Path()
        for name, keys in gp.parse_path_string(f"/interfaces/interface[name={PORT}]/state/{leaf}"):
            p.elem.add(name=name, key=dict(keys))
        subs.append(gnmi_pb2.Subscription(path=p, mode=gnmi_pb2.ON_CHANGE))
    request = gnmi_pb2.SubscribeRequest(subscribe=gnmi_pb2.SubscriptionList(subscription=subs, mode=0))
    peer = twin.peer(DEVICE, PORT)
    assert peer is not None
    key = link_key(Endpoint(DEVICE, PORT), peer)

    def leaves(responses: Any, n: int) -> list[tuple[str, str]]:
        out: list[tuple[str, str]] = []
        for r in responses:
            if r.HasField("update"):
                out += [(u.path.elem[-1].name, u.val.string_val) for u in r.update.update]
            if len(out) >= n:
                return out
        raise AssertionError(f"stream ended after {out}")

    with grpc.insecure_channel(f"{host}:{port}") as channel:
        responses = gnmi_pb2_grpc.gNMIStub(channel).Subscribe(iter([request]), metadata=MD, timeout=10)
        assert sorted(leaves(responses, 2)) == [("admin-status", "UP"), ("oper-status", "UP")]  # the initial state

        async def link_down() -> None:
            twin.link_down.add(key)
            twin.touch()
            twin.advance(twin.clock())

        asyncio.run_coroutine_threadsafe(link_down(), loop).result(10)
        assert leaves(responses, 1) == [("oper-status", "DOWN")]

        async def shut() -> None:
            twin.switches[DEVICE].config[twin.switches[DEVICE].index[PORT]].admin_up = False

        asyncio.run_coroutine_threadsafe(shut(), loop).result(10)
        assert leaves(responses, 1) == [("admin-status", "DOWN")]
        responses.cancel()

        async def restore() -> None:
            twin.switches[DEVICE].config[twin.switches[DEVICE].index[PORT]].admin_up = True
            twin.link_down.discard(key)
            twin.touch()
            twin.advance(twin.clock())

        asyncio.run_coroutine_threadsafe(restore(), loop).result(10)


def test_on_change_lldp_is_sent_when_the_neighbour_changes_not_every_second(
    served: tuple[Twin, GnmiServers, asyncio.AbstractEventLoop],
) -> None:
    """ON_CHANGE on leaves the twin has no event for (LLDP here; BGP and addresses alike): the initial values, then
    nothing while they stay the same (EOS does not resend an unchanged neighbour), then the neighbour that changed."""
    import time

    twin, servers, loop = served
    host, port = servers.addresses[DEVICE]
    p = gnmi_pb2.Path()
    for name, keys in gp.parse_path_string(
        f"/lldp/interfaces/interface[name={PORT}]/neighbors/neighbor[id=*]/state/system-name"
    ):
        p.elem.add(name=name, key=dict(keys))
    sub = gnmi_pb2.Subscription(path=p, mode=gnmi_pb2.ON_CHANGE)
    request = gnmi_pb2.SubscribeRequest(subscribe=gnmi_pb2.SubscriptionList(subscription=[sub], mode=0))
    peer = twin.peer(DEVICE, PORT)
    assert peer is not None
    got: list[tuple[float, str]] = []
    with grpc.insecure_channel(f"{host}:{port}") as channel:
        responses = gnmi_pb2_grpc.gNMIStub(channel).Subscribe(iter([request]), metadata=MD, timeout=10)

        def read() -> None:
            try:
                for r in responses:
                    if r.HasField("update"):
                        got.extend((time.monotonic(), u.val.string_val) for u in r.update.update)
            except grpc.RpcError:
                pass  # cancelled at the end

        reader = threading.Thread(target=read, daemon=True)
        reader.start()
        time.sleep(2.5)  # two and a half of the twin's change polls
        assert [v for _, v in got] == [peer.device]  # the initial value only
        other = Endpoint("some-other-switch", "Ethernet9/1")
        changed_at = time.monotonic()

        async def miscable() -> None:
            twin.lldp_swaps[(DEVICE, PORT)] = other

        asyncio.run_coroutine_threadsafe(miscable(), loop).result(10)
        deadline = time.monotonic() + 5
        while len(got) < 2 and time.monotonic() < deadline:
            time.sleep(0.05)
        responses.cancel()
        reader.join(5)

        async def repair() -> None:
            twin.lldp_swaps.pop((DEVICE, PORT), None)

        asyncio.run_coroutine_threadsafe(repair(), loop).result(10)
    assert [v for _, v in got] == [peer.device, "some-other-switch"]
    assert got[1][0] - changed_at < 1.5  # within a change poll (1 s)


def test_on_change_watchdog_count_is_sent_when_the_switch_declares_the_storm(
    served: tuple[Twin, GnmiServers, asyncio.AbstractEventLoop],
) -> None:
    """The PFC watchdog's stuck-count subscribed ON_CHANGE: 0 at first, then 1 at the moment the watchdog declares the
    queue stuck (its 200 ms detection time into a storm), not with a later sample."""
    import dataclasses
    import time

    from lab.faults import FaultInjector

    twin, servers, loop = served
    host, port = servers.addresses[DEVICE]
    nic_port = "Ethernet1/1"  # faces gpu-g0-000:nic0
    nic = twin.peer(DEVICE, nic_port)
    assert nic is not None and not twin.is_switch(nic.device)
    p = gnmi_pb2.Path()
    wd = "ethernet/pfc/watchdog/tx-queues/tx-queue[index=3][queue-type=UNICAST]/state/stuck-count"
    for name, keys in gp.parse_path_string(f"/interfaces/interface[name={nic_port}]/{wd}"):
        p.elem.add(name=name, key=dict(keys))
    sub = gnmi_pb2.Subscription(path=p, mode=gnmi_pb2.ON_CHANGE)
    request = gnmi_pb2.SubscribeRequest(subscribe=gnmi_pb2.SubscriptionList(subscription=[sub], mode=0))
    got: list[tuple[int, int]] = []
    injected: list[int] = []

    faults = FaultInjector(twin)
    before = twin.port_config(DEVICE, nic_port)

    async def arm() -> None:
        armed = dataclasses.replace(before, pfc_enabled=True, no_drop=frozenset({3}), watchdog=True)
        twin.set_port_config(DEVICE, nic_port, armed)
        twin.advance(twin.clock())

    async def storm() -> None:
        injected.append(faults.inject("pfc_storm", {"nic": str(nic)}).start_ns)

    async def calm() -> None:
        faults.clear(now_ns=twin.clock())
        twin.set_port_config(DEVICE, nic_port, before)
        twin.advance(twin.clock())

    asyncio.run_coroutine_threadsafe(arm(), loop).result(10)
    with grpc.insecure_channel(f"{host}:{port}") as channel:
        responses = gnmi_pb2_grpc.gNMIStub(channel).Subscribe(iter([request]), metadata=MD, timeout=10)

        def read() -> None:
            try:
                for r in responses:
                    if r.HasField("update"):
                        got.extend((r.update.timestamp, u.val.uint_val) for u in r.update.update)
            except grpc.RpcError:
                pass

        reader = threading.Thread(target=read, daemon=True)
        reader.start()
        deadline = time.monotonic() + 5
        while not got and time.monotonic() < deadline:
            time.sleep(0.02)
        asyncio.run_coroutine_threadsafe(storm(), loop).result(10)
        while len(got) < 2 and time.monotonic() < deadline:
            time.sleep(0.02)
        time.sleep(1.3)  # past the twin's next compare: the count did not change again, so nothing is resent
        responses.cancel()
        reader.join(5)
    asyncio.run_coroutine_threadsafe(calm(), loop).result(10)
    assert [v for _, v in got] == [0, 1]  # a resend of the unchanged count would read as no new declaration
    declared_after_s = (got[1][0] - injected[0]) / 1e9
    assert 0.19 <= declared_after_s <= 0.3  # the watchdog's 200 ms detection time (+ the twin's step)


def test_on_change_description_streams_what_the_operator_writes_and_its_removal(
    served: tuple[Twin, GnmiServers, asyncio.AbstractEventLoop],
) -> None:
    """`state/description` ON_CHANGE: "" for a port without one, the new text when it is set, "" again when it is
    removed (never left out: a removal must reach the collector)."""
    import dataclasses
    import time

    twin, servers, loop = served
    host, port = servers.addresses[DEVICE]
    p = gnmi_pb2.Path()
    for name, keys in gp.parse_path_string(f"/interfaces/interface[name={PORT}]/state/description"):
        p.elem.add(name=name, key=dict(keys))
    sub = gnmi_pb2.Subscription(path=p, mode=gnmi_pb2.ON_CHANGE)
    request = gnmi_pb2.SubscribeRequest(subscribe=gnmi_pb2.SubscriptionList(subscription=[sub], mode=0))
    got: list[str] = []
    before = twin.port_config(DEVICE, PORT)

    async def describe(text: str) -> None:
        twin.set_port_config(DEVICE, PORT, dataclasses.replace(twin.port_config(DEVICE, PORT), description=text))

    def wait_for(n: int) -> None:
        deadline = time.monotonic() + 5
        while len(got) < n and time.monotonic() < deadline:
            time.sleep(0.02)

    with grpc.insecure_channel(f"{host}:{port}") as channel:
        responses = gnmi_pb2_grpc.gNMIStub(channel).Subscribe(iter([request]), metadata=MD, timeout=10)

        def read() -> None:
            try:
                for r in responses:
                    if r.HasField("update"):
                        got.extend(u.val.string_val for u in r.update.update)
            except grpc.RpcError:
                pass

        reader = threading.Thread(target=read, daemon=True)
        reader.start()
        wait_for(1)
        asyncio.run_coroutine_threadsafe(describe("uplink to spine"), loop).result(10)
        wait_for(2)
        asyncio.run_coroutine_threadsafe(describe(""), loop).result(10)
        wait_for(3)
        responses.cancel()
        reader.join(5)
    asyncio.run_coroutine_threadsafe(describe(before.description), loop).result(10)
    assert got == ["", "uplink to spine", ""]
