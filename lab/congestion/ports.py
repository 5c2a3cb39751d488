"""The model as the twin uses it: each congested switch egress queue with the ingresses that feed it, solved
together (one vectorised run) and summarised per port. Pure: lab/model.py builds the inputs from its traffic and
running config and applies the outcome to its counters.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from .dcqcn import Aggregate, simulate
from .params import NicParams, QueueConfig

# How long the twin's model runs for one solve: about 40 feedback delays (DCQCN settles in tens of RTTs, §1.3) but at
# least 10 ms and at most 150 ms of simulated time, in about STEPS steps (no step shorter than 2 us nor longer than
# 20 us). ASSUMPTIONS for cost: the twin serves averages over the run, not a trace; 2000 steps rather than 3000 move a
# 6:1 incast's marked share, mean queue and watermark by 2-4 % (small-pod, fabricd's campus ECN), for a third less
# CPU per solve (the 512-switch start with a workload, docs/benchmarks.md).
MIN_RUN_S, MAX_RUN_S, RUN_DELAYS = 10e-3, 150e-3, 40
STEPS = 2000
MIN_DT_S, MAX_DT_S = 2e-6, 20e-6
CACHE = 64  # solves kept: collective phases flip between a few states


@dataclass(frozen=True)
class Ingress:
    """One ingress port's traffic into the congested queue."""

    row: int  # the switch port it arrives on
    bps: float  # what it would bring if nothing held it back
    flows: int
    line_bps: float  # each flow's NIC line rate
    port_bps: float  # the ingress port's speed
    feedback_delay_s: float
    hop_delay_s: float


@dataclass(frozen=True)
class HotPort:
    device: str
    row: int
    switch: int  # queues of one switch share its buffer pool
    config: QueueConfig
    ingresses: tuple[Ingress, ...]


@dataclass(frozen=True)
class PortOutcome:
    """Averages of one solve for one congested queue."""

    offered_bps: float
    served_bps: float
    mark_share: float
    dropped_bps: float
    queue_mean_bytes: float
    queue_max_bytes: float
    pg_max_bytes: float
    headroom_max_bytes: float
    cnp_ps: float
    paused: tuple[float, ...]  # per ingress (same order), the share of time it is held in XOFF
    ingress_cnp_ps: tuple[float, ...] = ()  # per ingress, CNPs/s its senders receive


class Solver:
    """Solves hot ports, remembering recent answers (rounded inputs as the key)."""

    def __init__(self) -> None:
        self._cache: OrderedDict[object, list[PortOutcome]] = OrderedDict()
        self.solves = 0  # model runs (not cache hits), for benches and tests

    def solve(self, ports: Sequence[HotPort], nic: NicParams) -> list[PortOutcome]:
        if not ports:
            return []
        key = (nic, tuple(_key(p) for p in ports))
        hit = self._cache.get(key)
        if hit is not None:
            self._cache.move_to_end(key)
            return hit
        out = _run(ports, nic)
        self.solves += 1
        self._cache[key] = out
        if len(self._cache) > CACHE:
            self._cache.popitem(last=False)
        return out


def _key(p: HotPort) -> object:
    # 1 % steps of load: the counters a reader sees do not move for less
    return (p.device, p.row, p.switch, p.config, tuple((i.row, round(i.bps, -7), i.flows, i.line_bps, i.port_bps,
            round(i.feedback_delay_s, 7), round(i.hop_delay_s, 7)) for i in p.ingresses))  # fmt: skip


def _run(ports: Sequence[HotPort], nic: NicParams) -> list[PortOutcome]:
    aggs: list[Aggregate] = []
    onset = []
    for j, p in enumerate(ports):
        brought = sum(min(i.bps, i.port_bps) for i in p.ingresses)
        # the twin serves the settled state: flows start at their fair share of the queue, and the onset's peak (the
        # senders at full rate for one feedback delay before any cut lands, reference §1.3) is added to the watermark
        onset.append((brought - p.config.capacity_bps) / 8 * max(i.feedback_delay_s for i in p.ingresses))
        for i in p.ingresses:
            aggs.append(
                Aggregate(
                    queue=j,
                    flows=i.flows,
                    line_bps=i.line_bps,
                    feedback_delay_s=i.feedback_delay_s,
                    hop_delay_s=i.hop_delay_s,
                    nic=nic,
                    ingress_bps=i.port_bps,
                    demand_bps=i.bps / i.flows,
                    start_bps=min(i.bps, i.port_bps) / max(brought, 1.0) * p.config.capacity_bps / i.flows,
                )
            )
    longest = max(a.feedback_delay_s for a in aggs)
    run = min(MAX_RUN_S, max(MIN_RUN_S, RUN_DELAYS * longest))
    dt = min(MAX_DT_S, max(MIN_DT_S, run / STEPS))
    r = simulate([p.config for p in ports], aggs, run, dt_s=dt, switch_of=[p.switch for p in ports])
    out, k = [], 0
    for j, p in enumerate(ports):
        n = len(p.ingresses)
        out.append(
            PortOutcome(
                offered_bps=float(sum(i.bps for i in p.ingresses)),
                served_bps=float(r.served_bps[j]),
                mark_share=float(r.mark_share[j]),
                dropped_bps=float(r.dropped_bps[j]),
                queue_mean_bytes=float(r.queue_mean_bytes[j]),
                queue_max_bytes=float(max(r.queue_max_bytes[j], min(onset[j], p.config.buffer_bytes))),
                pg_max_bytes=float(r.pg_max_bytes[j]),
                headroom_max_bytes=float(r.headroom_max_bytes[j]),
                cnp_ps=float(r.cnp_ps[j]),
                paused=tuple(float(x) for x in np.asarray(r.agg_paused_share[k : k + n])),
                ingress_cnp_ps=tuple(float(x) for x in np.asarray(r.agg_cnp_ps[k : k + n])),
            )
        )
        k += n
    return out
