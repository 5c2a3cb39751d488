"""The jobs section: where the training jobs come from (a file, a command, Slurm's REST API)."""

from __future__ import annotations

from pathlib import Path
from typing import Self

from pydantic import Field, field_validator, model_validator

from .base import SecretRef, _service_url, _Strict


class SlurmRestSettings(_Strict):
    """slurmrestd (Slurm's REST API) with a JWT: GET {url}/slurm/{api_version}/jobs, the same job records as
    `squeue --json` (Slurm's OpenAPI reference, https://slurm.schedmd.com/rest_api.html)."""

    url: str
    user: str  # X-SLURM-USER-NAME: the user the token was issued for (`scontrol token username=...`)
    token: SecretRef  # X-SLURM-USER-TOKEN
    api_version: str = Field("v0.0.40", pattern=r"^v0\.0\.[0-9]+$")  # the data parser plugin slurmrestd loads
    verify: bool | Path = True  # TLS: a CA bundle file, or false for a lab's self-signed slurmrestd

    _url = field_validator("url")(_service_url)


class JobSettings(_Strict):
    """Where the training jobs come from (docs/jobs.md); the service re-reads them every refresh_s, and a bad read
    keeps the previous job map in force."""

    path: Path | None = None  # a jobs file, `squeue --json` or `kubectl get pods -o json` output
    command: list[str] | None = None  # or a command printing one of those, e.g. [squeue, --json]
    slurmrestd: SlurmRestSettings | None = None  # or Slurm's REST API
    job_label: str | None = None  # Kubernetes: the pod label naming the job (default: the Job controller's)
    refresh_s: float = Field(60.0, ge=1, le=86400)
    timeout_s: float = Field(20.0, gt=0, le=600)

    @model_validator(mode="after")
    def _one_source(self) -> Self:
        if sum((self.path is not None, bool(self.command), self.slurmrestd is not None)) > 1:
            raise ValueError("give one of path, command or slurmrestd")
        return self
