"""The twin's gNMI server over real sockets: unmodified pygnmi and a raw grpc stub as clients."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable, Coroutine, Iterator
from dataclasses import dataclass
from typing import Any, TypeVar

import grpc
import numpy as np
import pytest
from pygnmi.client import gNMIclient
from pygnmi.spec.v080 import gnmi_pb2, gnmi_pb2_grpc

from lab import gnmi_paths as gp
from lab.endpoints import Credentials, DeviceEndpoints
from lab.eos_releases import DEFAULT_EOS_VERSION
from lab.gnmi_server import GnmiServers, start_gnmi_servers
from lab.model import PortConfig, Twin
from topology.fabric import Fabric
from topology.model import Cabling

T = TypeVar("T")
# pygnmi's reader thread re-raises CANCELLED when a subscription is closed; that is the client, not us.
pytestmark = [pytest.mark.filterwarnings("ignore::pytest.PytestUnhandledThreadExceptionWarning")]
CREDS = Credentials("admin", "s3cret")
MD = [("username", "admin"), ("password", "s3cret")]
FAST_NS = 200_000_000  # 0.2 s sample interval keeps the streaming tests short


@dataclass
class GnmiTwin:
    twin: Twin
    servers: GnmiServers
    loop: asyncio.AbstractEventLoop

    def run(self, coro: Coroutine[Any, Any, T]) -> T:
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(10)

    def call(self, fn: Callable[[], T]) -> T:
        """Run on the server's loop thread, where the twin lives."""

        async def wrap() -> T:
            return fn()

        return self.run(wrap())

    def addr(self, device: str) -> tuple[str, int]:
        return self.servers.addresses[device]

    def stub(self, device: str) -> tuple[grpc.Channel, Any]:
        host, port = self.addr(device)
        channel = grpc.insecure_channel(f"{host}:{port}")
        return channel, gnmi_pb2_grpc.gNMIStub(channel)

    def client(self, device: str, password: str = "s3cret") -> gNMIclient:
        return gNMIclient(target=self.addr(device), username="admin", password=password, insecure=True)

    def switch_link(self) -> tuple[str, str, str, str]:
        """Some switch-to-switch link (leaf uplink): both ends."""
        for name, sw in self.twin.switches.items():
            for port in sw.ports:
                peer = self.twin.peer(name, port)
                if peer is not None and self.twin.is_switch(peer.device):
                    return name, port, peer.device, peer.port
        raise AssertionError("no switch-to-switch link")


@pytest.fixture(scope="module")
def gnmi_twin(small_blueprint: Cabling) -> Iterator[GnmiTwin]:
    twin = Twin(Fabric(small_blueprint))
    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    endpoints = {name: DeviceEndpoints(name, "127.0.0.1", gnmi_port=0) for name in twin.switches}
    servers = asyncio.run_coroutine_threadsafe(start_gnmi_servers(twin, endpoints, CREDS), loop).result(30)
    yield GnmiTwin(twin, servers, loop)
    asyncio.run_coroutine_threadsafe(servers.close(), loop).result(10)
    loop.call_soon_threadsafe(loop.stop)
    thread.join(5)


def path(text: str, target: str = "") -> Any:
    p = gnmi_pb2.Path(target=target)
    for name, keys in gp.parse_path_string(text):
        p.elem.add(name=name, key=dict(keys))
    return p


def subscribe_request(paths: list[str], mode: int = 0, sub_mode: int = 2, interval: int = FAST_NS, **kw: Any) -> Any:
    subs = [gnmi_pb2.Subscription(path=path(p), mode=sub_mode, sample_interval=interval) for p in paths]
    return gnmi_pb2.SubscribeRequest(
        subscribe=gnmi_pb2.SubscriptionList(subscription=subs, mode=mode, prefix=kw.pop("prefix", None), **kw)
    )


def flat(n: Any) -> dict[str, Any]:
    """Leaf path text -> python value, from one Notification."""
    pre = "/".join(gp.elem_text(e) for e in gp.path_elems(n.prefix))
    out = {}
    for u in n.update:
        rel = "/".join(gp.elem_text(e) for e in gp.path_elems(u.path))
        out[f"/{pre}/{rel}"] = getattr(u.val, u.val.WhichOneof("value"))
    return out


def rpc_code(fn: Callable[[], Any]) -> grpc.StatusCode:
    with pytest.raises(grpc.RpcError) as info:
        fn()
    return info.value.code()


