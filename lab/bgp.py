"""The twin's BGP underlay: one eBGP session per switch-to-switch link (topology.underlay plans ASNs and addresses),
its state following the link and the faults, and what each session receives.

- A session is Established while its link is up on both ends, neither end has it shut (`neighbor X shutdown` in the
  EOS config) and no `bgp_down` fault holds it; else it is Idle (link down, with EOS's idle reason) or Active
  (the link is up but the session is not: a hold-timer expiry, a policy, a control plane that stopped answering).
  The sessions use BFD-like fast detection, as data-center fabrics configure (reference/platforms.md: 3/9 s timers or
  BFD 300 ms x 3): the state follows the link at once.
- A port whose session is not Established carries no routed traffic (its next hop left ECMP on both ends): the
  traffic model sees it as unusable, its oper status stays up.
- Prefixes received on a session: the peer announces what it reaches over Established sessions, less the routes
  the receiver drops because its own ASN is in their AS path (RFC 4271 loop prevention); computed per change of
  the session states, not per question.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass

import numpy as np

from topology.model import Endpoint
from topology.underlay import Session, Underlay
from topology.units import NS

HOLD_TIME_S = 9  # reference/platforms.md: data-center fabrics commonly set 3/9 s
# bgpmon (sonic-bgpcfgd) sleeps 15 s between looks at FRR (reference/maintenance-lldp-bgp-state.md: "at least every
# 15 s"): what STATE_DB's NEIGH_STATE_TABLE says trails FRR by up to this much.
BGPMON_INTERVAL_NS = 15 * NS
KEEPALIVE_S = 3
ESTABLISHED = "Established"


MSG_BASE = 4  # OPEN, KEEPALIVE, UPDATE, End-of-RIB: what a session exchanges before its keepalives


@dataclass
class SessionState:
    """One session (both ends share it)."""

    a: Session  # as its upper end sees it
    b: Session  # as its lower end sees it
    up: bool = True
    since_ns: int = 0  # last change of `up`
    transitions: int = 1  # times it became Established (it was, once, when the twin started)
    reason: str = ""  # why it is down: "link", "shutdown", "fault"

    def messages(self, now_ns: int) -> int:
        """Messages each way so far: the opening exchange, then a keepalive every KEEPALIVE_S while Established."""
        return MSG_BASE + (max(0, now_ns - self.since_ns) // (KEEPALIVE_S * NS) if self.up else 0)


class Bgp:
    """Session states of a twin. `update(oper_up_of, now)` follows the links after every recompute."""

    def __init__(self, underlay: Underlay, local: Iterable[str], now_ns: int) -> None:
        self.underlay = underlay
        local_set = set(local)
        self.local = local_set
        self.sessions: dict[tuple[Endpoint, Endpoint], SessionState] = {}
        self._by_end: dict[tuple[str, str], SessionState] = {}
        for link in underlay.links:
            a = underlay.session(link.a.device, link.a.port)
            b = underlay.session(link.b.device, link.b.port)
            if a is None or b is None:
                continue
            st = SessionState(a, b, since_ns=now_ns)
            self.sessions[(a.local, b.local)] = st
            for s in (a, b):
                if s.local.device in local_set:
                    self._by_end[(s.local.device, s.local.port)] = st
        self.faulted: dict[tuple[str, str], int] = {}  # a session's end -> active bgp_down faults holding it
        self.shut: dict[str, frozenset[str]] = {}  # switch -> peer addresses its config shuts
        self.version = 0  # bumped at every change of a session's state
        self.dirty = True  # a fault or a config changed what holds sessions down: the next recompute updates them
        self._received: tuple[int, dict[tuple[str, str], int]] | None = None
        self._distances: tuple[int, dict[str, dict[str, int]]] | None = None
        self._routed: dict[str, tuple[int, np.ndarray]] = {}

    # --- queries ---------------------------------------------------------------------------------------------
    def state_of(self, device: str, port: str) -> SessionState | None:
        return self._by_end.get((device, port))

    def view(self, device: str, port: str) -> tuple[Session, SessionState] | None:
        """The session on a port as that end sees it, with its state."""
        st = self._by_end.get((device, port))
        if st is None:
            return None
        return (st.a if (st.a.local.device, st.a.local.port) == (device, port) else st.b), st

    def sessions_of(self, device: str) -> list[tuple[Session, SessionState]]:
        out = []
        for s in self.underlay.sessions(device):
            got = self.view(device, s.local.port)
            if got is not None:
                out.append(got)
        return sorted(out, key=lambda v: tuple(int(x) for x in v[0].peer_address.split(".")))

    def shut_here(self, session: Session) -> bool:
        """Does this end's config shut the session (`neighbor X shutdown`)?"""
        return session.peer_address in self.shut.get(session.local.device, frozenset())

    def peer_state(self, session: Session, st: SessionState) -> str:
        """The state as this end shows it: Established; Idle where the link is down or this end's config shuts it;
        Active where the link is up and the session is not (a fault, or the other end shut it)."""
        if st.up:
            return ESTABLISHED
        if st.reason == "link" or (st.reason == "shutdown" and self.shut_here(session)):
            return "Idle"
        return "Active"

    def frr_state(self, session: Session, st: SessionState) -> str:
        """The state as FRR's `show bgp summary json` names it at this end: "Idle (Admin)" where its config shuts it."""
        state = self.peer_state(session, st)
        return "Idle (Admin)" if state == "Idle" and self.shut_here(session) else state

    def idle_reason(self, session: Session, st: SessionState) -> str:
        if st.reason == "shutdown" and self.shut_here(session):
            return "Administratively shut down"
        return "Interface down" if st.reason == "link" else ""

    def routed(self, device: str, ports: list[str]) -> np.ndarray:
        """Per port of `device`: False where a session exists and is not Established (no routed traffic)."""
        got = self._routed.get(device)
        if got is None or got[0] != self.version:
            mask = np.array([(st := self._by_end.get((device, p))) is None or st.up for p in ports], dtype=bool)
            got = self._routed[device] = (self.version, mask)
        return got[1]

    def received(self, device: str, port: str) -> int:
        """Prefixes `device` receives on the session of `port` (0 while it is down)."""
        if self._received is None or self._received[0] != self.version:
            self._received = (self.version, self._count_received())
        return self._received[1].get((device, port), 0)

    def sent(self, device: str, port: str) -> int:
        """Prefixes `device` sends on the session of `port`: what its peer receives from it."""
        got = self.view(device, port)
        if got is None:
            return 0
        return self.received(got[0].peer.device, got[0].peer.port)

    # --- changes ---------------------------------------------------------------------------------------------
    def hold(self, device: str, port: str, by: int) -> None:
        """A bgp_down fault takes the session of a port down (+1) or lets it go (-1)."""
        st = self._by_end.get((device, port))
        if st is None:
            raise KeyError(f"{device}:{port} has no BGP session (it faces a server or is not a fabric link)")
        for s in (st.a, st.b):
            key = (s.local.device, s.local.port)
            self.faulted[key] = self.faulted.get(key, 0) + by
            if self.faulted[key] <= 0:
                del self.faulted[key]
        self.dirty = True

    def set_shut(self, device: str, addresses: frozenset[str]) -> bool:
        """The peer addresses `device`'s config shuts; True if that changed."""
        if self.shut.get(device, frozenset()) == addresses:
            return False
        self.shut[device] = addresses
        self.dirty = True
        return True

    def update(self, oper_up: Callable[[str, str], bool], now_ns: int) -> list[SessionState]:
        """Bring every session's state in line with its link, the configs and the faults; returns the changed."""
        changed = []
        for st in self.sessions.values():
            reason = self._down_reason(st, oper_up)
            up = not reason
            if up != st.up:
                st.up, st.since_ns = up, now_ns
                st.transitions += 1 if up else 0
                changed.append(st)
            st.reason = reason
        if changed:
            self.version += 1
        self.dirty = False
        return changed

    def _down_reason(self, st: SessionState, oper_up: Callable[[str, str], bool]) -> str:
        for s in (st.a, st.b):
            if s.local.device in self.local and not oper_up(s.local.device, s.local.port):
                return "link"
        for s in (st.a, st.b):
            if s.peer_address in self.shut.get(s.local.device, frozenset()):
                return "shutdown"
        if (st.a.local.device, st.a.local.port) in self.faulted:
            return "fault"
        return ""

    def _count_received(self) -> dict[tuple[str, str], int]:
        """Per (device, port): prefixes received. For each receiver ASN, the speakers reachable from each peer over
        Established sessions without passing a speaker of that ASN (those routes carry it in their path)."""
        speakers = self.underlay.speakers
        adj: dict[str, set[str]] = {name: set() for name in speakers}
        for st in self.sessions.values():
            if st.up:
                adj[st.a.local.device].add(st.b.local.device)
                adj[st.b.local.device].add(st.a.local.device)
        by_asn: dict[int, list[str]] = {}
        for name, sp in speakers.items():
            by_asn.setdefault(sp.asn, []).append(name)
        out: dict[tuple[str, str], int] = {}
        reach_cache: dict[tuple[int, str], int] = {}
        for st in self.sessions.values():
            if not st.up:
                continue
            for s in (st.a, st.b):
                if s.local.device not in self.local:
                    continue
                key = (s.local_asn, s.peer.device)
                if key not in reach_cache:
                    reach_cache[key] = self._reachable_prefixes(s.peer.device, set(by_asn[s.local_asn]), adj)
                out[(s.local.device, s.local.port)] = reach_cache[key]
        return out

    def _reachable_prefixes(self, start: str, banned: set[str], adj: dict[str, set[str]]) -> int:
        if start in banned:
            return 0
        seen, todo = {start}, [start]
        while todo:
            node = todo.pop()
            for nxt in adj[node]:
                if nxt not in seen and nxt not in banned:
                    seen.add(nxt)
                    todo.append(nxt)
        return sum(len(self.underlay.speakers[n].originated) for n in seen)

    # --- routes ----------------------------------------------------------------------------------------------------
    def rib(self, device: str) -> dict[str, list[Session]]:
        """The BGP routes `device` installs: every prefix another speaker announces that it reaches over Established
        sessions, with ECMP over the sessions whose peer is one hop closer to the origin (multipath over equal
        AS-path lengths, RFC 7938; the twin's AS paths are as long as its hop counts)."""
        dist = self._all_distances()
        mine = [(s, st) for s, st in self.sessions_of(device) if st.up]
        out: dict[str, list[Session]] = {}
        for origin, sp in self.underlay.speakers.items():
            d = dist.get(origin, {}).get(device)
            if origin == device or d is None:
                continue
            hops = [s for s, _ in mine if dist[origin].get(s.peer.device) == d - 1]
            for prefix in sp.originated:
                out[prefix] = hops
        return out

    def as_path(self, session: Session, origin: str) -> list[int]:
        """The AS path of `origin`'s routes as `session`'s peer sends them: along one shortest chain of speakers."""
        dist = self._all_distances()[origin]
        chain = [session.peer.device]
        while chain[-1] != origin:
            here = chain[-1]
            step = sorted(s.peer.device for s, st in self.sessions_of(here) if st.up and
                          dist.get(s.peer.device) == dist[here] - 1)  # fmt: skip
            if not step:
                break
            chain.append(step[0])
        asns = [self.underlay.speakers[n].asn for n in chain]
        return [a for i, a in enumerate(asns) if i == 0 or a != asns[i - 1]]

    def _all_distances(self) -> dict[str, dict[str, int]]:
        """Per origin speaker: hops from it to every speaker over Established sessions (cached per state version)."""
        if self._distances is not None and self._distances[0] == self.version:
            return self._distances[1]
        adj: dict[str, set[str]] = {name: set() for name in self.underlay.speakers}
        for st in self.sessions.values():
            if st.up:
                adj[st.a.local.device].add(st.b.local.device)
                adj[st.b.local.device].add(st.a.local.device)
        out: dict[str, dict[str, int]] = {}
        for origin in adj:
            seen = {origin: 0}
            frontier = [origin]
            while frontier:
                nxt = []
                for node in frontier:
                    for peer in adj[node]:
                        if peer not in seen:
                            seen[peer] = seen[node] + 1
                            nxt.append(peer)
                frontier = nxt
            out[origin] = seen
        self._distances = (self.version, out)
        return out


