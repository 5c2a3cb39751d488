"""The numbers: headroom from cable length and speed, ECN scaling with speed, flowlet timers."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from policies.policy import DlbPolicy, EcnPolicy, PfcPolicy
from policies.tuning import ecn_thresholds, ecn_thresholds_dci, flowlet_inactivity, pfc_headroom

PFC = PfcPolicy()


@pytest.mark.parametrize(
    ("speed", "low_mb", "high_mb"),
    # domain.md: 120 km needs about 15 MB at 100G, 62 MB at 400G, 123 MB at 800G; the issue: about 61 MB at 400G.
    [(100, 14.9, 15.5), (400, 60.0, 62.5), (800, 120.5, 123.5)],
)
def test_120km_headroom_matches_published_figures(speed: int, low_mb: float, high_mb: float) -> None:
    headroom, why = pfc_headroom(120_000, speed, PFC)
    assert low_mb * 1e6 <= headroom <= high_mb * 1e6
    assert "2 x 120 km" in why and f"{speed} Gb/s" in why


def test_short_links_need_tens_of_kilobytes() -> None:
    # domain.md: short links (<= 300 m) need tens to a few hundred KB
    for length in (3, 30, 300):
        headroom, _ = pfc_headroom(length, 400, PFC)
        assert 10_000 < headroom < 500_000


def test_peer_response_uses_the_low_speed_quanta_at_100g() -> None:
    h100, why = pfc_headroom(3, 100, PFC)
    assert "394 quanta" in why
    h400, _ = pfc_headroom(3, 400, PFC)
    assert h400 - h100 > (905 - 394) * 64 - 1000  # the quanta difference dominates a 3 m cable


@given(st.floats(1, 200_000), st.floats(1, 200_000), st.sampled_from([100, 200, 400, 800]))
def test_headroom_grows_with_cable_length(a: float, b: float, speed: int) -> None:
    short, long_ = sorted((a, b))
    assert pfc_headroom(short, speed, PFC)[0] <= pfc_headroom(long_, speed, PFC)[0]


def test_ecn_thresholds_scale_with_speed() -> None:
    ecn = EcnPolicy()
    lo100, hi100, _ = ecn_thresholds(100, ecn)
    lo400, hi400, why = ecn_thresholds(400, ecn)
    # 12-120 us at 100 Gb/s is NVIDIA's 150 KB-1.5 MB
    assert (lo100, hi100) == (150_000, 1_500_000)
    assert (lo400, hi400) == (4 * lo100, 4 * hi100)
    assert "12-120 us" in why


def test_dci_ecn_follows_the_bandwidth_delay_product() -> None:
    ecn = EcnPolicy()
    lo, hi, why = ecn_thresholds_dci(120_000, 400, ecn)
    bdp = 400e9 * (2 * 120_000 / 1.98e8) / 8
    assert hi == round(bdp) and lo == round(0.2 * bdp)
    assert "RTT 1.21 ms" in why
    _, hi2, _ = ecn_thresholds_dci(60_000, 400, ecn)
    assert hi2 == pytest.approx(hi / 2, rel=1e-6)


def test_flowlet_timer_exceeds_path_delay_difference() -> None:
    dlb = DlbPolicy(inactivity_us=32, margin_us=16)
    value, why = flowlet_inactivity([30.0, 9000.0], dlb)
    diff_us = (9000 - 30) / 1.98e8 * 1e6
    assert value > 2 * diff_us and value == int(2 * diff_us) + 1 + 16
    assert "path-delay difference" in why
    assert flowlet_inactivity([30.0, 30.0], DlbPolicy())[0] == 256  # Juniper default stands