# --- pygnmi ---------------------------------------------------------------------------------------
def test_capabilities_and_get_with_pygnmi(gnmi_twin: GnmiTwin) -> None:
    with gnmi_twin.client("leaf-g0-r0") as gc:
        caps = gc.capabilities()
        assert caps["gnmi_version"] == "0.8.0"
        assert {"json", "proto", "json_ietf"} <= set(caps["supported_encodings"])
        assert any(m["name"] == "openconfig-interfaces" for m in caps["supported_models"])

        got = gc.get(path=["/interfaces/interface[name=Ethernet1/1]/state/counters/in-pkts"])
        (update,) = got["notification"][0]["update"]
        assert update["path"].endswith("state/counters/in-pkts")
        assert isinstance(update["val"], int) and update["val"] > 0

        got = gc.get(path=["/interfaces/interface[name=*]/state/oper-status"])
        ports = gnmi_twin.twin.switches["leaf-g0-r0"].ports
        vals = [u["val"] for n in got["notification"] for u in n["update"]]
        assert vals == ["UP"] * len(ports)


def test_stream_sample_with_pygnmi(gnmi_twin: GnmiTwin) -> None:
    leaf = "/interfaces/interface[name=Ethernet1/1]/state/counters/in-pkts"
    gc = gnmi_twin.client("leaf-g0-r1")
    gc.connect()
    sub = gc.subscribe2(
        subscribe={"mode": "stream", "subscription": [{"path": leaf, "mode": "sample", "sample_interval": FAST_NS}]}
    )
    try:
        first = sub.get_update(timeout=5)
        assert first["sync_response"] is True
        values = [u["val"] for u in first["update"]["update"]]
        for _ in range(2):
            values += [u["val"] for u in sub.get_update(timeout=5)["update"]["update"]]
    finally:
        gc.close()
        sub.close()
    assert len(values) == 3 and values[0] < values[1] < values[2]


def test_on_change_oper_status_reaches_both_ends(gnmi_twin: GnmiTwin) -> None:
    dev_a, port_a, dev_b, port_b = gnmi_twin.switch_link()
    subs, clients = [], []
    for dev, port in ((dev_a, port_a), (dev_b, port_b)):
        gc = gnmi_twin.client(dev)
        gc.connect()
        clients.append(gc)
        s = gc.subscribe2(
            subscribe={
                "mode": "stream",
                "subscription": [
                    {"path": f"/interfaces/interface[name={port}]/state/oper-status", "mode": "on_change"}
                ],
            }
        )
        first = s.get_update(timeout=5)
        assert [u["val"] for u in first["update"]["update"]] == ["UP"]
        subs.append(s)
    try:

        def shut() -> None:
            gnmi_twin.twin.set_port_config(dev_a, port_a, PortConfig(admin_up=False))
            gnmi_twin.twin.advance()

        gnmi_twin.call(shut)
        for s in subs:
            got = s.get_update(timeout=5)
            assert [u["val"] for u in got["update"]["update"]] == ["DOWN"]
            assert got["update"]["update"][0]["path"].endswith("state/oper-status")
    finally:
        gnmi_twin.call(lambda: gnmi_twin.twin.set_port_config(dev_a, port_a, PortConfig()))
        for gc in clients:
            gc.close()  # closing the channel first ends pygnmi's reader thread at once
        for s in subs:
            s.close()


def test_lldp_neighbour_is_deleted_when_the_link_goes_down_and_relearned_after_it_comes_up(
    gnmi_twin: GnmiTwin,
) -> None:
    """IEEE 802.1AB as a switch streams it: ON_CHANGE LLDP sends the neighbour entry's delete when the port stops
    being operational (a repair check must not read the old cable's neighbour), and the neighbour again only from
    the peer's first LLDPDU after link up (lab/model.py LLDP_LEARN_NS), never at the link-up instant."""
    dev, port, peer_dev, peer_port = gnmi_twin.switch_link()
    gc = gnmi_twin.client(dev)
    gc.connect()
    s = gc.subscribe2(
        subscribe={
            "mode": "stream",
            "subscription": [
                {"path": f"/lldp/interfaces/interface[name={port}]/neighbors/neighbor[id=1]/state", "mode": "on_change"}
            ],
        }
    )

    def next_update(kind: str) -> dict[str, Any]:
        """The next notification carrying `kind` (update or delete); the sync_response and others are skipped."""
        while True:
            body = s.get_update(timeout=5).get("update") or {}
            if body.get(kind):
                return dict(body)

    try:
        # (an earlier test may have flapped this link: its neighbour is known a second after it came up)
        first = next_update("update")
        assert {u["path"].rsplit("/", 1)[-1]: u["val"] for u in first["update"]} == {
            "system-name": peer_dev, "port-id": peer_port}  # fmt: skip
        gnmi_twin.call(lambda: gnmi_twin.twin.set_port_config(peer_dev, peer_port, PortConfig(admin_up=False)))
        gone = next_update("delete")  # the far end shut: this port is down too
        assert gone.get("update", []) == []
        assert [d["path"] for d in gone["delete"]] == ["neighbors/neighbor[id=1]"]
        up_at = time.monotonic()
        gnmi_twin.call(lambda: gnmi_twin.twin.set_port_config(peer_dev, peer_port, PortConfig()))
        back = next_update("update")
        assert time.monotonic() - up_at >= 0.9  # not before the first LLDPDU after link up
        assert {u["path"].rsplit("/", 1)[-1]: u["val"] for u in back["update"]}["system-name"] == peer_dev
    finally:
        gnmi_twin.call(lambda: gnmi_twin.twin.set_port_config(peer_dev, peer_port, PortConfig()))
        gc.close()
        s.close()


