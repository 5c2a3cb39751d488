"""The hot path: serialized gNMI SubscribeResponse bytes -> counter store.

Per notification the prefix bytes are looked up once ((channel, prefix bytes) -> device, port row, and a dict of
update-path bytes -> leaf code shared by every port with the same prefix shape). In the steady state the port's
template (templates.py: one regex per layout of update paths) then reads every value of the notification in one
C call; the first notification of a port, and any whose layout changed, is read by a raw walker (one dict lookup
per update on a bytes slice of the message: no path strings, no protobuf objects), which also learns the template.
Anything the walker does not read (sync_response, deletes, long values, unusual field order, garbage) goes through
the protobuf parser (`_general`), which ends in the same batch. Values stay as TypedValue bytes until `flush`,
which decodes all uint varints and doubles with numpy at once and writes the store in vectorised batches; the rare
other encodings are decoded one by one.

Bad input (undecodable bytes, wrong value types, missing values, huge paths) is counted per device and logged at
most once per device per minute; it never raises and never reaches a rate.
"""

from __future__ import annotations

import base64
import json
import logging
import math
import struct
from collections.abc import Iterable
from typing import Any, Protocol

import numpy as np
import numpy.typing as npt
from google.protobuf.message import DecodeError
from pygnmi.spec.v080 import gnmi_pb2

from . import sonic
from .paths import Elem, Kind, classify, leaves_in_subtree, match_rel, pb_elems, render, split_root
from .series import I64, Stat
from .store import CounterStore
from .templates import MAX_TEMPLATES, CompileBudget, Template, compile_cost, compile_template, value_kinds, varint

MISS, UNKNOWN, BAD = -1, -2, -3
MAX_PATH_BYTES = 1024  # longer prefix/update paths are malformed (EOS paths are < 200 bytes)
MAX_ELEMS = 32
REL_CACHE_MAX = 4096  # per prefix shape; bounds what a device sending random paths can make us keep
PREFIX_CACHE_MAX = 1 << 20  # per channel
LOG_EVERY_NS = 60 * 10**9
_INT64_MAX = (1 << 63) - 1
_TS_BYTES = 9  # a unix-ns timestamp since 1972 is a 9-byte varint
_U64_TOP = 1 << 64

Value = int | float | str
# (device id, base = port row << 16 or 0, rel cache, prefix elems, tree or "", root length, [template or None])
Ctx = tuple[int, int, dict[bytes, int], tuple[Elem, ...], str, int, list[Template | None]]


class UpdateSink(Protocol):
    """Receives every accepted update (e.g. trace.TraceWriter), in arrival order."""

    def record(self, device: str, path: str, value: Value, ts: int) -> None: ...


class _Odd(Exception):
    """The raw walker met a layout it does not read; the protobuf parser takes the message."""


def _varint(b: bytes, pos: int) -> tuple[int, int]:
    out = shift = 0
    for _ in range(10):
        c = b[pos]
        pos += 1
        out |= (c & 0x7F) << shift
        if c < 0x80:
            return out, pos
        shift += 7
    raise _Odd


