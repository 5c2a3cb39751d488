"""One traffic model for the whole twin: where every server's traffic goes and what each cable carries.

Every GPU NIC offers a steady load (30-60 % of its line, `counters.utilisation`). Its destinations follow a gravity
model over the switches that own servers: most of it stays in its rail (rail-optimized collectives), a share
crosses rails where a tier above the rails joins them, and where the fabric has a DCI a share goes to the far
campus, which sends as much back. Traffic follows up/down (valley-free) routing: a switch that reaches the
destination downward sends it down, otherwise up, spread over the cables whose far switch still reaches it (ECMP
after BGP withdrew the rest), in proportion to each cable's hash weight.

Faults enter as three factors on a cable direction:
- `passes`: how much a paused queue lets through (PFC backpressure). It throttles the whole flow end to end, as
  DCQCN and backpressure do: a source sends only what its paths let through, so every switch forwards what it
  receives;
- `drops`: a share of the egress dropped (counted as out-discards), lost to everything downstream;
- `rx_errors`: a share of frames arriving corrupted (counted in in-pkts and in-errors), discarded by the receiver.

So on every switch, in every state: received = sent + dropped + discarded as errors, and what one end of a cable
sends the other receives. Pure numpy over static arrays built once (`Structure`); `flow` is called on every change.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import IntEnum
from functools import cached_property

import numpy as np

from topology.model import TIER, Role

# Share of a NIC's traffic that leaves its rail, where a tier above the rails joins them (superspines): storage,
# checkpoints and collectives that do not use PXN. Our figure; rail-local collectives dominate training traffic.
CROSS_RAIL_SHARE = 0.10
# Never more than this share of a NIC's traffic crosses the DCI, however thin the campus is.
MAX_REMOTE_SHARE = 0.5


class Kind(IntEnum):
    """What a switch port faces."""

    UP = 0  # a switch of a higher tier
    DOWN = 1  # a switch of a lower tier
    SIDE = 2  # a switch of the same tier (miscabled): carries no routed traffic
    SERVER = 3  # a server NIC
    REMOTE = 4  # a far campus's switch (a DCI long-haul port)
    OTHER = 5  # anything else: carries nothing


@dataclass
class Ports:
    """One switch's ports as arrays (row order of `Switch.ports`)."""

    kind: np.ndarray  # Kind per row
    peer: np.ndarray  # peer switch node, -1 if not a switch of this twin
    peer_row: np.ndarray
    site: np.ndarray  # sink index of the far campus of a REMOTE port, -1 otherwise
    offered: np.ndarray  # SERVER: the NIC's offered load, bytes/s; REMOTE: the far campus's hash weight
    # SERVER: how a switch spreads what arrives for its servers over them (None: as `offered`); a workload's overlay
    # sets it to the NICs it targets (an incast's one port)
    deliver: np.ndarray | None = None

    @property
    def receives(self) -> np.ndarray:
        return self.offered if self.deliver is None else self.deliver


@dataclass
class Structure:
    """The fabric as the traffic model sees it, built once per twin."""

    names: list[str]
    tier: np.ndarray
    ports: list[Ports]
    sinks: list[str]  # switch names that own servers, then far-campus sites
    sink_of: np.ndarray  # node -> its sink index, -1 if it owns no server
    share: np.ndarray  # (nodes, sinks): where a switch's servers send, as shares of their offered load
    # where a far campus's traffic goes: each server-owning switch's share of what the campus's servers send
    gravity: np.ndarray = field(default_factory=lambda: np.zeros(0))
    remote_load: dict[int, float] = field(default_factory=dict)  # site sink -> bytes/s it sends (and receives)

    @cached_property
    def offsets(self) -> np.ndarray:
        """Where each switch's rows start in an array of every port (the last entry: the number of ports)."""
        out: np.ndarray = np.concatenate(([0], np.cumsum([len(p.kind) for p in self.ports]))).astype(np.int64)
        return out


