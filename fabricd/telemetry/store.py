"""The counter store: one row per (device, port, leaf, index) series in numpy arrays, and snapshots for detectors.

Index layout (compact, so a series costs well under 200 bytes all-in): devices and ports are interned once
(a port row per (device, port name)); a leaf+index pair is a small int `code`; `slots[port_row, code]` is the series
row. No per-series Python object or string exists: a series' path is rebuilt from its port name and leaf template.

Rules for counters (uint64, cumulative):
- first sample: baseline, rate NaN;
- newer sample: rate = (value - previous) / dt;
- value dropped: a 64-bit wrap when the modular increase `(new - old) mod 2**64` is below `WRAP_WINDOW` (2**56, more
  than a day of octets at 400G), so the old value was within 2**56 of 2**64 and the rate is computed modulo 2**64;
  any other drop is a reset (reboot, clear counters): new baseline, rate NaN, previous cleared (prev_ts = NEVER);
- same timestamp = duplicate, older timestamp = out of order: ignored and counted.
Rates are therefore never negative and never span a reset. Time is always the notification's timestamp (ns).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from .paths import LEAF, Kind
from .series import F64, I64, NAN, NEVER, U64, Stat, StateEvent, stale
from .snapshot import Snapshot

WRAP_WINDOW = np.uint64(1 << 56)


def _grow(a: npt.NDArray[Any], size: int, fill: Any) -> npt.NDArray[Any]:
    out = np.full((size, *a.shape[1:]), fill, dtype=a.dtype)
    out[: len(a)] = a
    return out


# What a series row holds beyond its key (s_port, s_code): what another store's row is copied by (put_series).
MIRRORED = ("value", "gauge", "ts", "prev_value", "prev_ts", "rate")

_SERIES_FIELDS = (
    ("value", np.uint64, 0),  # counters: last value; ENUM/TEXT: id of the interned string
    ("gauge", np.float64, NAN),
    ("ts", np.int64, NEVER),
    ("prev_value", np.uint64, 0),
    ("prev_ts", np.int64, NEVER),
    ("rate", np.float64, NAN),  # per second
    ("s_port", np.int32, -1),
    ("s_code", np.uint16, 0),
)
_FILL = {f: fill for f, _, fill in _SERIES_FIELDS}
# What a snapshot shares with the store: each series column, and the other arrays by name.
_SHAREABLE = frozenset([*_FILL, "stats", "port_dev", "slots", "code_kind", "events"])


class CounterStore:
    """Series arrays plus their index. Not thread-safe: one writer (the ingestor); readers take `snapshot()`."""

    def __init__(self, capacity: int = 1024, event_capacity: int = 65536) -> None:
        self.n = 0
        self.arrays: dict[str, npt.NDArray[Any]] = {
            f: np.full(capacity, fill, dtype=dt) for f, dt, fill in _SERIES_FIELDS
        }
        # devices
        self.devices: list[str] = []
        self.device_ids: dict[str, int] = {}
        self.last_seen: list[int] = []
        self.synced: list[bool] = []
        self.stats = np.zeros((16, len(Stat)), dtype=np.int64)
        # ports
        self.n_ports = 0
        self.port_names: list[str] = []
        self.port_dev = np.full(256, -1, dtype=np.int32)
        self.ports_of: list[dict[str, int]] = []
        # codes: (leaf, index) pairs
        self.codes: list[tuple[str, str | None]] = []
        self.code_ids: dict[tuple[str, str | None], int] = {}
        self.code_kind = np.zeros(64, dtype=np.uint8)
        self.slots = np.full((256, 64), -1, dtype=np.int32)
        # interned strings for ENUM/TEXT values; id 0 means "none"
        self.strings: list[str] = [""]
        self.string_ids: dict[str, int] = {"": 0}
        # events ring (ENUM changes); ev_total counts every event ever appended
        self.ev_cap = event_capacity
        self.ev_series = np.zeros(event_capacity, dtype=np.int32)
        self.ev_value = np.zeros(event_capacity, dtype=np.int32)
        self.ev_prev = np.zeros(event_capacity, dtype=np.int32)
        self.ev_ts = np.zeros(event_capacity, dtype=np.int64)
        self.ev_total = 0
        # Called when events are appended (the service's pass loop wakes on it: an ON_CHANGE oper-status event is
        # judged when it lands, not at the next poll; an action waiting to see its port go down looks again).
        self.on_event: list[Callable[[], None]] = []
        self.sample_batches = 0  # counter/gauge batches written: the service runs a detector pass when it moves
        self._shared: set[str] = set()  # arrays a snapshot holds views of: copy one before writing it

    # --- interning ---------------------------------------------------------------------------------------
    def device_id(self, name: str) -> int:
        d = self.device_ids.get(name)
        if d is None:
            self._unshare()
            d = self.device_ids[name] = len(self.devices)
            self.devices.append(name)
            self.last_seen.append(NEVER)
            self.synced.append(False)
            self.ports_of.append({})
            if d >= len(self.stats):
                self.stats = _grow(self.stats, 2 * len(self.stats), 0)
        return d

    def port_row(self, device: int, port: str) -> int:
        row = self.ports_of[device].get(port)
        if row is None:
            self._unshare()
            row = self.ports_of[device][port] = self.n_ports
            self.port_names.append(port)
            if row >= len(self.port_dev):
                self.port_dev = _grow(self.port_dev, 2 * len(self.port_dev), -1)
                self.slots = _grow(self.slots, len(self.port_dev), -1)
            self.port_dev[row] = device
            self.n_ports += 1
        return row

    def code(self, leaf: str, index: str | None) -> int:
        key = (leaf, index)
        c = self.code_ids.get(key)
        if c is None:
            self._unshare()
            c = self.code_ids[key] = len(self.codes)
            if c >= 0xFFFF:
                raise OverflowError("more than 65535 distinct leaf/index pairs")
            self.codes.append(key)
            if c >= len(self.code_kind):
                self.code_kind = _grow(self.code_kind, 2 * len(self.code_kind), 0)
                wider = np.full((len(self.slots), len(self.code_kind)), -1, dtype=np.int32)
                wider[:, : self.slots.shape[1]] = self.slots
                self.slots = wider
            self.code_kind[c] = LEAF[leaf].kind
        return c

    def intern(self, text: str) -> int:
        i = self.string_ids.get(text)
        if i is None:
            i = self.string_ids[text] = len(self.strings)
            self.strings.append(text)
        return i

    def series_at(self, rows: I64, codes: I64) -> I64:
        """Series rows of (port row, code) pairs, allocating the new ones."""
        sidx: I64 = self.slots[rows, codes].astype(np.int64)
        new = sidx < 0
        if new.any():
            self._unshare()
            for r, c in zip(rows[new].tolist(), codes[new].tolist(), strict=True):
                if self.slots[r, c] < 0:
                    self.slots[r, c] = self._alloc(r, c)
            sidx = self.slots[rows, codes].astype(np.int64)
        return sidx

    def _alloc(self, row: int, code: int) -> int:
        i = self.n
        if i >= len(self.arrays["value"]):
            size = 2 * len(self.arrays["value"])
            self.arrays = {f: _grow(self.arrays[f], size, fill) for f, _, fill in _SERIES_FIELDS}
        self.arrays["s_port"][i] = row
        self.arrays["s_code"][i] = code
        self.n += 1
        return i

    def _unshare(self, *names: str) -> None:
        """Copy what a snapshot shares before writing it: the arrays `names` (series columns, "stats", "port_dev",
        "slots", "code_kind", "events"), or all of them. Only the columns a write touches are copied: a batch of
        counters copies 5 of the 8 series columns, and only their `n` used rows (at 832 switches ~11 ms of ~25)."""
        if not self._shared:
            return
        for name in names or tuple(self._shared):
            if name not in self._shared:
                continue
            self._shared.discard(name)
            if name in _FILL:
                old, n = self.arrays[name], self.n
                new = np.empty_like(old)
                new[:n] = old[:n]
                new[n:] = _FILL[name]  # the growth slack keeps its fill: _alloc relies on it
                self.arrays[name] = new
            elif name == "stats":
                self.stats = self.stats.copy()
            elif name == "port_dev":
                self.port_dev = self.port_dev.copy()
            elif name == "slots":
                self.slots = self.slots.copy()
            elif name == "code_kind":
                self.code_kind = self.code_kind.copy()
            else:
                assert name == "events", name
                self.ev_series, self.ev_value = self.ev_series.copy(), self.ev_value.copy()
                self.ev_prev, self.ev_ts = self.ev_prev.copy(), self.ev_ts.copy()

    # --- writes ------------------------------------------------------------------------------------------
    def devices_of(self, sidx: I64) -> I64:
        out: I64 = self.port_dev[self.arrays["s_port"][sidx]].astype(np.int64)
        return out

    def count(self, device: int, stat: Stat, n: int = 1) -> None:
        self._unshare("stats")
        self.stats[device, stat] += n

    def count_many(self, devices: I64, stat: Stat) -> None:
        if len(devices):
            self._unshare("stats")
            np.add.at(self.stats[:, stat], devices, 1)

    def seen(self, device: int, ts: int) -> None:
        if ts > self.last_seen[device]:
            self.last_seen[device] = ts

    def set_synced(self, device: int, synced: bool) -> None:
        """Whether the device's current stream has sent its initial sync_response (False when a stream (re)opens)."""
        self.synced[device] = synced

    def write_counters(self, sidx: I64, values: U64, ts: I64) -> None:
        self.sample_batches += 1
        for idx, v, t in _rounds(sidx, values, ts):
            self._counters(idx, v, t)

    def write_gauges(self, sidx: I64, values: F64, ts: I64) -> None:
        self.sample_batches += 1
        for idx, v, t in _rounds(sidx, values, ts):
            ok = self._order(idx, t)
            self._unshare("prev_ts", "ts", "gauge")
            a = self.arrays
            idx, t = idx[ok], t[ok]
            a["prev_ts"][idx] = a["ts"][idx]
            a["ts"][idx] = t
            a["gauge"][idx] = v[ok]

    def _order(self, idx: I64, t: I64) -> npt.NDArray[np.bool_]:
        """Mask of samples newer than the stored one; duplicates and older ones are counted."""
        last = self.arrays["ts"][idx]
        ok: npt.NDArray[np.bool_] = t > last
        if not ok.all():
            self.count_many(self.devices_of(idx[t == last]), Stat.DUPLICATES)
            self.count_many(self.devices_of(idx[t < last]), Stat.OUT_OF_ORDER)
        return ok

    def _counters(self, idx: I64, v: U64, t: I64) -> None:
        ok = self._order(idx, t)
        if not ok.all():
            idx, v, t = idx[ok], v[ok], t[ok]
        self._unshare("value", "ts", "prev_value", "prev_ts", "rate")
        a = self.arrays
        lt = a["ts"][idx]
        lv = a["value"][idx]
        fresh = lt == NEVER
        delta = v - lv  # uint64: modular
        drop = v < lv
        wrap = drop & (delta < WRAP_WINDOW)
        reset = drop & ~wrap
        unknown = fresh | reset
        with np.errstate(invalid="ignore", divide="ignore"):
            rate = delta.astype(np.float64) * 1e9 / (t - lt).astype(np.float64)
        rate[unknown] = NAN
        a["prev_value"][idx] = np.where(unknown, np.uint64(0), lv)
        a["prev_ts"][idx] = np.where(unknown, NEVER, lt)
        a["value"][idx] = v
        a["ts"][idx] = t
        a["rate"][idx] = rate
        if reset.any():
            self.count_many(self.devices_of(idx[reset]), Stat.RESETS)
        if wrap.any():
            self.count_many(self.devices_of(idx[wrap]), Stat.WRAPS)

    def write_state(self, i: int, text: str, ts: int) -> None:
        """An ENUM or TEXT value; ENUM changes (and the first value) become events."""
        self._unshare()
        a = self.arrays
        last = int(a["ts"][i])
        if ts <= last:
            dev = int(self.port_dev[a["s_port"][i]])
            self.stats[dev, Stat.DUPLICATES if ts == last else Stat.OUT_OF_ORDER] += 1
            return
        new = self.intern(text)
        old = int(a["value"][i]) if last != NEVER else 0
        if self.code_kind[a["s_code"][i]] == Kind.ENUM and (new != old or last == NEVER):
            k = self.ev_total % self.ev_cap
            self.ev_series[k], self.ev_value[k], self.ev_prev[k], self.ev_ts[k] = i, new, old, ts
            self.ev_total += 1
            for listener in self.on_event:
                listener()
        a["prev_value"][i], a["prev_ts"][i] = old, last
        a["value"][i], a["ts"][i] = new, ts

    def clear(self, sidx: I64) -> None:
        """Forget series (a deleted path): the next sample is a new baseline."""
        self._unshare()
        for f, _, fill in _SERIES_FIELDS:
            if f not in ("s_port", "s_code"):
                self.arrays[f][sidx] = fill

    def port_series(self, row: int) -> I64:
        s = self.slots[row]
        out: I64 = s[s >= 0].astype(np.int64)
        return out

    def forget(self, device: int, port: str, leaf: tuple[str, str | None] | None = None) -> None:
        """A switch deleted a path: the port's series (or one leaf of it: (leaf, index)) start over, no rate across
        the gap. Unknown ports and leaves are ignored."""
        row = self.ports_of[device].get(port)
        if row is None:
            return
        if leaf is None:
            self.clear(self.port_series(row))
            return
        c = self.code_ids.get(leaf)
        if c is not None and self.slots[row, c] >= 0:
            self.clear(np.array([self.slots[row, c]], dtype=np.int64))

    def count_notifications(self, devices: I64, updates: I64) -> None:
        """One notification per entry of `devices`, carrying `updates[i]` updates (a batch of the ingestor)."""
        self._unshare("stats")
        np.add.at(self.stats[:, Stat.NOTIFICATIONS], devices, 1)
        np.add.at(self.stats[:, Stat.UPDATES], devices, updates)

    # --- export (a telemetry worker's store) and the mirror's reads (the service's) -------------------------
    def export_changes(self, cursor: ExportCursor) -> StoreChanges:
        """Everything that changed since `cursor` (which moves on): new names and series, series whose sample
        changed, events, and devices whose last-seen, sync or stats changed."""
        n, nd, npo, nc, ns = self.n, len(self.devices), self.n_ports, len(self.codes), len(self.strings)
        a = self.arrays
        diff = np.zeros(n, dtype=bool)
        for f in _COMPARED:
            cursor.sent[f] = _at_least(cursor.sent[f], n, NEVER if f != "value" else 0)
            diff |= a[f][:n] != cursor.sent[f][:n]
        sidx = np.flatnonzero(diff).astype(np.int64)
        for f in _COMPARED:
            cursor.sent[f][sidx] = a[f][sidx]
        total = self.ev_total
        k = np.arange(max(cursor.ev_total, total - self.ev_cap), total) % self.ev_cap
        cursor.last_seen = _at_least(cursor.last_seen, nd, NEVER)
        cursor.synced = _at_least(cursor.synced, nd, False)
        cursor.stats = _at_least(cursor.stats, nd, 0)
        seen = np.array(self.last_seen, dtype=np.int64)
        synced = np.array(self.synced, dtype=bool)
        stats = self.stats[:nd]
        dev = np.flatnonzero(
            (seen != cursor.last_seen[:nd]) | (synced != cursor.synced[:nd]) | (stats != cursor.stats[:nd]).any(axis=1)
        ).astype(np.int64)
        cursor.last_seen[dev], cursor.synced[dev], cursor.stats[dev] = seen[dev], synced[dev], stats[dev]
        out = StoreChanges(
            devices=self.devices[cursor.n_dev : nd],
            port_dev=self.port_dev[cursor.n_ports : npo].astype(np.int64),
            port_names=self.port_names[cursor.n_ports : npo],
            codes=self.codes[cursor.n_codes : nc],
            strings=self.strings[cursor.n_strings : ns],
            s_port=a["s_port"][cursor.n_series : n].astype(np.int64),
            s_code=a["s_code"][cursor.n_series : n].astype(np.int64),
            sidx=sidx,
            fields={f: a[f][sidx] for f in MIRRORED},
            events=(
                self.ev_series[k].astype(np.int64),
                self.ev_value[k].astype(np.int64),
                self.ev_prev[k].astype(np.int64),
                self.ev_ts[k].copy(),
            ),
            dev=dev,
            last_seen=seen[dev],
            synced=synced[dev],
            stats=stats[dev].copy(),
        )
        cursor.n_dev, cursor.n_ports, cursor.n_codes, cursor.n_strings, cursor.n_series = nd, npo, nc, ns, n
        cursor.ev_total = total
        return out

    def stats_of(self, devices: I64) -> I64:
        """The stats rows of these devices (a copy)."""
        out: I64 = self.stats[devices].copy()
        return out

    def kinds_of_series(self, sidx: I64) -> npt.NDArray[Any]:
        """The Kind of each series' leaf."""
        return self.kinds_of(self.arrays["s_code"][sidx])

    def series_key(self, i: int) -> tuple[str, str, str, str | None]:
        """(device, port, leaf, index) of series row i."""
        row = int(self.arrays["s_port"][i])
        leaf, index = self.codes[int(self.arrays["s_code"][i])]
        return self.devices[int(self.port_dev[row])], self.port_names[row], leaf, index

    def device_stats(self) -> tuple[list[str], list[list[int]], list[bool]]:
        """Per device, in id order: names, stats rows (a copy, indexed by Stat) and synced flags."""
        n = min(len(self.devices), len(self.stats), len(self.synced))
        return list(self.devices[:n]), self.stats[:n].tolist(), list(self.synced[:n])

    def last_value(self, i: int) -> int | None:
        """A series' current raw value (a counter, or a string id for ENUM/TEXT), None before its first sample."""
        return None if self.arrays["ts"][i] == NEVER else int(self.arrays["value"][i])

    def count_updates(self, devices: I64, updates: I64) -> None:
        """More updates of notifications already counted (the ingestor's counters it decoded itself)."""
        self._unshare("stats")
        np.add.at(self.stats[:, Stat.UPDATES], devices, updates)

    def kinds_of(self, codes: I64) -> npt.NDArray[Any]:
        """The Kind of each leaf code."""
        out: npt.NDArray[Any] = self.code_kind[codes]
        return out

    def device_name(self, device: int) -> str:
        return self.devices[device]

    def last_seen_ts(self, device: int) -> int:
        return int(self.last_seen[device])

    # --- mirrored writes (telemetry workers) ------------------------------------------------------------
    # Another process's store computed these rows by the rules above; they are copied as they are, so rates,
    # resets and the order checks stay where the samples arrived.
    def put_series(self, sidx: I64, fields: dict[str, npt.NDArray[Any]]) -> None:
        """Overwrite `MIRRORED` fields of series rows `sidx` (vectorised; rows must exist, each at most once)."""
        if len(sidx):
            self._unshare(*fields)
            self.sample_batches += 1
            for f, v in fields.items():
                self.arrays[f][sidx] = v

    def put_events(self, series: I64, value: I64, prev: I64, ts: I64) -> None:
        """Append ENUM change events (string ids of this store) to the ring, in the order given."""
        n = len(series)
        if n == 0:
            return
        self._unshare("events")
        if n > self.ev_cap:  # the ring keeps the newest ev_cap anyway
            skip = n - self.ev_cap
            self.ev_total += skip
            series, value, prev, ts = series[skip:], value[skip:], prev[skip:], ts[skip:]
            n = self.ev_cap
        k = (self.ev_total + np.arange(n)) % self.ev_cap
        self.ev_series[k], self.ev_value[k], self.ev_prev[k], self.ev_ts[k] = series, value, prev, ts
        self.ev_total += n
        for listener in self.on_event:
            listener()

    def events_after(self, total: int, leaf: str) -> tuple[list[StateEvent], int]:
        """The changes of `leaf` (not a series' first value) appended since the ring held `total` events, in arrival
        order, and the ring's total now (pass it next time). Reads the ring in place: no snapshot, no copy of the
        store, so an event-driven pass costs what its few events cost. Events pushed out of the ring are lost."""
        end = self.ev_total
        start = max(total, end - self.ev_cap)
        if start >= end:
            return [], end
        k = np.arange(start, end) % self.ev_cap
        k = k[self.ev_prev[k] != 0]
        ser = self.ev_series[k].astype(np.int64)
        codes = self.arrays["s_code"][ser]
        wanted = [c for c, (lf, _) in enumerate(self.codes) if lf == leaf]
        hit = np.isin(codes, wanted)
        k, ser = k[hit], ser[hit]
        rows = self.arrays["s_port"][ser]
        devices, ports, strings = self.devices, self.port_names, self.strings
        return [
            StateEvent(devices[d], ports[r], leaf, strings[v], strings[p], t)
            for d, r, v, p, t in zip(
                self.port_dev[rows].tolist(), rows.tolist(), self.ev_value[k].tolist(), self.ev_prev[k].tolist(),
                self.ev_ts[k].tolist(), strict=True,
            )
        ], end  # fmt: skip

    def put_stats(self, devices: I64, rows: I64) -> None:
        """Overwrite whole `Stat` rows of `devices`."""
        if len(devices):
            self._unshare("stats")
            self.stats[devices] = rows

    # --- reads -------------------------------------------------------------------------------------------
    def snapshot(self) -> Snapshot:
        """A consistent read-only view; O(1) for arrays (copy-on-write: the store copies before its next write)."""
        self._shared = set(_SHAREABLE)
        n = self.n

        def ro(a: npt.NDArray[Any]) -> npt.NDArray[Any]:
            v = a.view()
            v.flags.writeable = False
            return v

        a = {f: ro(arr[:n]) for f, arr in self.arrays.items()}
        return Snapshot(
            value=a["value"],
            gauge=a["gauge"],
            ts=a["ts"],
            prev_value=a["prev_value"],
            prev_ts=a["prev_ts"],
            rate=a["rate"],
            series_port=a["s_port"],
            series_code=a["s_code"],
            port_dev=ro(self.port_dev[: self.n_ports]),
            slots=ro(self.slots[: self.n_ports]),
            code_kind=ro(self.code_kind[: len(self.codes)]),
            devices=tuple(self.devices),
            port_names=tuple(self.port_names),
            codes=tuple(self.codes),
            strings=tuple(self.strings),
            last_seen=tuple(self.last_seen),
            synced=tuple(self.synced),
            stats=ro(self.stats[: len(self.devices)]),
            events=(ro(self.ev_series), ro(self.ev_value), ro(self.ev_prev), ro(self.ev_ts), self.ev_total),
            # The store only ever adds to these lookups; the snapshot bounds-checks what it finds in them, so it
            # can share them instead of rebuilding an 80k-port index per snapshot.
            live_ports=self.ports_of,
        )

    def stale(self, device: str, now: int, interval: int) -> bool:
        d = self.device_ids.get(device)
        return d is None or stale(self.last_seen[d], now, interval)


