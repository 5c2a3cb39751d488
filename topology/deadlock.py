"""PFC deadlock risk of a fabric with failed links (reference/domain.md, "PFC deadlock").

A deadlock is a cycle of lossless egress queues, each paused by the next (a cyclic buffer dependency). In a
healthy Clos it cannot form: routes go up the tiers, then down (valley-free), so a queue only ever waits on a
queue higher up, or lower down after the turn. Failed links can leave a pair of leaves with no valley-free path;
its traffic then goes down and up again (a bounce, e.g. leaf -> spineA -> leafX -> spineB -> leaf), and bounces
in opposite directions can close a cycle.

Routing model (the steady state BGP/IGP converge to after the failure):
- traffic runs between every pair of leaves (servers hang off leaves; cross-rail pairs climb to the superspines);
- a pair uses all its shortest valley-free paths over the links still up (ECMP);
- a pair left without any valley-free path uses all its shortest paths over the links still up: the bounce;
- only leaves, spines and superspines of this campus forward (DRs and servers are never transit);
- parallel cables between two switches are one ECMP bundle: the hop stays usable while one of them is up.

Channels are hops (the egress queues of a switch toward one neighbour); a route using hop a->b then b->c makes
(a,b) wait on (b,c). Valley-free routes alone never close a cycle, so every cycle holds at least one bounce; a
fabric where no pair bounces is answered without building the graph: one bitset AND per leaf pair (pod-16k, 832
switches: 0.5 s). When pairs do bounce, the work is one breadth-first search per destination leaf and a turn graph
holding every turn in use: small-pod takes ~10 ms, a 164-switch pod ~2 s; a 16k-GPU pod with bouncing pairs
would hold millions of turns (every spine->superspine->spine) and needs a region limit that is not built yet.
"""

from __future__ import annotations

import itertools
import re
from collections import defaultdict, deque
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from functools import partial

import networkx as nx

from topology.errors import InputError
from topology.fabric import Fabric
from topology.model import TIER, Link, Role

ROUTED = frozenset({Role.LEAF, Role.SPINE, Role.SUPERSPINE})
MAX_CYCLES = 64
MAX_HOPS = 8  # longer cycles reuse the bounces of shorter ones; enumerating them all explodes combinatorially
LINK_HELP = "name a link as devA:port--devB:port (one cable) or devA--devB (every cable between the two)"

Hop = tuple[str, str]  # the egress queues of hop[0] toward hop[1]
Turn = tuple[str, str, str]
State = tuple[str, int]  # (switch, 0 still climbing | 1 descending) of a valley-free walk


@dataclass(frozen=True)
class FailedLink:
    """A failed link as the user named it: one cable, or every cable between two devices."""

    name: str  # canonical: "a:p--b:q" (ends sorted) for one cable, "a--b" (sorted) for a device pair
    links: tuple[Link, ...]


@dataclass(frozen=True)
class DeadlockRisk:
    """One cycle of egress queues the routes in use can deadlock, and the failures that put it there."""

    queues: tuple[str, ...]  # "device:port", one per hop in cycle order, starting at the smallest device name
    devices: tuple[str, ...]  # the switch of each queue, same order
    parallel: tuple[tuple[str, ...], ...]  # every live egress port of each hop (parallel cables), same order
    bounces: tuple[str, ...]  # the down-then-up turns on the cycle, "spine-r0-0>leaf-g2-r0>spine-r0-1"
    failed: tuple[str, ...]  # failed links whose failure forced the bouncing routes onto this cycle
    pairs: tuple[str, ...]  # leaf pairs whose routes bounce on this cycle, "src>dst"

    @property
    def name(self) -> str:
        return " -> ".join((*self.queues, self.queues[0]))

    def to_dict(self) -> dict[str, object]:
        return {
            "cycle": list(self.queues),
            "devices": list(self.devices),
            "parallel": [list(p) for p in self.parallel],
            "bounces": list(self.bounces),
            "failed": list(self.failed),
            "pairs": list(self.pairs),
            "summary": self.summary,
        }

    @property
    def summary(self) -> str:
        cause = ", ".join(self.failed) if self.failed else "the cabling as given"
        return f"deadlock cycle {self.name}: routes bounce at {', '.join(self.bounces)} because of {cause}"


