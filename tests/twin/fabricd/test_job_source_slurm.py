"""The job map from slurmrestd over a real socket: a local HTTP server that checks the JWT as slurmrestd does."""

from __future__ import annotations

import json

import pytest

from fabricd.jobs.source import JobSource
from tests.unit.fabricd.test_job_source import FABRIC, SQUEUE


class _Slurmrestd:
    """An HTTP server answering GET /slurm/v0.0.40/jobs as slurmrestd does (the JWT checked), for one test."""

    def __init__(self, token: str) -> None:
        import http.server
        import threading

        self.status, self.body = 200, json.dumps(SQUEUE | {"meta": {}, "errors": []})
        self.seen: list[tuple[str, str | None]] = []
        outer = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                outer.seen.append((self.path, self.headers.get("X-SLURM-USER-NAME")))
                if self.headers.get("X-SLURM-USER-TOKEN") != token:
                    code, body = 401, "Authentication failure"
                elif self.path != "/slurm/v0.0.40/jobs":
                    code, body = 404, "Unable to find handler"
                else:
                    code, body = outer.status, outer.body
                data = body.encode()
                self.send_response(code)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args: object) -> None:
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def test_slurmrestd_with_a_jwt(caplog: pytest.LogCaptureFixture) -> None:
    from pydantic import SecretStr

    from fabricd.jobs.source import SlurmRest

    secret = "eyJhbGciOiJIUzI1NiJ9.secret-jwt"
    srv = _Slurmrestd(secret)
    try:
        src = JobSource(FABRIC, None, None, None, 5, SlurmRest(srv.url, "fabricd", SecretStr(secret)))
        assert src.configured
        first = src.refresh()
        assert first is not None and list(first.footprints) == ["7"] and first.footprints["7"].gpus == 8
        assert srv.seen == [("/slurm/v0.0.40/jobs", "fabricd")]
        # slurmrestd's own error list, an expired token, a wrong data parser version, no server: each named, the
        # previous map kept, the token in no message
        srv.body = json.dumps({"jobs": [], "errors": [{"description": "Unable to query jobs", "error_number": 9}]})
        assert src.refresh() is first and "slurmrestd answered an error: Unable to query jobs" in str(src.status.error)
        src.rest = SlurmRest(srv.url, "fabricd", SecretStr("expired"))
        assert src.refresh() is first and "refused the token (401)" in str(src.status.error)
        src.rest = SlurmRest(srv.url, "fabricd", SecretStr(secret), api_version="v0.0.39")
        assert src.refresh() is first and "set jobs.slurmrestd.api_version" in str(src.status.error)
        srv.body = json.dumps({"jobs": [{"name": "no id", "nodes": "gpu-g1-000", "job_state": ["RUNNING"]}]})
        src.rest = SlurmRest(srv.url, "fabricd", SecretStr(secret))
        assert src.refresh() is first
        assert str(src.status.error).startswith(f"{srv.url}/slurm/v0.0.40/jobs: field 'jobs[0].id'")
    finally:
        srv.close()
    assert src.refresh() is first and "cannot reach slurmrestd" in str(src.status.error)
    assert "cannot reach slurmrestd" in caplog.text and secret not in caplog.text and "expired" not in caplog.text
