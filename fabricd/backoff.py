"""The one retry delay of fabricd: exponential backoff, capped, with or without full jitter.

The n-th delay's bound is min(cap_s, base_s * 2**n). With jitter (the default) the delay is uniform in [0, bound]
("full jitter", AWS Architecture Blog, "Exponential Backoff And Jitter", 2015): many clients that lost the same
server do not come back in step. Without it the delay is the bound itself, for one retrier whose log should say
exactly when the next try is. Used by gNMI reconnects, telemetry worker restarts and ticket webhook retries.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field


@dataclass
class Backoff:
    base_s: float = 0.5
    cap_s: float = 30.0
    jitter: bool = True
    rng: random.Random = field(default_factory=random.Random)
    attempt: int = 0

    def __post_init__(self) -> None:
        if self.base_s <= 0 or self.cap_s < self.base_s:
            raise ValueError("backoff needs base_s > 0 and cap_s >= base_s")

    def bound(self) -> float:
        return min(self.cap_s, self.base_s * 2.0**self.attempt)

    def next(self) -> float:
        b = self.bound()
        if b < self.cap_s:  # stop counting once capped (2**attempt must not overflow a float on a long outage)
            self.attempt += 1
        return self.rng.uniform(0.0, b) if self.jitter else b

    def reset(self) -> None:
        self.attempt = 0
