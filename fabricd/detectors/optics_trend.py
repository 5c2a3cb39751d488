"""predicted_failure: an optic whose receive power falls steadily, with when it will cross the power at which frames
start to fail; the repair ticket can be worked before the job it carries breaks.

Hardware rarely fails at once: a dirty connector or an ageing laser loses power over hours or days before the link
errors. Per port (its lowest channel), samples of input-power are averaged into `bucket_s` buckets; at each bucket
close a least-squares line over the last `fit_buckets` (6 h by default) gives the trend. A port is predicted to fail
when the fall is steep (`min_slope_db_h`), sure (t-statistic of the slope beyond `min_t`), real (the fitted power
is `min_drop_db` under the window's best bucket) and the line crosses `threshold_dbm` within `horizon_h`. An optic's
power wanders with its temperature over the day (a few tenths of a dB); a 6 h window sees at most about 0.05 dB/h
of that, half the slope that counts. Vectorised over every port: healthy ones cost a few array cells each.
"""

from __future__ import annotations

import datetime as dt
import math
from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt

from fabricd.telemetry import NEVER, Snapshot
from topology.fabric import Fabric

from .finding import Finding

NS = 1_000_000_000
LEAF = "optics.input-power"


@dataclass(frozen=True)
class OpticsTrendConfig:
    bucket_s: float = 600.0
    fit_buckets: int = 36  # 6 h of 10-minute buckets
    min_buckets: int = 12  # 2 h of data before any trend is trusted
    min_slope_db_h: float = 0.1
    min_drop_db: float = 0.5
    min_t: float = 6.0
    horizon_h: float = 168.0  # a week: further out is not yet worth a ticket
    # Where a receiver starts to starve: 400G-FR4's -7.3 dBm minimum average receive power per lane (the figure
    # link_corruption uses for "low" too; e.g. IEEE 802.3cu); not a domain.md figure, so a setting.
    threshold_dbm: float = -7.0


@dataclass
class _Incident:
    start_ts: int
    device: str
    port: str


@dataclass
class OpticsTrendState:
    config: OpticsTrendConfig = field(default_factory=OpticsTrendConfig)
    bucket: int | None = None  # index of the bucket being filled
    last_ts: npt.NDArray[np.int64] = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    acc_sum: npt.NDArray[np.float64] = field(default_factory=lambda: np.zeros(0))
    acc_n: npt.NDArray[np.int32] = field(default_factory=lambda: np.zeros(0, dtype=np.int32))
    ring: npt.NDArray[np.float32] = field(default_factory=lambda: np.zeros((0, 0), dtype=np.float32))
    active: dict[int, _Incident] = field(default_factory=dict)  # series row -> incident
    last: dict[int, dict[str, float]] = field(default_factory=dict)  # series row -> the latest fit of an incident


def _grow(state: OpticsTrendState, n: int) -> None:
    have = len(state.last_ts)
    if n <= have:
        return
    width = state.config.fit_buckets
    state.last_ts = np.concatenate([state.last_ts, np.full(n - have, NEVER, dtype=np.int64)])
    state.acc_sum = np.concatenate([state.acc_sum, np.zeros(n - have)])
    state.acc_n = np.concatenate([state.acc_n, np.zeros(n - have, dtype=np.int32)])
    state.ring = np.concatenate([state.ring.reshape(have, width), np.full((n - have, width), np.nan, np.float32)])


def _close(state: OpticsTrendState, buckets: int) -> None:
    """Move the filled bucket into the ring (and empty ones for buckets with no sample)."""
    width = state.config.fit_buckets
    mean = np.where(state.acc_n > 0, state.acc_sum / np.maximum(state.acc_n, 1), np.nan).astype(np.float32)
    shift = min(buckets, width)
    state.ring = np.roll(state.ring, -shift, axis=1)
    state.ring[:, -shift:] = np.nan
    state.ring[:, -shift] = mean
    state.acc_sum[:] = 0.0
    state.acc_n[:] = 0


def fit(ring: npt.NDArray[np.float32], bucket_h: float) -> dict[str, npt.NDArray[np.float64]]:
    """Per row: points, slope (dB/h), its t-statistic, the fitted value at the newest bucket, the best bucket."""
    y = ring.astype(np.float64)
    m = ~np.isnan(y)
    x = np.arange(y.shape[1], dtype=np.float64) * bucket_h
    n = m.sum(axis=1).astype(np.float64)
    xm = np.where(m, x, 0.0)
    ym = np.where(m, y, 0.0)
    sx, sy = xm.sum(axis=1), ym.sum(axis=1)
    sxx, sxy = (xm * xm).sum(axis=1), (xm * ym).sum(axis=1)
    with np.errstate(invalid="ignore", divide="ignore"):
        den = n * sxx - sx * sx
        slope = (n * sxy - sx * sy) / den
        icept = (sy - slope * sx) / n
        resid = np.where(m, y - (icept[:, None] + slope[:, None] * x), 0.0)
        ss = (resid * resid).sum(axis=1)
        se = np.sqrt(ss / np.maximum(n - 2, 1) / np.maximum(sxx - sx * sx / np.maximum(n, 1), 1e-12))
        t = slope / np.maximum(se, 1e-9)
    best = np.where(m, y, -np.inf).max(axis=1)
    return {"n": n, "slope": slope, "t": t, "now": icept + slope * x[-1], "best": best}