class Ingestor:
    """Feeds a CounterStore from gNMI SubscribeResponses. One per process; not thread-safe.

    `channel` names the device a stream belongs to (used when the prefix carries no target). Writes are batched:
    they reach the store at `flush()` (called automatically every `flush_size` updates, and by `snapshot()`).
    A flush does not yield (~0.35 us per update): 4096 updates keep that pause at 1-4 ms on a loop that is also
    reading streams, where 16384 made it 6-20 ms, for the same throughput. `last_ts` is the timestamp of the
    notification in the message last ingested (0 if it had none), for the client's lag measurement.
    """

    def __init__(
        self,
        store: CounterStore,
        *,
        flush_size: int = 4096,
        recorder: UpdateSink | None = None,
        log: logging.Logger | None = None,
        compile_budget: CompileBudget | None = None,
    ) -> None:
        self.store = store
        self.compile_budget = compile_budget or CompileBudget()
        self.flush_size = flush_size
        self.recorder = recorder
        self.log = log or logging.getLogger("fabricd.telemetry")
        self._codes: list[int] = []
        self._vals: list[bytes] = []
        self._n_dev: list[int] = []
        self._n_ts: list[int] = []
        self._n_base: list[int] = []
        self._n_count: list[int] = []
        self._prefixes: dict[str, dict[bytes, Ctx]] = {}
        self._shapes: dict[tuple[str, tuple[Elem, ...]], dict[bytes, int]] = {}
        self._sonic_codes: dict[tuple[int, str, str, str | None], int] = {}  # (device, port, leaf, index) -> code
        self._aliases: dict[int, dict[str, str]] = {}  # SONiC device -> alias -> port name (APPL_DB PORT_TABLE)
        self._queue_oids: dict[int, dict[str, str]] = {}  # SONiC device -> queue OID -> "EthernetN:Q" (its name map)
        self._pg_oids: dict[int, dict[str, str]] = {}  # SONiC device -> priority-group OID -> "EthernetN:PG"
        self._db_prefixes: set[bytes] = set()  # prefixes naming a SONiC database (the raw walker leaves them alone)
        # SONiC counters decoded from JSON go straight to the store at flush, not through TypedValue bytes:
        self._d_codes: list[int] = []  # packed (port row << 16 | code)
        self._d_vals: list[int] = []
        self._d_dev: list[int] = []  # per SONiC notification: device, timestamp, number of counters
        self._d_ts: list[int] = []
        self._d_count: list[int] = []
        self._templates: dict[tuple[int, bytes, tuple[bytes, ...]], Template] = {}
        self._logged: dict[int, int] = {}
        self._paths: dict[int, str] = {}  # series -> path text, only when recording
        self.last_ts = 0
        self._ts_bytes, self._ts = b"", 0  # the last 9-byte timestamp varint decoded, and its value
        self.templated = 0  # notifications read by a template (the rest by the walker or the protobuf parser)

    # --- entry points ------------------------------------------------------------------------------------
    def ingest(self, data: bytes | Any, channel: str, now: int | None = None) -> None:
        """One SubscribeResponse (serialized bytes, or a gnmi_pb2 message). `now` (ns) only paces log lines."""
        if isinstance(data, bytes):
            b = data
        elif isinstance(data, bytearray | memoryview):
            b = bytes(data)
        else:
            b = data.SerializeToString()
        mark = len(self._codes)
        self.last_ts = 0
        try:
            self._fast(b, channel)
        except (_Odd, IndexError):
            del self._codes[mark:], self._vals[mark:]
            self._general(b, channel, now)
        if len(self._codes) + len(self._d_codes) >= self.flush_size:
            self.flush()

    def ingest_many(self, messages: Iterable[bytes | Any], channel: str, now: int | None = None) -> None:
        for m in messages:
            self.ingest(m, channel, now)
        self.flush()

    def snapshot(self) -> Any:
        self.flush()
        return self.store.snapshot()

    # --- decoding ----------------------------------------------------------------------------------------
    def _fast(self, b: bytes, channel: str) -> None:
        """The common layout: update{timestamp, prefix, update{path, val}*}. Raises _Odd for anything else."""
        if b[0] != 0x0A:
            raise _Odd
        ln, pos = _varint(b, 1)
        end = pos + ln
        if end != len(b) or b[pos] != 0x08:
            raise _Odd
        # The notifications of one sample share a timestamp: reuse the last one's decoding when the bytes match.
        tsb = b[pos + 1 : pos + 1 + _TS_BYTES]
        if tsb == self._ts_bytes:
            ts, pos = self._ts, pos + 1 + _TS_BYTES
        else:
            ts, after = _varint(b, pos + 1)
            if after - pos - 1 == _TS_BYTES:
                self._ts_bytes, self._ts = tsb, ts
            pos = after
        if b[pos] != 0x12 or not 0 < ts <= _INT64_MAX:
            raise _Odd
        plen = b[pos + 1]
        if plen < 0x80:
            pos += 2
        else:
            plen, pos = _varint(b, pos + 1)
        pfx = b[pos : pos + plen]
        pos += plen
        ctx = self._prefixes.get(channel, {}).get(pfx) or self._prefix(channel, pfx)
        if ctx is None:
            raise _Odd
        t = ctx[6][0]
        if t is not None:
            m = t.match.fullmatch(b, pos, end)
            if m is not None:  # this port's usual layout: every value in one regex call (templates.py)
                self.templated += 1
                self._codes.extend(t.codes)
                self._vals.extend(m.groups())
                self._notification(ctx, ts, len(t.codes))
                return
        rel = ctx[2]
        get = rel.get
        add_code, add_val = self._codes.append, self._vals.append
        keys: list[bytes] = []
        add_key = keys.append
        n = 0
        while pos < end:
            if b[pos] != 0x22:
                raise _Odd
            ulen = b[pos + 1]
            if ulen < 0x80:
                s = pos + 2
            else:
                hi = b[pos + 2]
                if hi >= 0x80:
                    raise _Odd
                ulen = (ulen & 0x7F) | (hi << 7)
                s = pos + 3
            ue = s + ulen
            if b[s] != 0x0A:
                raise _Odd
            pl = b[s + 1]
            if pl < 0x80:
                ps = s + 2
            else:
                pl = (pl & 0x7F) | (b[s + 2] << 7)
                ps = s + 3
            pe = ps + pl
            if b[pe] != 0x1A or b[pe + 1] + pe + 2 != ue:
                raise _Odd
            key = b[ps:pe]
            c = get(key, MISS)
            if c == MISS:
                c = self._resolve(ctx, key)
            add_code(c)
            add_key(key)
            add_val(b[pe + 2 : ue])
            pos = ue
            n += 1
        if pos != end:
            raise _Odd
        if ctx[4]:
            self._learn(ctx, keys, n)
        self._notification(ctx, ts, n)

    def _learn(self, ctx: Ctx, keys: list[bytes], n: int) -> None:
        """Give the port the template of the layout just walked (shared by its prefix shape). A layout no template
        reads (strings, unknown leaves, an empty notification) leaves the port's template as it was: its usual
        layout comes back."""
        if len(ctx[3]) != ctx[5]:
            # a prefix below the port's root (a routed port's address, keyed by the address): an ON_CHANGE leaf or
            # two, each prefix its own shape; templates are for the per-port SAMPLE layouts, and compiling one per
            # address would spend the compile budget those need
            return
        kinds = value_kinds(keys, self._vals[len(self._vals) - n :])
        codes = self._codes[len(self._codes) - n :]
        if kinds is None or min(codes, default=-1) < 0:
            return
        key = (id(ctx[2]), kinds, tuple(keys))
        t = self._templates.get(key)
        if t is None and len(self._templates) < MAX_TEMPLATES and self.compile_budget.take(compile_cost(keys)):
            t = self._templates[key] = compile_template(keys, kinds, codes)
        ctx[6][0] = t

    def _notification(self, ctx: Ctx, ts: int, n: int) -> None:
        self.store.seen(ctx[0], ts)  # now, not at flush: staleness must not wait for a batch to fill
        self.last_ts = ts
        self._n_dev.append(ctx[0])
        self._n_ts.append(ts)
        self._n_base.append(ctx[1])
        self._n_count.append(n)

    def _prefix(self, channel: str, pfx: bytes) -> Ctx | None:
        """Build and cache the context of a prefix (None if it is malformed, or names a SONiC database)."""
        if len(pfx) > MAX_PATH_BYTES or pfx in self._db_prefixes:
            return None
        try:
            p = gnmi_pb2.Path.FromString(pfx)
        except DecodeError:
            return None
        if p.target in sonic.TARGETS:
            if len(self._db_prefixes) < REL_CACHE_MAX:
                self._db_prefixes.add(pfx)
            return None  # a SONiC database, not a device: rows of JSON, read by _sonic
        elems = pb_elems(p)
        if len(elems) > MAX_ELEMS:
            return None
        dev = self.store.device_id(str(p.target) or channel)
        root = split_root(elems)
        if root is not None:
            tree, port, k = root
            rel = self._shapes.setdefault((tree, elems[k:]), {})
            ctx: Ctx = (dev, self.store.port_row(dev, port) << 16, rel, elems, tree, k, [None])
        else:
            ctx = (dev, 0, {}, elems, "", 0, [None])
        cache = self._prefixes.setdefault(channel, {})
        if len(cache) < PREFIX_CACHE_MAX:
            cache[pfx] = ctx
        return ctx

    def _resolve(self, ctx: Ctx, key: bytes) -> int:
        """Leaf code (or port row << 16 | code when the prefix names no port) of an update path; cached."""
        dev, _, rel, elems, tree, k, _ = ctx
        if len(key) > MAX_PATH_BYTES:
            return BAD
        try:
            full = elems + pb_elems(gnmi_pb2.Path.FromString(key))
        except DecodeError:
            return BAD
        if len(full) > MAX_ELEMS:
            return BAD
        if tree:
            found = match_rel(tree, full[k:])
            c = UNKNOWN if found is None else self.store.code(found[0].name, found[1])
        else:
            info = classify(full)
            if info is None:
                c = UNKNOWN
            else:
                c = (self.store.port_row(dev, info.port) << 16) | self.store.code(info.leaf, info.index)
        if len(rel) < REL_CACHE_MAX:
            rel[key] = c
        return c

    def _general(self, b: bytes, channel: str, now: int | None) -> None:
        """Any SubscribeResponse, through the protobuf parser."""
        try:
            r = gnmi_pb2.SubscribeResponse.FromString(b)
        except DecodeError:
            self._bad(self.store.device_id(channel), "undecodable SubscribeResponse", now)
            return
        which = r.WhichOneof("response")
        if which == "sync_response":
            dev = self.store.device_id(channel)
            self.store.set_synced(dev, True)
            self.store.count(dev, Stat.SYNCS)
            return
        if which != "update":
            self._bad(self.store.device_id(channel), f"SubscribeResponse without a notification ({which})", now)
            return
        note = r.update
        if note.prefix.target in sonic.TARGETS:
            self._sonic(note, channel, now)
            return
        ctx = self._prefix(channel, note.prefix.SerializeToString())
        if ctx is None:
            self._bad(self.store.device_id(channel), "malformed or oversized prefix", now)
            return
        ts = int(note.timestamp)
        if not 0 < ts <= _INT64_MAX:
            self._bad(ctx[0], f"notification timestamp {ts} out of range", now)
            return
        if note.delete:
            self.flush()
            for d in note.delete:
                self._delete(ctx, d)
        n = 0
        for u in note.update:
            if not u.HasField("val"):
                self._bad(ctx[0], "update without 'val'", now or ts)
                continue
            key = u.path.SerializeToString()
            c = ctx[2].get(key, MISS)
            self._codes.append(self._resolve(ctx, key) if c == MISS else c)
            self._vals.append(u.val.SerializeToString())
            n += 1
        self._notification(ctx, ts, n)

    def _sonic(self, note: Any, channel: str, now: int | None) -> None:
        """A notification of SONiC's DB paths: each update's value is a table row (JSON), decoded by sonic.decode
        into leaves; a row that yields none counts as an unknown path."""
        store = self.store
        dev = store.device_id(channel)
        ts = int(note.timestamp)
        if not 0 < ts <= _INT64_MAX:
            self._bad(dev, f"notification timestamp {ts} out of range", now)
            return
        target = str(note.prefix.target)
        prefix = [str(e.name) for e in note.prefix.elem]
        if note.delete:  # a row gone (an LLDP neighbour when its port went down, bgpmon clearing its table)
            self.flush()
            for d in note.delete:
                store.count(dev, Stat.DELETES)
                path = prefix + [str(e.name) for e in d.elem]
                for port, leaf, index in sonic.row_leaves(target, path, self._aliases.get(dev)):
                    store.forget(dev, port, (leaf, index))
        n = direct = 0
        codes, codes_append, vals_append = self._sonic_codes, self._codes.append, self._vals.append
        d_codes, d_vals = self._d_codes, self._d_vals
        for u in note.update:
            which = u.val.WhichOneof("value")
            try:
                row = json.loads(getattr(u.val, which)) if which in ("json_ietf_val", "json_val") else None
            except ValueError:
                row = None
            if not isinstance(row, dict):
                self._bad(dev, f"SONiC {target} update whose value is not a JSON object ({which})", now or ts)
                continue
            path = prefix + [str(e.name) for e in u.path.elem]
            before = n + direct
            if target == "APPL_DB" and len(path) == 2 and isinstance(alias := row.get("alias"), str) and alias:
                self._aliases.setdefault(dev, {})[alias] = path[1]  # a vendor alias keys this port's counters
            if target == "COUNTERS_DB" and (names := sonic.queue_names(path, row)) is not None:
                self._queue_oids[dev] = names  # the watermarks are keyed by these OIDs
            if target == "COUNTERS_DB" and (names := sonic.pg_names(path, row)) is not None:
                self._pg_oids[dev] = names
            rows = sonic.decode(
                target, path, row, self._aliases.get(dev), self._queue_oids.get(dev), self._pg_oids.get(dev)
            )
            for port, leaf, index, value in rows:
                key = (dev, port, leaf, index)
                c = codes.get(key)
                if c is None:
                    c = codes[key] = (store.port_row(dev, port) << 16) | store.code(leaf, index)
                if value.__class__ is int and self.recorder is None:  # a recorder needs every update as bytes
                    d_codes.append(c)
                    d_vals.append(value)
                    direct += 1
                    continue
                codes_append(c)
                # TypedValue bytes as flush() reads them: uint_val (0x18 varint), double_val (0x71), string_val
                if value.__class__ is int:
                    vals_append(b"\x18" + varint(value))
                elif value.__class__ is float:
                    vals_append(b"\x71" + struct.pack("<d", value))
                else:
                    vals_append(gnmi_pb2.TypedValue(string_val=value).SerializeToString())
                n += 1
            if n + direct == before and not sonic.known_path(target, path):
                self._codes.append(UNKNOWN)
                self._vals.append(b"")
                n += 1
        self._notification((dev, 0, {}, (), "", 0, [None]), ts, n)
        if direct:
            self._d_dev.append(dev)
            self._d_ts.append(ts)
            self._d_count.append(direct)

    def _delete(self, ctx: Ctx, path: Any) -> None:
        """A deleted leaf or port: its series start over (no rate across the gap)."""
        store = self.store
        dev = ctx[0]
        store.count(dev, Stat.DELETES)
        full = ctx[3] + pb_elems(path)
        root = split_root(full)
        if root is None:
            return
        if len(full) == root[2]:
            store.forget(dev, root[1])
            return
        found = match_rel(root[0], full[root[2] :])
        if found is not None:
            store.forget(dev, root[1], (found[0].name, found[1]))
            return
        # a subtree (an LLDP neighbour entry when the port goes down): every known leaf under it
        for leaf, index in leaves_in_subtree(root[0], full[root[2] :]):
            store.forget(dev, root[1], (leaf.name, index))

    def _bad(self, dev: int, reason: str, now: int | None) -> None:
        self.store.count(dev, Stat.MALFORMED)
        self._log(dev, reason, now)

    def _log(self, dev: int, reason: str, now: int | None) -> None:
        t = now if now is not None else max(self.store.last_seen_ts(dev), 0)
        last = self._logged.get(dev)
        if last is None or t - last >= LOG_EVERY_NS:
            self._logged[dev] = t
            self.log.warning(
                "telemetry from %s: %s (counted; logged at most once a minute per device)",
                self.store.device_name(dev),
                reason,
            )

    # --- batch apply -------------------------------------------------------------------------------------
    def flush(self) -> None:
        """Write the buffered updates into the store."""
        if self._d_dev:
            self._flush_direct()
        if not self._n_dev:
            return
        store = self.store
        codes = np.array(self._codes, dtype=np.int64)
        vals = self._vals
        counts = np.array(self._n_count, dtype=np.int64)
        n_dev = np.array(self._n_dev, dtype=np.int64)
        store.count_notifications(n_dev, counts)
        devs = np.repeat(n_dev, counts)
        ts = np.repeat(np.array(self._n_ts, dtype=np.int64), counts)
        base = np.repeat(np.array(self._n_base, dtype=np.int64), counts)
        self._codes, self._vals = [], []
        self._n_dev, self._n_ts, self._n_base, self._n_count = [], [], [], []
        if len(codes) == 0:
            return
        bad = codes < 0
        if bad.any():
            store.count_many(devs[codes == UNKNOWN], Stat.UNKNOWN)
            store.count_many(devs[codes == BAD], Stat.MALFORMED)
            for d in np.unique(devs[codes == BAD]).tolist():
                self._log(d, "undecodable or oversized update path", int(ts[devs == d].max()))
            keep = ~bad
            vals = [v for v, k in zip(vals, keep.tolist(), strict=True) if k]
            codes, devs, ts, base = codes[keep], devs[keep], ts[keep], base[keep]
            if len(codes) == 0:
                return
        packed = base + codes
        sidx = store.series_at(packed >> 16, packed & 0xFFFF)
        kinds = store.kinds_of(packed & 0xFFFF)
        u64, is_u, f64, is_d = _decode_numbers(vals)
        counter = is_u & (kinds == Kind.COUNTER)
        gauge = (is_u | is_d) & (kinds == Kind.GAUGE)
        if self.recorder is not None:
            self._record(sidx, vals, u64, is_u, kinds, ts)
        store.write_counters(sidx[counter], u64[counter], ts[counter])
        if gauge.any():
            g = np.where(is_u, u64.astype(np.float64), f64)  # one write keeps a series' updates in order
            store.write_gauges(sidx[gauge], g[gauge], ts[gauge])
        rest = np.flatnonzero(~(counter | gauge))
        if len(rest):
            self._apply_rest(rest, sidx, vals, kinds, ts, devs)

    def _flush_direct(self) -> None:
        """The counters `_sonic` decoded itself: straight into the store (their notifications are already counted)."""
        store = self.store
        packed = np.array(self._d_codes, dtype=np.int64)
        values = np.array(self._d_vals, dtype=np.uint64)
        counts = np.array(self._d_count, dtype=np.int64)
        devs = np.array(self._d_dev, dtype=np.int64)
        ts = np.repeat(np.array(self._d_ts, dtype=np.int64), counts)
        self._d_codes, self._d_vals, self._d_dev, self._d_ts, self._d_count = [], [], [], [], []
        store.count_updates(devs, counts)
        sidx = store.series_at(packed >> 16, packed & 0xFFFF)
        counter = store.kinds_of(packed & 0xFFFF) == Kind.COUNTER  # every SAI counter maps to a counter leaf
        store.write_counters(sidx[counter], values[counter], ts[counter])

    def _apply_rest(
        self, rest: I64, sidx: I64, vals: list[bytes], kinds: npt.NDArray[np.uint8], ts: I64, devs: I64
    ) -> None:
        """Updates that are not uint counters: decoded one at a time (strings, doubles, JSON, wrong types)."""
        store = self.store
        nums: dict[Kind, list[tuple[int, Value, int]]] = {Kind.COUNTER: [], Kind.GAUGE: []}
        for j in rest.tolist():
            kind = Kind(int(kinds[j]))
            v = _typed(kind, vals[j])
            if v is None:
                self._bad(int(devs[j]), f"wrong or undecodable value for a {kind.name.lower()} leaf", int(ts[j]))
            elif kind in nums:
                nums[kind].append((int(sidx[j]), v, int(ts[j])))
            else:
                store.write_state(int(sidx[j]), str(v), int(ts[j]))
        if nums[Kind.COUNTER]:
            ci, cv, ct = zip(*nums[Kind.COUNTER], strict=True)
            store.write_counters(np.array(ci), np.array(cv, dtype=np.uint64), np.array(ct, dtype=np.int64))
        if nums[Kind.GAUGE]:
            gi, gv, gt = zip(*nums[Kind.GAUGE], strict=True)
            store.write_gauges(np.array(gi), np.array(gv, dtype=np.float64), np.array(gt, dtype=np.int64))

    def _record(self, sidx: I64, vals: list[bytes], u64: Any, is_u: Any, kinds: Any, ts: I64) -> None:
        """Hand every well-typed update to the recorder, in arrival order (before duplicate/order rules)."""
        assert self.recorder is not None
        st = self.store
        for j, i in enumerate(sidx.tolist()):
            kind = Kind(int(kinds[j]))
            if is_u[j] and kind in (Kind.COUNTER, Kind.GAUGE):
                v: Value | None = int(u64[j]) if kind == Kind.COUNTER else float(u64[j])
            else:
                v = _typed(kind, vals[j])
            if v is None:
                continue
            device, port, leaf, index = st.series_key(i)
            path = self._paths.get(i)
            if path is None:
                path = self._paths[i] = render(port, leaf, index)
            self.recorder.record(device, path, v, int(ts[j]))


