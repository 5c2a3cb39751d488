"""The service's job map, kept fresh: re-read the jobs file (re-run the command, or ask slurmrestd) on a schedule; a
bad read is logged once per distinct error and leaves the previous map in force (a typo in jobs.yaml must not blind
fabricd to which jobs a fault hits)."""

from __future__ import annotations

import json
import logging
import re
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

import httpx
from pydantic import SecretStr

from topology.errors import FabricdError
from topology.fabric import Fabric
from topology.jobs import Job, JobError, JobMap, is_scontrol_text, load_jobs, parse_jobs, parse_scontrol_jobs

log = logging.getLogger("fabricd.jobs")
_JOBS_PATH = re.compile(r"^/slurm/(v\d+\.\d+\.\d+)/jobs/?$")
TOKEN_HINT = "; slurmctld refused the request: is jobs.slurmrestd.token valid for jobs.slurmrestd.user? renew it"


@dataclass
class JobStatus:
    jobs: int = 0
    loaded_at: float | None = None  # unix seconds of the last good read
    error: str | None = None  # the last read's error, None when it was good


@dataclass(frozen=True)
class SlurmRest:
    """slurmrestd: GET {url}/slurm/{api_version}/jobs with the user's JWT (never logged, never in an error)."""

    url: str
    user: str
    token: SecretStr
    api_version: str = "v0.0.40"
    verify: bool | str = True  # or a CA bundle file

    @property
    def jobs_url(self) -> str:
        return f"{self.url.rstrip('/')}/slurm/{self.api_version}/jobs"


class JobSource:
    def __init__(
        self,
        fabric: Fabric,
        path: Path | None,
        command: list[str] | None,
        job_label: str | None,
        timeout_s: float,
        rest: SlurmRest | None = None,
    ) -> None:
        self.fabric, self.path, self.command, self.rest = fabric, path, command, rest
        self.job_label, self.timeout_s = job_label, timeout_s
        self.map: JobMap | None = None
        self.status = JobStatus()

    @property
    def configured(self) -> bool:
        return self.path is not None or bool(self.command) or self.rest is not None

    def refresh(self) -> JobMap | None:
        """Blocking (a file read or a command): the new map, or the previous one when this read failed."""
        if not self.configured:
            return None
        try:
            if self.path is not None:
                jobs = load_jobs(self.path, self.job_label)
            elif self.rest is not None:
                jobs = self._ask(self.rest)
            else:
                jobs = self._run()
        except FabricdError as e:
            if str(e) != self.status.error:
                log.error("jobs: %s; the previous job map stays in force", e)
            self.status.error = str(e)
            return self.map
        self.map = JobMap(jobs, self.fabric)
        self.status = JobStatus(len(jobs), time.time(), None)
        return self.map

    def _run(self) -> list[Job]:
        assert self.command
        where = " ".join(self.command)
        try:
            done = subprocess.run(self.command, capture_output=True, timeout=self.timeout_s, check=False)
        except (OSError, subprocess.TimeoutExpired) as e:
            raise JobError(where, f"cannot run it ({type(e).__name__}); check jobs.command") from None
        if done.returncode:
            tail = done.stderr.decode(errors="replace").strip()[-200:]
            raise JobError(where, f"exited {done.returncode}: {tail}")
        text = done.stdout.decode(errors="replace")
        if is_scontrol_text(text):  # `scontrol -o show job`: Slurm 22.05's scontrol has no --json
            return parse_scontrol_jobs(text, where)
        try:
            data = json.loads(text)
        except ValueError as e:
            raise JobError(where, f"did not print JSON ({e}); it must print squeue --json, kubectl -o json or "
                           "scontrol -o show job") from None  # fmt: skip
        return parse_jobs(data, Path(where), self.job_label)

    def _served_versions(self, rest: SlurmRest, headers: dict[str, str]) -> list[str]:
        """The API versions of the jobs endpoints slurmrestd's OpenAPI description lists ([] when it will not say)."""
        try:
            with httpx.Client(timeout=self.timeout_s, verify=rest.verify) as client:
                paths = client.get(f"{rest.url.rstrip('/')}/openapi/v3", headers=headers).json().get("paths") or {}
        except (httpx.HTTPError, ValueError, AttributeError):
            return []
        return sorted({m.group(1) for p in paths if (m := _JOBS_PATH.match(str(p)))})

    def _ask(self, rest: SlurmRest) -> list[Job]:
        where = rest.jobs_url
        headers = {"X-SLURM-USER-NAME": rest.user, "X-SLURM-USER-TOKEN": rest.token.get_secret_value()}
        try:
            with httpx.Client(timeout=self.timeout_s, verify=rest.verify) as client:
                r = client.get(where, headers=headers)
        except httpx.HTTPError as e:
            raise JobError(where, f"cannot reach slurmrestd ({type(e).__name__}); check jobs.slurmrestd.url") from None
        if r.status_code in (401, 403):
            raise JobError(where, f"slurmrestd refused the token ({r.status_code}); renew jobs.slurmrestd.token "
                           "(scontrol token username=USER lifespan=...) and check jobs.slurmrestd.user")  # fmt: skip
        if r.status_code == 404:
            served = self._served_versions(rest, headers)
            hint = f"it serves {', '.join(served)}" if served else f"is {rest.api_version} a data parser it loads?"
            raise JobError(where, f"no such endpoint (404); {hint}: set jobs.slurmrestd.api_version")
        try:
            data = r.json()
        except ValueError:
            raise JobError(where, f"answered {r.status_code} without JSON; check jobs.slurmrestd.url") from None
        errors = data.get("errors") if isinstance(data, dict) else None
        if r.status_code >= 400 or errors:
            first = errors[0] if isinstance(errors, list) and errors and isinstance(errors[0], dict) else {}
            text = first.get("description") or first.get("error") or f"HTTP {r.status_code}"
            # Slurm 22.05 checks no token itself: slurmctld refuses a wrong or expired one and slurmrestd answers 500
            # "Failed while looking for jobs" from slurm_load_jobs (seen on 22.05.8; later releases not checked)
            why = TOKEN_HINT if first.get("source") == "slurm_load_jobs" and r.status_code == 500 else ""
            raise JobError(where, f"slurmrestd answered an error: {str(text)[:200]}{why}")
        try:
            return parse_jobs(data, Path("slurmrestd"), self.job_label)
        except JobError as e:  # named by the URL (a Path would fold its '//')
            raise JobError(where, e.problem, field=e.field) from None
