"""Each port's carrier-transitions counter as fabricd last saw it, kept across restarts: a flap train that ended
while fabricd was not watching (down, restarting, no leader) is still found (fabricd/detectors/link_flap_unwatched).

The leader remembers, and writes, cheaply: every SAVE_EVERY_S at most, only the ports whose value changed since its
last write, in one transaction, with the round's time (as of it, every other row still holds: an unchanged port is
never rewritten). A restart loses at most that interval's changes. When fabricd starts, or takes over as leader, it
reads what was remembered; each port's first sample from a switch it hears fresh is compared with it once. What that
finds goes the way of every finding (DetectorPasses.act, Incidents.on_findings), reported for REPORT_S (a new incident
may wait up to FRESH_WAIT_S for fresh telemetry before it is judged): a ticket, no action (decide.py).
"""

from __future__ import annotations

from collections.abc import Callable, Collection

import numpy as np
import numpy.typing as npt

from fabricd.detectors.finding import Finding
from fabricd.detectors.link_flap import LinkFlapConfig
from fabricd.detectors.link_flap_unwatched import CarrierSample, missed
from fabricd.telemetry import NEVER, Snapshot
from topology.fabric import Fabric
from topology.units import NS

from .remediation.holds import FRESH_WAIT_S
from .state import StateStore

LEAF = "if.carrier-transitions"
SAVE_EVERY_S = 10.0
REPORT_S = 2 * FRESH_WAIT_S
_UNWRITTEN = np.iinfo(np.uint64).max  # no value written for this series (a counter never reads it)
_BIGINT = int(np.iinfo(np.int64).max)  # what a database column holds; a carrier counter never gets near it
Round = tuple[list[tuple[str, str, int, int]], list[str]]  # (device, port, value, sample ts) rows; switches unsure