def rotate_to_min(seq: Sequence[str]) -> tuple[str, ...]:
    """The smallest rotation of a cycle (it starts at its smallest element): one name per cycle, whoever found
    it, even when a switch appears twice in it."""
    return min(tuple((*seq[i:], *seq[:i])) for i in range(len(seq)))


def port_key(port: str) -> tuple[str | int, ...]:
    """Natural order of port names (Ethernet2/1 before Ethernet10/1)."""
    return tuple(int(p) if p.isdigit() else p for p in re.split(r"(\d+)", port))


def cable_name(link: Link) -> str:
    a, b = sorted((str(link.a), str(link.b)))
    return f"{a}--{b}"


# --- naming failed links -----------------------------------------------------------------------------
def parse_link(text: str) -> tuple[str, str]:
    """`leafA:Ethernet1/1--spineB:Ethernet3/1` or `devA--devB` -> its two ends (syntax only)."""
    a, sep, b = text.strip().partition("--")
    if not sep or not a.strip() or not b.strip() or "--" in b:
        raise InputError(text, f"not a link name; {LINK_HELP}")
    return a.strip(), b.strip()


def resolve_failed(fabric: Fabric, failed: Iterable[str | tuple[str, str]]) -> list[FailedLink]:
    """The cables behind each failed link name; InputError names the link when it is not in the fabric."""
    out: dict[str, FailedLink] = {}
    for item in failed:
        a, b = parse_link(item) if isinstance(item, str) else item
        given = f"{a}--{b}"
        (da, pa), (db, pb) = (_end(fabric, e, given) for e in (a, b))
        cables = tuple(ln for ln in fabric.links_of(da) if _joins(ln, da, pa, db, pb))
        if not cables:
            raise InputError(
                given,
                f"{a} and {b} are not cabled to each other; check the ends ({LINK_HELP}; "
                "`fabricd topology export --format json` lists the links)",
            )
        name = cable_name(cables[0]) if len(cables) == 1 and (pa or pb) else "--".join(sorted((da, db)))
        out.setdefault(name, FailedLink(name, cables))
    return list(out.values())


def _end(fabric: Fabric, text: str, given: str) -> tuple[str, str | None]:
    device, _, port = text.partition(":")
    if fabric.get(device) is None:
        raise InputError(given, f"no device '{device}' in this fabric; check the name against the cabling")
    if port and fabric.link_of(device, port) is None:
        raise InputError(given, f"'{device}:{port}' is not a cabled port; {LINK_HELP}")
    return device, port or None


def _joins(link: Link, da: str, pa: str | None, db: str, pb: str | None) -> bool:
    for x, y in ((link.a, link.b), (link.b, link.a)):
        if x.device == da and y.device == db and pa in (None, x.port) and pb in (None, y.port):
            return True
    return False


