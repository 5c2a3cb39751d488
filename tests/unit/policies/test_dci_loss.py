"""The cross-DCI compute-loss model pinned to the published long-haul figures (reference/domain.md, issue 18) and
to its shape. Where the model lands against each figure is in docs/dci.md; the tolerances are stated per test."""

from __future__ import annotations

from dataclasses import replace

import pytest

from policies.dci_loss import UNTUNED_WINDOW_BYTES, DciPath, Split, Workload, evaluate, pair_rate, required_tbps, whatif

SEVEN_B_PP = Workload(7e9, 1024, Split.PP)
SEVEN_B_DP = Workload(7e9, 1024, Split.DP)
LAB = DciPath(distance_km=120, dci_tbps=3.2)  # the measured lab: 120 km, 8 x 400GbE DR ports


def test_rtt_is_one_ms_per_100_km() -> None:
    # "RTT 1 ms per 100 km"; 120 km ~ 1.2-1.3 ms
    assert 1.2 <= evaluate(SEVEN_B_PP, LAB).rtt_ms <= 1.3
    assert evaluate(SEVEN_B_PP, replace(LAB, distance_km=100)).rtt_ms == pytest.approx(1.0, rel=0.02)


def test_100_pairs_on_3_2_tbps_get_32_gbps_each() -> None:
    assert pair_rate(LAB, 100) * 8 / 1e9 == pytest.approx(32.0)


def test_seven_b_shape_is_llama2_like() -> None:
    assert SEVEN_B_PP.hidden == 4096 and SEVEN_B_PP.layers == 32
    # tens of MB of activations per micro-batch cross the cut
    assert 10e6 <= SEVEN_B_PP.activation_bytes <= 100e6
    assert (SEVEN_B_PP.tp, SEVEN_B_PP.pp, SEVEN_B_PP.dp) == (8, 2, 64)


def test_pp_7b_1k_gpus_at_120_km_stays_under_2_percent_with_at_most_5_tbps() -> None:
    need = required_tbps(SEVEN_B_PP, LAB, 0.02)
    assert need is not None and 3.2 < need <= 5.0  # model: 4.48 Tb/s
    assert evaluate(SEVEN_B_PP, replace(LAB, dci_tbps=5.0)).compute_loss < 0.02
    assert evaluate(SEVEN_B_PP, replace(LAB, dci_tbps=need)).compute_loss == pytest.approx(0.02, abs=2e-4)


def test_dp_needs_less_than_half_of_pp_bandwidth_and_ignores_distance() -> None:
    pp = required_tbps(SEVEN_B_PP, LAB, 0.02)
    dp = required_tbps(SEVEN_B_DP, LAB, 0.02)
    assert pp is not None and dp is not None and dp < 0.5 * pp
    near, far = (required_tbps(SEVEN_B_DP, replace(LAB, distance_km=km), 0.02) for km in (10, 500))
    assert near is not None and far is not None and far / near < 1.1  # within 10 % from 10 to 500 km


def test_pp_loss_grows_with_distance_and_suits_no_long_link() -> None:
    need = [required_tbps(SEVEN_B_PP, replace(LAB, distance_km=km), 0.02) for km in (10, 120, 300, 500)]
    assert all(n is not None for n in need)
    values = [n for n in need if n is not None]
    assert values == sorted(values) and values[-1] > 2 * values[0]
    assert required_tbps(SEVEN_B_PP, replace(LAB, distance_km=1000), 0.02) is None


@pytest.mark.parametrize("work", [SEVEN_B_PP, SEVEN_B_DP, replace(SEVEN_B_DP, zero=3)], ids=["pp", "dp", "dp-zero3"])
def test_loss_is_monotonic(work: Workload) -> None:
    by_distance = [evaluate(work, replace(LAB, distance_km=km)).compute_loss for km in (1, 50, 120, 400, 1000)]
    assert by_distance == sorted(by_distance)
    by_bw = [evaluate(work, replace(LAB, dci_tbps=t)).compute_loss for t in (0.8, 1.6, 3.2, 6.4, 12.8)]
    assert by_bw == sorted(by_bw, reverse=True)
    base = evaluate(work, LAB).compute_loss
    assert evaluate(work, replace(LAB, alpha_lb=0.8)).compute_loss >= base
    assert evaluate(work, replace(LAB, k=1.2)).compute_loss >= base
    assert evaluate(work, replace(LAB, drop_rate=1e-4)).compute_loss >= base
    assert evaluate(work, replace(LAB, window_bytes=UNTUNED_WINDOW_BYTES)).compute_loss >= base


def test_drops_cost_pp_round_trips() -> None:
    # go-back-N: a loss stalls the pair a round trip, so drops on the DR ports cost PP compute
    base = evaluate(SEVEN_B_PP, LAB).compute_loss
    assert evaluate(SEVEN_B_PP, replace(LAB, drop_rate=1e-4)).compute_loss > base * 1.01
    assert evaluate(SEVEN_B_PP, replace(LAB, drop_rate=1e-3)).compute_loss > base * 1.1


def test_zero3_makes_dp_lose_more_than_10_percent() -> None:
    z3 = evaluate(replace(SEVEN_B_DP, zero=3), LAB)
    assert z3.compute_loss > 0.10 > evaluate(SEVEN_B_DP, LAB).compute_loss
    assert any("ZeRO-3" in p.name for p in z3.phases)


def test_imbalance_costs_what_the_lost_bandwidth_costs() -> None:
    # alpha_LB 0.8 on 5 Tb/s is the same as 4 Tb/s evenly spread
    a = evaluate(SEVEN_B_PP, replace(LAB, dci_tbps=5.0, alpha_lb=0.8)).compute_loss
    b = evaluate(SEVEN_B_PP, replace(LAB, dci_tbps=4.0)).compute_loss
    assert a == pytest.approx(b)


def test_untuned_nccl_hurts_when_the_window_is_the_limit() -> None:
    # 256 GPUs: 128 pairs share 3.2 Tb/s (25 Gb/s each), above what a 2 MiB window moves per 1.2 ms RTT (13.8 Gb/s)
    w = Workload(7e9, 256, Split.PP)
    tuned, untuned = evaluate(w, LAB), evaluate(w, replace(LAB, window_bytes=UNTUNED_WINDOW_BYTES))
    assert untuned.per_pair_gbps == pytest.approx(UNTUNED_WINDOW_BYTES * 8 / (LAB.rtt_s * 1e9))
    assert untuned.compute_loss > 1.5 * tuned.compute_loss


def test_json_carries_the_named_fields() -> None:
    d = whatif(SEVEN_B_PP, LAB, 0.02).to_dict()
    for key in ("rtt_ms", "per_pair_gbps", "cross_dc_seconds_per_iteration", "compute_loss", "required_dci_tbps"):
        assert key in d
    assert d["pairs"] == 512 and d["per_pair_gbps"] == pytest.approx(6.25)
