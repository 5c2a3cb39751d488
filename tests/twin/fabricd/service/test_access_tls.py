"""The API over TLS and mutual TLS: a service on a real socket, a real HTTPS client."""

from __future__ import annotations

import json
import ssl
from pathlib import Path

import httpx
import pytest

from fabricd.cli import main as cli
from tests.unit.fabricd.service.test_access import self_signed, write

from .service_thread import ServiceThread


def test_tls_serves_https_and_the_cli_trusts_its_certificate(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("FABRICD_TEST_PW", "pw")
    cert, key = self_signed(tmp_path)
    cfg_path = write(tmp_path, f"  port: 0\n  tls: {{cert: {cert}, key: {key}}}\n")
    svc = ServiceThread(cfg_path).start()
    try:
        assert svc.service is not None
        url = f"https://127.0.0.1:{svc.service.api_port}"
        ctx = ssl.create_default_context(cafile=str(cert))
        assert httpx.get(url + "/api/v1/health", verify=ctx, timeout=10).status_code == 200
        with pytest.raises(httpx.HTTPError):  # plain HTTP on the TLS port gets no answer
            httpx.get(f"http://127.0.0.1:{svc.service.api_port}/api/v1/health", timeout=5)
        with pytest.raises(httpx.ConnectError):  # and an untrusted certificate is refused by the client
            httpx.get(url + "/api/v1/health", timeout=5)
        cfg_text = cfg_path.read_text().replace("  port: 0\n", f"  port: {svc.service.api_port}\n")
        cfg_path.write_text(cfg_text)
        monkeypatch.delenv("FABRICD_API_TOKEN", raising=False)
        capsys.readouterr()
        rc = cli(["status", "--config", str(cfg_path), "--format", "json"])  # 1: its one switch is not streaming
        assert rc in (0, 1) and json.loads(capsys.readouterr().out)["ticket_backend"] == "sqlite"
    finally:
        svc.stop()


def test_mutual_tls_refuses_a_client_without_a_certificate(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FABRICD_TEST_PW", "pw")
    cert, key = self_signed(tmp_path)
    client_cert, client_key = self_signed(tmp_path, "noc-laptop", "client-")  # its own CA: the one fabricd trusts
    cfg_path = write(tmp_path, f"  port: 0\n  tls: {{cert: {cert}, key: {key}, client_ca: {client_cert}}}\n")
    svc = ServiceThread(cfg_path).start()
    try:
        assert svc.service is not None
        url = f"https://127.0.0.1:{svc.service.api_port}/api/v1/health"
        ctx = ssl.create_default_context(cafile=str(cert))
        with pytest.raises(httpx.HTTPError):  # no client certificate: the handshake fails
            httpx.get(url, verify=ctx, timeout=5)
        ctx.load_cert_chain(str(client_cert), str(client_key))
        assert httpx.get(url, verify=ctx, timeout=10).status_code == 200
    finally:
        svc.stop()