# --- replication: what changed since an export, for another store to mirror (telemetry workers) ----------
@dataclass
class StoreChanges:
    """What changed in a store since its previous export; ids are that store's own (device, port row, code...)."""

    devices: list[str]  # newly interned, in id order
    port_dev: I64  # new ports: device id and name
    port_names: list[str]
    codes: list[tuple[str, str | None]]
    strings: list[str]
    s_port: I64  # new series: port row and code
    s_code: I64
    sidx: I64  # changed series rows and their MIRRORED fields
    fields: dict[str, npt.NDArray[Any]]
    events: tuple[I64, I64, I64, I64]  # series, value, previous (string ids), ts
    dev: I64  # devices whose last_seen, synced or stats changed
    last_seen: I64
    synced: npt.NDArray[np.bool_]
    stats: I64

    @property
    def empty(self) -> bool:
        return not (len(self.sidx) or len(self.events[0]) or len(self.dev) or len(self.s_port))


class ExportCursor:
    """What earlier exports of one store shipped (so the next ships only the difference)."""

    def __init__(self, store: CounterStore) -> None:
        self.n_dev = self.n_ports = self.n_codes = self.n_strings = self.n_series = self.ev_total = 0
        self.sent = {f: np.empty(0, dtype=store.arrays[f].dtype) for f in _COMPARED}
        self.last_seen = np.empty(0, dtype=np.int64)
        self.synced = np.empty(0, dtype=bool)
        self.stats = np.empty((0, len(Stat)), dtype=np.int64)


_COMPARED = ("ts", "prev_ts", "value")  # a series changed when one of these did


def _at_least(a: npt.NDArray[Any], n: int, fill: Any) -> npt.NDArray[Any]:
    return a if len(a) >= n else _grow(a, max(n, 2 * len(a)), fill)


def _rounds(sidx: I64, v: npt.NDArray[Any], ts: I64) -> Iterator[tuple[I64, npt.NDArray[Any], I64]]:
    """Split a batch so each round touches a series at most once, keeping arrival order per series."""
    n = len(sidx)
    if n < 2:
        yield sidx, v, ts
        return
    order = np.argsort(sidx, kind="stable")
    s = sidx[order]
    first = np.empty(n, dtype=bool)
    first[0] = True
    np.not_equal(s[1:], s[:-1], out=first[1:])
    if first.all():
        yield sidx, v, ts
        return
    pos = np.arange(n)
    rank_sorted = pos - np.maximum.accumulate(np.where(first, pos, 0))
    rank = np.empty(n, dtype=np.int64)
    rank[order] = rank_sorted
    for r in range(int(rank_sorted.max()) + 1):
        m = rank == r
        yield sidx[m], v[m], ts[m]
