"""What detectors read: an immutable snapshot of the counter store's arrays (`CounterStore.snapshot`)."""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import cached_property
from typing import Any

import numpy as np
import numpy.typing as npt

from .paths import Kind, render
from .series import F64, I64, NAN, NEVER, U64, Stat, StateEvent, stale


@dataclass(frozen=True, eq=False)
class Snapshot:
    """What detectors read: arrays indexed by series row, and the index to find rows. Immutable."""

    value: U64
    gauge: F64
    ts: I64
    prev_value: U64
    prev_ts: I64
    rate: F64
    series_port: npt.NDArray[np.int32]
    series_code: npt.NDArray[np.uint16]
    port_dev: npt.NDArray[np.int32]
    slots: npt.NDArray[np.int32]
    code_kind: npt.NDArray[np.uint8]
    devices: tuple[str, ...]
    port_names: tuple[str, ...]
    codes: tuple[tuple[str, str | None], ...]
    strings: tuple[str, ...]
    last_seen: tuple[int, ...]
    synced: tuple[bool, ...]
    stats: I64
    events: tuple[Any, Any, Any, Any, int]
    live_ports: list[dict[str, int]] | None = None  # the store's device -> {port: row}, shared (see snapshot())

    def __len__(self) -> int:
        return len(self.value)

    @cached_property
    def _device_ids(self) -> dict[str, int]:
        return {d: i for i, d in enumerate(self.devices)}

    def _port_row(self, d: int, port: str) -> int | None:
        if self.live_ports is not None:
            row = self.live_ports[d].get(port)
            return row if row is not None and row < len(self.port_dev) else None  # added after this snapshot
        return self._ports.get((d, port))

    @cached_property
    def _ports(self) -> dict[tuple[int, str], int]:
        return {(int(d), p): r for r, (d, p) in enumerate(zip(self.port_dev.tolist(), self.port_names, strict=True))}

    @cached_property
    def _codes_of_leaf(self) -> dict[str, list[int]]:
        out: dict[str, list[int]] = {}
        for c, (leaf, _) in enumerate(self.codes):
            out.setdefault(leaf, []).append(c)
        return out

    def _wanted(self, leaf: str | None, index: str | int | None) -> list[int]:
        """The codes of `leaf` (any, when None) with `index` (any, when None)."""
        want = None if index is None else str(index)
        codes = self._codes_of_leaf.get(leaf, []) if leaf is not None else range(len(self.codes))
        return [c for c in codes if index is None or self.codes[c][1] == want]

    def _code(self, leaf: str, index: str | int | None) -> int | None:
        want = None if index is None else str(index)
        for c in self._codes_of_leaf.get(leaf, ()):
            if self.codes[c][1] == want:
                return c
        return None

    def port_row(self, device: str, port: str) -> int | None:
        """The row of (device, port) in `port_dev`/`slots` (what vectorised readers index with), None if unknown."""
        d = self._device_ids.get(device)
        return None if d is None else self._port_row(d, port)

    def find(self, device: str, port: str, leaf: str, index: str | int | None = None) -> int | None:
        """The series row of one leaf, e.g. find("leaf-g0-r0", "Ethernet1/1", "pfc.in-frames", 3)."""
        d = self._device_ids.get(device)
        row = None if d is None else self._port_row(d, port)
        c = self._code(leaf, index)
        if row is None or c is None or c >= self.slots.shape[1]:
            return None
        i = int(self.slots[row, c])
        return i if 0 <= i < len(self) else None

    def rate_of(self, device: str, port: str, leaf: str, index: str | int | None = None) -> float | None:
        """A counter's current rate per second, or None before it has two samples (or when it is not finite)."""
        i = self.find(device, port, leaf, index)
        if i is None or self.ts[i] == NEVER or self.prev_ts[i] == NEVER:
            return None
        r = float(self.rate[i])
        return r if math.isfinite(r) else None

    def select(
        self,
        device: str | None = None,
        port: str | None = None,
        leaf: str | None = None,
        index: str | int | None = None,
    ) -> I64:
        """Series rows matching every given field (vectorised; use it for fabric-wide detectors)."""
        if device is None and port is None and (leaf is not None or index is not None):
            return self._select_codes(leaf, index)
        if device is not None and port is not None:
            return self._select_port(device, port, leaf, index)
        mask = np.ones(len(self), dtype=bool)
        if device is not None:
            d = self._device_ids.get(device, -1)
            mask &= self.port_dev[self.series_port] == d
        if port is not None:
            rows = [r for r, p in enumerate(self.port_names) if p == port]
            mask &= np.isin(self.series_port, rows)
        if leaf is not None or index is not None:
            mask &= np.isin(self.series_code, self._wanted(leaf, index))
        return np.flatnonzero(mask).astype(np.int64)

    def _select_port(self, device: str, port: str, leaf: str | None, index: str | int | None) -> I64:
        # One port's series are its row of `slots`: a lookup, not a pass over every series (the action path asks
        # this for the evidence of each port it acts on).
        row = self.port_row(device, port)
        if row is None:
            return np.zeros(0, dtype=np.int64)
        width = self.slots.shape[1]
        found = self.slots[row, [c for c in self._wanted(leaf, index) if c < width]]
        rows: I64 = found[(found >= 0) & (found < len(self))].astype(np.int64)
        rows.sort()
        return rows

    def _select_codes(self, leaf: str | None, index: str | int | None) -> I64:
        # A series' row sits in its (port, code) slot, so a few columns of `slots` (one entry per port) hold every
        # series of these codes: a tenth of the work of testing the code of every series.
        width = self.slots.shape[1]
        cols = self.slots[:, [c for c in self._wanted(leaf, index) if c < width]]
        rows: I64 = cols[(cols >= 0) & (cols < len(self))].astype(np.int64)
        rows.sort(kind="stable")  # timsort: near linear on the already ascending rows a store usually holds
        return rows

    def leaves_by_device(self) -> dict[str, set[str]]:
        """Per device, the leaves it has sent at least once (any port, any index)."""
        have = self.ts != NEVER
        dev = self.port_dev[self.series_port[have]].astype(np.int64)
        pairs = np.unique(dev * 65536 + self.series_code[have].astype(np.int64))
        out: dict[str, set[str]] = {}
        for pair in pairs.tolist():
            out.setdefault(self.devices[pair // 65536], set()).add(self.codes[pair % 65536][0])
        return out

    def key(self, i: int) -> tuple[str, str, str, str | None]:
        row = int(self.series_port[i])
        leaf, index = self.codes[int(self.series_code[i])]
        return self.devices[int(self.port_dev[row])], self.port_names[row], leaf, index

    def path(self, i: int) -> str:
        _, port, leaf, index = self.key(i)
        return render(port, leaf, index)

    def kind(self, i: int) -> Kind:
        return Kind(int(self.code_kind[int(self.series_code[i])]))

    def text(self, i: int) -> str | None:
        """Current value of an ENUM/TEXT series (None before the first sample)."""
        return None if self.ts[i] == NEVER else self.strings[int(self.value[i])]

    def current(self, i: int) -> int | float | str | None:
        if self.ts[i] == NEVER:
            return None
        k = self.kind(i)
        if k == Kind.COUNTER:
            return int(self.value[i])
        return float(self.gauge[i]) if k == Kind.GAUGE else self.strings[int(self.value[i])]

    def delta(self, idx: I64) -> F64:
        """value - previous (modulo 2**64, so wraps are right); NaN where no previous sample in this epoch."""
        d = (self.value[idx] - self.prev_value[idx]).astype(np.float64)
        d[self.prev_ts[idx] == NEVER] = NAN
        return d

    def events_since(self, ts: int, *, leaf: str | None = None, changes_only: bool = False) -> list[StateEvent]:
        """ENUM changes (oper/admin status) with timestamp >= ts still in the ring, oldest first; only those of
        `leaf` if given, and with `changes_only` not a series' first value (`previous` None)."""
        ser, val, prev, ets, total = self.events
        cap = len(ets)
        filled = min(total, cap)
        # Vectorised: only the events at or after `ts` become objects (the ring holds up to `cap` of them).
        keep = np.asarray(ets[:filled]) >= ts
        if changes_only:  # after a sync the ring holds ~65k first values: drop them before any object is made
            keep &= np.asarray(prev[:filled]) != 0
        if leaf is not None:
            of_leaf = [c for c, (lf, _) in enumerate(self.codes) if lf == leaf]
            keep &= np.isin(self.series_code[np.asarray(ser[:filled], dtype=np.int64)], of_leaf)
        hits = np.flatnonzero(keep) if cap else np.empty(0, dtype=np.int64)
        oldest = total % cap if total > cap else 0
        # By time; events of the same time in the order they arrived (their age in the ring).
        k = hits[np.lexsort(((hits - oldest) % cap if cap else hits, ets[hits]))]
        s = np.asarray(ser[k], dtype=np.int64)
        rows = self.series_port[s]
        # Keys read column-wise (lists of ints), not per event: after a sync the ring holds ~65k of them.
        devices, ports, codes, strings = self.devices, self.port_names, self.codes, self.strings
        return [
            StateEvent(devices[d], ports[r], codes[c][0], strings[v], strings[p] if p else None, t)
            for d, r, c, v, p, t in zip(
                self.port_dev[rows].tolist(),
                rows.tolist(),
                self.series_code[s].tolist(),
                val[k].tolist(),
                prev[k].tolist(),
                ets[k].tolist(),
                strict=True,
            )
        ]

    def stat(self, device: str, stat: Stat) -> int:
        d = self._device_ids.get(device)
        return 0 if d is None else int(self.stats[d, stat])

    def stale(self, device: str, now: int, interval: int) -> bool:
        d = self._device_ids.get(device)
        return d is None or stale(self.last_seen[d], now, interval)
