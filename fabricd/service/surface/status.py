"""What the running service says of itself: `/api/v1/health` (and `fabricd status`), the actions in flight, the
active drains, telemetry coverage, the jobs' reports and the topology's summary. Reads only."""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Mapping
from dataclasses import asdict, replace
from typing import Any

from drivers.inventory import Inventory
from fabricd import __version__
from fabricd.detectors import bgp_session
from fabricd.detectors.coverage import Coverage, Late, coverage_json, switch_coverage
from fabricd.jobs.report import JobReport
from fabricd.jobs.report import report as job_report
from fabricd.jobs.source import JobSource
from fabricd.telemetry import Ingestor, TelemetrySource
from fabricd.telemetry.bus_source import BusTelemetry
from fabricd.telemetry.platforms import Plan
from topology.fabric import Fabric
from topology.units import NS

from ..bgp_ssh import BgpOverSsh
from ..config import ServiceConfig
from ..ha import HaRole
from ..maintenance.plan import ACTIVE, overran
from ..remediation.wiring import Remediation
from ..shard_listener import ShardListener
from ..state import StateStore
from ..tickets.hand_off import TicketHandOff

COVERAGE_EVERY_S = 10.0  # telemetry coverage changes when a switch reconnects or is upgraded, not per sample


class ServiceStatus:
    def __init__(
        self, cfg: ServiceConfig, fabric: Fabric, inventory: Inventory, state: StateStore, ingestor: Ingestor,
        telemetry: TelemetrySource, plans: Mapping[str, Plan], os_versions: Mapping[str, str | None],
        bgp_ssh: BgpOverSsh, remediation: Remediation, hand_off: TicketHandOff, job_source: JobSource,
        shards: ShardListener, ha: HaRole, started: float,
    ) -> None:  # fmt: skip
        self.cfg, self.fabric, self.inventory, self.state, self.ingestor = cfg, fabric, inventory, state, ingestor
        self.telemetry, self.plans, self.os_versions, self.bgp_ssh = telemetry, plans, os_versions, bgp_ssh
        self.remediation, self.hand_off, self.job_source, self.shards, self.ha = (
            remediation, hand_off, job_source, shards, ha,
        )  # fmt: skip
        self.started = started  # time.monotonic() when the service was built
        self._coverage: tuple[float, tuple[frozenset[str], frozenset[str]], dict[str, Coverage]] | None = None

    def in_flight(self) -> list[dict[str, Any]]:
        """Actions under way (a port going down or coming back, one resumed after a restart waiting for telemetry or
        LLDP): while one runs its port may read up with its hold still recorded, or down without one."""
        now = time.time_ns()
        return [
            {"action_id": a.id, "op": a.op, "port": f"{a.device}:{a.port}", "mode": a.mode,
             "for_s": round(max(0, now - a.created_ts) / NS, 1), "detail": a.detail}
            for a in self.state.actions.with_status("running")
        ]  # fmt: skip

    def maintenance_status(self) -> list[dict[str, Any]]:
        """The active drains (planned maintenance), as `fabricd status` shows them."""
        now = time.time_ns()
        return [
            {"id": d.id, "kind": d.kind, "target": d.target, "state": d.state, "step": f"{d.done}/{len(d.steps)}",
             "actor": d.actor, "reason": d.reason, "detail": d.detail, "overran": overran(d.until_ts, d.state, now)}
            for d in self.state.drains.all(ACTIVE)
        ]  # fmt: skip

    def health(self) -> dict[str, Any]:
        stale = self.telemetry.stale_devices()
        synced = sum(self.telemetry.synced.values())
        silent = self.shards.silent_shards()
        writes = self.state.writes
        # degraded while a switch is stale or not synced (a source that never synced is not watching it)
        whole = not stale and not silent and synced == len(self.telemetry.devices)
        quarantined = self.state.quarantine.entries()  # rows that cannot be decoded: fabricd works without them
        status = "failing" if writes.failing else "ok" if whole and not quarantined else "degraded"
        return {
            "status": status,
            "state": {
                "writable": not writes.failing,
                "write_failures": writes.failures,
                "last_error": writes.last_error if writes.failing else None,
                "quarantined": [asdict(q) for q in quarantined],
            },
            "version": __version__,
            "mode": self.remediation.requests.mode,
            "ha": self.ha.status(),
            "uptime_s": round(time.monotonic() - self.started, 1),
            "telemetry": {
                "devices": len(self.telemetry.devices),
                "synced": synced,
                "stale": stale,
                # bus mode: switches no collector holds (stale because nobody streams them, not because they are
                # silent); empty when the service streams itself
                "unheld": self.telemetry.unheld_devices() if isinstance(self.telemetry, BusTelemetry) else [],
                "coverage": [coverage_json(name, self.os_versions.get(name), c) for name, c in self.coverage().items()],
                "bgp_over_ssh": self.bgp_ssh.status(),
            },
            "detectors": {
                "source": self.cfg.detectors.source,
                "shards": self.cfg.detectors.shards,
                "silent_shards": silent,
            },
            "open_tickets": len(self.state.tickets.all("open")),
            "disabled_ports": len(self.state.holds.all()),
            "stale_holds": len(self.remediation.holds.stale_holds()),
            "to_reapply": self.remediation.reconciler.to_reapply(),
            # issue 49: holds given back to keep a switch's uplink floor, and switches it cannot restore (the leader's)
            "floor": {
                "returned": [asdict(r) for r in self.remediation.floor.returned()],
                "under_floor": [{"device": d, "why": why} for d, why in sorted(self.remediation.floor.stuck.items())],
            },
            "in_flight": self.in_flight(),
            "maintenance": self.maintenance_status(),
            "ticket_backend": self.hand_off.backend.name,
            "jobs": asdict(self.job_source.status) | {"configured": self.job_source.configured},
        }

    def streams_bgp(self) -> set[str]:
        """The switches whose own telemetry streams their BGP sessions' state (no SSH reads needed)."""
        return {d for d, leaves in self.ingestor.snapshot().leaves_by_device().items() if bgp_session.STATE in leaves}

    def coverage(self) -> dict[str, Coverage]:
        """Synced switches whose telemetry falls short of their profile: paths left out for their release or refused
        by them, the leaves detectors read that they do not stream, and the detectors that leaves them blind or
        degraded on. Worked out at most every COVERAGE_EVERY_S (a pass over every series), for health and /metrics."""
        mono = time.monotonic()
        synced = frozenset(name for name, ok in self.telemetry.synced.items() if ok)
        key = (synced, frozenset(self.bgp_ssh.devices))  # a switch moving to SSH reads changes its coverage at once
        cached = self._coverage
        if cached is None or cached[1] != key or mono - cached[0] >= COVERAGE_EVERY_S:
            cached = self._coverage = (mono, key, self._work_out_coverage(synced))
        return cached[2]

    def _work_out_coverage(self, synced: frozenset[str]) -> dict[str, Coverage]:
        seen = self.ingestor.snapshot().leaves_by_device()
        out = {}
        for name in sorted(synced):
            if name not in self.plans:
                continue
            cov = switch_coverage(self.plans[name], self.telemetry.state(name).rejected, seen.get(name, ()))
            if name in self.bgp_ssh.devices:  # its BGP state comes over SSH, late by the read interval
                late = Late("bgp_session", bgp_session.STATE, self.bgp_ssh.late_reason)
                cov = replace(cov, late=(*(x for x in cov.late if x.leaf != bgp_session.STATE), late))
            if not cov.complete:
                out[name] = cov
        return out

    def jobs_through(self, ports: list[str]) -> list[str]:
        """The training jobs whose traffic uses these ports (the job map; none without one): what a drain touches."""
        jobs = self.job_source.map
        return [] if jobs is None else [j.name or j.id for j in jobs.hit(ports)]

    def job_reports(self) -> list[JobReport]:
        jobs = self.job_source.map
        if jobs is None:
            return []
        snap = self.ingestor.snapshot()
        return [job_report(fp, snap) for fp in jobs.footprints.values()]

    def topology_summary(self) -> dict[str, Any]:
        roles = Counter(d.role.value for d in self.fabric.devices())
        return {
            "devices": dict(sorted(roles.items())),
            "links": len(self.fabric.links),
            "switches": len(self.fabric.switches()),
            "managed": len(self.inventory.names),
        }
