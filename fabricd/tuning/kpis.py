"""The KPIs a tuning change is judged by, measured over a window of the same counters the rules read.

Each is a rate or a level over the window, absent when its counters are (a KPI never defaults to 0: "not measured"
and "none" are different answers to verify).
"""

from __future__ import annotations

import statistics
from collections.abc import Mapping
from enum import StrEnum

from .inputs import GroupWindow, PortWindow
from .rules import drops, ecmp_imbalance, pause_us, queue_watermark, tx_bytes
from .series import Series, counter, percentile


class Kpi(StrEnum):
    PAUSE = "pause_us_per_s"  # PFC pause duration rx + tx per second
    THROUGHPUT = "throughput_bytes_per_s"
    UNDERUSE = "underuse"  # 1 - throughput / line rate: the shortfall a rule that raises throughput is judged by
    DROPS = "drops_per_s"
    REORDERS = "reorders_per_s"  # NIC out_of_sequence per second
    QUEUE_DELAY = "queue_delay_p99_us"  # p99 of the interval watermarks, as time at line rate
    THROUGHPUT_CV = "throughput_cv"  # how much throughput swings (oscillation)
    IMBALANCE = "imbalance"  # (max - min) / mean load over an ECMP group's members


HIGHER_IS_BETTER = frozenset({Kpi.THROUGHPUT})
# Never allowed to get worse when another KPI is the target (issue 51: throughput, drops, pause time, reorders).
GUARDS = (Kpi.THROUGHPUT, Kpi.DROPS, Kpi.PAUSE, Kpi.REORDERS)

Kpis = Mapping[Kpi, float]


def port_kpis(w: PortWindow) -> dict[Kpi, float]:
    out: dict[Kpi, float] = {}
    if isinstance(p := pause_us(w), Series):
        out[Kpi.PAUSE] = p.rate
    if isinstance(tx := tx_bytes(w), Series):
        out[Kpi.THROUGHPUT] = tx.rate
        out[Kpi.UNDERUSE] = max(0.0, 1 - tx.rate / w.physics.bytes_per_s)
        mean = statistics.fmean(tx.rates())
        out[Kpi.THROUGHPUT_CV] = statistics.pstdev(tx.rates()) / mean if mean else 0.0
    if isinstance(d := drops(w), Series):
        out[Kpi.DROPS] = d.rate
    oos = counter(w.samples, "out_of_sequence", lambda s: s.nic.out_of_sequence if s.nic else None, lambda s: s.t_s)
    if isinstance(oos, Series):
        out[Kpi.REORDERS] = oos.rate
    if isinstance(wm := queue_watermark(w), Series):
        out[Kpi.QUEUE_DELAY] = percentile(wm.delta, 0.99) / w.physics.bytes_per_s * 1e6
    return out


def group_kpis(g: GroupWindow) -> dict[Kpi, float]:
    out: dict[Kpi, float] = {}
    oos = counter(g.samples, "out_of_sequence", lambda s: s.out_of_sequence, lambda s: s.t_s)
    if isinstance(oos, Series):
        out[Kpi.REORDERS] = oos.rate
    d = counter(g.samples, "drops", lambda s: s.drops, lambda s: s.t_s)
    if isinstance(d, Series):
        out[Kpi.DROPS] = d.rate
    ev = ecmp_imbalance(g).evidence
    if "spread" in ev:
        out[Kpi.IMBALANCE] = ev["spread"]
        out[Kpi.THROUGHPUT] = ev["load"] * g.speed_gbps * 1e9 / 8 * ev["members"]
    return out
