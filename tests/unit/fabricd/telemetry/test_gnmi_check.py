"""The post-commit gNMI check over real gRPC: it reads a switch's full dump, however big (64 MiB, as the client)."""

from __future__ import annotations

from collections.abc import Iterator
from concurrent import futures

import grpc
import pytest
from pydantic import SecretStr
from pygnmi.spec.v080 import gnmi_pb2

from drivers.base import DriverError
from drivers.inventory import DeviceAccess, EapiAccess, GnmiAccess, SshAccess
from fabricd.telemetry.client import gnmi_streams


def _dump(size: int) -> list[bytes]:
    """One notification of `size` bytes of updates, then sync_response (what a switch's ONCE answer is)."""
    n = size // 1000
    path = gnmi_pb2.Path(elem=[gnmi_pb2.PathElem(name="x" * 950)])
    updates = [gnmi_pb2.Update(path=path, val=gnmi_pb2.TypedValue(uint_val=i)) for i in range(n)]
    big = gnmi_pb2.SubscribeResponse(update=gnmi_pb2.Notification(timestamp=1, update=updates))
    return [big.SerializeToString(), gnmi_pb2.SubscribeResponse(sync_response=True).SerializeToString()]


@pytest.fixture
def switch() -> Iterator[tuple[DeviceAccess, dict[str, int]]]:
    answer = {"bytes": 0}

    def subscribe(requests: Iterator[bytes], context: grpc.ServicerContext) -> Iterator[bytes]:
        next(requests)
        yield from _dump(answer["bytes"])

    server = grpc.server(futures.ThreadPoolExecutor(max_workers=2), options=[("grpc.max_send_message_length", -1)])
    handler = grpc.stream_stream_rpc_method_handler(subscribe)
    server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler("gnmi.gNMI", {"Subscribe": handler}),))
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    access = DeviceAccess(
        "leaf-a",
        "127.0.0.1",
        "eos",
        "admin",
        SecretStr("x"),
        GnmiAccess(port=port, tls=False),
        EapiAccess(),
        SshAccess(),
    )
    try:
        yield access, answer
    finally:
        server.stop(None)


def test_a_dump_over_grpcs_4_mib_default_is_read(switch: tuple[DeviceAccess, dict[str, int]]) -> None:
    access, answer = switch
    answer["bytes"] = 6 << 20  # a large switch's dump: over gRPC's 4 MiB default receive limit
    assert gnmi_streams(access) == (6 << 20) // 1000


@pytest.mark.parametrize(
    ("behaviour", "message"),
    [("abort", "does not stream (UNAVAILABLE)"), ("no sync", "ended the stream before sync_response")],
)
def test_a_switch_that_does_not_stream_fails_the_check(behaviour: str, message: str) -> None:
    def subscribe(requests: Iterator[bytes], context: grpc.ServicerContext) -> Iterator[bytes]:
        req = gnmi_pb2.SubscribeRequest.FromString(next(requests))
        assert req.subscribe.mode == gnmi_pb2.SubscriptionList.ONCE  # the check asks once, not a stream
        if behaviour == "abort":
            context.abort(grpc.StatusCode.UNAVAILABLE, "gNMI agent restarting")
        yield _dump(1000)[0]  # updates, then the end of the call without sync_response

    server = grpc.server(futures.ThreadPoolExecutor(max_workers=2))
    handler = grpc.stream_stream_rpc_method_handler(subscribe)
    server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler("gnmi.gNMI", {"Subscribe": handler}),))
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    access = DeviceAccess("leaf-a", "127.0.0.1", "eos", "admin", SecretStr("pw-9c2e"), GnmiAccess(port=port, tls=False),
                          EapiAccess(), SshAccess())  # fmt: skip
    try:
        with pytest.raises(DriverError) as info:
            gnmi_streams(access, timeout_s=5)
        assert message in str(info.value) and f"127.0.0.1:{port}" in str(info.value)
        assert "pw-9c2e" not in str(info.value)
    finally:
        server.stop(None)
