"""Prometheus metrics of the service, read from the state store at scrape time (never a second source of truth)."""

from __future__ import annotations

from collections.abc import Iterator

from prometheus_client.core import CollectorRegistry, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from fabricd.detectors.dci_ports import DciPortsState

from .state import StateStore


class StateCollector(Collector):
    def __init__(self, state: StateStore) -> None:
        self.state = state

    def collect(self) -> Iterator[Metric]:
        findings = GaugeMetricFamily("fabricd_findings", "Findings in the state store", labels=["kind", "status"])
        for (kind, status), n in sorted(self.state.finding_counts().items()):
            findings.add_metric([kind, status], n)
        yield findings
        actions = GaugeMetricFamily("fabricd_actions", "Remediation actions by outcome", labels=["op", "status"])
        for (op, status), n in sorted(self.state.action_counts().items()):
            actions.add_metric([op, status], n)
        yield actions
        tickets = GaugeMetricFamily("fabricd_open_tickets", "Open repair tickets", labels=["kind"])
        counts: dict[str, int] = {}
        for t in self.state.tickets("open"):
            counts[t.kind] = counts.get(t.kind, 0) + 1
        for kind, n in sorted(counts.items()):
            tickets.add_metric([kind], n)
        yield tickets
        yield GaugeMetricFamily(
            "fabricd_disabled_ports", "Ports fabricd holds down", value=len(self.state.disabled_ports())
        )


def register(registry: CollectorRegistry, state: StateStore) -> None:
    registry.register(StateCollector(state))


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


def register_dci(registry: CollectorRegistry, state: DciPortsState) -> None:
    registry.register(DciCollector(state))


MAX_JOB_SERIES = 100  # bounded labels: past this many jobs with findings, the rest count under job="_other"


class JobCollector(Collector):
    """Active findings per job they hit (jobs from the job map); bounded to MAX_JOB_SERIES label values."""

    def __init__(self, state: StateStore) -> None:
        self.state = state

    def collect(self) -> Iterator[Metric]:
        counts: dict[str, int] = {}
        for f in self.state.findings("active", limit=100_000):
            for j in f.get("jobs") or []:
                counts[str(j["id"])] = counts.get(str(j["id"]), 0) + 1
        fam = GaugeMetricFamily("fabricd_job_active_findings", "Active findings hitting each job", labels=["job"])
        ranked = sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))
        for job, n in ranked[:MAX_JOB_SERIES]:
            fam.add_metric([job], n)
        if len(ranked) > MAX_JOB_SERIES:
            fam.add_metric(["_other"], sum(n for _, n in ranked[MAX_JOB_SERIES:]))
        yield fam


def register_jobs(registry: CollectorRegistry, state: StateStore) -> None:
    registry.register(JobCollector(state))
