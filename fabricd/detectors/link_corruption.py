"""link_corruption: ports whose received frames fail their checks (FCS/CRC), one finding per link.

Per receiving port and per new sample, the frame errors (in-fcs-errors, else in-crc-errors, else in-errors) and
in-pkts (OpenConfig counts bad frames in in-pkts) are summed over a sliding window: errors / packets is the loss
rate. FEC uncorrected codewords and symbol errors corroborate it; corrected codewords give a pre-FEC BER (lower
bound: a corrected codeword holds at least one bit error) and its trend. A port corrupts when its window holds
`min_errors` frame errors in `min_error_samples` samples or more and the loss rate reaches CorrOpt's floor.

A sample counts nothing when it cannot be trusted: the first after a counter reset (the store gives no delta), one
spanning a gap in the stream longer than 3 sample intervals, one taken while the port is down or within `grace_s`
of an oper-status change (link training errors), any of a stale device. A 64-bit wrap is an ordinary delta (the
store takes it modulo 2**64). Both ends of a link feed one finding; receive power at both ends says which part
likely fails and what to repair.
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import cached_property, reduce
from itertools import compress
from operator import add, itemgetter
from typing import Any

import numpy as np

from fabricd.telemetry import NEVER, Snapshot
from topology.fabric import Fabric
from topology.units import NS

from .finding import Finding

Port = tuple[str, str]

PKTS = "if.in-pkts"
# The first of these a port streams is its frame error count (they count the same frames; never add them up).
FRAME_LEAVES = ("if.in-fcs-errors", "eth.in-crc-errors", "if.in-errors")
# Counters that move when a link corrupts (silent_corruption uses them to tell link faults from silent ones).
ERROR_LEAVES = (*FRAME_LEAVES, "fec.uncorrected-codewords")
SYMBOLS = "eth.in-symbol-error"
FEC_CORRECTED = "fec.corrected-codewords"
COUNTED = (PKTS, *ERROR_LEAVES, SYMBOLS, FEC_CORRECTED)
RX_POWER = "optics.input-power"
PRE_FEC_BER = "fec.pre-fec-ber"


@dataclass(frozen=True)
class LinkCorruptionConfig:
    # CorrOpt (SIGCOMM 2017, reference/domain.md): corrupting links lose 1e-8..9e-6 (47%), 1e-5..1e-4 (18%),
    # 1e-4..1e-3 (22%) or 1e-3..1e-2 (13%) of their packets; below 1e-8 a link does not count as corrupting.
    buckets: tuple[float, ...] = (1e-8, 1e-5, 1e-4, 1e-3)
    # Warning in the lowest (and commonest) bucket, critical from the next one up: our choice, not CorrOpt's.
    critical_loss: float = 1e-5
    # Long enough to see 1e-8 at a few million packets/s; 1e-6 still shows in seconds: the rate is errors/packets
    # over the samples held so far, so a new port's window starts at its first errored sample.
    window_s: float = 300.0
    # A rate from fewer errors is noise (Poisson: +-45% at 5); one errored sample alone is a blip, not a link.
    min_errors: int = 5
    min_error_samples: int = 2
    # Link training after an oper-status change produces FCS/symbol errors that are not corruption.
    grace_s: float = 10.0
    # Below this a receiver is starved of light. 400G-FR4 optics specify -7.3 dBm minimum average receive power
    # per lane (e.g. Edgecore ET7502-FR4 datasheet, IEEE 802.3cu); not a domain.md figure, so a setting.
    low_rx_dbm: float = -7.0
    sample_interval_s: float = 1.0  # staleness and the longest trusted gap (3 intervals, as the store judges)
    fec_interval_s: float | None = None  # FEC counters' own sample interval (telemetry.intervals.fec), if apart


@dataclass
class _Sample:
    ts: int
    start: int  # previous sample time of in-pkts: the interval this sample covers is (start, ts]
    d: dict[str, float]  # leaf -> delta (summed over phys)
    ber: float | None  # pre-FEC BER lower bound from corrected codewords


@dataclass
class _Port:
    seen: dict[int, int] = field(default_factory=dict)  # series row -> timestamp of the last sample taken
    samples: deque[_Sample] = field(default_factory=deque)


@dataclass
class LinkCorruptionState:
    config: LinkCorruptionConfig = field(default_factory=LinkCorruptionConfig)
    ports: dict[Port, _Port] = field(default_factory=dict)
    # link ends -> (start_ts, origin end) of its active incident: fixed while it lasts, so its key is stable
    incidents: dict[tuple[str, ...], tuple[int, str]] = field(default_factory=dict)


@dataclass(frozen=True)
class _Totals:
    d: dict[str, float]
    frame_errors: float
    error_samples: int
    first_error: int  # start of the first errored sample
    span_s: float
    bers: list[float]

    @property
    def pkts(self) -> float:
        return self.d.get(PKTS, 0.0)

    @property
    def loss(self) -> float:
        return self.frame_errors / self.pkts if self.pkts > 0 else 0.0


class _Reader:
    """Per-tick lookups: the index values each leaf has (FEC phys, optics channels) and recent oper changes."""

    def __init__(self, snapshot: Snapshot, cfg: LinkCorruptionConfig, now_ns: int) -> None:
        self.s, self.cfg, self.now = snapshot, cfg, now_ns
        self.interval = int(cfg.sample_interval_s * NS)
        fec = int((cfg.fec_interval_s or cfg.sample_interval_s) * NS)
        # A sample gap longer than 3 of its leaf's intervals may hide a reboot; FEC may be sampled apart.
        self.max_gaps = {leaf: 3 * (fec if leaf.startswith("fec.") else self.interval) for leaf in COUNTED}
        self.indexes: dict[str, list[str | None]] = {}
        for leaf, index in snapshot.codes:
            self.indexes.setdefault(leaf, []).append(index)

    def rows(self, port: Port, leaf: str) -> list[int]:
        out = []
        for index in self.indexes.get(leaf, ()):
            i = self.s.find(port[0], port[1], leaf, index)
            if i is not None and self.s.ts[i] != NEVER:
                out.append(i)
        return out

    def stale(self, device: str) -> bool:
        return self.s.stale(device, self.now, self.interval)

    def oper(self, port: Port) -> str | None:
        i = self.s.find(port[0], port[1], "oper-status")
        return None if i is None else self.s.text(i)

    @cached_property
    def changes(self) -> dict[Port, list[int]]:
        """Oper-status changes per port (read only when some port has a new sample to judge)."""
        out: dict[Port, list[int]] = {}
        since = self.now - int((self.cfg.window_s + self.cfg.grace_s) * NS)
        # The first value seen is no change; after a sync the window holds one per port: filtered before objects.
        for e in self.s.events_since(since, leaf="oper-status", changes_only=True):
            out.setdefault((e.device, e.port), []).append(e.ts)
        return out

    def in_grace(self, port: Port, start: int, end: int) -> bool:
        grace = int(self.cfg.grace_s * NS)
        return any(start - grace <= t <= end for t in self.changes.get(port, ()))

    def gauge(self, port: Port, leaf: str, pick: Any) -> float | None:
        """`pick` (min/max) of a gauge's current values over its indexes; None without a reading or if stale."""
        if self.stale(port[0]):
            return None
        vals = [float(self.s.gauge[i]) for i in self.rows(port, leaf)]
        vals = [v for v in vals if math.isfinite(v)]
        return float(pick(vals)) if vals else None


