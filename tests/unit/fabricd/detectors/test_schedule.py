"""The detector-pass schedule the service and `fabricd detect` share: a table of arrivals and clock readings in,
passes out. No sockets, no event loop."""

from __future__ import annotations

import pytest

from fabricd.detectors.schedule import Pass, PassKind, PassSchedule

MS = 1_000_000
S = 1000 * MS
FULL, TICK = PassKind.FULL, PassKind.TICK


def replay(schedule: PassSchedule, records: list[int], end: bool = True) -> list[tuple[PassKind, int]]:
    """Drive it as `fabricd detect` does: before each record, the passes due by its time; at the end, those due by
    the last tick's end."""
    out: list[tuple[PassKind, int]] = []

    def drain(now: int) -> None:
        while (p := schedule.due(now)) is not None:
            out.append((p.kind, p.at))
            schedule.ran(p, p.at, now)

    for t in records:
        drain(t)
        schedule.arrived(t)
    if end and schedule.tick_end is not None:
        drain(schedule.tick_end)
    return out


@pytest.mark.parametrize(
    ("gap", "settle", "records", "passes"),
    [
        # a burst: a pass settle after its first record; a record 200 ms later gets its own, then the tick
        (200 * MS, 25 * MS, [100 * MS, 110 * MS, 300 * MS], [(FULL, 125 * MS), (FULL, 325 * MS), (TICK, S)]),
        # bursts 150 ms apart: each waits for the gap after the previous pass
        (
            200 * MS,
            25 * MS,
            [100 * MS, 250 * MS, 500 * MS],
            [(FULL, 125 * MS), (FULL, 325 * MS), (FULL, 525 * MS), (TICK, S)],
        ),
        # no gap: ticks only
        (0, 25 * MS, [100 * MS, 500 * MS], [(TICK, S)]),
        # a pass that would fall on or after the boundary is left to the tick
        (200 * MS, 25 * MS, [990 * MS], [(TICK, S)]),
        # a quiet stretch: one tick at the end of the last busy second, then the boundary after the next record
        (0, 0, [100 * MS, 5 * S + 1], [(TICK, S), (TICK, 6 * S)]),
        # a record on the boundary belongs to the next tick
        (0, 0, [100 * MS, S, S + 1], [(TICK, S), (TICK, 2 * S)]),
    ],
)
def test_replay_table(gap: int, settle: int, records: list[int], passes: list[tuple[PassKind, int]]) -> None:
    assert replay(PassSchedule(S, gap, settle_ns=settle), records) == passes


def test_nothing_is_due_before_data_or_start() -> None:
    s = PassSchedule(S, 200 * MS)
    assert s.due(10 * S) is None
    s.start(10 * S + 5)
    assert s.due(10 * S + 6) is None
    assert s.due(11 * S) == Pass(TICK, 11 * S)


def test_live_full_passes_between_samples_and_the_guard_before_the_tick() -> None:
    """The service's shape: no settle (it polls), a full pass at most every gap, nothing in the last 100 ms before a
    tick (oper-status events take no pass here: the service hands them to link_flap as they land)."""
    s = PassSchedule(S, 200 * MS, guard_ns=100 * MS)
    s.start(0)
    s.arrived(160 * MS)
    p = s.due(160 * MS)
    assert p == Pass(FULL, 160 * MS)
    s.ran(p, 160 * MS, 160 * MS)
    assert s.due(170 * MS) is None
    s.arrived(300 * MS)
    assert s.due(300 * MS) is None  # the full-pass gap: 160 + 200
    assert s.due(360 * MS) == Pass(FULL, 360 * MS)
    s.ran(Pass(FULL, 360 * MS), 360 * MS, 360 * MS)
    s.arrived(950 * MS)
    assert s.due(950 * MS) is None  # within the guard: the tick is about to run
    p = s.due(S)
    assert p == Pass(TICK, S)
    s.ran(p, S, S)
    assert (s.samples_since, s.tick_end) == (None, 2 * S)


def test_a_widened_gap_holds_the_next_full_pass() -> None:
    s = PassSchedule(S, 100 * MS)
    s.start(0)
    s.arrived(10 * MS)
    p = s.due(10 * MS)
    assert p is not None
    s.ran(p, 10 * MS, 10 * MS)
    s.gap_ns = 400 * MS  # the pass was expensive
    s.arrived(200 * MS)
    assert s.due(300 * MS) is None
    assert s.due(410 * MS) == Pass(FULL, 410 * MS)
