"""predicted_failure: an optic whose receive power falls, or whose pre-FEC bit error rate rises, steadily, with when it
will cross the level at which frames start to fail; the repair ticket can be worked before the job it carries breaks.
A module that warms steadily toward its alarm temperature is the third signal; the FEC corrected-codeword rate (as the
bit error rate it implies: corrections per second over the line rate, one error per corrected codeword while errors
are rare) the fourth, which stands in for the pre-FEC BER where a platform does not serve it.

Hardware rarely fails at once: a dirty connector or an ageing laser loses power over hours or days before the link
errors. Per series (input-power per channel in dBm; pre-FEC BER as -log10; temperature as -C: all fall when they
worsen), samples are averaged into `bucket_s` buckets; at each bucket close a least-squares line over the last
`fit_buckets` (6 h by default) gives the trend. A port is predicted to fail when a signal's fall is steep
(`min_slope_db_h`, `min_ber_decades_h`, `min_temp_c_h`), sure (t-statistic of the slope beyond `min_t`), real (the
fitted value is `min_drop_db`, `min_ber_rise_decades`, `min_temp_rise_c` worse than the window's best bucket) and
the line crosses its limit (`threshold_dbm`, the RS-FEC limit `ber_limit`, `temp_limit_c`) within `horizon_h`; the
earliest crossing is the port's deadline. An optic's power wanders with its temperature over the day (a few tenths
of a dB, a couple of degrees); a 6 h window sees at most about 0.05 dB/h and 0.5 C/h of that: half what counts.
Vectorised over every port: healthy ones cost a few array cells each.
"""

from __future__ import annotations

import datetime as dt
import math
from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt

from fabricd.telemetry import NEVER, Snapshot
from topology.fabric import Fabric
from topology.units import NS

from .finding import Finding

RX, BER, TEMP, FEC = "optics.input-power", "fec.pre-fec-ber", "optics.temperature", "fec.corrected-codewords"
LEAVES = (RX, BER, TEMP, FEC)
SIGNAL = {RX: "rx", BER: "pre_fec_ber", TEMP: "temperature", FEC: "fec_corrected"}


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
    # RS(544,514) ("KP4") FEC corrects up to a pre-FEC BER of about 2.4e-4 (the twin's figure too, lab/counters.py);
    # a BER rising a decade in 20 h, a quarter of a decade above its window's best, is a trend (the least change
    # must be under what the least slope gives over the window, 0.3 decades in 6 h, or it would never be reached).
    ber_limit: float = 2.4e-4
    min_ber_decades_h: float = 0.05
    min_ber_rise_decades: float = 0.25
    # Module temperature (as -C, so it too falls when it worsens): QSFP-DD/OSFP modules' high-temperature alarm is
    # typically 70-75 C (SFF-8636 / CMIS alarm thresholds, set by each vendor; 70 C is the common commercial case
    # limit), so 70 C is the default deadline. A module warming a degree an hour, 4 C above its window's coolest, is
    # a trend: a daily cycle of +-2 C moves at most 0.52 C/h, half of that.
    temp_limit_c: float = 70.0
    min_temp_c_h: float = 1.0
    min_temp_rise_c: float = 4.0


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
    leaf: npt.NDArray[np.int8] = field(default_factory=lambda: np.zeros(0, dtype=np.int8))  # 1 + LEAVES index
    bits_s: npt.NDArray[np.float64] = field(
        default_factory=lambda: np.zeros(0)
    )  # FEC rows: line rate (0 = not looked up)
    active: dict[tuple[str, str], _Incident] = field(default_factory=dict)  # (device, port) -> incident
    last: dict[tuple[str, str], dict[str, dict[str, float]]] = field(default_factory=dict)  # port -> signal -> fit


def _grow(state: OpticsTrendState, n: int) -> None:
    have = len(state.last_ts)
    if n <= have:
        return
    width = state.config.fit_buckets
    state.last_ts = np.concatenate([state.last_ts, np.full(n - have, NEVER, dtype=np.int64)])
    state.acc_sum = np.concatenate([state.acc_sum, np.zeros(n - have)])
    state.acc_n = np.concatenate([state.acc_n, np.zeros(n - have, dtype=np.int32)])
    state.leaf = np.concatenate([state.leaf, np.zeros(n - have, dtype=np.int8)])
    state.bits_s = np.concatenate([state.bits_s, np.zeros(n - have)])
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


def _health(leaf: str, values: npt.NDArray[np.float64]) -> npt.NDArray[np.float64]:
    """Every signal as 'higher is healthier': dBm as is, BER as -log10, temperature negated."""
    if leaf == BER:
        with np.errstate(divide="ignore", invalid="ignore"):
            return np.asarray(-np.log10(np.maximum(values, 1e-18)), dtype=np.float64)
    if leaf == TEMP:
        return -values
    return values