def test_once_and_poll_with_pygnmi(gnmi_twin: GnmiTwin) -> None:
    p = "/qos/interfaces/interface[interface-id=Ethernet1/1]/output/queues/queue[name=3]/state/transmit-pkts"
    with gnmi_twin.client("leaf-g1-r0") as gc:
        once = list(gc.subscribe2(subscribe={"mode": "once", "subscription": [{"path": p}]}))
        assert once[-1]["sync_response"] is True
        (upd,) = [u for msg in once if "update" in msg for u in msg["update"]["update"]]
        assert upd["val"] > 0

        poll = gc.subscribe2(subscribe={"mode": "poll", "subscription": [{"path": p}]})
        try:
            a = poll.get_update(timeout=5)["update"]["update"][0]["val"]
            time.sleep(0.05)
            b = poll.get_update(timeout=5)["update"]["update"][0]["val"]
            assert b > a
        finally:
            poll.close()


def test_wrong_password_is_unauthenticated(gnmi_twin: GnmiTwin) -> None:
    gc = gnmi_twin.client("leaf-g0-r0", password="nope")
    with pytest.raises(Exception, match="authentication failed"):
        gc.connect()
    gc.close()
    channel, stub = gnmi_twin.stub("leaf-g0-r0")
    with channel:
        assert rpc_code(lambda: stub.Capabilities(gnmi_pb2.CapabilityRequest())) == grpc.StatusCode.UNAUTHENTICATED


# --- raw stub --------------------------------------------------------------------------------------
def test_raw_stream_batches_per_interface_with_target_echo(gnmi_twin: GnmiTwin) -> None:
    dev = "spine-r0-0"
    sw = gnmi_twin.twin.switches[dev]
    req = subscribe_request(
        ["/interfaces/interface/state/counters", "/qos/interfaces"], prefix=gnmi_pb2.Path(target=dev)
    )
    channel, stub = gnmi_twin.stub(dev)
    with channel:
        call = stub.Subscribe(iter([req]), metadata=MD)
        first: list[Any] = []
        for resp in call:
            if resp.sync_response:
                break
            first.append(resp.update)
        second = [next(call).update for _ in range(len(first))]
        call.cancel()
    assert len(first) == 2 * len(sw.ports)  # one notification per interface and tree
    for n in first:
        assert n.prefix.target == dev
        assert n.prefix.elem[-1].name == "interface"
    if_notes = [n for n in first if n.prefix.elem[0].name == "interfaces"]
    assert len(if_notes[0].update) == 11 and all(u.val.HasField("uint_val") for u in if_notes[0].update)
    before = {k: v for n in first for k, v in flat(n).items()}
    after = {k: v for n in second for k, v in flat(n).items()}
    key = "/interfaces/interface[name=Ethernet1/1]/state/counters/out-octets"
    assert after[key] > before[key]
    assert all(n.timestamp > first[0].timestamp for n in second)
    assert abs(first[0].timestamp - time.time_ns()) < 5e9


