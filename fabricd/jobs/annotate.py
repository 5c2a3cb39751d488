"""Which training jobs a finding hits: a pure function of the finding and the job map."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import replace

from fabricd.detectors.finding import Finding, JobRef
from topology.jobs import JobMap


def jobs_hit(f: Finding, jobs: JobMap) -> tuple[JobRef, ...]:
    """A finding names ports (a link's ends, a storm's paused queues, a deadlock's cycle): the jobs whose traffic
    uses them. One that names only switches (silent corruption inside a switch): the jobs through those switches."""
    ports = list(f.ports) + ([f"{f.device}:{f.port}"] if f.port else [])
    hit = jobs.hit(ports) if ports else jobs.hit([], f.devices or (f.device,))
    return tuple(JobRef(j.id, j.name or j.id, j.priority, jobs.footprints[j.id].gpus) for j in hit)


def annotate(findings: Iterable[Finding], jobs: JobMap | None) -> list[Finding]:
    if jobs is None or not len(jobs):
        return list(findings)
    return [replace(f, jobs=jobs_hit(f, jobs)) for f in findings]
