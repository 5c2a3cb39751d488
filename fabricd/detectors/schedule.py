"""When detector passes run: the one schedule the service (on its clock) and `fabricd detect` (on trace time) share.

Every detector runs once per tick, on the clock's tick boundaries. In between, a pass runs soon after new data
arrives, so a storm's first whole paused sample is judged when it lands, not up to a tick later:
- new counter samples: a full pass `settle` after the first of them (the rest of a burst lands meanwhile), at least
  `gap` after the previous such pass (each pass snapshots the store and runs every detector);
- none closer than `guard` to the tick boundary, whose pass is about to come.
(New oper-status events, ON_CHANGE, need no pass here: the service hands each to link_flap as it lands.)
Ticks come on top of the gaps. A tick with no data since the previous one is skipped when time jumps over it (a
trace's quiet stretch); a live clock polls often enough that it never does.

Pure: the caller says what arrived when (`arrived`), asks what is due (`due`) and says what ran (`ran`).
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum


class PassKind(Enum):
    FULL = "full"  # every detector, between ticks (new samples)
    TICK = "tick"  # every detector, on the tick boundary


@dataclass(frozen=True, slots=True)
class Pass:
    kind: PassKind
    at: int  # when it is due (ns, the caller's clock)


@dataclass
class PassSchedule:
    tick_ns: int
    gap_ns: int = 0  # minimum gap between FULL passes; 0: none between ticks
    settle_ns: int = 0
    guard_ns: int = 0
    tick_end: int | None = None  # the next tick boundary; None until `start` or the first arrival
    samples_since: int | None = None  # first sample arrival no pass has seen
    last_full: int | None = None

    def boundary_after(self, t: int) -> int:
        return (t // self.tick_ns + 1) * self.tick_ns

    def start(self, now: int) -> None:
        self.tick_end = self.boundary_after(now)

    def arrived(self, t: int) -> None:
        """New samples arrived at `t`."""
        if self.tick_end is None:
            self.start(t)
        if self.samples_since is None:
            self.samples_since = t

    def due(self, now: int) -> Pass | None:
        """The pass due at or before `now`, earliest first (ask again after each `ran`), or None."""
        if self.tick_end is None:
            return None
        limit = self.tick_end - self.guard_ns
        if self.gap_ns and self.samples_since is not None:
            at = self.samples_since + self.settle_ns
            if self.last_full is not None:
                at = max(at, self.last_full + self.gap_ns)
            if at < limit and at <= now:
                return Pass(PassKind.FULL, at)
        if now >= self.tick_end:
            return Pass(PassKind.TICK, self.tick_end)
        return None

    def ran(self, p: Pass, at: int, now: int) -> None:
        """`p` ran at `at` (its due time in a replay, the clock's time live); `now` is the time `due` was asked."""
        self.samples_since = None
        if p.kind is PassKind.FULL:
            self.last_full = at
        else:
            self.tick_end = self.boundary_after(max(now, p.at))
