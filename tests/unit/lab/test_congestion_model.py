"""The congestion model (lab/congestion/) against published results, each test naming its source in
shared/reference/congestion-tuning.md. Pure numpy: no twin, no sockets."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from lab.congestion import (
    CONNECTX,
    LONG_HAUL,
    PAPER,
    Aggregate,
    QueueConfig,
    closed_form,
    exact,
    paper_switch,
    red,
    simulate,
    simulate_flowlets,
)

# The reference's worked example (§1.3) uses 1 KB packets at 40G.
PKT = 1000.0


def test_red_ramp_is_the_papers_marking_curve() -> None:
    """§1.1 [dcqcn15]: 0 below Kmin, linear to Pmax at Kmax, 1 above Kmax; nothing where ECN is off."""
    q = np.array([0.0, 5_000, 102_500, 200_000, 200_001, 150_000])
    on = np.array([True] * 5 + [False])
    p = red(q, np.full(6, 5_000.0), np.full(6, 200_000.0), np.full(6, 0.01), on)
    assert p.tolist() == pytest.approx([0.0, 0.0, 0.005, 0.01, 1.0, 0.0])


def test_closed_form_is_the_references_worked_example() -> None:
    """§1.3 (DERIVED there): 40G, 1 KB packets, paper constants: N = 2 gives p* ~ 9e-4 and q* ~ 23 KB; N = 20 gives
    p* ~ 0.02 > Pmax, so the queue sits at Kmax."""
    qc = paper_switch(40e9)
    two, twenty = closed_form(2, qc, PAPER, PKT), closed_form(20, qc, PAPER, PKT)
    assert two.p == pytest.approx(9e-4, rel=0.05) and two.queue_bytes == pytest.approx(23_000, rel=0.05)
    assert twenty.p == pytest.approx(0.02, rel=0.05) and not twenty.interior and twenty.queue_bytes == 200_000


@pytest.mark.slow  # a model run of a second or more: CI runs it, `pytest tests/unit -m "not slow"` not
def test_fluid_model_settles_at_the_papers_fixed_point() -> None:
    """§1.3 [dcqcn15][ecn-delay][fluid-py]: N flows on one 40G bottleneck with the paper's constants (g 1/256, N 50 us,
    timers 55 us, B 10 MB, F 5, R_AI 40 Mbps; Kmin 5 KB, Kmax 200 KB, Pmax 1 %) settle at the fixed point of the
    fluid equations: marking probability and queue within 10 % of it while p* <= Pmax (the closed form of the
    reference is within 35 %: it drops the (1-p)^F factors); with p* > Pmax there is no interior fixed point and the
    queue is pushed to Kmax and marks past Pmax. Feedback delay 10 us (one rack; the model is unstable at 85 us for
    N >= 8 at 40G, see the next test)."""
    qc = paper_switch(40e9)
    counts = [2, 4, 8, 10, 16, 20]
    aggs = [Aggregate(queue=i, flows=n, line_bps=40e9, feedback_delay_s=10e-6, nic=PAPER) for i, n in enumerate(counts)]
    r = simulate([qc] * len(counts), aggs, duration_s=0.2, dt_s=10e-6, warmup_s=0.12, packet_bytes=PKT)
    assert r.utilisation == pytest.approx(np.ones(len(counts)), rel=0.01)
    for i, n in enumerate(counts):
        fp = exact(n, qc, PAPER, PKT)
        if fp.interior:
            assert r.mark_share[i] == pytest.approx(fp.p, rel=0.10), n
            assert r.queue_mean_bytes[i] == pytest.approx(fp.queue_bytes, rel=0.10), n
            assert closed_form(n, qc, PAPER, PKT).p == pytest.approx(fp.p, rel=0.35), n
        else:
            assert n >= 16
            assert r.queue_max_bytes[i] >= qc.kmax_bytes and r.mark_share[i] > qc.pmax, n
    # p* grows with N (about as N^(4/3) with the timer term dominating, §1.3)
    interior = [exact(n, qc, PAPER, PKT).p for n in counts[:4]]
    assert interior == sorted(interior)


@pytest.mark.slow
def test_stability_depends_on_delay() -> None:
    """§1.3 CoNEXT'16 finding [ecn-delay]: DCQCN's stability depends on the flows and the feedback delay. The same
    8 flows that settle at 10 us oscillate across the whole RED ramp at 85 us (the delay [fluid-py] uses at 100G).
    The paper gives no figure for where the boundary lies at 40G: the model's boundary is its own."""
    qc = paper_switch(40e9)
    aggs = [
        Aggregate(queue=i, flows=8, line_bps=40e9, feedback_delay_s=d, nic=PAPER) for i, d in enumerate([10e-6, 85e-6])
    ]
    r = simulate([qc, qc], aggs, duration_s=0.12, dt_s=10e-6, warmup_s=0.08, trace_every=5, packet_bytes=PKT)
    swing = r.trace_q[len(r.trace_q) // 2 :].max(axis=0) - r.trace_q[len(r.trace_q) // 2 :].min(axis=0)
    assert swing[0] < 0.02 * qc.kmax_bytes
    assert swing[1] > 0.5 * qc.kmax_bytes


def _incast(senders: list[int], qc: QueueConfig) -> tuple[float, float, float]:
    """(first mark, first XOFF, drops) when the senders (flows per ingress port, 40G each) start at line rate."""
    aggs = [
        Aggregate(queue=0, flows=f, line_bps=40e9, feedback_delay_s=10e-6, nic=PAPER, ingress_bps=40e9) for f in senders
    ]
    r = simulate([qc], aggs, duration_s=0.004, dt_s=0.5e-6, warmup_s=0.0)
    return float(r.first_mark_s[0]), float(r.first_xoff_s[0]), float(r.dropped_bps[0])


def test_ecn_fires_before_pfc_with_the_papers_thresholds() -> None:
    """§1.4 [dcqcn15]: with the paper's switch (12 MB, 32 x 40G, headroom 22.4 KB, dynamic threshold beta = 8) and
    Kmin = 5 KB (below the 21.75 KB bound), a 16:1 incast is marked long before any PG reaches XOFF; PFC still fires
    as the last resort during the senders' reaction, and the headroom holds (no drop)."""
    mark, xoff, drops = _incast([1] * 16, paper_switch(40e9))
    assert mark < xoff < np.inf
    assert mark <= 1e-6
    assert drops == 0


def test_pfc_fires_first_when_kmin_is_above_xoff() -> None:
    """§1.4 [dcqcn15]: ECN must fire before XOFF, which needs t_PFC > n t_ECN for n ingresses feeding the queue. Static
    XOFF 24.47 KB (the paper's static bound) with Kmin 100 KB above n x XOFF (2 ingresses, 8 flows each): the PGs
    pause before the queue is ever marked."""
    qc = dataclasses.replace(
        paper_switch(40e9), dynamic_alpha=0.0, xoff_bytes=24_470, kmin_bytes=100_000, kmax_bytes=400_000
    )
    mark, xoff, drops = _incast([8, 8], qc)
    assert xoff < mark
    assert drops == 0


def _long_haul(nics: list[tuple[float, object]]) -> tuple[np.ndarray, np.ndarray, object]:
    """4 clients x 100G (4 QPs each) into one 100G DCI egress, 120 km (RTT 1.2 ms, §1.3 [hpe]); thresholds of HPE's
    working profile: Kmin 0.75 x RTT, Kmax 1.5 x RTT, buffer 2.5 x RTT (§1.4); lossy (no PFC on the long haul)."""
    c, rtt = 100e9, 1.2e-3
    bdp = c / 8 * rtt
    qc = QueueConfig(
        c, kmin_bytes=0.75 * bdp, kmax_bytes=1.5 * bdp, pmax=0.01, ecn=True, pfc=False, buffer_bytes=2.5 * bdp
    )
    aggs = [
        Aggregate(queue=j, flows=4, line_bps=c, feedback_delay_s=fb, nic=nic)  # type: ignore[arg-type]
        for j, (fb, nic) in enumerate(nics)
        for _ in range(4)
    ]
    r = simulate([qc] * len(nics), aggs, duration_s=0.25, dt_s=20e-6, warmup_s=0.12, trace_every=5)
    late = r.trace_served[len(r.trace_served) // 2 :] / c
    return late.min(axis=0), r.queue_max_bytes / bdp, r


@pytest.mark.slow
def test_long_haul_oscillates_with_end_to_end_cnp_and_settles_with_dr_cnp() -> None:
    """§1.3 [hpe]: over 120 km with default NIC timers the senders keep rising for a whole RTT before a cut lands:
    the queue overshoots by about (offered - C) x RTT (3 BDP here, past the 2.5 x RTT buffer: drops) and the loop
    keeps swinging (throughput falls far below line rate between overshoots). With the DR generating CNPs (fabricd's
    long-haul choice, policies/intent.py: the CNP reaches the senders within ~50 us) the same thresholds settle:
    full rate, no drops."""
    floor, peak, r = _long_haul([(1.2e-3, CONNECTX), (50e-6, CONNECTX)])
    assert peak[0] == pytest.approx(2.5, rel=0.01)  # overshoot capped by the buffer: tail drops
    assert floor[0] < 0.5
    assert floor[1] > 0.99 and r.dropped_bps[1] == 0  # type: ignore[attr-defined]


@pytest.mark.slow
@pytest.mark.xfail(
    strict=True,
    reason="HPE's NIC profile with greedy senders (no window, or 1 BDP per client): the onset passes Kmax, ~300 "
    "clamped 5 % cuts in one RTT put the rates at rpg_min_rate, recovery is byte-counter additive (~0.4 s): ~26 % of "
    "line. The reference does not give HPE's Pmax, start or whether the 1 BDP window is per client (§1.4)",
)
def test_long_haul_settles_with_the_hpe_nic_profile() -> None:
    """§1.2/§7 rule 7 [hpe]: RPG_TIME_RESET 5 ms, MIN_DEC_FAC 95, CLAMP_TGT_RATE 1 gave 100 % link use and no tail
    drops at 50-500 km, peak queue ~1 RTT (§1.4). Not reproduced with greedy senders: 16 QPs at line rate into a 4:1
    bottleneck overshoot by (offered - C) x RTT (3 BDP, capped by the 2.5 BDP buffer), far above Kmax (1.5 RTT), so
    every packet is marked for about one feedback delay; each QP then gets a CNP every 4 us (min_time_between_cnps,
    rate_reduce_monitor_period) and, with CLAMP_TGT_RATE, each resets RT to RC and cuts 5 %: 0.95^300 ~ 2e-7, the
    rates sit at rpg_min_rate. Recovery is additive per 32 KB byte-counter expiry (5 Mb/s each, so growth in
    proportion to the rate: ~50 ms time constant, ~0.4 s back to the fair share) and the cycle repeats: ~26 % of
    line. Neither the model nor HPE's figures are shown wrong: the reference does not say HPE's Pmax (1 % assumed
    here, the paper's), how the clients started, or whether "offered window ~1 BDP" is per client (a 4 BDP total:
    still collapses here, see below) or in all (then the window alone fills the link, the next test). Strict xfail:
    the day the model settles here, this test says so."""
    floor, _, _ = _long_haul([(1.2e-3, LONG_HAUL)])
    assert floor[0] > 0.95


@pytest.mark.parametrize("nic", [LONG_HAUL, CONNECTX], ids=["hpe", "connectx"])
def test_a_window_of_a_bdp_or_two_fills_the_long_haul_with_a_queue_of_at_most_an_rtt(nic: object) -> None:
    """§1.4 [hpe]: "16 QPs needed ~1.04 BDP, 8 QPs needed ~1.7 BDP to fill the link"; 100 % link use, no tail drop,
    peak queue ~1 RTT. Read as the window of all QPs together, the model agrees: with 1.04, 1.7 and 2 BDP in flight
    the 100G long haul runs full, nothing drops, and the queue peaks at (window - 1) BDP: at most 1 RTT. It does so
    under ConnectX's defaults as well (hardly a mark: the queue stays near Kmin), so this reading makes HPE's result
    the windows' doing, not the NIC profile's (which is why the test above stays an xfail). With 1 BDP per client
    (4 BDP in all) the same NIC profile collapses as greedy senders do."""
    c, rtt = 100e9, 1.2e-3
    bdp = c / 8 * rtt
    qc = QueueConfig(
        c, kmin_bytes=0.75 * bdp, kmax_bytes=1.5 * bdp, pmax=0.01, ecn=True, pfc=False, buffer_bytes=2.5 * bdp
    )
    peaks, floors = {}, {}
    for total in (1.04, 1.7, 2.0, 4.0):
        aggs = [
            Aggregate(queue=0, flows=4, line_bps=c, feedback_delay_s=rtt, nic=nic, window_bytes=total * bdp / 16)  # type: ignore[arg-type]
            for _ in range(4)
        ]
        r = simulate([qc], aggs, duration_s=0.25, dt_s=20e-6, warmup_s=0.12, trace_every=5)
        floors[total] = float((r.trace_served[len(r.trace_served) // 2 :, 0] / c).min())
        peaks[total] = float(r.queue_max_bytes[0] / bdp)
        if total < 4:
            assert r.dropped_bps[0] == 0
    assert all(floors[w] > 0.99 for w in (1.04, 1.7, 2.0))
    assert (
        peaks[1.04] < 0.1 and peaks[1.7] == pytest.approx(0.7, abs=0.05) and peaks[2.0] == pytest.approx(1.0, abs=0.05)
    )
    assert floors[4.0] < 0.5  # 1 BDP per client does not bind: the loop swings as without a window


def test_reorders_exactly_when_the_flowlet_gap_is_below_the_path_skew() -> None:
    """§4, §7 rule 8 [sonic-ars][meta24]: a flowlet may move only after an idle gap >= the inactivity time; it reorders
    when it overtakes its previous flowlet, which needs a gap below the path-delay skew (10 us here). Long gaps keep
    the hash's placement: the members' loads stay uneven."""
    delays = [1e-6, 1e-6, 11e-6, 11e-6]
    skew = 10e-6
    reorders = {g: simulate_flowlets(delays, g).reorders for g in (5e-6, skew - 0.1e-6, skew, skew + 0.1e-6, 50e-6)}
    assert reorders[5e-6] > reorders[skew - 0.1e-6] > 0
    assert reorders[skew] == reorders[skew + 0.1e-6] == reorders[50e-6] == 0
    short, long = simulate_flowlets(delays, skew + 1e-6), simulate_flowlets(delays, 256e-6)
    assert long.flowlets == 0 and long.moves == 0
    assert long.imbalance > 0.2 > 0.05 > short.imbalance


@pytest.mark.parametrize(("length_m", "speed"), [(3, 400), (30, 400), (120_000, 400), (100, 100), (2, 800)])
def test_the_twins_default_headroom_is_the_policys_formula(length_m: float, speed: int) -> None:
    """The lab may not import policies (test_layers), so it keeps its own copy of SONiC's headroom formula: the same
    bytes as policies/tuning.py pfc_headroom with the default PfcPolicy."""
    from lab.congestion.params import sonic_headroom
    from policies.policy import PfcPolicy
    from policies.tuning import pfc_headroom

    assert sonic_headroom(length_m, speed) == pfc_headroom(length_m, speed, PfcPolicy())[0]
