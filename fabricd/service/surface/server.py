"""The API server (uvicorn) for the app `api.create_app` builds: TLS, mutual TLS if a client CA is set."""

from __future__ import annotations

import asyncio
import ssl
from typing import Any

import uvicorn
from fastapi import FastAPI

from ..config import ApiSettings


def api_server(app: FastAPI, api: ApiSettings) -> uvicorn.Server:
    tls: dict[str, Any] = {}
    if api.tls is not None:
        tls = {"ssl_certfile": str(api.tls.cert), "ssl_keyfile": str(api.tls.key)}
        if api.tls.client_ca is not None:  # mutual TLS: no client certificate, no connection
            tls |= {"ssl_ca_certs": str(api.tls.client_ca), "ssl_cert_reqs": ssl.CERT_REQUIRED}
    config = uvicorn.Config(
        app, host=api.host, port=api.port, log_level="warning", lifespan="off", access_log=False, **tls
    )
    return uvicorn.Server(config)


async def started_port(server: uvicorn.Server) -> int:
    """Wait for the server to listen; the port it listens on (api.port 0: one the system chose)."""
    while not server.started:
        if server.should_exit:
            raise RuntimeError("the API server did not start")
        await asyncio.sleep(0.02)
    sock = server.servers[0].sockets[0]
    return int(sock.getsockname()[1])
