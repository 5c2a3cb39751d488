"""The server NICs' DCQCN counters, as ConnectX keeps them (reference/congestion-tuning.md §3.3 [mlx5-counters]):
`np_ecn_marked_roce_packets` (CE-marked RoCE packets the NIC received), `np_cnp_sent` (CNPs its notification point
sent for them), `rp_cnp_handled` (CNPs its reaction point acted on: each cut a rate), `rp_cnp_ignored` (CNPs received
and not acted on). A real host reads them in `/sys/class/infiniband/<dev>/ports/<p>/hw_counters/<name>`; the twin has
no host, so they are kept per server port of the leaf (the NIC on its far end) and served by the control API
(`GET /congestion` `nics`), not by any switch.

Where they come from: each congested queue's marks and CNPs (the congestion model) are followed along the traffic to
the NICs at either end. Marks go downstream to the receivers: what a queue sends leaves each next switch by its
egresses in proportion to what they send (valley-free: what came down is not sent up again). CNPs go back to the
senders: what arrives on an ingress was fed, at the previous switch, by that switch's ingresses in proportion to what
they received (the twin's `_feed`, valley-free likewise). Pure over the traffic's arrays: no twin import.

ASSUMPTIONS (no figure in the reference): congestion control is enabled on the lossless priority of every NIC, so
no CNP is ignored (`rp_cnp_ignored` stays 0) and every CNP cuts (`rp_cnp_handled` = the CNPs the senders receive);
a DR that generates CNPs for long-haul traffic signals instead of marking CE, so the far receivers see no CE and send
no CNP for that queue (its CNPs are the DR's: `rp_cnp_handled` rises at the senders, `np_*` do not).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

# ConnectX hw_counters names (reference §3.3), in the order of the twin's counter columns (lab/counters.py)
NAMES = ("np_ecn_marked_roce_packets", "np_cnp_sent", "rp_cnp_handled", "rp_cnp_ignored")
MAX_HOPS = 6  # a Clos path has at most 4 switch hops (leaf, spine, superspine, spine, leaf): a bound, not a guess


@dataclass(frozen=True)
class Fabric:
    """Per switch (the traffic model's node order): what each port faces and carries now."""

    server: list[np.ndarray]  # bool per row: a server NIC on the far end
    up: list[np.ndarray]  # bool per row: a switch of a higher tier on the far end
    peer: list[np.ndarray]  # far switch node, -1 if none of this twin (a NIC, a far campus)
    peer_row: list[np.ndarray]
    sent: list[np.ndarray]  # bytes/s each port sends
    feed: Callable[[int, int], np.ndarray]  # (switch, egress row) -> bytes/s each ingress row brings it


def receivers(f: Fabric, x: int, row: int, amount: float) -> dict[tuple[int, int], float]:
    """`amount` leaving switch x by `row`, spread over the server ports it ends at: {(switch, row): share}."""

    def onward(z: int, r: int) -> np.ndarray:
        # what came down from above leaves by any port but up; what came up may go anywhere but back
        weights: np.ndarray = f.sent[z] * (~f.up[z] if f.up[z][r] else 1.0)
        weights[r] = 0.0
        return weights

    return _walk(f, x, {row: amount}, onward)


def senders(f: Fabric, x: int, brought: dict[int, float]) -> dict[tuple[int, int], float]:
    """What each ingress row of switch x `brought` (an amount per row), traced back to the server ports it came in
    by: {(switch, row): share}."""
    return _walk(f, x, brought, f.feed)


def _walk(
    f: Fabric, x: int, start: dict[int, float], spread: Callable[[int, int], np.ndarray]
) -> dict[tuple[int, int], float]:
    """Amounts on rows of switch x, carried hop by hop to the server ports they end at: an amount on a server row
    stays there; on a switch row it crosses the cable to the far switch's row, where `spread(switch, row)` gives the
    weights (unscaled) of that switch's rows it goes on by (receivers: the egresses; senders: the ingresses)."""
    out: dict[tuple[int, int], float] = {}
    frontier = {x: np.zeros(len(f.sent[x]))}
    for r, a in start.items():
        frontier[x][r] += a
    for _ in range(MAX_HOPS):
        crossed: dict[int, np.ndarray] = {}  # per far switch: what reached each of its rows
        for y, here in frontier.items():
            _collect(out, y, here * f.server[y])
            away = here * ~f.server[y] * (f.peer[y] >= 0)
            for r in np.nonzero(away)[0].tolist():
                z = int(f.peer[y][r])
                crossed.setdefault(z, np.zeros(len(f.sent[z])))[f.peer_row[y][r]] += away[r]
        frontier = {}
        for z, reached in crossed.items():
            going = np.zeros(len(f.sent[z]))
            for r in np.nonzero(reached)[0].tolist():
                weights = spread(z, r)
                total = float(weights.sum())
                if total > 0:
                    going += reached[r] * weights / total
            frontier[z] = going
        if not frontier:
            break
    return out


def _collect(out: dict[tuple[int, int], float], x: int, values: np.ndarray) -> None:
    for r in np.nonzero(values)[0].tolist():
        out[(x, r)] = out.get((x, r), 0.0) + float(values[r])
