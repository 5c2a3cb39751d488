"""fabricd's mark on a port: written as a suffix of the operator's description, read back, removed cleanly."""

from __future__ import annotations

import pytest

from drivers.marks import MAX_DESCRIPTION, Mark, parse_mark, with_mark, without_mark

M = Mark(action_id=12, ticket_id=7, kind="link_flap")


@pytest.mark.parametrize(
    ("before", "after"),
    [
        ("", "[fabricd: down a12 t7 link_flap]"),
        ("uplink to spine-r3-1", "uplink to spine-r3-1 [fabricd: down a12 t7 link_flap]"),
        # an older mark is replaced, never stacked
        ("uplink [fabricd: down a3 t1 link_corruption]", "uplink [fabricd: down a12 t7 link_flap]"),
    ],
)
def test_mark_is_a_suffix_of_the_operators_description(before: str, after: str) -> None:
    assert with_mark(before, M) == after
    assert parse_mark(after) == M
    assert without_mark(after) == before.partition(" [fabricd")[0]


def test_no_mark_reads_as_none_and_strips_nothing() -> None:
    assert parse_mark("uplink to spine-r3-1") is None
    assert parse_mark("[fabricd] something else") is None
    assert without_mark("uplink to spine-r3-1") == "uplink to spine-r3-1"
    assert parse_mark(with_mark("x", Mark(1, None, "link_corruption"))) == Mark(1, None, "link_corruption")


def test_a_long_description_is_cut_to_fit_the_switch_and_keeps_the_mark() -> None:
    marked = with_mark("x" * 300, M)
    assert len(marked) <= MAX_DESCRIPTION
    assert parse_mark(marked) == M