NeighStates = Callable[[str], dict[str, str]]  # a SONiC switch -> {neighbour address: FRR's state}
Schedule = Callable[[int, Callable[[int], None]], None]


class BgpMon:
    """STATE_DB `NEIGH_STATE_TABLE` of each SONiC switch, as bgpmon (sonic-bgpcfgd) writes it: it clears the table
    when it starts, then every BGPMON_INTERVAL_NS reads FRR's `show bgp summary json` and writes each neighbour's
    `state` (reference/maintenance-lldp-bgp-state.md). So the table is empty for the first interval after a boot
    and then shows FRR's states as of its last read; always empty when `silent`. `read` gives FRR's states now (the
    model's, or real FRR's)."""

    def __init__(self, devices: Iterable[str], read: NeighStates, schedule: Schedule, now_ns: int) -> None:
        self.read = read
        self.schedule = schedule
        self.tables: dict[str, dict[str, str]] = {}
        self.written_ns: dict[str, int] = {}  # when bgpmon last wrote a switch's table
        # FRR in unified or split mode (`docker_routing_config_mode`): bgpmon writes no row, vtysh still answers
        self.silent = False
        self._runs: dict[str, int] = {}  # bumped at each start: the timers of a previous run stop
        for device in devices:
            self.start(device, now_ns)

    def start(self, device: str, now_ns: int) -> None:
        """bgpmon starts (the switch boots): the table is cleared, the first read is one interval later."""
        run = self._runs.get(device, 0) + 1
        self._runs[device] = run
        self.tables[device] = {}
        self.written_ns[device] = now_ns
        self.schedule(now_ns + BGPMON_INTERVAL_NS, self._tick(device, run))

    def _tick(self, device: str, run: int) -> Callable[[int], None]:
        def fire(at: int) -> None:
            if self._runs.get(device) != run:
                return
            self.tables[device] = {} if self.silent else dict(self.read(device))
            self.written_ns[device] = at
            self.schedule(at + BGPMON_INTERVAL_NS, self._tick(device, run))

        return fire
