"""fabricd's own holds against each switch's capacity floor: which held ports to give back, which to swap. Pure.

The guard (guard.py) is asked only when fabricd acts; once a port is held, the fabric around it can get worse (another
uplink's BGP session drops, a link goes down, a drain starts) and the hold can become part of a shortfall. CorrOpt
(SIGCOMM 2017; shared/reference/congestion-tuning.md §6.1, rule 11 of §7) treats the set of disabled links as one
decision over the fabric, re-made whenever capacity changes, minimising the loss left on the links kept up under a
per-ToR capacity constraint. Two decisions here:

- `restore`: a switch is under `min_uplink_fraction` and one or more of its missing uplinks is a fabricd hold (either
  end): return the fewest held ports that restore every such floor, the least harmful first; never a port pinned
  down (its cable is wrong, an open `miscabled` finding) and never one still faulty (a flap train not yet quiet, a
  corruption above `max_return_loss`); when nothing returnable restores a floor, say so once per switch (`Stuck`).
  Drains are an operator's decision and count as lost, never returned; a switch a drain now leaves under its floor
  is `Stuck` too (reported, not undone).
- `choose`: CorrOpt's optimizer over a candidate set (held ports and faulty newcomers the guard refused for capacity):
  the feasible set to hold down that leaves the least loss on the links kept up, found by growing feasible sets
  from the singletons with every superset of an infeasible set pruned (capacity only falls as a set grows, so such a
  superset is infeasible too). A change of set (a swap) is taken only when it at least halves the loss left up:
  hysteresis, so two faults of about the same cost never trade places back and forth.

Harm is a loss rate (the fraction of packets a link drops while up): a corrupting link's measured loss rate; for a
flapping link the fraction of time it is down converging (`flap_harm`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum
from itertools import combinations
from weakref import WeakKeyDictionary

from topology.fabric import Fabric
from topology.model import Endpoint, Link

from .guard import is_uplink

# A swap must at least halve the loss left on the links kept up (fabricd's hysteresis, not a published figure).
SWAP_MARGIN = 2.0
# Subsets examined at most per decision before falling back to the greedy choice (16 candidates = 65,536 subsets; a
# switch's floor is contended by a handful of links in practice).
MAX_SUBSETS = 65_536
# Each flap costs about this much outage while routing converges around it (BFD/BGP and ECMP repair take ~1 s on
# the underlay fabricd drives; shared/reference/domain.md). A flap rate becomes a loss rate through it.
FLAP_OUTAGE_S = 1.0


def flap_harm(flaps: int, window_s: float) -> float:
    """A flapping link's loss rate: the fraction of the window it spends down converging, at most 1."""
    if window_s <= 0:
        return 1.0 if flaps else 0.0
    return min(1.0, flaps * FLAP_OUTAGE_S / window_s)


class Lost(StrEnum):
    """Why an uplink is out of service for a reason other than fabricd's hold."""

    LINK_DOWN = "link_down"
    BGP_DOWN = "bgp_down"
    DRAINED = "drained"


_LOST_TEXT = {
    Lost.LINK_DOWN: "{port} is down",
    Lost.BGP_DOWN: "{port}'s BGP session is down",
    Lost.DRAINED: "{port} is drained",
}


@dataclass(frozen=True)
class Held:
    """A port fabricd holds down (or would: a newcomer the guard refused), with what keeping it up costs."""

    port: Endpoint
    harm: float  # loss rate while up (see module doc)
    faulty: bool = False  # still faulty: flapping within the quiet time, or corrupting above max_return_loss
    pinned: str = ""  # why it may never be returned (a wrong cable, an open miscabled finding); "" = may be


@dataclass(frozen=True)
class Floor:
    """The capacity picture fabricd decides in: what is lost for other reasons, and the floor."""

    lost: Mapping[Endpoint, Lost]
    min_fraction: float


@dataclass(frozen=True)
class Return:
    port: Endpoint
    why: str  # e.g. "returned to keep leaf-g0-r1 at 3 of 4 uplinks (Ethernet5/1's BGP session is down)"


@dataclass(frozen=True)
class Stuck:
    device: str
    why: str  # e.g. "leaf-g0-r1 under its floor (2 of 4 uplinks, 50 % < 75 %): both candidates still faulty"


@dataclass(frozen=True)
class Restore:
    returns: tuple[Return, ...]
    stuck: tuple[Stuck, ...]


@dataclass(frozen=True)
class Choice:
    hold: frozenset[Endpoint]  # the set to hold down
    take: tuple[Endpoint, ...]  # newcomers to disable (through the guard, with `give` returned first)
    give: tuple[Endpoint, ...]  # held ports to return for them
    loss_left: float  # Σ harm of the candidates left up with `hold`


