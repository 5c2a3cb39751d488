"""Remediation's window on telemetry: which ports are down, did a port go down, what its counters say.

It reads the same counter store the detectors read. A snapshot is taken at most every `refresh_s`, so a fabric
with thousands of ports is scanned a few times per second, not once per question.
"""

from __future__ import annotations

import asyncio
import contextlib
import math
from collections.abc import Callable, Iterator, Mapping
from typing import Any

from fabricd.detectors.bgp_session import BgpSessionState, sessions_down
from fabricd.detectors.miscabled import heard
from fabricd.telemetry import Ingestor, Kind, Snapshot
from topology.fabric import Fabric
from topology.model import Endpoint

from .cabling_check import expects_lldp

DOWN = frozenset({"DOWN", "LOWER_LAYER_DOWN", "NOT_PRESENT", "DORMANT"})
EVIDENCE_LEAVES = (
    "oper-status",
    "admin-status",
    "if.carrier-transitions",
    "if.in-pkts",
    "if.in-errors",
    "if.in-fcs-errors",
    "eth.in-crc-errors",
    "eth.in-symbol-error",
    "fec.corrected-codewords",
    "fec.uncorrected-codewords",
    "fec.pre-fec-ber",
)


class AdminStates(Mapping[Endpoint, bool]):
    """A snapshot's admin-status leaves as a mapping: port -> administratively up."""

    def __init__(self, snap: Snapshot) -> None:
        self._snap = snap

    def __getitem__(self, ep: Endpoint) -> bool:
        i = self._snap.find(ep.device, ep.port, "admin-status")
        state = None if i is None else self._snap.text(i)
        if state is None:
            raise KeyError(ep)
        return state == "UP"

    def __iter__(self) -> Iterator[Endpoint]:
        snap = self._snap
        for i in snap.select(leaf="admin-status").tolist():
            if snap.text(i) is not None:
                dev, port, _, _ = snap.key(i)
                yield Endpoint(dev, port)

    def __len__(self) -> int:
        return sum(1 for _ in self)


