"""The service's job map source: a file or a command, re-read; a bad read keeps the previous map and is named."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from fabricd.jobs.source import JobSource
from tests.conftest import EXAMPLES
from topology.load import load_fabric

FABRIC = load_fabric(EXAMPLES / "small-pod.yaml", None)[1]
SQUEUE = {"jobs": [{"job_id": 7, "name": "p", "nodes": "gpu-g1-[000-001]", "job_state": ["RUNNING"], "qos": "high"}]}


def test_a_command_printing_squeue_json(tmp_path: Path) -> None:
    out = tmp_path / "squeue.json"
    out.write_text(json.dumps(SQUEUE))
    src = JobSource(FABRIC, None, [sys.executable, "-c", f"print(open({str(out)!r}).read())"], None, 10)
    jobs = src.refresh()
    assert jobs is not None and list(jobs.footprints) == ["7"] and jobs.footprints["7"].gpus == 8
    assert src.status.error is None and src.status.jobs == 1


def test_a_bad_read_keeps_the_previous_map(tmp_path: Path) -> None:
    path = tmp_path / "jobs.yaml"
    path.write_text((EXAMPLES / "small-pod-jobs.yaml").read_text())
    src = JobSource(FABRIC, path, None, None, 10)
    first = src.refresh()
    assert first is not None and len(first) == 3
    path.write_text("jobs:\n  - id: x\n    nodes: gpu-[1-\n")
    assert src.refresh() is first
    assert src.status.error is not None and "jobs[0].nodes" in src.status.error and src.status.jobs == 3


def test_a_failing_command_is_named_not_raised(tmp_path: Path) -> None:
    src = JobSource(FABRIC, None, [sys.executable, "-c", "import sys; sys.exit(3)"], None, 10)
    assert src.refresh() is None
    assert src.status.error is not None and "exited 3" in src.status.error
    src = JobSource(FABRIC, None, [sys.executable, "-c", "print('not json')"], None, 10)
    assert src.refresh() is None and "did not print JSON" in str(src.status.error)
    src = JobSource(FABRIC, None, ["/nonexistent/squeue"], None, 10)
    assert src.refresh() is None and "cannot run it" in str(src.status.error)


def test_unconfigured_is_no_map() -> None:
    src = JobSource(FABRIC, None, None, None, 10)
    assert not src.configured and src.refresh() is None and src.status.error is None


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


def test_the_config_takes_one_source_and_reads_the_token(tmp_path: Path) -> None:
    from fabricd.service.config import ConfigError, load_config

    cfg_path = tmp_path / "fabricd.yaml"
    cfg_path.write_text(
        f"spec: {EXAMPLES / 'small-pod.yaml'}\ninventory: inventory.yaml\n"
        "jobs:\n  slurmrestd:\n    url: https://slurm:6820\n    user: fabricd\n    token: {env: SLURM_JWT}\n"
    )
    with pytest.raises(ConfigError) as e:
        load_config(cfg_path, environ={})
    assert "SLURM_JWT is not set" in str(e.value) and "jobs.slurmrestd.token" in str(e.value)
    cfg = load_config(cfg_path, environ={"SLURM_JWT": "x"})
    assert cfg.jobs.slurmrestd is not None and cfg.jobs.slurmrestd.api_version == "v0.0.40"
    cfg_path.write_text(cfg_path.read_text() + "  path: jobs.yaml\n")
    with pytest.raises(ConfigError) as e:
        load_config(cfg_path, environ={"SLURM_JWT": "x"})
    assert "give one of path, command or slurmrestd" in str(e.value)
