"""/metrics of the tuning loop: what the last judged window found, and the changes of the ledger by how they stand."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator

from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from .job import TuningJob


class TuningCollector(Collector):
    def __init__(self, job: TuningJob) -> None:
        self.job = job

    def collect(self) -> Iterator[Metric]:
        fired = GaugeMetricFamily("fabricd_tuning_rule_fired_subjects", "Ports or groups on which a tuning rule "
                                  "fired in the last judged window", labels=["rule", "port_class"])  # fmt: skip
        props = GaugeMetricFamily("fabricd_tuning_proposals", "Proposals of the last judged window",
                                  labels=["port_class"])  # fmt: skip
        recorded = GaugeMetricFamily("fabricd_tuning_recorded", "Proposals this instance recorded since it started")
        changes = GaugeMetricFamily("fabricd_tuning_changes", "Tuning changes in the ledger by status (observed, "
                                    "awaiting_approval, applying, verifying, rolling_back, confirmed, rolled_back, "
                                    "refused)", labels=["status"])  # fmt: skip
        applied = GaugeMetricFamily("fabricd_tuning_applied", "Tuning changes applied to a switch (being verified, "
                                    "confirmed or rolled back)")  # fmt: skip
        skipped = GaugeMetricFamily("fabricd_tuning_skipped_subjects", "Ports or groups the last round left unjudged "
                                    "for a fault open on them (an active finding on the port or its link's other "
                                    "end)")  # fmt: skip
        skipped.add_metric([], len(self.job.skipped))
        r = self.job.last
        if r is not None:
            for (rule, cls), n in sorted(Counter((str(v.rule), str(v.port_class)) for v in r.fired).items()):
                fired.add_metric([rule, cls], n)
            for cls, n in sorted(Counter(str(p.port_class) for p in r.proposals).items()):
                props.add_metric([cls], n)
        recorded.add_metric([], len(self.job.recorded))
        counts = self.job.state.tuning.counts()
        for status, n in sorted(counts.items()):
            changes.add_metric([status], n)
        applied.add_metric([], sum(counts.get(s, 0) for s in ("verifying", "rolling_back", "confirmed", "rolled_back")))
        yield from (fired, props, recorded, changes, applied, skipped)
