"""What the counter store and its snapshots share: the array types, "never", the ingestion statistics, state events."""

from __future__ import annotations

from dataclasses import dataclass
from enum import IntEnum

import numpy as np
import numpy.typing as npt

NEVER = np.iinfo(np.int64).min
NAN = float("nan")

I64 = npt.NDArray[np.int64]
U64 = npt.NDArray[np.uint64]
F64 = npt.NDArray[np.float64]


class Stat(IntEnum):
    """Per-device counters of what ingestion saw."""

    NOTIFICATIONS = 0
    UPDATES = 1
    DUPLICATES = 2
    OUT_OF_ORDER = 3
    RESETS = 4
    WRAPS = 5
    UNKNOWN = 6
    MALFORMED = 7
    DELETES = 8
    SYNCS = 9


@dataclass(frozen=True, slots=True)
class StateEvent:
    device: str
    port: str
    leaf: str
    value: str
    previous: str | None  # None on the first value fabricd sees
    ts: int


def stale(last_seen: int, now: int, interval: int) -> bool:
    """Stale once nothing (update, heartbeat, sync) arrived for 3 intervals, or never."""
    return last_seen == NEVER or now - last_seen > 3 * interval