@dataclass
class Conditions:
    """Per node, per row, this instant: which cables are up and the factors faults put on them."""

    up: list[np.ndarray]
    weight: list[np.ndarray]  # ECMP hash weight of the port's egress
    passes: list[np.ndarray]  # share of the port's egress a pause lets through
    nic_passes: list[np.ndarray]  # SERVER rows: share of the NIC's egress a pause from the switch lets through
    drops: list[np.ndarray]  # share of the port's egress dropped
    rx_errors: list[np.ndarray]  # share of the frames the port receives that arrive corrupted


@dataclass
class Loads:
    """Bytes per second on one switch's ports, per row."""

    offered: np.ndarray  # what the port had to send (before its egress drops)
    sent: np.ndarray  # what went on the wire
    received: np.ndarray  # what arrived (corrupted frames included)


def build(
    names: list[str],
    roles: list[Role],
    rails: list[int | None],
    ports: list[Ports],
    sites: list[str],
    site_load: dict[str, float],
) -> Structure:
    """The static model: sinks, and the shares of each server-owning switch's traffic toward every sink
    (gravity over the healthy fabric's reachability). `ports[n].site` holds indexes into `sites`; they are
    renumbered here as sink indexes."""
    n = len(names)
    tier = np.array([TIER[r] for r in roles], dtype=np.int64)
    owners = [i for i in range(n) if np.any(ports[i].kind == Kind.SERVER)]
    sinks = [names[i] for i in owners] + list(sites)
    sink_of = np.full(n, -1, dtype=np.int64)
    for k, i in enumerate(owners):
        sink_of[i] = k
    for p in ports:  # site index -> sink index
        p.site = np.where(p.site >= 0, p.site + len(owners), -1)
    s = Structure(names, tier, ports, sinks, sink_of, np.zeros((n, len(sinks))))
    reach = _routes(s, [np.ones(len(p.kind), dtype=bool) for p in ports]).reach  # the healthy fabric
    leaves = len(owners)
    sends = np.zeros(len(sinks))  # what each owner's servers offer
    for k, i in enumerate(owners):
        sends[k] = float(ports[i].offered[ports[i].kind == Kind.SERVER].sum())
    total = float(sends.sum())
    # Each far campus gets the share of every NIC's traffic that makes the campus send it what it sends back.
    remote = np.array([site_load.get(site, 0.0) / total if total else 0.0 for site in sites])
    if remote.sum() > MAX_REMOTE_SHARE:
        remote *= MAX_REMOTE_SHARE / remote.sum()
    for i in owners:
        ok = reach[i, :leaves]
        same = ok & np.array([rails[j] == rails[i] for j in owners], dtype=bool)
        w_same = np.where(same, sends[:leaves], 0.0)
        w_other = np.where(ok & ~same, sends[:leaves], 0.0)
        cross = CROSS_RAIL_SHARE if w_other.sum() > 0 else 0.0
        row = np.zeros(len(sinks))
        if w_same.sum() > 0:
            row[:leaves] += (1 - cross) * w_same / w_same.sum()
        if cross:
            row[:leaves] += cross * w_other / w_other.sum()
        row *= 1 - float(remote.sum())
        row[leaves:] = remote * reach[i, leaves:]
        s.share[i] = row
    s.gravity = sends / total if total else np.zeros(len(sinks))
    for j, site in enumerate(sites):
        s.remote_load[leaves + j] = site_load.get(site, 0.0)
    return s


def _weigh_toward_dcis(s: Structure, c: Conditions) -> Conditions:
    """A cable up toward a DR weighs what the DR's long-haul ports up weigh, shared by the cables to it (BGP
    link-bandwidth, as DCI designs use): the DCI's long-haul ports are one ECMP group whatever DR holds them."""
    capacity = np.zeros(len(s.names))
    for x, p in enumerate(s.ports):
        m = (p.kind == Kind.REMOTE) & c.up[x]
        capacity[x] = float(c.weight[x][m].sum())
    if not capacity.any():
        return c
    weight = []
    for x, p in enumerate(s.ports):
        w = c.weight[x]
        m = (p.kind == Kind.UP) & c.up[x]
        toward = m & (capacity[np.maximum(p.peer, 0)] > 0) & (p.peer >= 0)
        if toward.any():
            w = w.copy()
            peers, counts = np.unique(p.peer[toward], return_counts=True)
            per = dict(zip(peers.tolist(), counts.tolist(), strict=True))
            for row in np.nonzero(toward)[0]:
                w[row] *= capacity[p.peer[row]] / per[int(p.peer[row])]
        weight.append(w)
    return Conditions(c.up, weight, c.passes, c.nic_passes, c.drops, c.rx_errors)