# Per fabric (the blueprint lives as long as the service), each switch's uplinks and each port's switches: the
# optimizer asks for them once per subset it examines (a chaos run: 1-2.5 s stalls of the service's loop when they
# were recomputed every time, found by loop_watch.py).
_UPLINKS: WeakKeyDictionary[Fabric, dict[str, list[Link]]] = WeakKeyDictionary()
_SWITCHES: WeakKeyDictionary[Fabric, dict[Endpoint, list[str]]] = WeakKeyDictionary()


def _uplinks(fabric: Fabric, device: str) -> list[Link]:
    known = _UPLINKS.setdefault(fabric, {})
    ups = known.get(device)
    if ups is None:
        ups = known[device] = [lk for lk in fabric.links_of(device) if is_uplink(fabric, device, lk)]
    return ups


def _down(link: Link, gone: Iterable[Endpoint] | frozenset[Endpoint]) -> bool:
    return link.a in gone or link.b in gone


def _share(fabric: Fabric, device: str, gone: frozenset[Endpoint]) -> tuple[int, int, float]:
    """(uplinks up, uplinks, fraction of uplink capacity up) of a switch with `gone` out of service."""
    ups = _uplinks(fabric, device)
    total = sum(float(lk.speed_gbps or 1) for lk in ups)
    left = sum(float(lk.speed_gbps or 1) for lk in ups if not _down(lk, gone))
    n_up = sum(1 for lk in ups if not _down(lk, gone))
    return n_up, len(ups), (left / total if total else 1.0)


def _switches_of(fabric: Fabric, port: Endpoint) -> list[str]:
    """The switches whose uplink capacity this port's link is part of (the lower end of a leaf-spine link)."""
    known = _SWITCHES.setdefault(fabric, {})
    found = known.get(port)
    if found is None:
        found = known[port] = _switches_of_link(fabric, port)
    return found


def _switches_of_link(fabric: Fabric, port: Endpoint) -> list[str]:
    link = fabric.link_of(port.device, port.port)
    if link is None:
        return []
    out = []
    for end in (link.a, link.b):
        dev = fabric.get(end.device)
        if dev is not None and dev.is_switch and is_uplink(fabric, end.device, link):
            out.append(end.device)
    return out


def _short(fabric: Fabric, floor: Floor, devices: Iterable[str], gone: frozenset[Endpoint]) -> list[str]:
    return sorted(d for d in set(devices) if _share(fabric, d, gone)[2] < floor.min_fraction)


def _lost_text(fabric: Fabric, floor: Floor, device: str) -> str:
    """The uplinks of `device` lost for other reasons, named by the device's own port."""
    parts = []
    for lk in _uplinks(fabric, device):
        mine = lk.a if lk.a.device == device else lk.b
        why = floor.lost.get(lk.a) or floor.lost.get(lk.b)
        if why is not None:
            parts.append(_LOST_TEXT[why].format(port=mine.port))
    return "; ".join(parts)


def _groups(fabric: Fabric, candidates: Sequence[Held]) -> list[list[Held]]:
    """The candidates in groups that share a switch (directly or through others), each in the given order."""
    parent: dict[str, str] = {}

    def root(x: str) -> str:
        while parent.setdefault(x, x) != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    keys = [_switches_of(fabric, c.port) or [f"port {c.port}"] for c in candidates]
    for first, *rest in keys:
        for other in rest:
            parent[root(other)] = root(first)
    out: dict[str, list[Held]] = {}
    for c, key in zip(candidates, keys, strict=True):
        out.setdefault(root(key[0]), []).append(c)
    return list(out.values())


def uplink_ends(fabric: Fabric) -> list[Endpoint]:
    """Every switch's own end of each of its uplinks, sorted (what the optimizer's candidates are drawn from)."""
    ends = []
    for d in fabric.devices():
        if d.is_switch:
            ends += [lk.a if lk.a.device == d.name else lk.b for lk in _uplinks(fabric, d.name)]
    return sorted(ends, key=str)