def _line_rate(
    snapshot: Snapshot, fabric: Fabric, state: OpticsTrendState, rows: npt.NDArray[np.int64]
) -> npt.NDArray[np.float64]:
    """Bits/s of each row's port (from the cabling; NaN where the link or its speed is not known), looked up once."""
    for row in rows[state.bits_s[rows] == 0].tolist():
        device, port, _, _ = snapshot.key(row)
        link = fabric.link_of(device, port)
        state.bits_s[row] = float(link.speed_gbps) * 1e9 if link is not None and link.speed_gbps else np.nan
    return state.bits_s[rows]


def detect(snapshot: Snapshot, fabric: Fabric, state: OpticsTrendState, now_ns: int) -> list[Finding]:
    cfg = state.config
    bucket_ns = int(cfg.bucket_s * NS)
    _grow(state, len(snapshot))
    for code, leaf in enumerate(LEAVES, 1):
        rows = snapshot.select(leaf=leaf)
        if not len(rows):
            continue
        state.leaf[rows] = code
        ts = snapshot.ts[rows]
        new = rows[(ts != NEVER) & (ts > state.last_ts[rows])]
        if leaf == FEC:
            vals = _health(BER, snapshot.rate[new] / _line_rate(snapshot, fabric, state, new))
        else:
            vals = _health(leaf, snapshot.gauge[new].astype(np.float64))
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
    return [_finding(fabric, state, port, inc, now_ns) for port, inc in sorted(state.active.items())]


def _params(cfg: OpticsTrendConfig, leaf: npt.NDArray[np.int8]) -> tuple[npt.NDArray[np.float64], ...]:
    """Per row: threshold, least slope and least change that count (in 'higher is healthier' units)."""
    code = np.clip(leaf.astype(np.int64) - 1, 0, len(LEAVES) - 1)  # 0 (no leaf yet) reads as RX; `enough` masks it
    ber = -math.log10(cfg.ber_limit)
    threshold = np.array([cfg.threshold_dbm, ber, -cfg.temp_limit_c, ber])[code]
    slope = np.array([cfg.min_slope_db_h, cfg.min_ber_decades_h, cfg.min_temp_c_h, cfg.min_ber_decades_h])[code]
    change = np.array([cfg.min_drop_db, cfg.min_ber_rise_decades, cfg.min_temp_rise_c, cfg.min_ber_rise_decades])[code]
    return threshold, slope, change


def _judge(snapshot: Snapshot, state: OpticsTrendState, now_ns: int) -> None:
    cfg = state.config
    f = fit(state.ring, cfg.bucket_s / 3600)
    n, slope, t, cur, best = f["n"], f["slope"], f["t"], f["now"], f["best"]
    threshold, min_slope, min_change = _params(cfg, state.leaf)
    enough = (n >= cfg.min_buckets) & (state.leaf > 0)
    with np.errstate(invalid="ignore", divide="ignore"):
        eta = (threshold - cur) / slope
    falling = enough & (slope <= -min_slope) & (t <= -cfg.min_t) & (best - cur >= min_change)
    due = falling & (cur > threshold) & (eta <= cfg.horizon_h)
    trending = falling | (enough & (slope <= -min_slope / 2) & (best - cur >= min_change / 2))
    fits: dict[tuple[str, str], dict[str, dict[str, float]]] = {}
    for row in np.flatnonzero(trending).tolist():
        device, port, leaf, _ = snapshot.key(row)
        signal = SIGNAL[leaf]
        prev = fits.setdefault((device, port), {}).get(signal)
        if prev is not None and prev["now"] <= float(cur[row]):
            continue  # the port's worst channel speaks for it
        fits[(device, port)][signal] = {
            "slope": float(slope[row]),
            "t": float(t[row]),
            "now": float(cur[row]),
            "best": float(best[row]),
            "eta_h": max(0.0, float(eta[row])) if cur[row] > threshold[row] else 0.0,
            "n": float(n[row]),
            "due": float(bool(due[row])),
        }
    for key, signals in fits.items():
        if key not in state.active and any(x["due"] for x in signals.values()):
            state.active[key] = _Incident(now_ns, *key)
    for key in list(state.active):
        if key not in fits:  # no signal still trends: repaired, or it was wander after all
            del state.active[key]
            state.last.pop(key, None)
        else:
            state.last[key] = fits[key]


def _when(ts_ns: int) -> str:
    return dt.datetime.fromtimestamp(ts_ns / NS, tz=dt.UTC).strftime("%Y-%m-%d %H:%M UTC")


