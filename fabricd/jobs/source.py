"""The service's job map, kept fresh: re-read the jobs file (or re-run the command) on a schedule; a bad read is
logged once per distinct error and leaves the previous map in force (a typo in jobs.yaml must not blind fabricd to
which jobs a fault hits)."""

from __future__ import annotations

import json
import logging
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

from topology.errors import FabricdError
from topology.fabric import Fabric
from topology.jobs import Job, JobError, JobMap, load_jobs, parse_jobs

log = logging.getLogger("fabricd.jobs")


@dataclass
class JobStatus:
    jobs: int = 0
    loaded_at: float | None = None  # unix seconds of the last good read
    error: str | None = None  # the last read's error, None when it was good


class JobSource:
    def __init__(
        self, fabric: Fabric, path: Path | None, command: list[str] | None, job_label: str | None, timeout_s: float
    ) -> None:
        self.fabric, self.path, self.command = fabric, path, command
        self.job_label, self.timeout_s = job_label, timeout_s
        self.map: JobMap | None = None
        self.status = JobStatus()

    @property
    def configured(self) -> bool:
        return self.path is not None or bool(self.command)

    def refresh(self) -> JobMap | None:
        """Blocking (a file read or a command): the new map, or the previous one when this read failed."""
        if not self.configured:
            return None
        try:
            jobs = load_jobs(self.path, self.job_label) if self.path is not None else self._run()
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
        try:
            data = json.loads(done.stdout)
        except ValueError as e:
            raise JobError(where, f"did not print JSON ({e}); it must print squeue --json or kubectl -o json") from None
        return parse_jobs(data, Path(where), self.job_label)
