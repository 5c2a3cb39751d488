"""The DCQCN fluid model's fixed point, as the papers analyse it (reference §1.3): what the time-stepped model must
settle to when N flows share one bottleneck.

`exact` sets every derivative of the fluid model to zero and solves for the marking probability (bisection; no
approximation); `closed_form` is the small-p limit printed in the reference (DERIVED there, and in [fluid-py] as
`Psend`), which drops the (1 - p)^F factors and overestimates p* by up to ~25 %.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from .dcqcn import PACKET_BYTES
from .params import NicParams, QueueConfig


@dataclass(frozen=True)
class FixedPoint:
    flows: int
    rate_bps: float  # each flow's RC* = C / N
    p: float  # marking probability
    queue_bytes: float  # q* on the RED ramp; kmax when p* > pmax (no interior fixed point)
    interior: bool  # p* <= pmax


def _queue(p: float, qc: QueueConfig) -> tuple[float, bool]:
    if p > qc.pmax:
        return qc.kmax_bytes, False
    return qc.kmin_bytes + (qc.kmax_bytes - qc.kmin_bytes) * p / qc.pmax, True


def _balance(p: float, r: float, nic: NicParams, pkt: float) -> float:
    """Decrease minus increase of RC at the fixed point (RT - RC eliminated through dRT/dt = 0); r in packets/s."""
    tau, tau_a, t, b, f = nic.cut_interval_s, nic.alpha_period_s, nic.time_reset_s, nic.byte_reset / pkt, nic.threshold
    r_ai = nic.ai_rate_bps / 8 / pkt
    q1 = 1.0 - p
    a = 1.0 - q1 ** (tau * r)
    alpha = 1.0 - q1 ** (tau_a * r)
    bb = p / (q1 ** (-b) - 1.0)
    dd = p / (q1 ** (-t * r) - 1.0)
    cc, ee = bb * q1 ** (f * b), dd * q1 ** (f * t * r)
    gap = r_ai * r * (cc + ee) * tau / a  # RT* - RC* from dRT/dt = 0
    fresh = (1 - nic.alpha_g) * alpha + nic.alpha_g if nic.alpha_before_cut else alpha
    cut = min(fresh / 2, 1.0 - nic.min_dec_fac)
    return float(r * cut * a / tau - gap * r * (bb + dd) / 2)


def exact(flows: int, qc: QueueConfig, nic: NicParams, packet_bytes: float = PACKET_BYTES) -> FixedPoint:
    r = qc.capacity_bps / 8 / flows / packet_bytes
    lo, hi = 1e-9, 0.5
    for _ in range(200):  # the balance rises with p: more marks, more cuts, fewer increases
        mid = math.sqrt(lo * hi)
        if _balance(mid, r, nic, packet_bytes) > 0:
            hi = mid
        else:
            lo = mid
    p = math.sqrt(lo * hi)
    q, interior = _queue(p, qc)
    return FixedPoint(flows, qc.capacity_bps / flows, p, q, interior)


def closed_form(flows: int, qc: QueueConfig, nic: NicParams, packet_bytes: float = PACKET_BYTES) -> FixedPoint:
    """p* ~ [R_AI (1/B + 1/(T RC*))^2 / (tau' RC*^2)]^(1/3) (reference §1.3, DERIVED; rates in packets/s)."""
    r = qc.capacity_bps / 8 / flows / packet_bytes
    r_ai = nic.ai_rate_bps / 8 / packet_bytes
    b = nic.byte_reset / packet_bytes
    p = (r_ai * (1 / b + 1 / (nic.time_reset_s * r)) ** 2 / (nic.alpha_period_s * r**2)) ** (1 / 3)
    q, interior = _queue(p, qc)
    return FixedPoint(flows, qc.capacity_bps / flows, p, q, interior)