def _link_ends(fabric: Fabric, port: Port) -> tuple[str, ...]:
    link = fabric.link_of(*port)
    if link is None:
        return (f"{port[0]}:{port[1]}",)
    return tuple(sorted((f"{link.a.device}:{link.a.port}", f"{link.b.device}:{link.b.port}")))


def _split(end: str) -> Port:
    device, port = end.split(":", 1)
    return device, port


def _candidates(r: _Reader, state: LinkCorruptionState) -> set[Port]:
    """Tracked ports, plus ports whose error counters moved in a fresh sample."""
    out = set(state.ports)
    s = r.s
    for leaf in (*ERROR_LEAVES, SYMBOLS):
        rows = s.select(leaf=leaf)
        if not len(rows):
            continue
        moved = rows[(np.nan_to_num(s.delta(rows), nan=0.0) > 0) & (s.ts[rows] > r.now - r.max_gaps[leaf])]
        for i in moved.tolist():
            device, port, _, _ = s.key(i)
            out.add((device, port))
    return out


def _update(r: _Reader, port: Port, ps: _Port, speed_gbps: float | None) -> None:
    """Take the port's new samples into its window (or only mark them seen, when they cannot be trusted)."""
    s = r.s
    pk = s.find(port[0], port[1], PKTS)
    if pk is None:
        return  # no packet count: no loss rate
    ts, start = int(s.ts[pk]), int(s.prev_ts[pk])
    if ts <= ps.seen.get(pk, NEVER):
        return
    max_gap = r.max_gaps[PKTS]
    oper = r.oper(port)
    trusted = (
        start != NEVER  # first sample, or the first after a reset
        and ts - start <= max_gap  # a gap may hide a reboot whose counters grew back past the old values
        and oper in (None, "UP")
        and not r.in_grace(port, start, ts)
    )
    rows = {leaf: r.rows(port, leaf) for leaf in COUNTED}
    flat = [i for rs in rows.values() for i in rs]
    deltas = dict(zip(flat, s.delta(np.array(flat, dtype=np.int64)).tolist(), strict=True))
    d: dict[str, float] = {}
    ber: float | None = None
    for leaf, rs in rows.items():
        for i in rs:
            t, prev = int(s.ts[i]), int(s.prev_ts[i])
            if t <= ps.seen.get(i, NEVER):
                continue  # counted on an earlier tick
            ps.seen[i] = t
            v = deltas[i]
            if not trusted or math.isnan(v) or prev == NEVER or t - prev > r.max_gaps[leaf]:
                continue
            d[leaf] = d.get(leaf, 0.0) + v
            if leaf == FEC_CORRECTED and speed_gbps:
                ber = (ber or 0.0) + v * NS / (t - prev) / (speed_gbps * 1e9)
    if trusted and PKTS in d:
        ps.samples.append(_Sample(ts, start, d, ber))