def _finding(fabric: Fabric, state: OpticsTrendState, key: tuple[str, str], inc: _Incident, now_ns: int) -> Finding:
    cfg = state.config
    signals = state.last.get(key, {})
    first = min(signals.items(), key=lambda kv: kv[1]["eta_h"], default=("rx", {}))
    name, lead = first
    eta_h = lead.get("eta_h", math.nan)
    eta_ts = now_ns + int(eta_h * 3600 * NS) if math.isfinite(eta_h) else now_ns
    where = f"{inc.device}:{inc.port}"
    rx, ber, temp = signals.get("rx"), signals.get("pre_fec_ber"), signals.get("temperature")
    fec = signals.get("fec_corrected")
    trend = []
    if rx is not None:
        trend.append(f"receive power falls {abs(rx['slope']):.2f} dB/h (now {rx['now']:.1f} dBm)")
    if ber is not None:
        trend.append(f"pre-FEC BER rises {abs(ber['slope']):.2f} decades/h (now {10 ** -ber['now']:.1e})")
    if fec is not None:
        trend.append(f"FEC corrections rise {abs(fec['slope']):.2f} decades/h (a BER of {10 ** -fec['now']:.1e})")
    if temp is not None:
        trend.append(f"module temperature rises {abs(temp['slope']):.1f} C/h (now {-temp['now']:.0f} C)")
    limit = {
        "rx": f"{cfg.threshold_dbm:g} dBm, where frames start to fail",
        "pre_fec_ber": f"a pre-FEC BER of {cfg.ber_limit:.1e}, where frames start to fail",
        "fec_corrected": f"a pre-FEC BER of {cfg.ber_limit:.1e}, where frames start to fail",
        "temperature": f"{cfg.temp_limit_c:g} C, the module's alarm temperature",
    }[name]
    summary = (
        f"optic on {where}: {' and '.join(trend)}; has reached {limit}: replace it now"
        if eta_h <= 0
        else f"optic on {where}: {' and '.join(trend)}; reaches {limit}, in "
        f"~{eta_h:.0f} h: replace it before ~{_when(eta_ts)}"
    )
    far = fabric.peer(inc.device, inc.port)
    peer = str(far) if far is not None else None
    evidence: dict[str, object] = {
        "eta_hours": round(max(eta_h, 0.0), 1) if math.isfinite(eta_h) else None,
        "eta_ts": eta_ts,
        "eta": _when(eta_ts),
        "deadline_from": name,
        "window_h": cfg.fit_buckets * cfg.bucket_s / 3600,
        "repair": f"clean the connector or replace the optic on {where}"
        + (f" (the far end {peer} sends the light: check its optic too)" if peer else ""),
        "peer": peer,
    }
    if rx is not None:
        evidence["rx"] = {
            "slope_db_per_hour": round(rx["slope"], 4),
            "dbm_fitted": round(rx["now"], 2),
            "best_dbm_in_window": round(rx["best"], 2),
            "threshold_dbm": cfg.threshold_dbm,
            "eta_hours": round(rx["eta_h"], 1),
            "t_stat": round(rx["t"], 1),
            "buckets": int(rx["n"]),
        }
    if ber is not None:
        evidence["pre_fec_ber"] = {
            "decades_per_hour": round(-ber["slope"], 4),
            "ber_fitted": float(f"{10 ** -ber['now']:.3g}"),
            "limit": cfg.ber_limit,
            "eta_hours": round(ber["eta_h"], 1),
            "t_stat": round(ber["t"], 1),
            "buckets": int(ber["n"]),
        }
    if fec is not None:
        evidence["fec_corrected"] = {
            "decades_per_hour": round(-fec["slope"], 4),
            "implied_ber": float(f"{10 ** -fec['now']:.3g}"),
            "limit": cfg.ber_limit,
            "eta_hours": round(fec["eta_h"], 1),
            "t_stat": round(fec["t"], 1),
            "buckets": int(fec["n"]),
        }
    if temp is not None:
        evidence["temperature"] = {
            "c_per_hour": round(-temp["slope"], 3),
            "c_fitted": round(-temp["now"], 1),
            "coolest_c_in_window": round(-temp["best"], 1),
            "limit_c": cfg.temp_limit_c,
            "eta_hours": round(temp["eta_h"], 1),
            "t_stat": round(temp["t"], 1),
            "buckets": int(temp["n"]),
        }
    best_t = max((abs(x["t"]) for x in signals.values()), default=0.0)
    return Finding(
        kind="predicted_failure",
        device=inc.device,
        port=inc.port,
        devices=(inc.device,),
        ports=(where,),
        start_ts=inc.start_ts,
        detected_ts=now_ns,
        severity="warning",
        confidence=min(0.99, best_t / (2 * cfg.min_t)),
        summary=summary,
        evidence=evidence,
    )