F64 = npt.NDArray[np.float64]
U64 = npt.NDArray[np.uint64]
Mask = npt.NDArray[np.bool_]


def _decode_numbers(vals: list[bytes]) -> tuple[U64, Mask, F64, Mask]:
    """Decode all TypedValues that hold `uint_val` (tag 0x18 + varint) or `double_val` (tag 0x71 + 8 bytes little
    endian: optics power, BER) at once; the masks say which did. Anything else is left to `_typed`."""
    n = len(vals)
    lens = np.fromiter(map(len, vals), dtype=np.int64, count=n)
    buf = np.frombuffer(b"".join(vals), dtype=np.uint8)
    starts = np.cumsum(lens) - lens
    if n == 0 or len(buf) == 0:
        return np.zeros(n, dtype=np.uint64), np.zeros(n, dtype=bool), np.zeros(n), np.zeros(n, dtype=bool)
    u64, is_u = _uints(buf, lens, starts)
    is_d = (lens == 9) & (buf[np.minimum(starts, len(buf) - 1)] == 0x71)
    f64 = np.zeros(n)
    if is_d.any():
        at = starts[is_d, None] + np.arange(1, 9)
        f64[is_d] = np.ascontiguousarray(buf[at]).view("<f8").ravel()
    return u64, is_u, f64, is_d


