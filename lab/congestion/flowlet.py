"""Flowlet load balancing over one ECMP group (DLB / SONiC ARS `per_flowlet_quality`, reference §4).

Each flow sends messages back to back at line rate with idle times between them. A message that starts after an
idle time of at least the group's inactivity gap starts a new flowlet, which the switch may put on another member:
the one of best quality (least recent load; reference §4 weighs load and queue size equally, here only load,
ASSUMPTION). Moving a flow from member i to member j reorders its packets when the first packet on j overtakes the
last one on i: idle + delay_j < delay_i, i.e. when idle < delay_i - delay_j. So reorders need a gap below the
group's path-delay skew (reference §4, §7 rule 8); a long gap rarely lets a flow move, and the hash's first
placement stays (imbalance).

Vectorised over flows: the k-th message of every flow is handled in one round (messages of one round go to the
members in increasing order of load, as many as keeps them even).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

# The load a member is judged by decays with this time constant: SONiC ARS samples every 16 us and weighs past
# against current load (reference §4); one message round is a few tens of us here, so a few rounds of memory.
LOAD_MEMORY_S = 100e-6


@dataclass(frozen=True)
class FlowletResult:
    flowlets: int  # messages that began a new flowlet (idle >= gap)
    moves: int  # flowlets put on another member (SAI ARS next-hop reassignments)
    reorders: int  # moves whose first packets overtook the previous flowlet's last ones
    member_bytes: np.ndarray  # bytes each member carried
    duration_s: float

    @property
    def imbalance(self) -> float:
        """(max - mean) / mean of the members' bytes: 0 when even."""
        mean = float(self.member_bytes.mean())
        return float(self.member_bytes.max() / mean - 1) if mean > 0 else 0.0


def simulate_flowlets(
    path_delay_s: Sequence[float],
    gap_s: float,
    flows: int = 32,
    messages: int = 400,
    message_bytes: float = 64 * 1024,
    line_bps: float = 400e9,
    idle_s: tuple[float, float] = (0.0, 20e-6),
    seed: int = 1,
) -> FlowletResult:
    """`path_delay_s`: each member's one-way delay to the merge point; `idle_s`: the range idle times are drawn from
    (uniform, seeded: the same run gives the same counts)."""
    rng = np.random.default_rng(seed)
    delay = np.asarray(path_delay_s, dtype=np.float64)
    m = len(delay)
    burst = message_bytes * 8 / line_bps
    member = rng.integers(0, m, flows)  # the hash's first placement
    load = np.zeros(m)
    carried = np.zeros(m)
    clock = np.zeros(flows)  # when each flow's last message ended
    flowlets = moves = reorders = 0
    decay = np.exp(-(burst + np.mean(idle_s)) / LOAD_MEMORY_S)
    for k in range(messages):
        idle = rng.uniform(idle_s[0], idle_s[1], flows) if k else np.full(flows, np.inf)
        new = idle >= gap_s
        flowlets += int(new.sum()) if k else 0
        if k and new.any():
            movers = np.nonzero(new)[0]
            # fill the least loaded members first: each mover takes the member of lowest load, then counts on it
            order = np.argsort(load, kind="stable")
            choice = order[np.arange(len(movers)) % m]
            moved = choice != member[movers]
            moves += int(moved.sum())
            overtakes = idle[movers] + delay[choice] < delay[member[movers]]
            reorders += int((moved & overtakes).sum())
            member[movers] = choice
        clock += np.where(np.isinf(idle), 0.0, idle) + burst
        load = load * decay + np.bincount(member, minlength=m) * message_bytes
        carried += np.bincount(member, minlength=m) * message_bytes
    return FlowletResult(flowlets, moves, reorders, carried, float(clock.max()))
