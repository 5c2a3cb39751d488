"""DCQCN over RED/ECN and PFC queues: a time-stepped fluid model, vectorised over queues and flow aggregates.

The equations are the DCQCN fluid model (SIGCOMM'15 §5, CoNEXT'16 Eq. 11; reference §1.3): per flow, the current
rate RC, the target rate RT and alpha, fed by the marking probability of its bottleneck queue and its own rate one
feedback delay ago:

    a = 1 - (1 - p)^(tau R')              a CNP within one cut interval tau (NP pacing, RP monitor period)
    b = p / ((1 - p)^-B - 1)              byte-counter expiries per packet (B in packets)
    d = p / ((1 - p)^-(T R') - 1)         timer expiries per packet
    c = b (1 - p)^(F B),  e = d (1 - p)^(F T R')      the same once past Fast Recovery (Additive Increase)
    dq/dt     = sum RC - C
    dalpha/dt = (g / tau') ((1 - (1 - p)^(tau' R')) - alpha)
    dRT/dt    = -(RT - RC) a / tau + R_AI R' (c + e)
    dRC/dt    = -RC (alpha / 2) a / tau + (RT - RC) R' (b + d) / 2

ConnectX's knobs enter as: the cut per CNP is min(alpha/2, 1 - min_dec_fac); tau = max(min_time_between_cnps,
rate_reduce_monitor_period); with clamp_tgt_rate off RT is reset only by the share d/(b+d) of increases that were
timer-driven (ASSUMPTION: the reference gives the knob's meaning, not its dynamics). Rates stay in
[min_rate, line rate]. No hyper-increase term: the fluid model has none (ASSUMPTION: its effect, faster recovery
after long quiet periods, is left out).

Each aggregate stands for `flows` identical flows from one ingress (so one PFC priority group) into one queue. Flows
start at line rate (no slow start, [dcqcn15]). PFC: an aggregate's ingress PG holds its arrival share of the queue;
past the XOFF threshold the switch pauses it, and the pause takes effect one hop delay later (what is in flight
lands in headroom; past headroom the PG drops). The integrator is exponential Euler (decays are exact over a
step), so steps longer than tau stay stable.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from .params import CONNECTX, NicParams, QueueConfig

# The twin's RoCE frames: 4096-byte payloads plus headers (lab/counters.py FRAME_BYTES).
PACKET_BYTES = 4200.0
# PFC frames while a PG stays above XON: one per half pause time at the refresh the twin already uses
# (lab/counters.py PAUSE_QUANTA / PAUSE_REFRESH); the first XOFF is sent at once.
PAUSE_QUANTA = 65535


@dataclass(frozen=True)
class Aggregate:
    """`flows` identical DCQCN flows from one ingress into queue `queue`."""

    queue: int
    flows: int
    line_bps: float  # each flow's NIC line rate
    feedback_delay_s: float  # mark -> CNP -> sender: the path's RTT, or to the DR when it generates CNPs
    hop_delay_s: float = 1e-6  # XOFF -> the upstream stops: twice the ingress cable plus the peer's response
    nic: NicParams = CONNECTX
    duty: float = 1.0  # share of the time the flows have data (collective on/off phases, averaged)
    ingress_bps: float = 0.0  # the ingress port's speed, which caps what the aggregate delivers (0: no cap)
    demand_bps: float = 0.0  # what each flow has to send when not held back (0: line rate)
    start_bps: float = 0.0  # each flow's rate at the start (0: line rate, as DCQCN flows start [dcqcn15])
    # bytes each flow may have in flight (RDMA's outstanding work requests; 0: no limit): a flow then sends at most
    # window / (feedback delay + its queue's delay), ACK-clocked as a window-limited sender is
    window_bytes: float = 0.0


@dataclass
class Result:
    """Time averages over the measured window (after `warmup_s`), per queue and per aggregate; bytes and seconds."""

    window_s: float
    arrival_bps: np.ndarray  # per queue, what arrived (bits/s)
    served_bps: np.ndarray  # what the queue sent
    queue_mean_bytes: np.ndarray
    queue_max_bytes: np.ndarray  # watermark over the whole run (a switch's watermark includes the start)
    pg_max_bytes: np.ndarray  # highest ingress PG occupancy seen (SAI PG shared watermark), per queue
    headroom_max_bytes: np.ndarray  # highest PG occupancy above its XOFF point (XOFF-room watermark), per queue
    mark_share: np.ndarray  # marked / sent packets
    marked_pps: np.ndarray
    dropped_bps: np.ndarray  # headroom overflow with PFC, tail drops without
    paused_share: np.ndarray  # share of time at least one ingress of the queue is held in XOFF
    pause_frames_ps: np.ndarray  # PFC frames/s the switch sends upstream for this queue (all its ingresses)
    cnp_ps: np.ndarray  # CNPs/s generated for the queue's marks (by the DR where dr_cnp, else by the receivers)
    first_mark_s: np.ndarray  # first time a packet was marked (inf: never)
    first_xoff_s: np.ndarray  # first time an ingress crossed XOFF (inf: never)
    agg_rate_bps: np.ndarray  # per aggregate, mean sending rate (all its flows)
    agg_paused_share: np.ndarray  # per aggregate, share of time held in XOFF
    agg_cnp_ps: np.ndarray  # per aggregate, CNPs/s its flows receive (each cuts a rate: rp_cnp_handled)
    trace_t: np.ndarray = field(default_factory=lambda: np.zeros(0))
    trace_q: np.ndarray = field(default_factory=lambda: np.zeros((0, 0)))  # (samples, queues)
    trace_served: np.ndarray = field(default_factory=lambda: np.zeros((0, 0)))  # bits/s per sample

    @property
    def utilisation(self) -> np.ndarray:
        out: np.ndarray = self.served_bps / np.maximum(self._capacity, 1.0)
        return out

    _capacity: np.ndarray = field(default_factory=lambda: np.zeros(0), repr=False)


def _nic_array(aggs: Sequence[Aggregate], attr: str) -> np.ndarray:
    return np.array([float(getattr(a.nic, attr)) for a in aggs])


def red(q: np.ndarray, kmin: np.ndarray, kmax: np.ndarray, pmax: np.ndarray, ecn: np.ndarray) -> np.ndarray:
    """RED/ECN marking probability (reference §1.1): 0 below Kmin, linear to Pmax at Kmax, 1 above Kmax."""
    span = np.maximum(kmax - kmin, 1.0)
    ramp = np.clip((q - kmin) / span, 0.0, 1.0) * pmax
    p = np.where(q > kmax, 1.0, np.where(q > kmin, ramp, 0.0))
    out: np.ndarray = np.where(ecn, p, 0.0)
    return out


def _expiry(p: np.ndarray, x: np.ndarray, n: np.ndarray) -> np.ndarray:
    """p / ((1 - p)^-n - 1) with x = -n log(1 - p): a counter of n packets expiring, per packet (1/n as p -> 0)."""
    small = x < 1e-9
    den = np.expm1(np.minimum(x, 700.0))
    out: np.ndarray = np.where(small, 1.0 / np.maximum(n, 1e-12), p / np.where(small, 1.0, den))
    return out


def _per_queue_max(qa: np.ndarray, values: np.ndarray, nq: int) -> np.ndarray:
    out = np.zeros(nq)
    np.maximum.at(out, qa, values)
    return out


def simulate(
    queues: Sequence[QueueConfig],
    aggs: Sequence[Aggregate],
    duration_s: float,
    dt_s: float = 1e-6,
    warmup_s: float | None = None,
    switch_of: Sequence[int] | None = None,
    trace_every: int = 0,
    packet_bytes: float = PACKET_BYTES,
) -> Result:
    """Run the model for `duration_s`; averages over the time after `warmup_s` (default: the first half).

    `switch_of[j]`: which switch queue j's buffer belongs to (queues of one switch share its pool); default one each.
    `trace_every`: record the queues every that many steps (tests and plots)."""
    nq, na = len(queues), len(aggs)
    warm = duration_s / 2 if warmup_s is None else warmup_s
    steps = max(1, round(duration_s / dt_s))
    cap = np.array([qc.capacity_bps / 8 for qc in queues])  # bytes/s
    kmin = np.array([qc.kmin_bytes for qc in queues])
    kmax = np.array([qc.kmax_bytes for qc in queues])
    pmax = np.array([qc.pmax for qc in queues])
    ecn = np.array([qc.ecn for qc in queues], dtype=bool)
    pfc = np.array([qc.pfc for qc in queues], dtype=bool)
    static = np.array([qc.xoff_bytes for qc in queues])
    dyn = np.array([qc.dynamic_alpha for qc in queues])
    pool = np.array([qc.pool_bytes for qc in queues])
    headroom = np.array([qc.headroom_bytes for qc in queues])
    xon_gap = np.array([qc.xon_bytes for qc in queues])
    buffer = np.array([qc.buffer_bytes for qc in queues])
    sw = np.arange(nq) if switch_of is None else np.asarray(switch_of, dtype=np.int64)

    qa = np.array([a.queue for a in aggs], dtype=np.int64)
    flows = np.array([float(a.flows) for a in aggs])
    line = np.array([a.line_bps / 8 for a in aggs])  # bytes/s per flow
    duty = np.array([a.duty for a in aggs])
    port_cap = np.array([a.ingress_bps / 8 if a.ingress_bps > 0 else np.inf for a in aggs])
    demand = np.array([a.demand_bps / 8 if a.demand_bps > 0 else a.line_bps / 8 for a in aggs])
    win_bytes = np.array([a.window_bytes if a.window_bytes > 0 else np.inf for a in aggs])
    windowed = bool(np.isfinite(win_bytes).any())
    base_rtt = np.array([a.feedback_delay_s for a in aggs])
    fb_steps = np.maximum(1, np.round(np.array([a.feedback_delay_s for a in aggs]) / dt_s)).astype(np.int64)
    hop_steps = np.maximum(1, np.round(np.array([a.hop_delay_s for a in aggs]) / dt_s)).astype(np.int64)
    hist = int(max(fb_steps.max(initial=1), hop_steps.max(initial=1))) + 1
    # NIC constants per aggregate
    t_reset = _nic_array(aggs, "time_reset_s")
    b_pkts = _nic_array(aggs, "byte_reset") / packet_bytes
    f_stage = _nic_array(aggs, "threshold")
    r_ai = _nic_array(aggs, "ai_rate_bps") / 8
    max_cut = 1.0 - _nic_array(aggs, "min_dec_fac")
    min_rate = _nic_array(aggs, "min_rate_bps") / 8
    g = _nic_array(aggs, "alpha_g")
    tau_a = _nic_array(aggs, "alpha_period_s")
    tau = np.array([max(a.nic.cut_interval_s, 1e-9) for a in aggs])
    clamp = np.array([a.nic.clamp_tgt_rate for a in aggs], dtype=bool)
    fresh = np.array([a.nic.alpha_before_cut for a in aggs], dtype=bool)
    alpha_decay = np.exp(-g / tau_a * dt_s)

    start = np.array([a.start_bps / 8 if a.start_bps > 0 else a.line_bps / 8 for a in aggs])
    rc = np.minimum(start, line)  # no slow start: flows begin at line rate unless told
    rt = rc.copy()
    alpha = _nic_array(aggs, "initial_alpha")
    q = np.zeros(nq)
    p_hist = np.zeros((hist, nq))
    rc_hist = np.tile(rc, (hist, 1))
    xoff_hist = np.zeros((hist, na), dtype=bool)
    xoff = np.zeros(na, dtype=bool)
    share = np.zeros(na)
    room = np.zeros(na)  # headroom in use per PG
    idx = np.arange(na)

    acc_arr, acc_srv, acc_q, acc_mark, acc_drop, acc_paused = (np.zeros(nq) for _ in range(6))
    acc_rate, acc_held, acc_newly, acc_cnp = (np.zeros(na) for _ in range(4))
    qmax, agg_pg, agg_room = np.zeros(nq), np.zeros(na), np.zeros(na)
    watching = nq > 0
    pfc_a, headroom_a, xon_a, static_a = pfc[qa], headroom[qa], xon_gap[qa], static[qa]
    dyn_a = dyn[qa] > 0
    any_dyn = bool(dyn_a.any())
    share_gain = min(1.0, dt_s / 50e-6)  # the PG share follows arrivals over ~50 us (ASSUMPTION)
    first_mark, first_xoff = np.full(nq, np.inf), np.full(nq, np.inf)
    measured = 0
    t_trace: list[float] = []
    q_trace: list[np.ndarray] = []
    s_trace: list[np.ndarray] = []
    refresh_s = PAUSE_QUANTA * 512 / np.maximum(line * 8, 1.0) / 2  # a held PG refreshes its XOFF at half its time

    # constants of the loop, folded once (the loop runs thousands of steps over small arrays: numpy's per-call cost
    # is most of its time, so fewer calls per step is what makes it cheaper)
    span = np.maximum(kmax - kmin, 1.0)
    pmax_on, marks_all = np.where(ecn, pmax, 0.0), ecn.astype(np.float64)
    inv_b = 1.0 / np.maximum(b_pkts, 1e-12)
    fb_stage = f_stage * b_pkts
    ai_dt = r_ai * dt_s
    dt_tau = dt_s / tau
    no_p = np.zeros(na)

    for step in range(steps):
        t = step * dt_s
        slot = step % hist
        # RED/ECN (`red` above, inlined)
        p = np.where(q > kmax, marks_all, np.minimum(np.maximum(q - kmin, 0.0) / span, 1.0) * pmax_on)
        p_hist[slot] = p
        rc_hist[slot] = rc
        xoff_hist[slot] = xoff
        ago = (step - fb_steps) % hist
        pd = p_hist[ago, qa] if step else no_p
        rd = rc_hist[ago, idx]
        held = xoff_hist[(step - hop_steps) % hist, idx]
        rpk = rd / packet_bytes  # packets/s one feedback delay ago
        tr = t_reset * rpk

        # --- reaction point (per flow); lp = log(1 - p), so (1 - p)^x = exp(x lp) ---
        if pd.any():
            lp = np.log1p(-np.minimum(pd, 1 - 1e-12))
            cnp_win = -np.expm1(tau * rpk * lp)
            alpha_target = -np.expm1(tau_a * rpk * lp)
            alpha = alpha_target + (alpha - alpha_target) * alpha_decay
            bb = _expiry(pd, -b_pkts * lp, b_pkts)
            dd = _expiry(pd, -tr * lp, tr)
            cc = bb * np.exp(fb_stage * lp)
            ee = dd * np.exp(f_stage * tr * lp)
            cut = np.minimum(np.where(fresh, (1 - g) * alpha + g, alpha) / 2, max_cut)
            reset = np.where(clamp, 1.0, dd / np.maximum(bb + dd, 1e-30))
            rt = rc + (rt - rc) * np.exp(-cnp_win * reset * dt_tau) + ai_dt * rpk * (cc + ee)
            rc = rc * np.exp(-cut * cnp_win * dt_tau)
        else:  # nothing marked one feedback delay ago: no CNP, every counter expires at its unmarked rate (1/n)
            alpha = alpha * alpha_decay
            cnp_win = no_p
            bb = inv_b
            dd = 1.0 / np.maximum(tr, 1e-12)
            rt = rt + ai_dt * rpk * (bb + dd)
        rc = rt - (rt - rc) * np.exp(-rpk * (bb + dd) / 2 * dt_s)
        rc = np.minimum(np.maximum(rc, min_rate), line)
        rt = np.minimum(np.maximum(rt, rc), line)

        # --- queues ---
        per_flow = np.minimum(rc, demand)
        if windowed:  # what a window lets out per round trip, the round trip stretched by the queue it waits in
            per_flow = np.minimum(per_flow, win_bytes / (base_rtt + q[qa] / cap[qa]))
        send = np.minimum(flows * per_flow * duty, port_cap) * ~held  # bytes/s each aggregate puts on the wire
        arr = np.bincount(qa, send, nq)
        srv = np.minimum(cap, arr + q / dt_s)
        q = q + (arr - srv) * dt_s
        # each ingress PG holds its arrival share of the queue (smoothed: what the queue holds arrived over time)
        share += (send / np.maximum(arr[qa], 1e-9) - share) * (share_gain if step else 1.0)
        pg = q[qa] * share
        if any_dyn:
            thr = np.where(dyn_a, dyn[qa] * np.maximum(pool - np.bincount(sw, q)[sw], 0.0)[qa], static_a)
        else:
            thr = static_a
        over = pfc_a & (pg >= thr)
        newly = over & ~xoff
        xoff = over | (xoff & (pg > thr - xon_a))
        # headroom: what a PG takes in after its XOFF until the pause lands upstream; past it, the PG drops
        room = np.where(xoff, room + send * dt_s, 0.0)
        spill = np.maximum(room - headroom_a, 0.0)
        room -= spill
        # without PFC the queue tail-drops past the buffer
        dropped = np.bincount(qa, spill, nq) + np.maximum(q - buffer, 0.0) * ~pfc
        q = np.maximum(q - dropped, 0.0)
        mark_now = p * srv
        if watching:  # the first mark and the first XOFF of each queue
            first_mark = np.where((mark_now > 0) & np.isinf(first_mark), t, first_mark)
            crossed = np.bincount(qa, over, nq) > 0
            first_xoff = np.where(crossed & np.isinf(first_xoff), t, first_xoff)
            watching = bool(np.isinf(first_mark).any() or np.isinf(first_xoff).any())
        np.maximum(qmax, q, out=qmax)
        np.maximum(agg_pg, pg, out=agg_pg)
        np.maximum(agg_room, room, out=agg_room)
        if t >= warm:
            measured += 1
            acc_arr += arr
            acc_srv += srv
            acc_q += q
            acc_mark += mark_now
            acc_drop += dropped
            acc_paused += np.bincount(qa, xoff, nq) > 0
            acc_newly += newly
            acc_rate += send
            acc_held += xoff
            acc_cnp += cnp_win
        if trace_every and step % trace_every == 0:
            t_trace.append(t)
            q_trace.append(q.copy())
            s_trace.append(srv * 8)

    m = max(measured, 1)
    served = acc_srv / m
    window = measured * dt_s
    held_share = acc_held / m
    # one frame at each XOFF, then one per refresh interval while held
    frames = acc_newly / max(window, 1e-12) + held_share / refresh_s
    cnps = flows * acc_cnp / m / tau * duty
    return Result(
        window_s=window,
        arrival_bps=acc_arr / m * 8,
        served_bps=served * 8,
        queue_mean_bytes=acc_q / m,
        queue_max_bytes=qmax,
        pg_max_bytes=_per_queue_max(qa, agg_pg, nq),
        headroom_max_bytes=_per_queue_max(qa, agg_room, nq),
        mark_share=np.where(served > 0, acc_mark / m / np.maximum(served, 1e-9), 0.0),
        marked_pps=acc_mark / m / packet_bytes,
        dropped_bps=acc_drop / m / dt_s * 8,
        paused_share=acc_paused / m,
        pause_frames_ps=np.bincount(qa, frames, nq),
        cnp_ps=np.bincount(qa, cnps, nq),
        first_mark_s=first_mark,
        first_xoff_s=first_xoff,
        agg_rate_bps=acc_rate / m * 8,
        agg_paused_share=held_share,
        agg_cnp_ps=cnps,
        trace_t=np.array(t_trace),
        trace_q=np.array(q_trace).reshape(len(q_trace), nq),
        trace_served=np.array(s_trace).reshape(len(s_trace), nq),
        _capacity=cap * 8,
    )