def _uints(buf: npt.NDArray[np.uint8], lens: I64, starts: I64) -> tuple[U64, Mask]:
    n = len(lens)
    safe = np.minimum(starts, len(buf) - 1)
    within = np.arange(len(buf), dtype=np.int64) - np.repeat(starts + 1, lens)  # byte index inside the varint
    body = (within >= 0) & (within < 10)
    shift = (7 * np.clip(within, 0, 9)).astype(np.uint64)
    part = np.where(body, (buf & 0x7F).astype(np.uint64) << shift, np.uint64(0))
    nonempty = lens > 0
    out = np.zeros(n, dtype=np.uint64)
    out[nonempty] = np.add.reduceat(part, starts[nonempty])
    ends = np.add.reduceat(((buf < 0x80) & (within >= 0)).astype(np.int64), starts[nonempty])
    is_u = np.zeros(n, dtype=bool)
    last = buf[np.maximum(starts + lens - 1, 0)]
    is_u[nonempty] = ends == 1
    is_u &= (buf[safe] == 0x18) & (lens >= 2) & (lens <= 11) & (last < 0x80)
    return out, is_u


def _float32(raw: bytes) -> float | None:
    """openconfig-types:ieeefloat32 (e.g. pre-fec-ber): 4 bytes, IEEE 754 single precision, network byte order."""
    if len(raw) != 4:
        return None
    v: float = struct.unpack(">f", raw)[0]
    return v if math.isfinite(v) else None


