"""Prometheus metrics of the service, read from the state store at scrape time (never a second source of truth)."""

from __future__ import annotations

from collections.abc import Iterator

from prometheus_client.core import CollectorRegistry, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

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
