"""The tuning loop in the service (docs/tuning.md, issue 51), in `observe` mode: the leader samples every lossless
queue from its telemetry store every `tuning.sample_s`, and every `tuning.window_s` judges the window and proposes
(fabricd/tuning: judge -> propose -> admit); each proposal is recorded once in the audit with what it would change,
why, its evidence's rule and source, and an idempotency key. Nothing is changed on a switch. `approve` and `auto`
(apply through the rollout, verify, confirm or roll back, the ledger in the state) are not wired yet."""

from __future__ import annotations

import hashlib
import logging
from collections import Counter
from collections.abc import Callable, Iterator

from apscheduler.schedulers.asyncio import AsyncIOScheduler
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from fabricd.telemetry.snapshot import Snapshot
from fabricd.tuning.observed import SampleLog, group_windows, lossless_ports, port_windows
from fabricd.tuning.propose import Proposal
from fabricd.tuning.round import Round, judge_round
from fabricd.tuning.verify import admit
from policies.intent import derive_intent
from policies.policy import load_policy
from topology.fabric import Fabric
from topology.spec import load_spec
from topology.units import NS

from .config import ServiceConfig
from .state import StateStore

log = logging.getLogger("fabricd.service")
WHAT = "tuning (observe)"


def proposal_key(p: Proposal, window: int) -> str:
    """The same proposal in the same window is one record, whichever instance judged it (a leader that takes over
    mid-window judges its own samples, so it may record a proposal the old leader recorded: at most once a window)."""
    text = f"{window}|{p.subject}|" + ";".join(f"{c.knob}={c.before}->{c.after}" for c in p.changes)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


class TuningJob:
    def __init__(
        self,
        cfg: ServiceConfig,
        clock: Callable[[], int],
        fabric: Fabric,
        state: StateStore,
        snapshot: Callable[[], Snapshot],
        acting: Callable[[], bool],
    ) -> None:
        self.cfg, self.settings, self.clock, self.fabric, self.state = cfg, cfg.tuning, clock, fabric, state
        self.snapshot, self.acting = snapshot, acting
        self.policy = load_policy(cfg.policy)
        self.intent = derive_intent(fabric, load_spec(cfg.spec), self.policy, None)
        keep = int(self.settings.window_s / self.settings.sample_s) + 1
        ports = ((d.device, p.port) for d, p in lossless_ports(self.intent))
        self.samples = SampleLog(ports, self.policy.lossless_priorities[0], max(keep, 4))
        self.recorded: set[str] = set()
        self.last: Round | None = None

    def schedule(self, scheduler: AsyncIOScheduler) -> None:
        scheduler.add_job(self.sample, "interval", seconds=self.settings.sample_s, id="tuning-sample")
        scheduler.add_job(self.round, "interval", seconds=self.settings.window_s, id="tuning-round")

    async def sample(self) -> None:
        if self.acting():
            self.samples.take(self.snapshot(), self.clock() / NS)

    async def round(self) -> list[Proposal]:
        """Judge the window; record each admitted proposal once. Returns what it recorded."""
        if not self.acting():
            return []
        now = self.clock()
        xoff = self.settings.xoff_bytes
        ports = port_windows(self.intent, self.fabric, self.samples, self.policy, lambda _d, _p: xoff)
        groups = group_windows(self.intent, self.fabric, self.samples)
        self.last = r = judge_round(ports, groups, self.policy)
        window = int(now / NS // self.settings.window_s)
        out = []
        for p in r.proposals:
            key = proposal_key(p, window)
            if key in self.recorded:
                continue
            adm = admit(p, [], now / NS, self.policy.tuning)  # observe changes nothing: no ledger of its own yet
            if not adm.allowed:
                log.info("tuning: %s not admitted: %s", p.subject, adm.why)
                continue
            diff = "; ".join(line.strip() for line in p.diff())
            self.state.audit.record(now, WHAT, f"would change {diff} [key {key}]", mode="observe")
            self.recorded.add(key)
            out.append(p)
        return out


class TuningCollector(Collector):
    """/metrics: what the last judged window found: subjects per fired rule and class, proposals per class (observe:
    recorded, not applied), and the loop's recorded proposals since start."""

    def __init__(self, job: TuningJob) -> None:
        self.job = job

    def collect(self) -> Iterator[Metric]:
        fired = GaugeMetricFamily("fabricd_tuning_rule_fired_subjects", "Ports or groups on which a tuning rule "
                                  "fired in the last judged window", labels=["rule", "port_class"])  # fmt: skip
        props = GaugeMetricFamily("fabricd_tuning_proposals", "Proposals of the last judged window (observe: "
                                  "recorded in the audit, not applied)", labels=["port_class"])  # fmt: skip
        recorded = GaugeMetricFamily("fabricd_tuning_recorded", "Proposals the loop recorded since it started")
        r = self.job.last
        if r is not None:
            for (rule, cls), n in sorted(Counter((str(v.rule), str(v.port_class)) for v in r.fired).items()):
                fired.add_metric([rule, cls], n)
            for cls, n in sorted(Counter(str(p.port_class) for p in r.proposals).items()):
                props.add_metric([cls], n)
        recorded.add_metric([], len(self.job.recorded))
        yield from (fired, props, recorded)
