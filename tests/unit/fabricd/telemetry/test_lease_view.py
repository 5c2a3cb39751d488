"""The lease view a collector keeps from its watch: which switches are held, which abandoned and may be taken over
with a compare-and-set, all on the collector's own clock."""

from __future__ import annotations

import pytest

from fabricd.telemetry.lease_view import LeaseView, Op, op_of

TTL = 1.0


def view(*events: tuple[str, int, Op, float]) -> LeaseView:
    v = LeaseView(TTL)
    for key, rev, op, t in events:
        v.saw(key, rev, op, t)
    return v


@pytest.mark.parametrize(
    ("events", "now", "live", "abandoned"),
    [
        pytest.param([], 5.0, set(), {}, id="empty bucket: nothing held"),
        pytest.param([("a", 1, Op.PUT, 0.0)], 0.5, {"a"}, {}, id="seen half a TTL ago: held"),
        pytest.param([("a", 1, Op.PUT, 0.0)], 1.0, set(), {"a": 1}, id="not rewritten for a TTL: abandoned"),
        pytest.param([("a", 1, Op.PUT, 0.0), ("a", 2, Op.PUT, 0.4)], 1.2, {"a"}, {}, id="a renewal restarts the TTL"),
        pytest.param(
            [("a", 1, Op.PUT, 0.0), ("a", 1, Op.PUT, 0.9)], 1.0, set(), {"a": 1},
            id="the same revision again (a watch restarted) does not restart it",
        ),
        pytest.param([("a", 1, Op.PUT, 0.0), ("a", 2, Op.DELETE, 0.2)], 0.3, set(), {}, id="given back: free"),
        pytest.param(
            [("a", 1, Op.PUT, 0.0), ("b", 7, Op.PUT, 0.8)], 1.5, {"b"}, {"a": 1},
            id="one holder stopped, the other renews",
        ),
    ],
)  # fmt: skip
def test_what_is_held_and_what_was_abandoned(
    events: list[tuple[str, int, Op, float]], now: float, live: set[str], abandoned: dict[str, int]
) -> None:
    v = view(*events)
    assert v.live(now) == live
    assert v.abandoned(now) == abandoned
    assert not v.live(now) & set(v.abandoned(now))


def test_a_watch_that_went_quiet_is_not_fresh() -> None:
    v = view(("m", 1, Op.PUT, 0.0))
    assert v.fresh(0.5, within=2 / 3)
    assert not v.fresh(0.7, within=2 / 3)
    assert not LeaseView(TTL).fresh(0.0, within=1.0)  # never delivered anything


@pytest.mark.parametrize(("operation", "op"), [(None, Op.PUT), ("DEL", Op.DELETE), ("PURGE", Op.DELETE)])
def test_nats_operations(operation: str | None, op: Op) -> None:
    assert op_of(operation) is op


@pytest.mark.parametrize(
    ("events", "now", "lapse"),
    [
        pytest.param([], 0.0, float("inf"), id="empty bucket: nothing to wait for"),
        pytest.param([("a", 1, Op.PUT, 0.0)], 0.3, 1.0, id="a TTL after it was seen"),
        pytest.param([("a", 1, Op.PUT, 0.0), ("b", 4, Op.PUT, 0.5)], 0.6, 1.0, id="the sooner of two"),
        pytest.param([("a", 1, Op.PUT, 0.0), ("b", 4, Op.PUT, 0.5)], 1.2, 1.5, id="one lapsed already: the next"),
        pytest.param([("a", 1, Op.PUT, 0.0), ("a", 2, Op.PUT, 0.4)], 0.5, 1.4, id="renewed: from the renewal"),
        pytest.param([("a", 1, Op.PUT, 0.0), ("a", 2, Op.DELETE, 0.2)], 0.3, float("inf"), id="given back: none"),
    ],
)  # fmt: skip
def test_when_the_next_lease_lapses(events: list[tuple[str, int, Op, float]], now: float, lapse: float) -> None:
    v = view(*events)
    assert v.next_lapse(now) == lapse
    if lapse != float("inf"):
        after = lapse + 1e-9  # float: 0.4 + 1.0 - 0.4 < 1.0 (why the collector wakes LAPSE_MARGIN_S after)
        assert v.abandoned(after) and not set(v.abandoned(now)) >= set(v.abandoned(after))