# --- routes ------------------------------------------------------------------------------------------
class _Net:
    """The forwarding switches and their live hops (a hop: at least one cable of the bundle up)."""

    def __init__(self, fabric: Fabric, down: set[Link]) -> None:
        self.tier = {d.name: TIER[d.role] for d in fabric.switches() if d.role in ROUTED}
        self.ports: dict[Hop, list[str]] = defaultdict(list)
        self.adj: dict[str, set[str]] = {n: set() for n in self.tier}
        for ln in fabric.links:
            a, b = ln.a.device, ln.b.device
            if ln in down or a == b or a not in self.tier or b not in self.tier:
                continue
            self.ports[(a, b)].append(ln.a.port)
            self.ports[(b, a)].append(ln.b.port)
            self.adj[a].add(b)
            self.adj[b].add(a)
        for ports in self.ports.values():
            ports.sort(key=port_key)
        self.leaves = sorted(n for n, t in self.tier.items() if t == TIER[Role.LEAF])

    def up_sets(self) -> dict[str, int]:
        """Per switch, the bitset of switches reachable by only climbing (itself included)."""
        bit = {n: 1 << i for i, n in enumerate(self.tier)}
        up: dict[str, int] = {}
        for n in sorted(self.tier, key=lambda n: -self.tier[n]):  # higher tiers first: their sets are ready
            up[n] = bit[n]
            for m in self.adj[n]:
                if self.tier[m] > self.tier[n]:
                    up[n] |= up[m]
        return up

    def components(self) -> dict[str, int]:
        comp: dict[str, int] = {}
        for i, start in enumerate(self.tier):
            if start in comp:
                continue
            comp[start] = i
            queue = deque([start])
            while queue:
                for m in self.adj[queue.popleft()]:
                    if m not in comp:
                        comp[m] = i
                        queue.append(m)
        return comp

    # valley-free walks: states (switch, phase); climbing may go up or turn down, descending only goes down
    def vf_dist(self, dst: str) -> dict[State, int]:
        """Hops from every state to `dst` along valley-free walks (a breadth-first search backwards)."""
        dist: dict[State, int] = {(dst, 0): 0, (dst, 1): 0}
        queue = deque(dist)
        while queue:
            v, phase = x = queue.popleft()
            tv = self.tier[v]
            for u in self.adj[v]:
                tu = self.tier[u]
                preds = [(u, 0)] if phase == 0 and tu < tv else [(u, 0), (u, 1)] if phase == 1 and tu > tv else []
                for p in preds:
                    if p not in dist:
                        dist[p] = dist[x] + 1
                        queue.append(p)
        return dist

    def vf_next(self, x: State, dist: dict[State, int]) -> list[State]:
        u, phase = x
        tu, want = self.tier[u], dist[x] - 1
        out: list[State] = []
        for v in self.adj[u]:
            tv = self.tier[v]
            y = (v, 0) if tv > tu and phase == 0 else (v, 1) if tv < tu else None
            if y is not None and dist.get(y) == want:
                out.append(y)
        return out

    def dist(self, dst: str) -> dict[str, int]:
        dist = {dst: 0}
        queue = deque([dst])
        while queue:
            v = queue.popleft()
            for u in self.adj[v]:
                if u not in dist:
                    dist[u] = dist[v] + 1
                    queue.append(u)
        return dist

    def next_hops(self, x: State, dist: dict[str, int]) -> list[State]:
        """Next hops on the shortest paths, valley or not (the phase is unused: always 0)."""
        u = x[0]
        return [(v, 0) for v in self.adj[u] if dist.get(v) == dist[u] - 1]


def _walk(starts: Iterable[State], step: dict[State, list[State]], nxt: Callable[[State], list[State]]) -> None:
    """Fill `step` with the next states of every state reachable from `starts` (`nxt(state)` gives them)."""
    queue = deque(s for s in starts if s not in step)
    seen = set(queue)
    while queue:
        x = queue.popleft()
        step[x] = nxt(x)
        for y in step[x]:
            if y not in seen:
                seen.add(y)
                queue.append(y)


def _turns(step: dict[State, list[State]]) -> Iterable[Turn]:
    for x, ys in step.items():
        for y in ys:
            for z in step.get(y, ()):
                yield x[0], y[0], z[0]


def deadlock_risk(
    fabric: Fabric,
    failed: Iterable[str | tuple[str, str] | FailedLink] = (),
    *,
    max_cycles: int = MAX_CYCLES,
    max_hops: int = MAX_HOPS,
) -> list[DeadlockRisk]:
    """Cycles of egress queues the routes in use close once `failed` links are down (shortest first).

    `failed` holds link names (`a:p--b:q`, `a--b`), end pairs, or resolved FailedLinks; an unknown device or
    link raises InputError naming it. At most `max_cycles` cycles of at most `max_hops` hops are returned.
    """
    items = list(failed)
    fails = [f for f in items if isinstance(f, FailedLink)]
    fails += resolve_failed(fabric, [f for f in items if not isinstance(f, FailedLink)])
    down = {ln for f in fails for ln in f.links}
    net = _Net(fabric, down)
    up, comp = net.up_sets(), net.components()
    bouncing = [
        (s, d)
        for s, d in itertools.permutations(net.leaves, 2)
        if not up[s] & up[d] and comp[s] == comp[d]  # no common ancestor: no valley-free path, yet connected
    ]
    if not bouncing:
        return []
    healthy = _Net(fabric, set())
    turns: set[Turn] = set()
    bounce_pairs: dict[Turn, set[tuple[str, str]]] = defaultdict(set)
    by_dst: dict[str, list[str]] = defaultdict(list)
    for s, d in bouncing:
        by_dst[d].append(s)
    for d in net.leaves:
        vf = net.vf_dist(d)
        step: dict[State, list[State]] = {}
        _walk([(s, 0) for s in net.leaves if s != d and (s, 0) in vf], step, partial(net.vf_next, dist=vf))
        turns.update(_turns(step))
        if d not in by_dst:
            continue
        dist = net.dist(d)
        for s in by_dst[d]:
            plain: dict[State, list[State]] = {}
            _walk([(s, 0)], plain, partial(net.next_hops, dist=dist))
            for t in _turns(plain):
                turns.add(t)
                if net.tier[t[1]] < net.tier[t[0]] and net.tier[t[1]] < net.tier[t[2]]:
                    bounce_pairs[t].add((s, d))
    causes = _causes(net, healthy, fails, {p for ps in bounce_pairs.values() for p in ps})
    return _cycles(net, turns, bounce_pairs, causes, max_cycles, max_hops)


