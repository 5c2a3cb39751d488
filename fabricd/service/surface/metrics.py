"""Prometheus metrics of the service, read from the state store at scrape time (never a second source of truth)."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from typing import Any

from prometheus_client.core import CollectorRegistry, CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from fabricd.detectors.coverage import Coverage
from fabricd.detectors.dci_ports import DciPortsState
from fabricd.jobs.report import JobReport
from topology.fabric import Fabric
from topology.model import Endpoint

from ..guard import Budget
from ..maintenance.plan import ACTIVE, drained_capacity, overran
from ..state import StateStore, StoredFinding
from .port_metrics import PortCollector


class StateCollector(Collector):
    def __init__(self, state: StateStore) -> None:
        self.state = state

    def collect(self) -> Iterator[Metric]:
        yield from self._writes()  # first: they must be scraped even when the reads below fail
        findings = GaugeMetricFamily("fabricd_findings", "Findings in the state store", labels=["kind", "status"])
        for (kind, status), n in sorted(self.state.findings.counts().items()):
            findings.add_metric([kind, status], n)
        yield findings
        # Where: active findings per kind and device (bounded by switches x kinds), so an alert can name the switch
        where = GaugeMetricFamily(
            "fabricd_active_findings",
            "Active findings by kind, device and severity",
            labels=["kind", "device", "severity"],
        )
        per: dict[tuple[str, str, str], int] = {}
        active = self.state.findings.all("active", limit=100_000)  # read once: the job counts below come from it too
        for f in active:
            key = (str(f["kind"]), str(f.get("device") or ""), str(f.get("severity") or ""))
            per[key] = per.get(key, 0) + 1
        for key, n in sorted(per.items()):
            where.add_metric(list(key), n)
        yield where
        yield _job_findings(active)
        actions = GaugeMetricFamily("fabricd_actions", "Remediation actions by outcome", labels=["op", "status"])
        for (op, status), n in sorted(self.state.actions.counts().items()):
            actions.add_metric([op, status], n)
        yield actions
        drains = GaugeMetricFamily("fabricd_drains", "Planned maintenance drains by state", labels=["state"])
        for state, n in sorted(self.state.drains.counts().items()):
            drains.add_metric([state], n)
        yield drains
        now = time.time_ns()
        late = sum(1 for d in self.state.drains.all(ACTIVE) if overran(d.until_ts, d.state, now))
        yield GaugeMetricFamily("fabricd_drains_overran", "Active drains past their --until (maintenance overran)",
                                value=late)  # fmt: skip
        tickets = GaugeMetricFamily("fabricd_open_tickets", "Open repair tickets", labels=["kind"])
        counts: dict[str, int] = {}
        for t in self.state.tickets.all("open"):
            counts[t.kind] = counts.get(t.kind, 0) + 1
        for kind, n in sorted(counts.items()):
            tickets.add_metric([kind], n)
        yield tickets
        yield GaugeMetricFamily("fabricd_disabled_ports", "Ports fabricd holds down", value=len(self.state.holds.all()))

    def _writes(self) -> Iterator[Metric]:
        w = self.state.writes
        yield GaugeMetricFamily("fabricd_state_writable", "1 while the state store takes writes; 0: fabricd cannot "
                                "record, so it takes no action", value=0 if w.failing else 1)  # fmt: skip
        yield CounterMetricFamily("fabricd_state_write_failures", "Writes to the state store that failed",
                                  value=w.failures)  # fmt: skip
        per_table: dict[str, int] = {}
        for q in self.state.quarantine.entries():
            per_table[q.table] = per_table.get(q.table, 0) + 1
        quarantined = GaugeMetricFamily(
            "fabricd_state_quarantined_records",
            "State rows that cannot be decoded: kept in the file, left out of what fabricd reads",
            labels=["table"],
        )
        for table, n in sorted(per_table.items()):
            quarantined.add_metric([table], n)
        yield quarantined


def register(
    registry: CollectorRegistry,
    state: StateStore,
    dci: DciPortsState,
    reports: Callable[[], list[JobReport]],
    ports: PortCollector | None = None,
    budgets: Callable[[], list[Budget]] | None = None,
    ha: Callable[[], dict[str, Any]] | None = None,
    coverage: Callable[[], dict[str, Coverage]] | None = None,
    shards: Callable[[], dict[int, float | None]] | None = None,
    underlay: Collector | None = None,
    to_reapply: Callable[[], int] | None = None,
    fabric: Fabric | None = None,
    floor: Callable[[], tuple[int, int]] | None = None,
    loop_stalls: Callable[[], tuple[int, float]] | None = None,
) -> None:
    """Every service metric (the telemetry client registers its own): state, DR ports, jobs, the per-port
    counters when `ports` is given (api.port_metrics), and the capacity drains hold out of service when `fabric`
    (the blueprint, for the links' speeds) is."""
    registry.register(StateCollector(state))
    registry.register(DciCollector(dci))
    registry.register(JobReportCollector(reports))
    if ports is not None:
        registry.register(ports)
    if budgets is not None:
        registry.register(BudgetCollector(budgets))
    if ha is not None:
        registry.register(HaCollector(ha))
    if coverage is not None:
        registry.register(CoverageCollector(coverage))
    if shards is not None:
        registry.register(ShardCollector(shards))
    if underlay is not None:
        registry.register(underlay)
    if to_reapply is not None:
        registry.register(ToReapplyCollector(to_reapply))
    if fabric is not None:
        registry.register(DrainedCollector(state, fabric))
    if floor is not None:
        registry.register(FloorCollector(floor))
    if loop_stalls is not None:
        registry.register(LoopStallCollector(loop_stalls))


class LoopStallCollector(Collector):
    """The service's event loop stalls (loop_watch.py): how many, and the longest."""

    def __init__(self, stalls: Callable[[], tuple[int, float]]) -> None:
        self.stalls = stalls

    def collect(self) -> Iterator[Metric]:
        n, longest = self.stalls()
        yield CounterMetricFamily("fabricd_event_loop_stalls", "Times the service's event loop ran one callback a "
                                  "second or more (the log names where)", value=n)  # fmt: skip
        yield GaugeMetricFamily("fabricd_event_loop_stall_longest_seconds", "The longest event loop stall since the "
                                "start", value=longest)  # fmt: skip


class DrainedCollector(Collector):
    """The capacity active drains hold out of service, per switch and side (maintenance.drained_capacity): one
    series per switch a drain touches, none while nothing is drained."""

    def __init__(self, state: StateStore, fabric: Fabric) -> None:
        self.state = state
        self.fabric = fabric

    def collect(self) -> Iterator[Metric]:
        labels = ["device", "direction"]
        links = GaugeMetricFamily("fabricd_drained_links", "Links of each switch out of service by active drains "
                                  "(either end drained), uplinks and downlinks", labels=labels)  # fmt: skip
        gbps = GaugeMetricFamily("fabricd_drained_capacity_gbps", "Line rate of those links, Gb/s (blueprint "
                                 "speeds); summed over switches, direction=uplink counts each link once",
                                 labels=labels)  # fmt: skip
        ports = {Endpoint(*p.split(":", 1)) for d in self.state.drains.all(ACTIVE) for p in d.ports if ":" in p}
        for c in drained_capacity(self.fabric, ports):
            links.add_metric([c.device, c.direction], c.links)
            gbps.add_metric([c.device, c.direction], c.gbps)
        yield links
        yield gbps


class ToReapplyCollector(Collector):
    """Holds whose port is up again and whose re-apply the guard refuses: a port shut for a fault is back in
    service, unrepaired, until the guard allows it down again, its ticket is resolved or a person releases it."""

    def __init__(self, count: Callable[[], int]) -> None:
        self.count = count

    def collect(self) -> Iterator[Metric]:
        yield GaugeMetricFamily(
            "fabricd_holds_to_reapply",
            "Held ports up again whose re-apply the guard refuses (retried every pass)",
            value=self.count(),
        )


class FloorCollector(Collector):
    """The capacity floor over fabricd's own holds (remediation/floor.py): held ports given back to keep a switch's
    uplink floor (up on their return), and switches under their floor that no return can restore."""

    def __init__(self, counts: Callable[[], tuple[int, int]]) -> None:
        self.counts = counts

    def collect(self) -> Iterator[Metric]:
        returned, under = self.counts()
        yield GaugeMetricFamily(
            "fabricd_floor_returned_ports", "Held ports returned to keep a switch's uplink floor", value=returned
        )
        yield GaugeMetricFamily(
            "fabricd_floor_unrestorable_switches",
            "Switches under their uplink floor whose held candidates are all still faulty",
            value=under,
        )


class ShardCollector(Collector):
    """Detector shards (detectors.source: shards): seconds since each last reported (-1: never)."""

    def __init__(self, ages: Callable[[], dict[int, float | None]]) -> None:
        self.ages = ages

    def collect(self) -> Iterator[Metric]:
        g = GaugeMetricFamily("fabricd_detector_shard_report_age_seconds",
                              "Seconds since each detector shard last reported its findings (-1: never)",
                              labels=["shard"])  # fmt: skip
        for shard, age in sorted(self.ages().items()):
            g.add_metric([str(shard)], -1.0 if age is None else age)
        yield g


class CoverageCollector(Collector):
    """Detectors a switch's telemetry leaves blind or degraded (what `fabricd status` lists): one series per
    affected (switch, detector), none for a switch that streams everything its detectors read."""

    def __init__(self, coverage: Callable[[], dict[str, Coverage]]) -> None:
        self.coverage = coverage

    def collect(self) -> Iterator[Metric]:
        g = GaugeMetricFamily(
            "fabricd_detector_degraded",
            "1 where a switch does not stream what a detector reads: blind (cannot judge it), degraded (less evidence)",
            labels=["device", "detector", "state"],
        )
        for device, cov in sorted(self.coverage().items()):
            for d in cov.degraded:
                g.add_metric([device, d.detector, "blind" if d.blind else "degraded"], 1.0)
        yield g


class HaCollector(Collector):
    """Is this instance the one that acts? (a hot-standby pair: exactly one 1 across the instances)"""

    def __init__(self, status: Callable[[], dict[str, Any]]) -> None:
        self.status = status

    def collect(self) -> Iterator[Metric]:
        s = self.status()
        g = GaugeMetricFamily("fabricd_ha_leader", "1 while this instance holds the leader lease and acts",
                              labels=["instance"])  # fmt: skip
        g.add_metric([str(s.get("instance", ""))], 1.0 if s.get("role") == "leader" else 0.0)
        yield g


class BudgetCollector(Collector):
    """The remediation guard's rate and budget limits and what is used of each (an alert fires when used reaches
    the limit: fabricd will refuse the next disable)."""

    def __init__(self, budgets: Callable[[], list[Budget]]) -> None:
        self.budgets = budgets

    def collect(self) -> Iterator[Metric]:
        used = GaugeMetricFamily(
            "fabricd_remediation_budget_used",
            "Used of each guard limit: disables in the last hour, ports held on the busiest switch and rail, fabric",
            labels=["limit"],
        )
        allowed = GaugeMetricFamily(
            "fabricd_remediation_budget_limit", "Each guard limit (remediation.limits)", labels=["limit"]
        )
        for b in self.budgets():
            used.add_metric([b.limit], b.used)
            allowed.add_metric([b.limit], b.allowed)
        yield used
        yield allowed


class DciCollector(Collector):
    """The DR port monitor's last judgement per group (a DCI's long-haul ports, a DR's campus uplinks): the live
    load-balance factor, skew, drop rate and what they cost (docs/dci.md). One series per group: bounded by the
    number of DCIs and DR switches."""

    def __init__(self, state: DciPortsState) -> None:
        self.state = state

    def collect(self) -> Iterator[Metric]:
        labels = ["dci", "group"]
        fams = {
            "alpha_lb": GaugeMetricFamily(
                "fabricd_dci_alpha_lb",
                "Load-balance factor of the group's ports: mean / max load (1 = even)",
                labels=labels,
            ),
            "skew": GaugeMetricFamily(
                "fabricd_dci_skew", "(max - min) / mean load of the group's ports", labels=labels
            ),
            "drop_rate": GaugeMetricFamily(
                "fabricd_dci_drop_ratio", "Share of the group's egress packets dropped over the window", labels=labels
            ),
            "utilisation": GaugeMetricFamily(
                "fabricd_dci_utilisation_ratio", "Mean egress load of the group's ports / line rate", labels=labels
            ),
            "extra_loss": GaugeMetricFamily(
                "fabricd_dci_extra_compute_loss_ratio",
                "Compute the configured job shape loses to today's imbalance and drops (detectors.dci.job_*)",
                labels=labels,
            ),
        }
        for live in sorted(self.state.live.values(), key=lambda x: x.group):
            for field, fam in fams.items():
                fam.add_metric([live.dci, live.group], float(getattr(live, field)))
        yield from fams.values()


MAX_JOB_SERIES = 100  # bounded labels: past this many jobs with findings, the rest count under job="_other"


def _job_findings(active: list[StoredFinding]) -> GaugeMetricFamily:
    """Active findings per job they hit (jobs from the job map); bounded to MAX_JOB_SERIES label values."""
    counts: dict[str, int] = {}
    for f in active:
        for j in f.get("jobs") or []:
            counts[str(j["id"])] = counts.get(str(j["id"]), 0) + 1
    fam = GaugeMetricFamily("fabricd_job_active_findings", "Active findings hitting each job", labels=["job"])
    ranked = sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))
    for job, n in ranked[:MAX_JOB_SERIES]:
        fam.add_metric([job], n)
    if len(ranked) > MAX_JOB_SERIES:
        fam.add_metric(["_other"], sum(n for _, n in ranked[MAX_JOB_SERIES:]))
    return fam