def _frames(d: dict[str, float]) -> float:
    for leaf in FRAME_LEAVES:
        if leaf in d:
            return d[leaf]
    return 0.0


def _totals(ps: _Port, now_ns: int, window_s: float) -> _Totals | None:
    horizon = now_ns - int(window_s * NS)
    while ps.samples and ps.samples[0].ts <= horizon:
        ps.samples.popleft()
    if not ps.samples:
        return None
    samples = ps.samples
    ds = [smp.d for smp in samples]
    cols = _columns(ds)
    d: dict[str, float] = {}
    fs: Sequence[float]
    if cols is None:  # samples with different leaves: add them up one by one
        for x in ds:
            for k, v in x.items():
                d[k] = d.get(k, 0.0) + v
        fs = [_frames(x) for x in ds]
    else:
        # Left to right from 0.0, as adding one sample at a time does: the very same floats.
        d = {k: reduce(add, c, 0.0) for k, c in cols.items()}
        fs = next((cols[leaf] for leaf in FRAME_LEAVES if leaf in cols), (0.0,) * len(ds))
    errored = list(map((0.0).__lt__, fs))  # f > 0 per sample
    frames = reduce(add, compress(fs, errored), 0.0)
    first = next((smp.start for smp in compress(samples, errored) if smp.start), 0)  # the loop's `first or start`
    span = (samples[-1].ts - samples[0].start) / NS
    bers = [smp.ber for smp in samples if smp.ber is not None]
    return _Totals(d, frames, sum(errored), first, span, bers)


def _columns(ds: list[dict[str, float]]) -> dict[str, tuple[float, ...]] | None:
    """Each leaf's values in sample order, read at C speed, when every sample has the same leaves (as a port's
    samples do); None otherwise."""
    leaves = tuple(ds[0])
    if len(leaves) < 2 or set(map(len, ds)) != {len(leaves)}:
        return None
    try:
        rows = list(map(itemgetter(*leaves), ds))
    except KeyError:
        return None
    return dict(zip(leaves, zip(*rows, strict=True), strict=True))