def test_get_state_leaves_and_json_ietf(gnmi_twin: GnmiTwin) -> None:
    dev = "leaf-g0-r0"
    channel, stub = gnmi_twin.stub(dev)
    with channel:
        resp = stub.Get(gnmi_pb2.GetRequest(path=[path("/interfaces/interface[name=Ethernet1/1]")]), metadata=MD)
        leaves = {k: v for n in resp.notification for k, v in flat(n).items()}
        base = "/interfaces/interface[name=Ethernet1/1]"
        assert leaves[f"{base}/state/oper-status"] == "UP"
        assert leaves[f"{base}/state/admin-status"] == "UP"
        assert 0 < leaves[f"{base}/ethernet/phys/phy[index=1]/ingress/fec/state/pre-fec-ber"] < 1e-4
        assert (
            f"{base}/ethernet/pfc/watchdog/tx-queues/tx-queue[index=3][queue-type=UNICAST]/state/stuck-count" in leaves
        )
        assert len(leaves) == sum(1 for leaf in gp.CATALOG if leaf.tree == "if")

        resp = stub.Get(
            gnmi_pb2.GetRequest(
                path=[
                    path("/components/component[name=Ethernet1/1 transceiver]"),
                    path("/lldp/interfaces/interface[name=Ethernet1/1]/neighbors"),
                ]
            ),
            metadata=MD,
        )
        leaves = {k: v for n in resp.notification for k, v in flat(n).items()}
        peer = gnmi_twin.twin.peer(dev, "Ethernet1/1")
        assert peer is not None
        assert -4 < next(v for k, v in leaves.items() if k.endswith("input-power/instant")) < 0
        assert next(v for k, v in leaves.items() if k.endswith("system-name")) == peer.device
        assert next(v for k, v in leaves.items() if k.endswith("port-id")) == peer.port

        resp = stub.Get(
            gnmi_pb2.GetRequest(
                path=[path("/interfaces/interface[name=Ethernet1/1]/state/counters/in-pkts")], encoding=4
            ),
            metadata=MD,
        )
        val = resp.notification[0].update[0].val.json_ietf_val
        assert val.startswith(b'"') and int(val.strip(b'"')) > 0


def test_status_codes(gnmi_twin: GnmiTwin) -> None:
    dev = "leaf-g0-r0"
    channel, stub = gnmi_twin.stub(dev)

    def get(p: Any, md: Any = MD, **kw: Any) -> Any:
        return stub.Get(gnmi_pb2.GetRequest(path=[p], **kw), metadata=md)

    def sub(req: Any) -> Any:
        return list(stub.Subscribe(iter([req]), metadata=MD))

    with channel:
        assert rpc_code(lambda: get(path("/interfaces"), md=[("username", "admin")])) == grpc.StatusCode.UNAUTHENTICATED
        bad = gnmi_pb2.Path(elem=[gnmi_pb2.PathElem(name="interfaces"), gnmi_pb2.PathElem(name="")])
        assert rpc_code(lambda: get(bad)) == grpc.StatusCode.INVALID_ARGUMENT
        assert rpc_code(lambda: get(gnmi_pb2.Path(element=["interfaces"]))) == grpc.StatusCode.INVALID_ARGUMENT
        assert (
            rpc_code(lambda: get(path("/interfaces/interface[name=Ethernet99/1]/state"))) == grpc.StatusCode.NOT_FOUND
        )
        assert rpc_code(lambda: get(path("/interfaces/interface/state/no-such-leaf"))) == grpc.StatusCode.NOT_FOUND
        assert (
            rpc_code(lambda: get(path("/interfaces"), prefix=gnmi_pb2.Path(target="other")))
            == grpc.StatusCode.NOT_FOUND
        )
        assert rpc_code(lambda: get(path("/interfaces"), encoding=3)) == grpc.StatusCode.UNIMPLEMENTED
        too_fast = subscribe_request(["/interfaces"], interval=1000)
        assert rpc_code(lambda: sub(too_fast)) == grpc.StatusCode.INVALID_ARGUMENT
        assert rpc_code(lambda: sub(subscribe_request(["/interfaces"], mode=7))) == grpc.StatusCode.INVALID_ARGUMENT
        poll_first = gnmi_pb2.SubscribeRequest(poll=gnmi_pb2.Poll())
        assert rpc_code(lambda: sub(poll_first)) == grpc.StatusCode.INVALID_ARGUMENT
        set_req = gnmi_pb2.SetRequest()
        assert rpc_code(lambda: stub.Set(set_req, metadata=MD)) == grpc.StatusCode.UNIMPLEMENTED
        # The server survives all of that.
        assert stub.Capabilities(gnmi_pb2.CapabilityRequest(), metadata=MD).gNMI_version == "0.8.0"


