"""What a collector knows of a lease bucket, by its own clock: pure, fed by a watch on the bucket.

A collector used to find free switches by listing both lease buckets every round (two consumers created and deleted
on the bus each time) and could take a dead collector's switch only after the bus expired its key: the TTL from
the last renewal, plus the bus's expiry timer, plus the next listing. Watching the bucket, it sees every renewal as
it happens and so knows, on its own clock, when a key last changed. A key not rewritten for a whole TTL after it
was seen belongs to a holder that stopped renewing: that holder's `Collector.holds()` turned false at the latest a
TTL after it *sent* that renewal, which was before the watch delivered it, so the key can be taken at once with a
compare-and-set on the revision seen (a renewal that did arrive in between changed the revision: the take fails).
No clock is compared across machines; only intervals measured by the one that takes over.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field


class Op(enum.Enum):
    PUT = "put"
    DELETE = "delete"  # deleted or purged: given back, or the bus's own expiry marker


def op_of(operation: str | None) -> Op:
    """nats-py's Entry.operation: None for a value, "DEL" or "PURGE" for a removal."""
    return Op.PUT if operation is None else Op.DELETE


@dataclass
class LeaseView:
    ttl: float
    seen: dict[str, tuple[int, float]] = field(default_factory=dict)  # key -> (revision, when first seen)
    last_event: float = float("-inf")  # when the watch last delivered anything

    def saw(self, key: str, revision: int, op: Op, now: float) -> None:
        self.last_event = now
        if op is Op.DELETE:
            self.seen.pop(key, None)
            return
        known = self.seen.get(key)
        if known is None or known[0] != revision:
            self.seen[key] = (revision, now)

    def live(self, now: float) -> set[str]:
        """Keys rewritten less than a TTL before now (their holder may still be streaming)."""
        return {k for k, (_, t) in self.seen.items() if now - t < self.ttl}

    def abandoned(self, now: float) -> dict[str, int]:
        """Keys not rewritten for a TTL or more since seen: key -> the revision to take over with a compare-and-set.
        The bus may have expired them already (then the take fails and a create succeeds)."""
        return {k: rev for k, (rev, t) in self.seen.items() if now - t >= self.ttl}

    def next_lapse(self, now: float) -> float:
        """When the next key seen live becomes abandoned (a TTL after it was seen), or +inf: a collector waits for
        that instant rather than for its next claim round, so a dead holder's switches are taken when they can be,
        not up to a round later."""
        return min((t + self.ttl for _, t in self.seen.values() if t + self.ttl > now), default=float("inf"))

    def fresh(self, now: float, within: float) -> bool:
        """The watch delivered something within `within`: a collector renews its own member key every third of a
        TTL, so a watch on the member bucket that went quiet longer is broken (the bus restarted, a slow consumer)
        and its view of who renews is not to be trusted for taking leases over."""
        return now - self.last_event < within