def _corrupting(t: _Totals | None, cfg: LinkCorruptionConfig) -> bool:
    return (
        t is not None
        and t.frame_errors >= cfg.min_errors
        and t.error_samples >= cfg.min_error_samples
        and t.pkts > 0
        and t.loss >= cfg.buckets[0]
    )


def detect(snapshot: Snapshot, fabric: Fabric, state: LinkCorruptionState, now_ns: int) -> list[Finding]:
    cfg = state.config
    r = _Reader(snapshot, cfg, now_ns)
    for port in sorted(_candidates(r, state)):
        if r.stale(port[0]):
            continue  # nothing new to judge; keep what we have
        link = fabric.link_of(*port)
        ps = state.ports.setdefault(port, _Port())
        _update(r, port, ps, None if link is None else link.speed_gbps)
    totals = {port: _totals(ps, now_ns, cfg.window_s) for port, ps in state.ports.items()}
    judged = {port: t for port, t in totals.items() if t is not None}
    bad = {
        port
        for port, t in judged.items()
        if _corrupting(t, cfg) and r.oper(port) in (None, "UP") and not r.stale(port[0])
    }
    by_link: dict[tuple[str, ...], list[Port]] = {}
    for port in sorted(bad):
        by_link.setdefault(_link_ends(fabric, port), []).append(port)
    out = []
    for ends, receivers in sorted(by_link.items()):
        if ends not in state.incidents:
            worst = _worst(receivers, judged)
            start = min(judged[p].first_error for p in receivers)
            state.incidents[ends] = (start, f"{worst[0]}:{worst[1]}")
        for end in ends:  # watch the far end too: its counters and optics belong in the evidence
            far = _split(end)
            if far not in state.ports and snapshot.find(far[0], far[1], PKTS) is not None:
                state.ports[far] = _Port()
        out.append(_finding(ends, receivers, judged, r, cfg, state.incidents[ends], now_ns))
    for ends in [e for e in state.incidents if e not in by_link]:
        if not any(r.stale(_split(e)[0]) for e in ends):  # a stale end may come back still corrupting
            del state.incidents[ends]
    for port, t in totals.items():
        if (t is None or t.frame_errors == 0) and _link_ends(fabric, port) not in by_link:
            del state.ports[port]  # quiet for a whole window: forget it
    return out


def _worst(receivers: list[Port], judged: dict[Port, _Totals]) -> Port:
    return max(receivers, key=lambda p: (judged[p].loss, p))


def bucket(loss: float, buckets: tuple[float, ...] = LinkCorruptionConfig.buckets) -> float | None:
    """CorrOpt's loss-rate bucket (its lower bound) of a loss rate; None below the first."""
    found = None
    for b in buckets:
        if loss >= b:
            found = b
    return found


def _bucket_label(b: float, buckets: tuple[float, ...]) -> str:
    i = buckets.index(b)
    upper = buckets[i + 1] if i + 1 < len(buckets) else b * 10
    return f"{b:.0e}..{upper:.0e}".replace("e-0", "e-")


def attribute(
    receiver: str, rx_dbm: float | None, sender: str | None, far_rx_dbm: float | None, low_dbm: float
) -> dict[str, str]:
    """Which part likely fails and the repair, from receive power at both ends of a corrupting direction.

    CorrOpt (reference/domain.md) files tickets with the likely cause (clean connector / replace optic / replace
    cable) read from optical power on both ends: light missing in one direction only points at that direction's
    fibre strand, connectors or the far end's transmitter; missing both ways points at the cable; light arriving
    fine while frames still fail points at the receiving optic.
    """
    far = sender or "the far end"
    if rx_dbm is None:
        return {
            "suspect": "unknown",
            "rule": "no receive power reading",
            "repair": f"no optical power reading at {receiver}: check its optic and the cable, "
            "cleaning connectors first",
        }
    low = rx_dbm < low_dbm
    far_low = far_rx_dbm is not None and far_rx_dbm < low_dbm
    if low and far_low:
        return {
            "suspect": "cable",
            "rule": "receive power low at both ends",
            "repair": f"clean the connectors at both ends; if power stays low, replace the fibre/cable "
            f"{receiver} <-> {far}",
        }
    if low:
        return {
            "suspect": f"fibre or {far} transmitter",
            "rule": "receive power low at the receiving end only",
            "repair": f"clean the connectors and the fibre toward {receiver}; if its receive power stays low, replace "
            f"the optic at {far} (its transmitter), then the fibre",
        }
    return {
        "suspect": f"{receiver} optic",
        "rule": "receive power normal, frames still corrupt",
        "repair": f"reseat, then replace the optic at {receiver} (its receiver)",
    }


