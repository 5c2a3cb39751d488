"""What the floor's decisions read of a hold or a refused newcomer (floor.py, floor_swap.py)."""

from __future__ import annotations

from fabricd.service.capacity_floor import flap_harm
from topology.units import NS

from ..config import RemediationSettings
from ..state import ActionStatus, StoredFinding

# the actions that change (or will change) a port: a refused or observed one leaves it as it was
CHANGED: tuple[ActionStatus, ...] = ("awaiting_approval", "running", "done")


def harm_of(found: StoredFinding | None, now: int, s: RemediationSettings) -> tuple[float, bool]:
    """(loss rate while up, still faulty) of a hold's or a newcomer's finding: a corrupting link's measured loss rate,
    faulty above `max_return_loss`; a flap train's share of its window spent flapping, faulty until it has been quiet
    `return_quiet_s`. Without a finding (adopted, re-applied) nothing says it is still faulty."""
    if found is None:
        return 0.0, False
    evidence = found.get("evidence")
    evidence = evidence if isinstance(evidence, dict) else {}
    if found.get("kind") == "link_corruption":
        rate = evidence.get("loss_rate")
        loss = float(rate) if isinstance(rate, int | float) else 0.0
        return loss, loss > s.max_return_loss
    flaps = evidence.get("timeline")
    timeline = [int(t) for t in flaps if isinstance(t, int | float)] if isinstance(flaps, list) else []
    if not timeline:
        return 0.0, False
    window = max((timeline[-1] - timeline[0]) / NS, 60.0)
    return flap_harm(len(timeline), window), (now - timeline[-1]) / NS < s.return_quiet_s
