"""Training jobs and where they sit on the fabric: servers -> NICs -> leaf ports -> rails -> spines.

Jobs come from a plain YAML/JSON file, from Slurm (`squeue --json` or `scontrol show job --json` output, or the
`scontrol -o show job` text of a Slurm whose scontrol has no --json, as 22.05's has not) or from Kubernetes
(`kubectl get pods -o json`: running pods' node names grouped by a job label); `load_jobs` tells them apart by their
shape. A job's footprint is what its traffic can use: the leaf ports facing its NICs always (rail k
of a server talks through the rail-k leaf of its group), and when it spans aggregation groups also those leaves'
uplinks and the spines of its rails (collectives between groups cross the spine tier).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from topology.errors import FabricdError, InputError
from topology.exports.hostlist import expand_hostlist
from topology.fabric import Fabric
from topology.layout import nic_rail
from topology.model import Role
from topology.sourcefile import load_document, load_model, yaml_line

JobSource = Literal["file", "slurm", "kubernetes"]
# Kubernetes: the label a Job controller puts on its pods (batch/v1), then the older one; --job-label overrides.
K8S_JOB_LABELS = ("batch.kubernetes.io/job-name", "job-name")


class JobError(InputError):
    """A jobs file (or Slurm / Kubernetes output) is malformed."""


@dataclass(frozen=True)
class Job:
    id: str
    nodes: tuple[str, ...]
    name: str = ""
    priority: str | None = None  # a label: Slurm QoS, a Kubernetes label, or the file's `priority`
    source: JobSource = "file"

    def to_dict(self) -> dict[str, object]:
        return {"id": self.id, "name": self.name or self.id, "nodes": list(self.nodes), "priority": self.priority}


class _FileJob(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    id: str = Field(min_length=1, max_length=200)
    name: str | None = None
    nodes: list[str] | str = Field(description="server names, or a Slurm hostlist such as gpu-g0-[000-015]")
    priority: str | None = None


class _FileJobs(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    jobs: list[_FileJob]


def load_jobs(path: Path, job_label: str | None = None) -> list[Job]:
    """Jobs from a file; errors name the file, the line (YAML) and the field, and say what to fix."""
    try:
        text = path.read_text(errors="replace")
    except OSError:
        text = ""  # load_document names the error
    if is_scontrol_text(text):
        return parse_scontrol_jobs(text, str(path))
    data = load_document(path, JobError)
    return parse_jobs(data, path, job_label)


def parse_jobs(data: Any, path: Path, job_label: str | None = None) -> list[Job]:
    """Jobs from already-parsed data (a command's JSON output), shape told apart: Kubernetes PodList, Slurm, file."""
    if isinstance(data, dict) and (data.get("kind") == "PodList" or ("items" in data and "jobs" not in data)):
        return _kubernetes(data, path, job_label)
    if (
        isinstance(data, dict)
        and isinstance(data.get("jobs"), list)
        and any(isinstance(j, dict) and "job_id" in j for j in data["jobs"])
    ):
        return _slurm(data["jobs"], path)
    model = load_model(path, _FileJobs, JobError, "a jobs file", "jobs: [{id, nodes, priority}]", data=data)
    out = []
    for i, j in enumerate(model.jobs):
        nodes = _nodes(j.nodes, path, f"jobs[{i}].nodes", yaml_line(path, ["jobs", i, "nodes"]))
        out.append(Job(j.id, nodes, j.name or j.id, j.priority, "file"))
    _unique(out, path)
    return out


def _nodes(value: list[str] | str, path: Path, where: str, line: int | None = None) -> tuple[str, ...]:
    try:
        names = expand_hostlist(value) if isinstance(value, str) else [n for v in value for n in expand_hostlist(v)]
    except FabricdError as e:
        raise JobError(str(path), f"{e}; write names or a Slurm hostlist", line=line, field=where) from None
    if not names:
        raise JobError(str(path), "no nodes; a job needs at least one server", line=line, field=where)
    return tuple(dict.fromkeys(names))


def _unique(jobs: list[Job], path: Path) -> None:
    seen: set[str] = set()
    for i, j in enumerate(jobs):
        if j.id in seen:
            raise JobError(str(path), f"job id '{j.id}' appears twice; ids must be unique", field=f"jobs[{i}].id")
        seen.add(j.id)


def _slurm(rows: list[Any], path: Path) -> list[Job]:
    """`squeue --json` / `scontrol show job --json` (Slurm 23+): running jobs with their nodes and QoS."""
    out = []
    for i, row in enumerate(rows):
        where = f"jobs[{i}]"
        if not isinstance(row, dict):
            raise JobError(str(path), "a Slurm job must be an object", field=where)
        state = row.get("job_state")
        states = state if isinstance(state, list) else [state]
        if "RUNNING" not in states:
            continue  # pending, completing and finished jobs hold no nodes we care about
        if "job_id" not in row:
            raise JobError(str(path), "missing job_id; pass `squeue --json` output unchanged", field=where)
        nodes = row.get("nodes")
        if not isinstance(nodes, str) or not nodes:
            raise JobError(str(path), "a running job needs its nodes (a hostlist string)", field=f"{where}.nodes")
        qos = row.get("qos")
        name = row.get("name")
        out.append(
            Job(
                str(row["job_id"]),
                _nodes(nodes, path, f"{where}.nodes"),
                str(name) if name else str(row["job_id"]),
                str(qos) if isinstance(qos, str) and qos else None,
                "slurm",
            )
        )
    _unique(out, path)
    return out


# `scontrol -o show job`: one job a line of Key=Value fields. A value may hold spaces (JobName, Command), so a field
# runs to the next ` Key=`; a job name that itself holds ` x=` would be cut there (NodeList and JobState never are).
_SCONTROL_KEY = re.compile(r"(?:^|\s)([A-Za-z][\w:/]*)=")
_SCONTROL_NONE = "No jobs in the system"  # what scontrol prints, exit 0, when there is no job


def is_scontrol_text(text: str) -> bool:
    head = text.lstrip()
    return head.startswith("JobId=") or head.rstrip() == _SCONTROL_NONE


def parse_scontrol_jobs(text: str, where: str) -> list[Job]:
    """`scontrol -o show job` (Slurm 22.05's scontrol has no --json; checked against 22.05.8): each RUNNING job's
    JobId, JobName, NodeList and QOS (`(null)` without accounting)."""
    out = []
    for lineno, line in enumerate(text.splitlines(), start=1):
        if not line.strip() or line.strip() == _SCONTROL_NONE:
            continue
        keys = list(_SCONTROL_KEY.finditer(line))
        fields = {m.group(1): line[m.end() : nxt.start() if nxt else len(line)].strip()
                  for m, nxt in zip(keys, [*keys[1:], None], strict=True)}  # fmt: skip
        if "JobId" not in fields:
            raise JobError(where, "a line without JobId=; pass `scontrol -o show job` output unchanged", line=lineno)
        if fields.get("JobState") != "RUNNING":
            continue  # pending, completing and finished jobs hold no nodes we care about
        nodes = fields.get("NodeList", "")
        if not nodes or nodes == "(null)":
            raise JobError(where, "a running job needs its NodeList (a hostlist)", line=lineno, field="NodeList")
        qos = fields.get("QOS")
        job_id = fields["JobId"]
        out.append(Job(job_id, _nodes(nodes, Path(where), "NodeList", lineno), fields.get("JobName") or job_id,
                       qos if qos and qos != "(null)" else None, "slurm"))  # fmt: skip
    _unique(out, Path(where))
    return out


def _kubernetes(data: dict[str, Any], path: Path, job_label: str | None) -> list[Job]:
    """`kubectl get pods -o json`: running pods with a node, grouped by the job label."""
    items = data.get("items")
    if not isinstance(items, list):
        raise JobError(str(path), "a PodList needs an items list; pass `kubectl get pods -o json`", field="items")
    labels = (job_label,) if job_label else K8S_JOB_LABELS
    jobs: dict[str, list[str]] = {}
    priority: dict[str, str | None] = {}
    for i, pod in enumerate(items):
        where = f"items[{i}]"
        if not isinstance(pod, dict):
            raise JobError(str(path), "a pod must be an object", field=where)
        meta, spec, status = pod.get("metadata") or {}, pod.get("spec") or {}, pod.get("status") or {}
        pod_labels = meta.get("labels") or {}
        job = next((pod_labels[k] for k in labels if k in pod_labels), None)
        if job is None or status.get("phase") != "Running":
            continue
        node = spec.get("nodeName")
        if not isinstance(node, str) or not node:
            raise JobError(str(path), "a running pod without spec.nodeName", field=f"{where}.spec.nodeName")
        jobs.setdefault(str(job), []).append(node)
        priority.setdefault(str(job), spec.get("priorityClassName"))
    return [Job(j, tuple(dict.fromkeys(nodes)), j, priority[j], "kubernetes") for j, nodes in sorted(jobs.items())]


@dataclass(frozen=True)
class Footprint:
    job: Job
    servers: tuple[str, ...]  # the job's nodes that are servers of this fabric
    unknown: tuple[str, ...]  # nodes the fabric does not have (named in reports, never guessed)
    nics: tuple[str, ...]  # server:nicK
    leaf_ports: tuple[str, ...]  # leaf:port facing each NIC, in NIC order
    rail_of: dict[str, int] = field(default_factory=dict)  # leaf:port -> rail
    nic_of: dict[str, str] = field(default_factory=dict)  # leaf:port -> server:nicK
    leaves: tuple[str, ...] = ()
    groups: tuple[int, ...] = ()
    uplinks: tuple[str, ...] = ()  # leaf:port toward a spine (only when the job spans groups)
    spines: tuple[str, ...] = ()

    @property
    def gpus(self) -> int:
        return len(self.nics)

    @property
    def rails(self) -> tuple[int, ...]:
        return tuple(sorted(set(self.rail_of.values())))

    def to_dict(self) -> dict[str, object]:
        return {
            **self.job.to_dict(),
            "servers": len(self.servers),
            "gpus": self.gpus,
            "unknown_nodes": list(self.unknown),
            "groups": list(self.groups),
            "rails": list(self.rails),
            "leaves": list(self.leaves),
            "spines": list(self.spines),
        }


def footprint(job: Job, fabric: Fabric) -> Footprint:
    servers: list[str] = []
    unknown: list[str] = []
    for n in job.nodes:
        d = fabric.get(n)
        (servers if d is not None and d.role is Role.SERVER else unknown).append(n)
    nics: list[str] = []
    ports: list[str] = []
    rail_of: dict[str, int] = {}
    nic_of: dict[str, str] = {}
    leaves: dict[str, None] = {}
    groups: set[int] = set()
    for s in servers:
        dev = fabric.device(s)
        if dev.group is not None:
            groups.add(dev.group)
        for link in sorted(fabric.links_of(s), key=lambda ln: ln.a.port if ln.a.device == s else ln.b.port):
            nic = link.a if link.a.device == s else link.b
            facing = link.other(s, nic.port)
            leaf_dev = fabric.device(facing.device)
            if leaf_dev.role is not Role.LEAF:
                continue
            nics.append(str(nic))
            ports.append(str(facing))
            rail = nic_rail(nic.port)
            rail_of[str(facing)] = rail if rail is not None else (leaf_dev.rail or 0)
            nic_of[str(facing)] = str(nic)
            leaves[facing.device] = None
    uplinks: list[str] = []
    spines: dict[str, None] = {}
    if len(groups) > 1:
        for leaf in leaves:
            for link in fabric.links_of(leaf):
                local = link.a if link.a.device == leaf else link.b
                far = link.other(leaf, local.port)
                if fabric.device(far.device).role is Role.SPINE:
                    uplinks.append(str(local))
                    spines[far.device] = None
    return Footprint(
        job, tuple(servers), tuple(unknown), tuple(nics), tuple(ports), rail_of, nic_of, tuple(leaves),
        tuple(sorted(groups)), tuple(uplinks), tuple(spines),
    )  # fmt: skip


class JobMap:
    """Every job's footprint, and which jobs each port and switch carries."""

    def __init__(self, jobs: Iterable[Job], fabric: Fabric) -> None:
        self.footprints = {j.id: footprint(j, fabric) for j in jobs}
        self.by_port: dict[str, set[str]] = {}
        self.by_device: dict[str, set[str]] = {}
        for fp in self.footprints.values():
            for p in (*fp.leaf_ports, *fp.nics, *fp.uplinks):
                self.by_port.setdefault(p, set()).add(fp.job.id)
            for d in (*fp.servers, *fp.leaves, *fp.spines):
                self.by_device.setdefault(d, set()).add(fp.job.id)

    def __len__(self) -> int:
        return len(self.footprints)

    def hit(self, ports: Iterable[str], devices: Iterable[str] = ()) -> list[Job]:
        """The jobs whose traffic uses any of these ports (device:port) or switches, by id."""
        ids: set[str] = set()
        for p in ports:
            ids |= self.by_port.get(p, set())
        for d in devices:
            ids |= self.by_device.get(d, set())
        return [self.footprints[i].job for i in sorted(ids)]