def _ber_view(t: _Totals | None) -> dict[str, Any] | None:
    if t is None or not t.bers:
        return None
    first, last = t.bers[0], t.bers[-1]
    trend = "rising" if last > 2 * first else "falling" if last < first / 2 else "steady"
    return {"first": first, "last": last, "max": max(t.bers), "trend": trend}


def _finding(
    ends: tuple[str, ...],
    receivers: list[Port],
    judged: dict[Port, _Totals],
    r: _Reader,
    cfg: LinkCorruptionConfig,
    incident: tuple[int, str],
    now_ns: int,
) -> Finding:
    start, origin = incident
    worst = _worst(receivers, judged)
    wt = judged[worst]
    loss = wt.loss
    b = bucket(loss, cfg.buckets) or cfg.buckets[0]
    rx_end = f"{worst[0]}:{worst[1]}"
    far_end = next((e for e in ends if e != rx_end), None)
    rx = {e: r.gauge(_split(e), RX_POWER, min) for e in ends}
    repair = attribute(rx_end, rx[rx_end], far_end, None if far_end is None else rx[far_end], cfg.low_rx_dbm)
    counters: dict[str, Any] = {}
    pre_fec: dict[str, Any] = {}
    for e in ends:
        t = judged.get(_split(e))
        if t is None:
            continue
        counters[e] = {
            "in_pkts": int(t.pkts),
            "frame_errors": int(t.frame_errors),
            **{leaf.split(".", 1)[1]: int(t.d[leaf]) for leaf in COUNTED[1:] if leaf in t.d},
            "loss_rate": float(f"{t.loss:.3g}"),
            "window_s": round(t.span_s, 1),
        }
        ber = _ber_view(t)
        reported = r.gauge(_split(e), PRE_FEC_BER, max)
        if ber is not None or reported is not None:
            pre_fec[e] = {"from_corrected_codewords": ber, "reported": reported}
    errors = wt.frame_errors
    # Poisson: the rate estimate's relative error is 1/sqrt(errors); more errors, surer bucket.
    confidence = min(0.99, max(0.5, 1.0 - 1.0 / math.sqrt(errors)))
    device, port = _split(origin)
    label = _bucket_label(b, cfg.buckets)
    return Finding(
        kind="link_corruption",
        device=device,
        port=port,
        devices=tuple(sorted({_split(e)[0] for e in ends})),
        ports=ends,
        start_ts=start,
        detected_ts=now_ns,
        severity="critical" if loss >= cfg.critical_loss else "warning",
        confidence=confidence,
        summary=f"link {' <-> '.join(ends)} corrupts {loss:.1e} of frames received at {rx_end} "
        f"(CorrOpt bucket {label}); likely {repair['suspect']}: {repair['repair']}",
        evidence={
            "loss_rate": float(f"{loss:.3g}"),
            "bucket": b,
            "bucket_range": label,
            "receiving_ends": sorted(f"{p[0]}:{p[1]}" for p in receivers),
            "counters": counters,
            "optics": {e: {"rx_power_dbm": v, "low": None if v is None else v < cfg.low_rx_dbm} for e, v in rx.items()},
            "low_rx_dbm": cfg.low_rx_dbm,
            "pre_fec_ber": pre_fec,
            **repair,
        },
    )
