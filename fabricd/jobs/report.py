"""How a job's ports look right now, and which of them is the slow one: a pure function of a footprint and a
telemetry snapshot (the service answers `GET /api/v1/jobs/ID` with it; `fabricd jobs --trace` replays one).

Per leaf port facing one of the job's NICs: Gb/s to and from the NIC, the share of time the NIC paused the leaf
(pfc-on-total-rx-time), ECN marks, drops and the frame error rate. Traffic per rail (the job's rails should carry
alike: a collective moves the same bytes on every rail) and per uplink (shared with other jobs) when it spans groups.
The slow node or rail is an outlier among the job's own ports: a robust z-score (median and MAD), so one bad port
among hundreds stands out and a job's normal spread does not.
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass, field

from fabricd.telemetry import NEVER, Snapshot
from topology.jobs import Footprint
from topology.units import NS

Z = 3.5  # robust z beyond which a port is an outlier (Iglewicz and Hoaglin's usual cut for modified z-scores)
MAD_SCALE = 1.4826  # MAD of a normal sample x this = its standard deviation
CORRUPTING = 1e-8  # CorrOpt's floor of a corrupting link (reference/domain.md)
PAUSED = 0.01  # 1 % of the time paused is a port a NIC holds back


@dataclass(frozen=True)
class PortView:
    port: str  # leaf:port
    nic: str
    rail: int
    to_nic_gbps: float
    from_nic_gbps: float
    paused: float  # share of time the NIC paused this leaf port (lossless priority)
    ecn_per_s: float
    drops_per_s: float
    error_rate: float  # frame errors / frames received from the NIC

    @property
    def gbps(self) -> float:
        return self.to_nic_gbps + self.from_nic_gbps

    def to_dict(self) -> dict[str, object]:
        return {
            "port": self.port,
            "nic": self.nic,
            "rail": self.rail,
            "to_nic_gbps": round(self.to_nic_gbps, 3),
            "from_nic_gbps": round(self.from_nic_gbps, 3),
            "paused": round(self.paused, 5),
            "ecn_per_s": round(self.ecn_per_s, 2),
            "drops_per_s": round(self.drops_per_s, 2),
            "error_rate": float(f"{self.error_rate:.3g}"),
        }


@dataclass(frozen=True)
class Outlier:
    port: str
    nic: str
    metric: str  # throughput | paused | error_rate
    value: float
    median: float
    z: float | None  # None when the job's other ports are all alike (MAD 0)
    why: str

    def to_dict(self) -> dict[str, object]:
        return {
            "port": self.port,
            "nic": self.nic,
            "metric": self.metric,
            "value": float(f"{self.value:.4g}"),
            "median": float(f"{self.median:.4g}"),
            "z": None if self.z is None else round(self.z, 1),
            "why": self.why,
        }


@dataclass(frozen=True)
class JobReport:
    footprint: Footprint
    ports: list[PortView]
    per_rail_gbps: dict[int, float]
    rail_imbalance: float
    uplinks_gbps: dict[str, float]
    outliers: list[Outlier] = field(default_factory=list)
    unseen: list[str] = field(default_factory=list)  # ports with no telemetry (yet)

    @property
    def attention(self) -> list[PortView]:
        """Ports with pauses, drops or errors: where the job's traffic suffers."""
        return [p for p in self.ports if p.paused >= PAUSED or p.drops_per_s > 0 or p.error_rate >= CORRUPTING]

    def to_dict(self, *, ports: bool = True) -> dict[str, object]:
        out: dict[str, object] = {
            **self.footprint.to_dict(),
            "gbps": round(sum(p.gbps for p in self.ports), 2),
            "per_rail_gbps": {str(r): round(v, 2) for r, v in sorted(self.per_rail_gbps.items())},
            "rail_imbalance": round(self.rail_imbalance, 4),
            "outliers": [o.to_dict() for o in self.outliers],
            "attention": [p.port for p in self.attention],
            "unseen_ports": self.unseen,
        }
        if ports:
            out["ports"] = [p.to_dict() for p in self.ports]
            out["uplinks_gbps"] = {k: round(v, 2) for k, v in sorted(self.uplinks_gbps.items())}
        return out


