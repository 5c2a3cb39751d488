"""How far apart the service's sample-driven detector passes are: the configured gap, or more on large fabrics."""

from __future__ import annotations

from fabricd.service.passes import PASS_SHARE, pass_gap

MS = 1_000_000


def test_small_fabric_passes_keep_the_configured_gap() -> None:
    assert pass_gap(200 * MS, 0.002) == 200 * MS  # an 18-switch pass: ~2 ms


def test_large_fabric_passes_space_out_to_a_share_of_a_core() -> None:
    gap = pass_gap(200 * MS, 0.023)  # an 832-switch pass, plus the store copy it causes
    assert gap == 460 * MS
    assert 2 * 0.023 / (gap / 1e9) <= PASS_SHARE + 1e-9


def test_ticks_only_stays_off() -> None:
    assert pass_gap(0, 0.0) == 0
