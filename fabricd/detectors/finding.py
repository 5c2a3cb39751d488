"""The finding every detector returns, in the docs/formats.md shape (`{"findings": [...]}` holds their `to_dict()`)."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

KINDS = (
    "link_flap",
    "pfc_storm",
    "pfc_deadlock",
    "link_corruption",
    "silent_corruption",
    "dci_imbalance",
    "dci_drops",
    "predicted_failure",
    "bgp_session",
    "miscabled",
)


@dataclass(frozen=True)
class JobRef:
    """A training job a finding hits (filled in from the job map, outside the detectors)."""

    id: str
    name: str
    priority: str | None
    gpus: int

    def to_dict(self) -> dict[str, Any]:
        return {"id": self.id, "name": self.name, "priority": self.priority, "gpus": self.gpus}


@dataclass(frozen=True)
class Finding:
    kind: str
    device: str  # where it starts: a storm's origin port, one end of a flapping link
    port: str | None
    devices: tuple[str, ...]  # everything involved, sorted
    ports: tuple[str, ...]  # "device:port", sorted unless the order means something (a deadlock's cycle)
    start_ts: int  # unix ns the fault began (first flap, storm onset)
    detected_ts: int  # unix ns of the tick that first raised it
    severity: str  # "warning" | "critical"
    confidence: float  # 0..1
    summary: str
    priority: int | None = None
    evidence: dict[str, Any] = field(default_factory=dict)
    jobs: tuple[JobRef, ...] = ()  # the training jobs whose traffic uses what it names (none without a job map)

    @property
    def key(self) -> tuple[str, str, str | None, int | None, int]:
        """Identity of one incident: a detector re-reports an active incident every tick under the same key."""
        return (self.kind, self.device, self.port, self.priority, self.start_ts)

    def merged(self, newer: Finding) -> Finding:
        """The same incident seen again: keep when it was first detected, take the newer view of everything else,
        and keep every port/device ever involved (a storm spreads after its first report)."""
        return replace(
            newer,
            detected_ts=min(self.detected_ts, newer.detected_ts),
            devices=newer.devices + tuple(d for d in self.devices if d not in newer.devices),
            ports=newer.ports + tuple(p for p in self.ports if p not in newer.ports),
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "device": self.device,
            "port": self.port,
            "priority": self.priority,
            "devices": list(self.devices),
            "ports": list(self.ports),
            "start_ts": self.start_ts,
            "detected_ts": self.detected_ts,
            "severity": self.severity,
            "confidence": round(self.confidence, 3),
            "evidence": self.evidence,
            "summary": self.summary,
            "jobs": [j.to_dict() for j in self.jobs],
        }
