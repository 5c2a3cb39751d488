"""Is a switch's gNMI service still answering? (A post-commit check: a config change must not cut telemetry.)"""

from __future__ import annotations

from typing import Any

import grpc
from pygnmi.spec.v080 import gnmi_pb2, gnmi_pb2_grpc

from drivers.base import DriverError
from drivers.inventory import DeviceAccess

MAX_MESSAGE = 64 << 20  # a full-device initial dump in JSON can exceed gRPC's 4 MiB default


def channel_options(access: DeviceAccess) -> list[tuple[str, Any]]:
    """The options of every gNMI channel fabricd opens (this check's and the telemetry client's)."""
    opts: list[tuple[str, Any]] = [("grpc.max_receive_message_length", MAX_MESSAGE), ("grpc.enable_retries", 0)]
    if access.gnmi.tls and access.gnmi.skip_verify:
        # The certificate must still chain to the CA; only the name check is made against the inventory host.
        opts.append(("grpc.ssl_target_name_override", access.host))
    return opts


def channel_for(access: DeviceAccess) -> grpc.Channel:
    """A gRPC channel as the inventory asks: TLS with verification by default, plaintext only if `tls: false`."""
    target = f"{access.host}:{access.gnmi.port}"
    options = channel_options(access)
    if not access.gnmi.tls:
        return grpc.insecure_channel(target, options=options)
    root = access.gnmi.ca_file.read_bytes() if access.gnmi.ca_file else None
    return grpc.secure_channel(target, grpc.ssl_channel_credentials(root_certificates=root), options=options)


def gnmi_streams(access: DeviceAccess, timeout_s: float = 5.0) -> int:
    """Subscribe ONCE to every port's oper-status and wait for sync_response: proof that telemetry flows,
    not just that the gRPC server accepts calls. Returns the number of updates; raises DriverError."""
    metadata = [("username", access.username), ("password", access.password.get_secret_value())]
    path = gnmi_pb2.Path(
        elem=[
            gnmi_pb2.PathElem(name="interfaces"),
            gnmi_pb2.PathElem(name="interface", key={"name": "*"}),
            gnmi_pb2.PathElem(name="state"),
            gnmi_pb2.PathElem(name="oper-status"),
        ]
    )
    request = gnmi_pb2.SubscribeRequest(
        subscribe=gnmi_pb2.SubscriptionList(
            mode=gnmi_pb2.SubscriptionList.ONCE, subscription=[gnmi_pb2.Subscription(path=path)]
        )
    )
    updates = 0
    with channel_for(access) as channel:
        stub = gnmi_pb2_grpc.gNMIStub(channel)
        try:
            for response in stub.Subscribe(iter([request]), metadata=metadata, timeout=timeout_s):
                if response.sync_response:
                    return updates
                updates += len(response.update.update)
        except grpc.RpcError as e:
            code = e.code().name if hasattr(e, "code") else "UNKNOWN"
            raise DriverError(
                access.name, f"gNMI at {access.host}:{access.gnmi.port} does not stream ({code})"
            ) from None
    raise DriverError(access.name, f"gNMI at {access.host}:{access.gnmi.port} ended the stream before sync_response")