def restore(fabric: Fabric, floor: Floor, held: Sequence[Held]) -> Restore:
    """The held ports to return so that no switch stays under its floor with a fabricd hold among its missing
    uplinks: the fewest, then the least harmful; what cannot be restored is `stuck`."""
    lost = frozenset(floor.lost)
    holds = frozenset(h.port for h in held)
    gone = lost | holds
    # a drain is an operator's, never undone, but a switch it now leaves under its floor is reported (issue 49)
    drains = [p for p, why in floor.lost.items() if why is Lost.DRAINED]
    ours = {d for p in [*(h.port for h in held), *drains] for d in _switches_of(fabric, p)}
    short = _short(fabric, floor, ours, gone)
    if not short:
        return Restore((), ())
    helps = [
        h for h in sorted(held, key=lambda h: (h.harm, str(h.port))) if set(_switches_of(fabric, h.port)) & set(short)
    ]
    free = [h for h in helps if not h.pinned and not h.faulty]

    def fixes(chosen: Sequence[Held]) -> bool:
        return not _short(fabric, floor, short, gone - {h.port for h in chosen})

    best: tuple[Held, ...] | None = None
    for k in range(1, len(free) + 1):
        sets = [c for c in combinations(free, k) if fixes(c)]
        if sets:
            best = min(sets, key=lambda c: (sum(h.harm for h in c), [str(h.port) for h in c]))
            break
    chosen: tuple[Held, ...] = best if best is not None else tuple(free)
    after = gone - {h.port for h in chosen}
    returns = []
    for h in chosen:
        dev = next(d for d in _switches_of(fabric, h.port) if d in short)
        n_up, n, _ = _share(fabric, dev, after)
        lost_text = _lost_text(fabric, floor, dev)
        why = f"returned to keep {dev} at {n_up} of {n} uplinks" + (f" ({lost_text})" if lost_text else "")
        returns.append(Return(h.port, why))
    stuck = []
    for dev in _short(fabric, floor, short, after):
        n_up, n, frac = _share(fabric, dev, after)
        lost_text = _lost_text(fabric, floor, dev)
        left = [h for h in helps if h not in chosen and dev in _switches_of(fabric, h.port)]
        kinds = sorted({"pinned down: " + h.pinned if h.pinned else "still faulty" for h in left})
        what = {1: "its candidate", 2: "both candidates"}.get(len(left), f"all {len(left)} candidates")
        stuck.append(
            Stuck(
                dev,
                f"{dev} under its floor ({n_up} of {n} uplinks, {frac:.0%} < {floor.min_fraction:.0%}): "
                + (f"{what} {', '.join(kinds)}" if left else f"no hold of fabricd's left to return ({lost_text})"),
            )
        )
    return Restore(tuple(returns), tuple(stuck))


def choose(fabric: Fabric, floor: Floor, candidates: Sequence[Held], held: frozenset[Endpoint]) -> Choice:
    """CorrOpt's optimizer: the set of candidates to hold down, feasible at every floor, with the least loss left on
    the candidates kept up; pinned held ports stay in every set. The current holds are kept unless another set at
    least halves the loss left up (`SWAP_MARGIN`)."""
    lost = frozenset(floor.lost)
    forced = frozenset(c.port for c in candidates if c.pinned and c.port in held)
    free = sorted((c for c in candidates if c.port not in forced), key=lambda c: (-c.harm, str(c.port)))
    harm = {c.port: c.harm for c in candidates}
    total = sum(harm.values())

    def feasible(chosen: frozenset[Endpoint]) -> bool:
        """Every switch a newly taken port touches keeps its floor (a switch already short with only holds of
        before is `restore`'s to mend, not made worse here)."""
        gone = lost | forced | chosen
        devs = {d for p in chosen - held for d in _switches_of(fabric, p)}
        return not _short(fabric, floor, devs, gone)

    def loss_left(chosen: frozenset[Endpoint]) -> float:
        return total - sum(harm[p] for p in chosen | forced)

    def held_down(chosen: frozenset[Endpoint]) -> float:
        return sum(harm[p] for p in chosen)

    # The floors of different switches are independent: candidates that share no switch never constrain each other,
    # so the best set is the union of each group's best (loss is additive), and each group is small (a switch's
    # contenders) where the fabric-wide search would grow with 2^candidates.
    best = frozenset[Endpoint]()
    for group in _groups(fabric, free):
        found = frozenset[Endpoint]()
        seen = 0
        frontier = [frozenset[Endpoint]()]
        infeasible: set[frozenset[Endpoint]] = set()
        while frontier and seen < MAX_SUBSETS:
            nxt: dict[frozenset[Endpoint], None] = {}
            for base in frontier:
                for c in group:
                    if c.port in base:
                        continue
                    grown = base | {c.port}
                    if grown in nxt or any(bad <= grown for bad in infeasible):
                        continue
                    seen += 1
                    if feasible(grown):
                        nxt[grown] = None
                        if held_down(grown) > held_down(found) + 1e-15:
                            found = grown
                    else:
                        infeasible.add(grown)
            frontier = list(nxt)
        if seen >= MAX_SUBSETS:  # greedy: the most harmful first, each kept if still feasible
            found = frozenset()
            for c in group:
                if feasible(found | {c.port}):
                    found = found | {c.port}
        best = best | found
    current = frozenset(p for p in held if p not in forced and p in harm)
    # a hold that stays feasible beside the chosen set stays held: giving it back leaves more loss up, never less
    # (a chaos replay: an adopted hold, of no measured harm, given back "to make room" for newcomers on five other
    # switches, which the hourly rate had refused and went on refusing)
    for p in sorted(current - best, key=lambda p: (-harm[p], str(p))):
        if feasible(best | {p}):
            best = best | {p}
    if loss_left(best) * SWAP_MARGIN > loss_left(current) - 1e-15:
        best = current  # not worth a change
    hold = best | forced
    return Choice(
        hold=hold,
        take=tuple(sorted((p for p in best if p not in held), key=str)),
        give=tuple(sorted((p for p in current if p not in best), key=str)),
        loss_left=loss_left(best),
    )