def _typed(kind: Kind, tv_bytes: bytes) -> Value | None:
    """A TypedValue as the leaf's kind wants it, or None if it does not fit (counted as malformed)."""
    try:
        tv = gnmi_pb2.TypedValue.FromString(tv_bytes)
    except DecodeError:
        return None
    which = tv.WhichOneof("value")
    v: Any
    if which in ("uint_val", "int_val", "double_val", "float_val", "string_val", "ascii_val"):
        v = getattr(tv, which)
    elif which in ("json_val", "json_ietf_val"):
        try:
            v = json.loads(getattr(tv, which))
        except ValueError:
            return None
    elif which == "decimal_val":
        v = tv.decimal_val.digits / 10**tv.decimal_val.precision
    elif which == "bytes_val" and kind == Kind.GAUGE:
        return _float32(tv.bytes_val)
    elif which == "leaflist_val" and kind == Kind.TEXT:
        items = [_typed(Kind.TEXT, e.SerializeToString()) for e in tv.leaflist_val.element]
        return None if None in items else ",".join(str(x) for x in items)
    else:
        return None
    if isinstance(v, bool):
        return None
    if kind == Kind.COUNTER:
        if isinstance(v, str) and v.isdigit():  # RFC 7951: 64-bit integers are JSON strings
            v = int(v)
        return v if isinstance(v, int) and 0 <= v < _U64_TOP else None
    if kind == Kind.GAUGE:
        if isinstance(v, int | float):
            return float(v)
        if isinstance(v, str):
            try:
                return float(v)
            except ValueError:
                pass
            try:  # RFC 7951: a binary leaf (openconfig-types:ieeefloat32) is its bytes in base64
                return _float32(base64.b64decode(v, validate=True))
            except ValueError:
                return None
        return None
    return v if isinstance(v, str) else None
