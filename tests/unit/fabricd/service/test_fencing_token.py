"""The leader's fencing token: the lease bucket's creation time above the revision at which the lease was taken."""

from __future__ import annotations

import pytest

from fabricd.service.leader import TOKEN_EPOCH_S, fencing_token

T0 = TOKEN_EPOCH_S + 94_608_000  # three years on


@pytest.mark.parametrize(
    ("older", "newer"),
    [
        pytest.param((T0, 7), (T0, 8), id="one bucket: in the order of the revisions"),
        pytest.param((T0, 5_000_000), (T0 + 1, 1), id="a bucket made anew: above every token of the old one"),
        pytest.param((T0, (1 << 32) - 1), (T0 + 1, 1), id="even the old bucket's last revision"),
        pytest.param((None, 9_000), (T0, 1), id="tokens of a bus that gave no creation time: below"),
        pytest.param((None, 3), (None, 4), id="no creation time: the bare revision"),
    ],
)  # fmt: skip
def test_a_newer_lease_has_a_larger_token(older: tuple[float | None, int], newer: tuple[float | None, int]) -> None:
    assert fencing_token(*older) < fencing_token(*newer)


def test_the_token_fits_a_bigint_and_keeps_the_revision() -> None:
    token = fencing_token(TOKEN_EPOCH_S + (1 << 31) - 1, (1 << 32) - 1)  # the year 2091
    assert token < 1 << 63
    assert fencing_token(T0 + 0.9, 12) & 0xFFFFFFFF == 12
    assert fencing_token(None, 12) == 12


@pytest.mark.parametrize("revision", [0, -1, 1 << 32])
def test_a_revision_out_of_range_is_refused(revision: int) -> None:
    with pytest.raises(ValueError, match="lease revision out of range"):
        fencing_token(T0, revision)