class JobReportCollector(Collector):
    """Each job's traffic per rail and how many of its ports stand out (the Grafana job view reads these); the
    MAX_JOB_SERIES largest jobs, by GPUs."""

    def __init__(self, reports: Callable[[], list[JobReport]]) -> None:
        self.reports = reports

    def collect(self) -> Iterator[Metric]:
        gpus = GaugeMetricFamily("fabricd_job_gpus", "GPUs of each job", labels=["job", "name"])
        rail = GaugeMetricFamily("fabricd_job_rail_gbps", "A job's traffic on each rail, Gb/s", labels=["job", "rail"])
        imb = GaugeMetricFamily(
            "fabricd_job_rail_imbalance_ratio", "(max - min) / mean of a job's traffic per rail", labels=["job"]
        )
        out = GaugeMetricFamily(
            "fabricd_job_outlier_ports", "A job's ports that stand out from its others", labels=["job"]
        )
        att = GaugeMetricFamily(
            "fabricd_job_attention_ports", "A job's ports with pauses, drops or frame errors", labels=["job"]
        )
        reports = sorted(self.reports(), key=lambda r: (-r.footprint.gpus, r.footprint.job.id))[:MAX_JOB_SERIES]
        for r in reports:
            job = r.footprint.job
            gpus.add_metric([job.id, job.name or job.id], r.footprint.gpus)
            for k, v in sorted(r.per_rail_gbps.items()):
                rail.add_metric([job.id, str(k)], v)
            imb.add_metric([job.id], r.rail_imbalance)
            out.add_metric([job.id], len({o.port for o in r.outliers}))
            att.add_metric([job.id], len(r.attention))
        yield from (gpus, rail, imb, out, att)