def test_an_older_release_serves_fewer_leaves_and_refuses_paths_it_does_not_have(gnmi_twin: GnmiTwin) -> None:
    """EOS 4.31.2F has no FEC `phys` subtree, no in-symbol-error and no pause-time leaf (issue 15,
    reference/platforms.md): a raw grpc client and pygnmi both see a container without them and a refused path."""
    dev, other = "leaf-g0-r0", "leaf-g0-r1"
    base = "/interfaces/interface[name=Ethernet1/1]"
    fec = f"{base}/ethernet/phys/phy[index=1]/ingress/fec/state"
    prio = f"{base}/ethernet/pfc/priorities/priority[index=3]/state"
    sw = gnmi_twin.twin.switches[dev]
    gnmi_twin.call(lambda: setattr(sw, "os_version", "4.31.2F"))
    try:
        channel, stub = gnmi_twin.stub(dev)
        with channel:
            resp = stub.Get(gnmi_pb2.GetRequest(path=[path(prio), path(f"{base}/ethernet/state")]), metadata=MD)
            leaves = {k.rsplit("/", 1)[1] for n in resp.notification for k in flat(n)}
            assert {"in-frames", "out-frames", "in-crc-errors"} <= leaves
            assert not leaves & {"pfc-on-total-rx-time", "in-symbol-error"}
            with pytest.raises(grpc.RpcError) as info:
                stub.Get(gnmi_pb2.GetRequest(path=[path(fec)]), metadata=MD)
            assert info.value.code() == grpc.StatusCode.NOT_FOUND
            assert "/ingress/fec/state" in (info.value.details() or "")
            # Subscribe: the whole call is refused for that one path, however many good ones it holds
            req = subscribe_request([f"{base}/state/counters", fec], mode=1)
            assert rpc_code(lambda: list(stub.Subscribe(iter([req]), metadata=MD))) == grpc.StatusCode.NOT_FOUND
            once = list(stub.Subscribe(iter([subscribe_request([f"{base}/state/counters"], mode=1)]), metadata=MD))
            assert once[-1].sync_response and len(once) > 1
        with gnmi_twin.client(dev) as gc:
            got = gc.get(path=[prio])
            names = {u["path"].rsplit("/", 1)[1] for n in got["notification"] for u in n["update"]}
            assert "in-frames" in names and "pfc-on-total-rx-time" not in names
        with gnmi_twin.client(other) as gc:  # a switch on the current release serves both
            got = gc.get(path=[prio])
            names = {u["path"].rsplit("/", 1)[1] for n in got["notification"] for u in n["update"]}
            assert {"in-frames", "pfc-on-total-rx-time"} <= names
            assert gc.get(path=[fec])["notification"]
    finally:
        gnmi_twin.call(lambda: setattr(sw, "os_version", DEFAULT_EOS_VERSION))


def test_pygnmi_and_a_raw_grpc_client_see_the_same_switch(gnmi_twin: GnmiTwin) -> None:
    """One port's every leaf through pygnmi (its own path parsing and JSON decoding) and through the raw stubs
    (PROTO): the same paths, the same states and neighbours, and counters that agree with the time each was read."""
    dev, base = "leaf-g0-r0", "/interfaces/interface[name=Ethernet5/1]"
    channel, stub = gnmi_twin.stub(dev)

    def rel(full: str) -> str:
        return full.strip("/").removeprefix(base.strip("/") + "/")

    def raw() -> dict[str, Any]:
        resp = stub.Get(gnmi_pb2.GetRequest(path=[path(base)], encoding=2), metadata=MD)
        return {rel(k): v for n in resp.notification for k, v in flat(n).items()}

    with channel:
        before = raw()
        with gnmi_twin.client(dev) as gc:
            got = gc.get(path=[base], encoding="json_ietf")
        after = raw()
    seen: dict[str, Any] = {}
    for n in got["notification"]:
        for u in n["update"]:
            seen[rel(f"{n.get('prefix', '')}/{u['path']}")] = u["val"]
    assert set(seen) == set(before) == set(after) and len(seen) > 20
    for leaf, v in seen.items():
        b, a = before[leaf], after[leaf]
        if isinstance(b, str):
            assert v == b == a, leaf
        elif isinstance(b, float):  # optics wander a little between reads
            lo, hi = min(b, a), max(b, a)
            assert lo - 0.05 * abs(lo) - 1e-12 <= float(v) <= hi + 0.05 * abs(hi) + 1e-12, leaf
        else:  # a counter read between the two raw reads
            assert b <= int(v) <= a, leaf