def detect(snapshot: Snapshot, fabric: Fabric, state: OpticsTrendState, now_ns: int) -> list[Finding]:
    cfg = state.config
    bucket_ns = int(cfg.bucket_s * NS)
    rows = snapshot.select(leaf=LEAF)
    _grow(state, len(snapshot))
    if len(rows):
        ts = snapshot.ts[rows]
        new = rows[(ts != NEVER) & (ts > state.last_ts[rows])]
        vals = snapshot.gauge[new]
        ok = np.isfinite(vals)
        new, vals = new[ok], vals[ok]
        state.acc_sum[new] += vals
        state.acc_n[new] += 1
        state.last_ts[new] = snapshot.ts[new]
    b = now_ns // bucket_ns
    if state.bucket is None:
        state.bucket = int(b)
    if b > state.bucket:
        _close(state, int(b - state.bucket))
        state.bucket = int(b)
        _judge(snapshot, state, now_ns)
    return [_finding(fabric, state, row, inc, now_ns) for row, inc in sorted(state.active.items())]


def _judge(snapshot: Snapshot, state: OpticsTrendState, now_ns: int) -> None:
    cfg = state.config
    f = fit(state.ring, cfg.bucket_s / 3600)
    n, slope, t, cur, best = f["n"], f["slope"], f["t"], f["now"], f["best"]
    enough = n >= cfg.min_buckets
    with np.errstate(invalid="ignore", divide="ignore"):
        eta = (cfg.threshold_dbm - cur) / slope
    falling = enough & (slope <= -cfg.min_slope_db_h) & (t <= -cfg.min_t) & (best - cur >= cfg.min_drop_db)
    due = falling & (cur > cfg.threshold_dbm) & (eta <= cfg.horizon_h)
    for row in np.flatnonzero(due).tolist():
        if row not in state.active:
            device, port, _, _ = snapshot.key(row)
            state.active[row] = _Incident(now_ns, device, port)
    for row in list(state.active):
        if row >= len(n):
            continue
        recovered = not enough[row] or (slope[row] > -cfg.min_slope_db_h / 2 and best[row] - cur[row] < cfg.min_drop_db)
        if recovered:
            del state.active[row]
            state.last.pop(row, None)
            continue
        state.last[row] = {
            "slope": float(slope[row]),
            "t": float(t[row]),
            "now": float(cur[row]),
            "best": float(best[row]),
            "eta_h": float(eta[row]) if cur[row] > cfg.threshold_dbm else 0.0,
            "n": float(n[row]),
        }


def _when(ts_ns: int) -> str:
    return dt.datetime.fromtimestamp(ts_ns / NS, tz=dt.UTC).strftime("%Y-%m-%d %H:%M UTC")


def _finding(fabric: Fabric, state: OpticsTrendState, row: int, inc: _Incident, now_ns: int) -> Finding:
    cfg = state.config
    last = state.last.get(row, {})
    slope, eta_h, rx = last.get("slope", math.nan), last.get("eta_h", math.nan), last.get("now", math.nan)
    eta_ts = now_ns + int(eta_h * 3600 * NS) if math.isfinite(eta_h) else now_ns
    where = f"{inc.device}:{inc.port}"
    crossed = eta_h <= 0
    summary = (
        f"optic on {where} has crossed {cfg.threshold_dbm:g} dBm after falling {abs(slope):.2f} dB/h: replace it now"
        if crossed
        else f"optic on {where} loses {abs(slope):.2f} dB/h (rx {rx:.1f} dBm); crosses {cfg.threshold_dbm:g} dBm, "
        f"where frames start to fail, in ~{eta_h:.0f} h: replace it before ~{_when(eta_ts)}"
    )
    far = fabric.peer(inc.device, inc.port)
    peer = str(far) if far is not None else None
    return Finding(
        kind="predicted_failure",
        device=inc.device,
        port=inc.port,
        devices=(inc.device,),
        ports=(where,),
        start_ts=inc.start_ts,
        detected_ts=now_ns,
        severity="warning",
        confidence=min(0.99, abs(last.get("t", 0.0)) / (2 * cfg.min_t)),
        summary=summary,
        evidence={
            "slope_db_per_hour": round(slope, 4),
            "rx_dbm_fitted": round(rx, 2),
            "best_dbm_in_window": round(last.get("best", math.nan), 2),
            "threshold_dbm": cfg.threshold_dbm,
            "eta_hours": round(max(eta_h, 0.0), 1),
            "eta_ts": eta_ts,
            "eta": _when(eta_ts),
            "t_stat": round(last.get("t", math.nan), 1),
            "buckets": int(last.get("n", 0)),
            "window_h": cfg.fit_buckets * cfg.bucket_s / 3600,
            "repair": f"clean the connector or replace the optic on {where}"
            + (f" (the far end {peer} sends the light: check its optic too)" if peer else ""),
            "peer": peer,
        },
    )