FAR = 1 << 30  # no path


@dataclass
class Routes:
    """Hop counts to every sink (`dist`), and going only down (`down`): up/down routing that prefers the shortest
    paths, as BGP's AS-path length does in a Clos. A switch sends a destination down when the shortest path to it
    starts down, else up; over each next hop one hop closer to it (ECMP)."""

    down: np.ndarray
    dist: np.ndarray
    _elig: dict[tuple[int, bool], np.ndarray] = field(default_factory=dict, repr=False)
    _groups: dict[tuple[int, bool], tuple[np.ndarray, np.ndarray, np.ndarray]] = field(default_factory=dict, repr=False)

    @cached_property
    def reach(self) -> np.ndarray:
        out: np.ndarray = self.dist < FAR
        return out

    @cached_property
    def goes_down(self) -> np.ndarray:
        out: np.ndarray = (self.down < FAR) & (self.down == self.dist)
        return out

    def next_down(self, x: int, peers: np.ndarray) -> np.ndarray:
        # only to switches that keep it going down: traffic never turns up again (valley-free)
        out: np.ndarray = (self.down[peers] == self.down[x] - 1) & (self.down[x] < FAR) & self.goes_down[peers]
        return out

    def next_up(self, x: int, peers: np.ndarray) -> np.ndarray:
        out: np.ndarray = (self.dist[peers] == self.dist[x] - 1) & (self.dist[x] < FAR)
        return out

    # The next hops of switch x over its cables `m` (up or down), per sink: the same for every flow under these
    # routes (they were worked out for one set of cables up, so `m` is the same at every call for one x).
    def elig(self, x: int, going_up: bool, peer: np.ndarray, m: np.ndarray) -> np.ndarray:
        got = self._elig.get((x, going_up))
        if got is None:
            got = self._elig[(x, going_up)] = (self.next_up if going_up else self.next_down)(x, peer[m])
        return got

    def peer_groups(self, x: int, going_up: bool, peers: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """x's cables (up or down) grouped by far switch: the order that sorts them, where each group starts, and its
        switch (np.add.reduceat over these adds what parallel cables carry to one peer)."""
        got = self._groups.get((x, going_up))
        if got is None:
            order = np.argsort(peers, kind="stable")
            targets, first = np.unique(peers[order], return_index=True)
            got = self._groups[(x, going_up)] = (order, first, targets)
        return got


def _routes(s: Structure, up: list[np.ndarray]) -> Routes:
    """Hop counts over the cables up, lower tiers first for going down, higher first for the rest."""
    n, k = len(s.names), len(s.sinks)
    down = np.full((n, k), FAR, dtype=np.int64)
    order = np.argsort(s.tier, kind="stable")
    for x in order:
        p = s.ports[x]
        m = (p.kind == Kind.DOWN) & up[x]
        if m.any():
            down[x] = np.minimum(down[x], down[p.peer[m]].min(axis=0) + 1)
        if s.sink_of[x] >= 0:
            down[x, s.sink_of[x]] = 0
        down[x, p.site[(p.kind == Kind.REMOTE) & up[x]]] = 0
    dist = down.copy()
    for x in order[::-1]:
        p = s.ports[x]
        m = (p.kind == Kind.UP) & up[x]
        if m.any():
            dist[x] = np.minimum(dist[x], dist[p.peer[m]].min(axis=0) + 1)
    return Routes(np.minimum(down, FAR), np.minimum(dist, FAR))


# Kind as plain ints for the loops below: an IntEnum member looked up by name costs a class __getattr__ each time
_UP, _DOWN, _SERVER, _REMOTE = int(Kind.UP), int(Kind.DOWN), int(Kind.SERVER), int(Kind.REMOTE)


def routes(s: Structure, up: list[np.ndarray]) -> Routes:
    """The routes over the cables `up`: pass the same to several `flow` calls under the same cables (a workload's
    overlay, the congestion model's passes) and they are worked out once."""
    return _routes(s, up)


def flow(s: Structure, c: Conditions, routed: Routes | None = None) -> list[Loads]:
    """What every port offers, sends and receives under `c` (bytes/s). `routed`: `routes(s, c.up)` if known."""
    n, k = len(s.names), len(s.sinks)
    routes = routed if routed is not None else _routes(s, c.up)
    down, reach = routes.goes_down, routes.reach
    order = np.argsort(s.tier, kind="stable")
    c = _weigh_toward_dcis(s, c)
    ups = [(p.kind == _UP) & u for p, u in zip(s.ports, c.up, strict=True)]
    downs = [(p.kind == _DOWN) & u for p, u in zip(s.ports, c.up, strict=True)]
    servers = [(p.kind == _SERVER) & u for p, u in zip(s.ports, c.up, strict=True)]
    remotes = [(p.kind == _REMOTE) & u for p, u in zip(s.ports, c.up, strict=True)]
    site_weight: dict[int, float] = {}  # each far campus spreads what it sends over every long-haul port up
    for x in range(n):
        p = s.ports[x]
        for row in np.nonzero(remotes[x])[0]:
            site_weight[int(p.site[row])] = site_weight.get(int(p.site[row]), 0.0) + float(p.offered[row])
    # through[x, d]: the share of traffic at x for d that gets through to d: weighted over x's next hops of each one's
    # pass factor times what gets through beyond it. Down first (lower tiers first), then up (higher first).
    through = np.zeros((n, k))
    for x in order:
        p = s.ports[x]
        num, den = np.zeros(k), np.zeros(k)
        own = s.sink_of[x]
        if own >= 0:
            m = servers[x]
            den[own] = float(p.receives[m].sum())
            num[own] = float((p.receives[m] * c.passes[x][m]).sum())
        m = remotes[x]
        if m.any():
            den += np.bincount(p.site[m], c.weight[x][m], k)
            num += np.bincount(p.site[m], c.weight[x][m] * c.passes[x][m], k)
        m = downs[x]
        if m.any():
            elig = routes.elig(x, False, p.peer, m)
            den += c.weight[x][m] @ elig
            num += (c.weight[x][m] * c.passes[x][m]) @ (elig * through[p.peer[m]])
        through[x] = np.where(down[x] & (den > 0), num / np.where(den > 0, den, 1.0), 0.0)
    for x in order[::-1]:
        p = s.ports[x]
        m = ups[x]
        todo = reach[x] & ~down[x]
        if not m.any() or not todo.any():
            continue
        elig = routes.elig(x, True, p.peer, m)
        den = c.weight[x][m] @ elig
        num = (c.weight[x][m] * c.passes[x][m]) @ (elig * through[p.peer[m]])
        through[x] = np.where(todo & (den > 0), num / np.where(den > 0, den, 1.0), through[x])

    # every port's received bytes in one flat array (each switch's Loads.received a view of its rows): what a cable
    # delivers lands on the far end's row by one indexed add instead of a Python loop over the cables
    offsets = s.offsets
    received = np.zeros(int(offsets[-1]))
    rx_errors = np.concatenate(c.rx_errors) if c.rx_errors else np.zeros(0)
    loads = [
        Loads(np.zeros(len(p.kind)), np.zeros(len(p.kind)), received[offsets[x] : offsets[x + 1]])
        for x, p in enumerate(s.ports)
    ]
    at = np.zeros((n, k))  # traffic at each switch, by destination
    for x in range(n):
        p = s.ports[x]
        if s.sink_of[x] >= 0:  # its servers: each NIC sends what its paths let through
            m = servers[x]
            dest = s.share[x] * reach[x] * through[x]
            offered = p.offered[m] * c.nic_passes[x][m]
            loads[x].received[m] = offered * dest.sum()
            at[x] += float((offered * (1 - c.rx_errors[x][m])).sum()) * dest
        for row in np.nonzero(remotes[x])[0]:  # the far campus: its load over the long-haul ports up, by its hash
            site = int(p.site[row])
            share = p.offered[row] / site_weight[site]
            dest = s.gravity * reach[x] * through[x]
            arriving = s.remote_load[site] * share
            loads[x].received[row] = arriving * dest.sum()
            at[x] += arriving * (1 - c.rx_errors[x][row]) * dest

    def send(x: int, m: np.ndarray, elig: np.ndarray, todo: np.ndarray, going_up: bool) -> None:
        p = s.ports[x]
        here = at[x] * todo
        nz = np.nonzero(here)[0]
        peers = p.peer[m]
        cols: np.ndarray | None = None
        if 2 * len(nz) < len(here):  # a workload's overlay goes to a few sinks: only their columns
            cols = nz
            elig, here = elig[:, cols], here[cols]
            ahead = through[peers[:, None], cols]
        else:
            ahead = through[peers]
        weights = (c.weight[x][m] * c.passes[x][m])[:, None] * elig * ahead
        total = weights.sum(axis=0)
        amounts = weights * np.where(total > 0, here / np.where(total > 0, total, 1.0), 0.0)
        offered = amounts.sum(axis=1)
        kept = 1 - c.drops[x][m]
        loads[x].offered[m] += offered
        loads[x].sent[m] += offered * kept
        far = offsets[peers] + p.peer_row[m]  # each cable's far row: distinct, so a plain indexed add
        received[far] += offered * kept
        arrive = kept * (1 - rx_errors[far])  # frames arriving corrupted are discarded there
        order, first, targets = routes.peer_groups(x, going_up, peers)  # parallel cables to one peer add up
        added = np.add.reduceat((amounts * arrive[:, None])[order], first, axis=0)
        if cols is None:
            at[targets] += added
        else:
            at[targets[:, None], cols] += added

    for x in order:  # up: lower tiers first, so each switch has everything its lower tier sent it
        p = s.ports[x]
        m = ups[x]
        todo = reach[x] & ~down[x]
        if m.any() and (at[x] * todo).any():
            send(x, m, routes.elig(x, True, p.peer, m), todo, True)
    for x in order[::-1]:  # down: higher tiers first
        p = s.ports[x]
        here = at[x] * down[x]
        if not here.any():
            continue
        m = downs[x]
        if m.any():
            send(x, m, routes.elig(x, False, p.peer, m), down[x], False)
        own = s.sink_of[x]
        if own >= 0 and here[own] > 0:
            m = servers[x]
            w = p.receives[m] * c.passes[x][m]
            if w.sum() > 0:
                offered = here[own] * w / w.sum()
                loads[x].offered[m] += offered
                loads[x].sent[m] += offered * (1 - c.drops[x][m])
        m = remotes[x]
        if not m.any():
            continue
        for site in set(p.site[m].tolist()):
            members = m & (p.site == site)
            w = c.weight[x][members] * c.passes[x][members]
            if w.sum() > 0 and here[site] > 0:
                offered = here[site] * w / w.sum()
                loads[x].offered[members] += offered
                loads[x].sent[members] += offered * (1 - c.drops[x][members])
    return loads


def overlay(s: Structure, sends: list[np.ndarray], share: np.ndarray, receives: list[np.ndarray]) -> Structure:
    """A workload as its own structure over the same fabric: `sends[n]` what each SERVER row of switch n offers
    (bytes/s), `share[n]` where switch n's servers send it (sums to 1 over sinks, far campuses included),
    `receives[n]` the weights its SERVER rows take what arrives for them. Far campuses send nothing back. `flow` is
    linear in what the servers offer, so the overlay's loads add to the base traffic's."""
    ports = []
    for p, out, into in zip(s.ports, sends, receives, strict=True):
        server = p.kind == Kind.SERVER
        ports.append(
            Ports(p.kind, p.peer, p.peer_row, p.site, np.where(server, out, p.offered), np.where(server, into, 0.0))
        )
    return Structure(
        s.names, s.tier, ports, s.sinks, s.sink_of, share, np.zeros(len(s.sinks)), dict.fromkeys(s.remote_load, 0.0)
    )