class CarrierWatch:
    def __init__(self, state: StateStore, fabric: Fabric, cfg: LinkFlapConfig, *, save_every_s: float = SAVE_EVERY_S,
                 report_s: float = REPORT_S) -> None:  # fmt: skip
        self.state, self.fabric, self.cfg = state, fabric, cfg
        self.save_every = int(save_every_s * NS)
        self.report = int(report_s * NS)
        self.remembered: dict[str, CarrierSample] | None = None  # None: not armed (a standby, or not started)
        self._compared = np.zeros(0, dtype=bool)  # by series row: its first fresh sample was compared
        self._written = np.zeros(0, dtype=np.uint64)  # by series row: the value last written (or remembered)
        self._next_save = 0
        self._uncompared: set[str] = set()  # remembered ports whose first fresh sample has not come yet
        self._armed_at = 0
        self._reporting: dict[tuple[object, ...], tuple[Finding, int]] = {}

    def disarm(self) -> None:
        """This instance no longer leads: when it leads again it reads what its successor remembered."""
        self.remembered = None

    def _arm(self, now: int) -> None:
        rows, saved = self.state.carrier.seen()
        out = {}
        for (device, port), (value, ts) in rows.items():
            if saved is not None and device not in saved[1]:
                ts = max(ts, saved[0])  # the round says the value still held then
            out[f"{device}:{port}"] = CarrierSample(value, ts)
        self.remembered = out
        self._uncompared = set(out)
        self._armed_at = now
        self._compared = np.zeros(0, dtype=bool)
        self._written = np.zeros(0, dtype=np.uint64)
        self._next_save = 0

    def _grow(self, n: int) -> None:
        if len(self._compared) < n:
            self._compared = np.concatenate([self._compared, np.zeros(n - len(self._compared), dtype=bool)])
            more = np.full(n - len(self._written), _UNWRITTEN, dtype=np.uint64)
            self._written = np.concatenate([self._written, more])

    def check(self, snap: Snapshot, now: int, unsure: Collection[str],
              live: Callable[[tuple[str, ...]], bool]) -> list[Finding]:  # fmt: skip
        """The leader's pass: compare the first fresh sample of each port not compared yet with what was remembered
        (switches in `unsure`, stale or not synced, wait until they are heard fresh); `live(ends)`: link_flap is
        tracking that link as it streams (it reports it itself). Returns the findings still being reported."""
        if self.remembered is None:
            self._arm(now)
        assert self.remembered is not None
        if self._uncompared and now - self._armed_at > int(self.cfg.unwatched_max_s * NS):
            self._uncompared.clear()  # ports not heard since: whatever they show now is history
        if self._uncompared:  # once every remembered port is compared, a pass costs nothing here
            self._compare(snap, now, unsure, live)
        if self._reporting:
            self._reporting = {k: v for k, v in self._reporting.items() if v[1] >= now}
        return [f for f, _ in self._reporting.values()]

    def _compare(self, snap: Snapshot, now: int, unsure: Collection[str],
                 live: Callable[[tuple[str, ...]], bool]) -> None:  # fmt: skip
        assert self.remembered is not None
        rows = snap.select(leaf=LEAF)
        self._grow(len(snap))
        todo = rows[~self._compared[rows]]
        if len(todo):
            todo = todo[(snap.ts[todo] != NEVER) & self._heard(snap, todo, unsure)]
            self._compared[todo] = True
        fresh = {}
        for i in todo.tolist():
            device, port, _, _ = snap.key(i)
            end = f"{device}:{port}"
            old = self.remembered.get(end)
            if old is not None:  # rewritten only once its value changes
                fresh[end] = CarrierSample(int(snap.value[i]), int(snap.ts[i]))
                self._written[i] = np.uint64(old.value) if old.value >= 0 else _UNWRITTEN
                self._uncompared.discard(end)
        for f in missed(self.remembered, fresh, self.fabric, self.cfg, now):
            if not live(f.ports):
                self._reporting[f.key] = (f, now + self.report)

    @staticmethod
    def _heard(snap: Snapshot, rows: npt.NDArray[np.int64], unsure: Collection[str]) -> npt.NDArray[np.bool_]:
        if not unsure:
            return np.ones(len(rows), dtype=bool)
        bad = np.fromiter((d in unsure for d in snap.devices), dtype=bool, count=len(snap.devices))
        out: npt.NDArray[np.bool_] = ~bad[snap.port_dev[snap.series_port[rows]]]
        return out

    def to_save(self, snap: Snapshot, now: int, unsure: Collection[str]) -> Round | None:
        """What the leader writes this round: the ports heard fresh whose value changed since written (a remembered one
        only once compared), and the switches
        for which the round's time does not hold (not heard fresh, or with remembered ports not compared yet);
        None: not due yet, or not armed."""
        if self.remembered is None or now < self._next_save:
            return None
        rows = snap.select(leaf=LEAF)
        self._grow(len(snap))
        rows = rows[(snap.ts[rows] != NEVER) & self._heard(snap, rows, unsure)]
        if self._uncompared:  # a remembered value is not overwritten before it is compared
            rows = np.array([i for i in rows.tolist() if self._compared[i] or self._end(snap, i) not in
                             self._uncompared], dtype=np.int64)  # fmt: skip
        changed = rows[snap.value[rows] != self._written[rows]]  # a port not written yet reads _UNWRITTEN
        out = []
        for i in changed.tolist():
            device, port, _, _ = snap.key(i)
            out.append((device, port, min(int(snap.value[i]), _BIGINT), int(snap.ts[i])))
        waiting = {end.split(":", 1)[0] for end in self._uncompared}
        return out, sorted({*unsure, *waiting})

    @staticmethod
    def _end(snap: Snapshot, i: int) -> str:
        device, port, _, _ = snap.key(i)
        return f"{device}:{port}"

    def saved(self, snap: Snapshot, rows: list[tuple[str, str, int, int]], now: int) -> None:
        """The round was written: its values are the ones written, the next round is SAVE_EVERY_S away."""
        for device, port, value, _ in rows:
            i = snap.find(device, port, LEAF)
            if i is not None:
                self._written[i] = np.uint64(value)
        self._next_save = now + self.save_every