class TelemetryPortView:
    def __init__(
        self, ingestor: Ingestor, clock: Callable[[], float], refresh_s: float = 0.05, fabric: Fabric | None = None
    ) -> None:
        self.ingestor = ingestor
        self.fabric = fabric
        self.clock = clock  # monotonic seconds
        self.refresh_s = refresh_s
        self._snap: Snapshot | None = None
        self._at = -1e18
        self._events_seen = -1  # the store's event total when the snapshot was taken
        self._down: frozenset[Endpoint] | None = None
        self._routed_down: frozenset[Endpoint] | None = None
        self._bgp = BgpSessionState()  # only its cache of the routed ports' addresses is used

    def snapshot(self) -> Snapshot:
        now = self.clock()
        if self._snap is None or now - self._at >= self.refresh_s:
            self._snap = self.ingestor.snapshot()
            self._events_seen = self.ingestor.store.ev_total  # the ring's total the snapshot holds
            self._at = now
            self._down = None
            self._routed_down = None
        return self._snap

    def oper_down(self) -> frozenset[Endpoint]:
        snap = self.snapshot()
        if self._down is None:
            out = set()
            for i in snap.select(leaf="oper-status").tolist():
                if snap.text(i) in DOWN:
                    dev, port, _, _ = snap.key(i)
                    out.add(Endpoint(dev, port))
            self._down = frozenset(out)
        return self._down

    def routed_down(self) -> frozenset[Endpoint]:
        """Both ends of every link whose BGP session is not ESTABLISHED (detectors/bgp_session.py)."""
        snap = self.snapshot()
        if self._routed_down is None:
            fabric = self.fabric
            self._routed_down = sessions_down(snap, fabric, self._bgp) if fabric is not None else frozenset()
        return self._routed_down

    def admin_up(self) -> AdminStates:
        """Each port's admin state as last streamed (ON_CHANGE); ports that never reported it are absent. Looked up
        port by port: the guard asks for the few ports fabricd holds, on the action path, not for all of them."""
        return AdminStates(self.snapshot())

    def description(self, device: str, port: str) -> str | None:
        """The port's description as the switch last streamed it (ON_CHANGE), or None when it streams none."""
        snap = self.snapshot()
        i = snap.find(device, port, "description")
        return None if i is None else snap.text(i)

    def oper(self, device: str, port: str) -> str | None:
        snap = self.snapshot()
        i = snap.find(device, port, "oper-status")
        return None if i is None else snap.text(i)

    async def wait_oper(self, device: str, port: str, up: bool, timeout_s: float) -> bool:
        """True once telemetry shows the port up (or down). The oper-status streams ON_CHANGE: the store wakes this
        on each event it takes, and the events since the snapshot (read from the store's ring, no new snapshot)
        say the port's state now."""
        deadline = self.clock() + timeout_s
        store = self.ingestor.store
        news = asyncio.Event()
        store.on_event.append(news.set)
        try:
            state = self.oper(device, port)
            cursor = self._events_seen
            while True:
                news.clear()
                if store.ev_total - cursor > store.ev_cap:  # the ring has lost some since: a snapshot of now
                    self._snap = None
                    state, cursor = self.oper(device, port), self._events_seen
                else:
                    events, cursor = store.events_after(cursor, "oper-status")
                    state = next((e.value for e in reversed(events) if e.device == device and e.port == port), state)
                if state is not None and (state == "UP") == up:
                    return True
                left = deadline - self.clock()
                if left <= 0:
                    return False
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(news.wait(), min(self.refresh_s, left))
        finally:
            store.on_event.remove(news.set)

    def expects_lldp(self, device: str, port: str) -> bool:
        """Whether a neighbour should be heard on the port once it is up (cabling_check.expects_lldp over the ports
        the switch streams LLDP for)."""
        snap = self.snapshot()
        heard = {snap.key(i)[1] for i in snap.select(device, None, "lldp.system-name").tolist()}
        if self.fabric is None:  # no blueprint to find the port's kin by: its own LLDP only
            return port in heard
        return expects_lldp(self.fabric, Endpoint(device, port), heard)

    async def lldp_neighbour(self, device: str, port: str, since_ns: int, timeout_s: float) -> Endpoint | None:
        """Who LLDP hears on the port in a sample newer than `since_ns`, waiting up to `timeout_s`; None if none
        (at once when no neighbour is expected there: `expects_lldp`)."""
        if not self.expects_lldp(device, port):
            return None  # a platform, release or kind of neighbour without LLDP: nothing will come
        deadline = self.clock() + timeout_s
        while True:
            got = self._lldp(device, port, since_ns)
            if got is not None or self.clock() >= deadline:
                return got
            await asyncio.sleep(self.refresh_s)

    def _lldp(self, device: str, port: str, since_ns: int) -> Endpoint | None:
        snap = self.snapshot()
        newest: dict[str, tuple[int, str]] = {}
        for leaf in ("lldp.system-name", "lldp.port-id"):
            for i in snap.select(device, port, leaf).tolist():
                ts, text = int(snap.ts[i]), snap.text(i)
                if text and ts > since_ns and ts > newest.get(leaf, (-1, ""))[0]:
                    newest[leaf] = (ts, text)
        if "lldp.system-name" not in newest:
            return None
        return heard(snap, newest["lldp.system-name"][1], newest.get("lldp.port-id", (0, ""))[1])

    def out_rate_bps(self, device: str, port: str) -> float | None:
        """What the port sends now, bits/s (its out-octets counter's rate); None before a second sample."""
        snap = self.snapshot()
        i = snap.find(device, port, "if.out-octets")
        if i is None or math.isnan(float(snap.rate[i])):
            return None
        return float(snap.rate[i]) * 8

    def evidence(self, device: str, port: str) -> dict[str, Any]:
        """Current values of the counters a person repairing this port wants to see, and its optics."""
        snap = self.snapshot()
        out: dict[str, Any] = {}
        for leaf in EVIDENCE_LEAVES:
            for i in snap.select(device, port, leaf).tolist():
                v = snap.current(i)
                if v is None:
                    continue
                idx = snap.key(i)[3]
                out[leaf if idx is None else f"{leaf}[{idx}]"] = v
                if snap.kind(i) is Kind.COUNTER and not math.isnan(snap.rate[i]):
                    out[f"{leaf}/s" if idx is None else f"{leaf}[{idx}]/s"] = round(float(snap.rate[i]), 3)
        power = [snap.current(i) for i in snap.select(device, port, "optics.input-power").tolist()]
        if power:
            out["optics_rx_dbm"] = [p for p in power if p is not None]
        return out