def _causes(
    net: _Net, healthy: _Net, fails: list[FailedLink], pairs: set[tuple[str, str]]
) -> dict[tuple[str, str], set[str]]:
    """Per bouncing pair, the failed links that cut a hop of one of its healthy valley-free paths."""
    by_hop: dict[frozenset[str], set[str]] = defaultdict(set)
    for f in fails:
        for ln in f.links:
            hop = frozenset((ln.a.device, ln.b.device))
            if len(hop) == 2 and not net.ports.get((ln.a.device, ln.b.device)):  # the whole bundle is down
                by_hop[hop].add(f.name)
    out: dict[tuple[str, str], set[str]] = {}
    dists: dict[str, dict[State, int]] = {}
    for s, d in pairs:
        if d not in dists:
            dists[d] = healthy.vf_dist(d)
        vf = dists[d]
        step: dict[State, list[State]] = {}
        _walk([(s, 0)], step, partial(healthy.vf_next, dist=vf))
        hops = {frozenset((x[0], y[0])) for x, ys in step.items() for y in ys}
        out[(s, d)] = {name for hop in hops & by_hop.keys() for name in by_hop[hop]}
    return out


def _cycles(
    net: _Net,
    turns: set[Turn],
    bounce_pairs: dict[Turn, set[tuple[str, str]]],
    causes: dict[tuple[str, str], set[str]],
    max_cycles: int,
    max_hops: int,
) -> list[DeadlockRisk]:
    g = nx.DiGraph()
    g.add_edges_from(((a, b), (b, c)) for a, b, c in sorted(turns))
    found: set[tuple[str, ...]] = set()
    sccs = [g.subgraph(c).copy() for c in nx.strongly_connected_components(g) if len(c) > 1]
    # Shortest first, and bounded: a dense bounce region has combinatorially many long cycles that only
    # recombine the bounces of the short ones.
    for bound in sorted({*range(min(4, max_hops), max_hops, 2), max_hops}):  # Clos cycles have even length
        for sub in sccs:
            for hops in itertools.islice(nx.simple_cycles(sub, length_bound=bound), 20 * max_cycles):
                found.add(rotate_to_min([h[0] for h in hops]))
        if len(found) >= max_cycles:
            break
    turn_failed = {t: {name for p in ps for name in causes.get(p, ())} for t, ps in bounce_pairs.items()}
    return [_risk(net, c, bounce_pairs, turn_failed) for c in sorted(found, key=lambda c: (len(c), c))[:max_cycles]]


def _risk(
    net: _Net,
    order: tuple[str, ...],
    bounce_pairs: dict[Turn, set[tuple[str, str]]],
    turn_failed: dict[Turn, set[str]],
) -> DeadlockRisk:
    hops = list(itertools.pairwise((*order, order[0])))
    turns = [(a, b, c) for (a, b), (_, c) in itertools.pairwise((*hops, hops[0]))]
    bounces = [t for t in turns if t in bounce_pairs]
    return DeadlockRisk(
        queues=tuple(f"{a}:{net.ports[(a, b)][0]}" for a, b in hops),
        devices=order,
        parallel=tuple(tuple(f"{a}:{p}" for p in net.ports[(a, b)]) for a, b in hops),
        bounces=tuple(">".join(t) for t in bounces),
        failed=tuple(sorted({name for t in bounces for name in turn_failed[t]})),
        pairs=tuple(f"{s}>{d}" for s, d in sorted({p for t in bounces for p in bounce_pairs[t]})),
    )