def _rate(s: Snapshot, port: str, leaf: str, index: str | None = None) -> float | None:
    device, name = port.split(":", 1)
    return s.rate_of(device, name, leaf, index)


def _sum(s: Snapshot, port: str, leaf: str) -> float:
    device, name = port.split(":", 1)
    total = 0.0
    for lf, index in s.codes:
        if lf == leaf:
            i = s.find(device, name, leaf, index)
            if i is not None and s.prev_ts[i] != NEVER and math.isfinite(float(s.rate[i])):
                total += float(s.rate[i])
    return total


def report(fp: Footprint, s: Snapshot, lossless: int = 3) -> JobReport:
    views: list[PortView] = []
    unseen: list[str] = []
    for port in fp.leaf_ports:
        out_oct, in_oct = _rate(s, port, "if.out-octets"), _rate(s, port, "if.in-octets")
        if out_oct is None or in_oct is None:
            unseen.append(port)
            continue
        in_pkts = _rate(s, port, "if.in-pkts") or 0.0
        errors = next(
            (r for leaf in ("if.in-fcs-errors", "eth.in-crc-errors", "if.in-errors") if (r := _rate(s, port, leaf))),
            0.0,
        )
        paused_ns = _rate(s, port, "pfc.pfc-on-total-rx-time", str(lossless)) or 0.0
        views.append(
            PortView(
                port,
                fp.nic_of.get(port, ""),
                fp.rail_of.get(port, 0),
                out_oct * 8 / 1e9,
                in_oct * 8 / 1e9,
                min(1.0, paused_ns / NS),
                _sum(s, port, "queue.ecn-marked-pkts"),
                (_rate(s, port, "if.out-discards") or 0.0) + _sum(s, port, "queue.dropped-pkts"),
                errors / in_pkts if in_pkts > 0 else 0.0,
            )
        )
    per_rail: dict[int, float] = {}
    for v in views:
        per_rail[v.rail] = per_rail.get(v.rail, 0.0) + v.gbps
    mean = statistics.fmean(per_rail.values()) if per_rail else 0.0
    imbalance = (max(per_rail.values()) - min(per_rail.values())) / mean if mean > 0 else 0.0
    uplinks = {}
    for up in fp.uplinks:
        o, i = _rate(s, up, "if.out-octets"), _rate(s, up, "if.in-octets")
        if o is not None and i is not None:
            uplinks[up] = (o + i) * 8 / 1e9
    return JobReport(fp, views, per_rail, imbalance, uplinks, outliers(views), unseen)


def _robust(values: list[float], x: float) -> tuple[float, float | None]:
    med = statistics.median(values)
    mad = statistics.median(abs(v - med) for v in values)
    return med, None if mad == 0 else (x - med) / (MAD_SCALE * mad)


def outliers(views: list[PortView]) -> list[Outlier]:
    """The job's ports that stand out from its others: little throughput, much pause, frame errors."""
    if len(views) < 3:
        return []
    out: list[Outlier] = []
    thr = [v.gbps for v in views]
    paused = [v.paused for v in views]
    errors = [v.error_rate for v in views]
    for v in views:
        med, z = _robust(thr, v.gbps)
        if v.gbps < 0.9 * med and (z is None or z < -Z):
            why = f"{v.gbps:.1f} Gb/s against the job's median {med:.1f} Gb/s per port"
            out.append(Outlier(v.port, v.nic, "throughput", v.gbps, med, z, why))
        med, z = _robust(paused, v.paused)
        if v.paused >= PAUSED and v.paused > 2 * med and (z is None or z > Z):
            why = f"{v.nic} paused its leaf {v.paused:.0%} of the time (job median {med:.1%})"
            out.append(Outlier(v.port, v.nic, "paused", v.paused, med, z, why))
        med, z = _robust(errors, v.error_rate)
        if v.error_rate >= CORRUPTING and v.error_rate > 10 * med and (z is None or z > Z):
            why = (
                f"{v.error_rate:.1e} of frames from {v.nic} fail their check (job median {med:.1e}): "
                "a bad link or optic on this rank"
            )
            out.append(Outlier(v.port, v.nic, "error_rate", v.error_rate, med, z, why))
    order = {"error_rate": 0, "paused": 1, "throughput": 2}
    return sorted(out, key=lambda o: (order[o.metric], -abs(o.z or math.inf), o.port))
