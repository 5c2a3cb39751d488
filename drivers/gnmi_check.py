"""Is a switch's gNMI service still answering? (A post-commit check: a config change must not cut telemetry.)"""

from __future__ import annotations

import grpc
from pygnmi.spec.v080 import gnmi_pb2, gnmi_pb2_grpc

from drivers.base import DriverError
from drivers.inventory import DeviceAccess


def channel_for(access: DeviceAccess) -> grpc.Channel:
    """A gRPC channel as the inventory asks: TLS with verification by default, plaintext only if `tls: false`."""
    target = f"{access.host}:{access.gnmi.port}"
    if not access.gnmi.tls:
        return grpc.insecure_channel(target)
    root = access.gnmi.ca_file.read_bytes() if access.gnmi.ca_file else None
    options = [("grpc.ssl_target_name_override", access.host)] if access.gnmi.skip_verify else []
    return grpc.secure_channel(target, grpc.ssl_channel_credentials(root_certificates=root), options=options)


def gnmi_capabilities(access: DeviceAccess, timeout_s: float = 5.0) -> list[str]:
    """The gNMI versions/models the switch announces; raises DriverError if it does not answer."""
    metadata = [("username", access.username), ("password", access.password.get_secret_value())]
    with channel_for(access) as channel:
        stub = gnmi_pb2_grpc.gNMIStub(channel)
        try:
            reply = stub.Capabilities(gnmi_pb2.CapabilityRequest(), metadata=metadata, timeout=timeout_s)
        except grpc.RpcError as e:
            code = e.code().name if hasattr(e, "code") else "UNKNOWN"
            raise DriverError(
                access.name, f"gNMI at {access.host}:{access.gnmi.port} does not answer ({code})"
            ) from None
    return [m.name for m in reply.supported_models]