def test_stream_drop_is_unavailable(gnmi_twin: GnmiTwin) -> None:
    dev = "leaf-g1-r1"
    sw = gnmi_twin.twin.switches[dev]
    channel, stub = gnmi_twin.stub(dev)
    with channel:
        call = stub.Subscribe(iter([subscribe_request(["/interfaces/interface/state/counters/in-pkts"])]), metadata=MD)
        while not next(call).sync_response:
            pass

        def drop() -> None:
            sw.stream_epoch += 1
            sw.gnmi_blocked_until = time.time_ns() + 2_000_000_000

        gnmi_twin.call(drop)
        assert rpc_code(lambda: list(call)) == grpc.StatusCode.UNAVAILABLE
        again = stub.Subscribe(iter([subscribe_request(["/interfaces"])]), metadata=MD)
        assert rpc_code(lambda: list(again)) == grpc.StatusCode.UNAVAILABLE
        gnmi_twin.call(lambda: setattr(sw, "gnmi_blocked_until", 0))
        once = list(
            stub.Subscribe(iter([subscribe_request(["/interfaces/interface/state/oper-status"], mode=1)]), metadata=MD)
        )
        assert once[-1].sync_response and len(once) == len(sw.ports) + 1


def test_address_in_use_names_host_and_port(gnmi_twin: GnmiTwin) -> None:
    host, port = gnmi_twin.addr("leaf-g0-r0")
    with pytest.raises(OSError, match=f"{host}:{port}"):
        gnmi_twin.run(
            start_gnmi_servers(gnmi_twin.twin, {"leaf-g0-r0": DeviceEndpoints("leaf-g0-r0", host, port)}, CREDS)
        )


# --- path mapping and encoding (no sockets) --------------------------------------------------------
def test_path_matching(gnmi_twin: GnmiTwin) -> None:
    sw = gnmi_twin.twin.switches["leaf-g0-r0"]
    n_ports = len(sw.ports)

    routed = gp.addresses(gnmi_twin.twin, sw)  # the ports with a BGP session: 4 uplinks

    def count(text: str) -> int:
        return len(gp.select(sw, gp.match(gp.parse_path_string(text)), routed)[0])

    assert count("/interfaces/interface[name=Ethernet1/1]/state/counters") == 11
    assert count("/interfaces/interface[name=*]/state/counters/in-pkts") == n_ports
    assert count("/interfaces/*/ethernet/pfc/priorities/priority[index=3]/state") == 3 * n_ports
    assert count("/interfaces/interface/.../in-frames") == 8 * n_ports
    by_address = sum(1 for leaf in gp.CATALOG if leaf.tree in gp.ADDRESS_TREES)
    assert len(routed) == 4
    assert count("/") == (len(gp.CATALOG) - by_address) * n_ports + by_address * len(routed)
    bgp = "/network-instances/network-instance[name=default]/protocols/protocol[identifier=BGP][name=BGP]/bgp"
    assert count(f"{bgp}/neighbors/neighbor[neighbor-address=*]/state/session-state") == 4
    peer = next(iter(routed.values()))[1]
    assert count(f"{bgp}/neighbors/neighbor[neighbor-address={peer}]") == 8
    with pytest.raises(gp.PathNotFound):
        count(f"{bgp}/neighbors/neighbor[neighbor-address=192.0.2.1]")
    assert count("/components/component[name=Ethernet2/1 transceiver]") == 2  # input power, temperature
    with pytest.raises(gp.PathNotFound):
        count("/components/component[name=Ethernet2/1]")
    with pytest.raises(gp.PathError):
        gp.parse_path_string("/interfaces/interface[name=Ethernet1/1")


def test_counter_encoding_round_trips() -> None:
    codes = np.array([c for c in range(len(gp.CATALOG)) if gp.IS_COUNTER[c]] * 2, dtype=np.int64)
    edge = [0, 1, 127, 128, 16383, 16384, 2**32, 2**63, 2**64 - 1]
    rng = np.random.default_rng(1)
    values = rng.integers(0, 2**63, len(codes), dtype=np.uint64)
    values[: len(edge)] = np.array(edge, dtype=np.uint64)
    blob, lengths = gp.encode_counters(codes, values)
    assert int(lengths.sum()) == len(blob)
    note = gnmi_pb2.Notification.FromString(blob)
    assert [u.val.uint_val for u in note.update] == values.tolist()
    assert [gp.path_elems(u.path) for u in note.update] == [list(gp.CATALOG[c].rel) for c in codes]
