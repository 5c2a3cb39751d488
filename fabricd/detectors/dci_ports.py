"""dci_imbalance and dci_drops: the DR ports of a long-haul DCI, their load balance and their drops.

Groups come from the fabric: each DCI's long-haul ports (every DR of that DCI, one ECMP group toward the other
campus) and each DR's campus-side uplinks (its ECMP group into the campus). Per port, the new samples of out-octets,
out-pkts, out-discards and queue dropped-pkts are summed over a sliding window (`window_s`): a burst shorter than a
fraction of the window barely moves the sums, which is the first guard against short bursts; the second is
hysteresis (raise at `raise_skew`, clear under `clear_skew`).

- Imbalance: skew = (max - min) / mean of the members' loads over the window, a member down counting 0 (the capacity
  it leaves is lost to the group). alpha_LB = mean / max: the share of the group's capacity usable before its busiest
  member fills (the load-balance factor of the compute-loss model, policies.dci_loss). The shape says the likely
  cause: a member down (or up and idle), two clusters of loads (hash polarization: the DR hashes on what the tier
  before already hashed on), or a spread with no clusters (too few flows / QPs for the hash).
- Drops: a port drops when its window holds `min_drops` discards and a drop rate of `drop_rate` or more; one finding
  per DCI names every dropping DR port of it.
Both findings carry the cost "today's imbalance and drops cost ~X % compute for a job of this shape", the same
model `fabricd dci whatif` runs, with the live alpha_LB and drop rate; `state.live` keeps those per DCI for metrics.
A group is judged only when every member's device is fresh and the window is covered; an idle group (mean under
`min_utilisation` of line rate) is never judged.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field
from itertools import pairwise

import numpy as np

from fabricd.telemetry import NEVER, Snapshot
from policies.dci_loss import DciPath, Split, Workload, evaluate
from topology.fabric import Fabric
from topology.model import Role
from topology.units import NS

from .finding import Finding

Port = tuple[str, str]

OCTETS, PKTS, DISCARDS, QDROPS = "if.out-octets", "if.out-pkts", "if.out-discards", "queue.dropped-pkts"
ECN, PAUSE_IN = "queue.ecn-marked-pkts", "pfc.in-frames"
LEAVES = (OCTETS, PKTS, DISCARDS, QDROPS, ECN, PAUSE_IN)


@dataclass(frozen=True)
class DciPortsConfig:
    window_s: float = 10.0
    # A healthy ECMP group with many flows sits within a few % (the twin: +-2 %); the measured long-haul lab saw up
    # to 20 % between DR ports (reference/domain.md). Raise at 15 %, clear under 10 % (hysteresis, our choice).
    raise_skew: float = 0.15
    clear_skew: float = 0.10
    # ... and the skew must stay at or over raise_skew this long: a 2 s burst of 40 % skew in a 10 s window reads
    # ~8 % plus the group's own spread, a lasting 20 % skew passes 15 % within ~7 s and is raised 5 s later.
    hold_s: float = 5.0
    min_utilisation: float = 0.05  # an idle group's shares mean nothing
    # Lossless or DR-CNP long-haul ports should not drop at all; 1e-6 over >= 20 packets in a window is a finding.
    drop_rate: float = 1e-6
    min_drops: int = 20
    min_drop_samples: int = 3  # ... in this many samples of the window: drops that last, not one burst
    sample_interval_s: float = 1.0
    # The job shape the cost is quoted for (the 7B / 1k-GPU PP job of the long-haul figures).
    job_params: float = 7e9
    job_gpus: int = 1024
    job_split: str = "pp"


@dataclass(frozen=True)
class Group:
    kind: str  # "dci" (long-haul ports of one DCI) | "uplinks" (one DR's campus-side ECMP group)
    name: str  # the DCI name, or the DR's name
    dci: str  # the DCI this group serves
    members: tuple[Port, ...]
    speed_gbps: float
    distance_km: float
    dci_tbps: float

    @property
    def label(self) -> str:
        return f"DCI {self.name} long-haul ports" if self.kind == "dci" else f"{self.name} campus uplinks"


@dataclass
class _Sample:
    ts: int
    span_ns: int
    d: dict[str, float]


@dataclass
class _Port:
    seen: int = NEVER
    samples: deque[_Sample] = field(default_factory=deque)


@dataclass(frozen=True)
class PortLive:
    port: str  # device:port
    up: bool
    gbps: float  # egress over the window
    share: float  # of the group's mean load (1 = its fair share)
    drops: int
    drop_rate: float


@dataclass(frozen=True)
class Live:
    """The last judgement of one group (what the service exports as metrics and `fabricd dci ports` shows)."""

    dci: str
    group: str
    alpha_lb: float
    skew: float
    drop_rate: float
    utilisation: float
    extra_loss: float
    ports: tuple[PortLive, ...] = ()

    def to_dict(self) -> dict[str, object]:
        return {
            "dci": self.dci,
            "group": self.group,
            "alpha_lb": round(self.alpha_lb, 4),
            "skew": round(self.skew, 4),
            "drop_rate": float(f"{self.drop_rate:.3g}"),
            "utilisation": round(self.utilisation, 4),
            "extra_compute_loss": round(self.extra_loss, 5),
            "ports": [
                {
                    "port": x.port,
                    "up": x.up,
                    "gbps": round(x.gbps, 2),
                    "share": round(x.share, 4),
                    "drops": x.drops,
                    "drop_rate": float(f"{x.drop_rate:.3g}"),
                }
                for x in self.ports
            ],
        }


@dataclass
class DciPortsState:
    config: DciPortsConfig = field(default_factory=DciPortsConfig)
    groups: list[Group] | None = None
    ports: dict[Port, _Port] = field(default_factory=dict)
    imbalance: dict[str, tuple[int, str, str]] = field(default_factory=dict)  # group label -> (start, device, port)
    over_since: dict[str, int] = field(default_factory=dict)  # group label -> since when its skew is over raise_skew
    drops: dict[str, tuple[int, str, str]] = field(default_factory=dict)  # dci -> (start, device, port)
    live: dict[str, Live] = field(default_factory=dict)  # group label -> last judgement


def dci_groups(fabric: Fabric) -> list[Group]:
    """Every DCI's long-haul ports and every DR's campus uplinks, from the cabling."""
    long_haul: dict[str, list[Port]] = {}
    length: dict[str, float] = {}
    speed: dict[str, float] = {}
    uplinks: dict[str, list[Port]] = {}
    serves: dict[str, str] = {}
    for dr in fabric.switches():
        if dr.role is not Role.DR:
            continue
        for link in fabric.links_of(dr.name):
            local = link.a if link.a.device == dr.name else link.b
            far = fabric.device(link.other(dr.name, local.port).device)
            if far.site is not None:
                long_haul.setdefault(far.site, []).append((dr.name, local.port))
                length[far.site] = max(length.get(far.site, 0.0), float(link.length_m or 0.0))
                speed[far.site] = float(link.speed_gbps or 0)
                serves[dr.name] = far.site
            elif far.is_switch:
                uplinks.setdefault(dr.name, []).append((dr.name, local.port))
    out = []
    for dci, members in sorted(long_haul.items()):
        tbps = len(members) * speed[dci] / 1000
        out.append(Group("dci", dci, dci, tuple(sorted(members)), speed[dci], length[dci] / 1000, tbps))
    for name, members in sorted(uplinks.items()):
        site = serves.get(name)
        if site is None or len(members) < 2:
            continue
        ref = next(g for g in out if g.name == site)
        out.append(Group("uplinks", name, site, tuple(sorted(members)), ref.speed_gbps, ref.distance_km, ref.dci_tbps))
    return out


@dataclass(frozen=True)
class Judgement:
    loads: dict[Port, float]  # bytes/s over the window
    up: dict[Port, bool]
    drops: dict[Port, tuple[float, float]]  # port -> (dropped, offered packets) over the window
    drop_samples: dict[Port, int]  # port -> samples of the window that dropped
    ecn: dict[Port, float]
    pauses: dict[Port, float]
    skew: float
    alpha_lb: float
    utilisation: float
    drop_rate: float  # the group's: dropped / offered packets


def judge(
    loads: dict[Port, float], up: dict[Port, bool], speed_gbps: float, drops: dict[Port, tuple[float, float]]
) -> tuple[float, float, float, float]:
    """(skew, alpha_lb, utilisation, group drop rate) of a group's window loads; a member down counts 0.
    `drops` maps a port to (dropped, offered) packets."""
    vals = np.array([loads[p] if up[p] else 0.0 for p in loads], dtype=np.float64)
    mean = float(vals.mean()) if len(vals) else 0.0
    top = float(vals.max()) if len(vals) else 0.0
    skew = (top - float(vals.min())) / mean if mean > 0 else 0.0
    alpha = mean / top if top > 0 else 1.0
    util = mean * 8 / (speed_gbps * 1e9) if speed_gbps > 0 else 0.0
    dropped = sum(d for d, _ in drops.values())
    offered = sum(o for _, o in drops.values())
    return skew, alpha, util, dropped / offered if offered > 0 else 0.0


def likely_cause(loads: dict[Port, float], up: dict[Port, bool]) -> tuple[str, str, list[str]]:
    """(cause, fix, the ports it concerns) from the shape of the loads."""
    down = [p for p in loads if not up[p]]
    mean = sum(loads[p] for p in loads if up[p]) / max(1, sum(up.values()))
    idle = [p for p in loads if up[p] and loads[p] < 0.1 * mean]
    if down or idle:
        names = [f"{d}:{p}" for d, p in down + idle]
        what = "down" if down else "up but idle (out of the ECMP group?)"
        return (
            "member_down",
            f"bring back {', '.join(names)} ({what}); until then the group runs on "
            f"{len(loads) - len(down) - len(idle)} of {len(loads)} members",
            names,
        )
    vals = sorted(loads.values())
    spread = vals[-1] - vals[0]
    gaps = [b - a for a, b in pairwise(vals)]
    over = [f"{d}:{p}" for (d, p), v in sorted(loads.items()) if v > mean * 1.05]
    if gaps and spread > 0 and max(gaps) >= 0.5 * spread:
        return (
            "hash_polarization",
            "loads fall into two clusters: the DR hashes on what the tier before it already hashed on; enable DLB "
            "(flowlet) on the DR's ECMP groups, or hash on other fields (UDP source port / QP) or with another seed",
            over,
        )
    return (
        "too_few_flows",
        "loads spread with no clusters: too few RoCE flows for the hash; more QPs per connection "
        "(NCCL_IB_QPS_PER_CONNECTION, `fabricd dci nccl`) or DLB (flowlet) on the DR's ECMP groups",
        over,
    )


def _job(cfg: DciPortsConfig) -> Workload:
    return Workload(cfg.job_params, cfg.job_gpus, Split(cfg.job_split))


def _job_text(cfg: DciPortsConfig) -> str:
    return f"{cfg.job_params:.3g}-param {cfg.job_split.upper()} job on {cfg.job_gpus} GPUs"


def cost(cfg: DciPortsConfig, g: Group, alpha: float, drop_rate: float) -> tuple[float, float]:
    """(loss today, extra loss over a balanced, drop-free DCI) for the configured job shape."""
    path = DciPath(distance_km=max(g.distance_km, 0.001), dci_tbps=max(g.dci_tbps, 1e-6))
    base = evaluate(_job(cfg), path).compute_loss
    now = evaluate(_job(cfg), DciPath(path.distance_km, path.dci_tbps, alpha_lb=max(alpha, 1e-3), drop_rate=drop_rate))
    return now.compute_loss, max(0.0, now.compute_loss - base)


def _take(s: Snapshot, port: Port, ps: _Port) -> None:
    """The port's new sample (out-octets decides when one arrived) into its window."""
    oct_row = s.find(port[0], port[1], OCTETS)
    if oct_row is None or int(s.ts[oct_row]) <= ps.seen:
        return
    ts, prev = int(s.ts[oct_row]), int(s.prev_ts[oct_row])
    ps.seen = ts
    if prev == NEVER:
        return  # first sample or a reset: no delta
    d: dict[str, float] = {}
    for leaf in LEAVES:
        rows = [i for i in _rows(s, port, leaf) if int(s.ts[i]) > prev]
        if rows:
            vals = s.delta(np.asarray(rows, dtype=np.int64))
            d[leaf] = float(np.nansum(vals))
    ps.samples.append(_Sample(ts, ts - prev, d))


def _rows(s: Snapshot, port: Port, leaf: str) -> list[int]:
    out = []
    for lf, index in s.codes:
        if lf == leaf:
            i = s.find(port[0], port[1], leaf, index)
            if i is not None and s.ts[i] != NEVER:
                out.append(i)
    return out


def detect(snapshot: Snapshot, fabric: Fabric, state: DciPortsState, now_ns: int) -> list[Finding]:
    cfg = state.config
    if state.groups is None:
        state.groups = dci_groups(fabric)
    if not state.groups:
        return []
    window = int(cfg.window_s * NS)
    interval = int(cfg.sample_interval_s * NS)
    out: list[Finding] = []
    judged: dict[str, tuple[Group, Judgement]] = {}
    for g in state.groups:
        for port in g.members:
            ps = state.ports.setdefault(port, _Port())
            _take(snapshot, port, ps)
            while ps.samples and ps.samples[0].ts <= now_ns - window:
                ps.samples.popleft()
        if any(snapshot.stale(d, now_ns, interval) for d in {p[0] for p in g.members}):
            continue
        j = _window(snapshot, g, state, window)
        if j is None:
            continue
        judged[g.label] = (g, j)
        _, extra = cost(cfg, g, j.alpha_lb, j.drop_rate)
        state.live[g.label] = _live(g, j, extra)
        f = _imbalance(cfg, state, g, j, now_ns)
        if f is not None:
            out.append(f)
    for dci in sorted({g.dci for g, _ in judged.values()}):
        f = _drops(cfg, state, dci, [gj for gj in judged.values() if gj[0].dci == dci], now_ns)
        if f is not None:
            out.append(f)
    return out


def _live(g: Group, j: Judgement, extra: float) -> Live:
    mean = sum(j.loads[p] if j.up[p] else 0.0 for p in g.members) / len(g.members)
    ports = tuple(
        PortLive(
            f"{d}:{p}",
            j.up[(d, p)],
            j.loads[(d, p)] * 8 / 1e9,
            j.loads[(d, p)] / mean if mean else 0.0,
            int(j.drops[(d, p)][0]),
            j.drops[(d, p)][0] / j.drops[(d, p)][1] if j.drops[(d, p)][1] else 0.0,
        )
        for d, p in g.members
    )
    return Live(g.dci, g.label, j.alpha_lb, j.skew, j.drop_rate, j.utilisation, extra, ports)


def _window(s: Snapshot, g: Group, state: DciPortsState, window: int) -> Judgement | None:
    loads: dict[Port, float] = {}
    up: dict[Port, bool] = {}
    drops: dict[Port, tuple[float, float]] = {}
    drop_samples: dict[Port, int] = {}
    ecn: dict[Port, float] = {}
    pauses: dict[Port, float] = {}
    for port in g.members:
        samples = state.ports[port].samples
        i = s.find(port[0], port[1], "oper-status")
        up[port] = i is None or s.text(i) != "DOWN"
        span = sum(x.span_ns for x in samples)
        if up[port] and (not samples or span < window * 0.9):
            return None  # the window is not covered yet: judge nothing
        total = {leaf: sum(x.d.get(leaf, 0.0) for x in samples) for leaf in LEAVES}
        loads[port] = total[OCTETS] / (span / NS) if span else 0.0
        dropped = max(total[DISCARDS], total[QDROPS])
        offered = total[PKTS] + dropped
        drops[port] = (dropped, offered)
        drop_samples[port] = sum(1 for x in samples if max(x.d.get(DISCARDS, 0.0), x.d.get(QDROPS, 0.0)) > 0)
        ecn[port], pauses[port] = total[ECN], total[PAUSE_IN]
    skew, alpha, util, rate = judge(loads, up, g.speed_gbps, drops)
    return Judgement(loads, up, drops, drop_samples, ecn, pauses, skew, alpha, util, rate)


def _imbalance(cfg: DciPortsConfig, state: DciPortsState, g: Group, j: Judgement, now: int) -> Finding | None:
    active = state.imbalance.get(g.label)
    if j.utilisation < cfg.min_utilisation and not any(not u for u in j.up.values()):
        state.imbalance.pop(g.label, None)
        state.over_since.pop(g.label, None)
        return None
    if j.skew >= cfg.raise_skew:
        state.over_since.setdefault(g.label, now)
    else:
        state.over_since.pop(g.label, None)
    since = state.over_since.get(g.label)
    held = since is not None and now - since >= int(cfg.hold_s * NS)
    if active is None and held:
        top = max(j.loads, key=lambda p: (j.loads[p] if j.up[p] else 0.0, p))
        active = state.imbalance[g.label] = (now, top[0], top[1])
    elif active is not None and j.skew < cfg.clear_skew:
        del state.imbalance[g.label]
        return None
    if active is None:
        return None
    start, device, port = active
    cause, fix, named = likely_cause(j.loads, j.up)
    today, extra = cost(cfg, g, j.alpha_lb, j.drop_rate)
    mean = sum(j.loads.values()) / len(j.loads)
    shares = {f"{d}:{p}": round(j.loads[(d, p)] / mean, 3) if mean else 0.0 for d, p in g.members}
    job = _job_text(cfg)
    summary = (
        f"{g.label}: loads differ by {j.skew * 100:.0f} % (alpha_LB {j.alpha_lb:.2f}); likely "
        f"{cause.replace('_', ' ')}; today's imbalance and drops cost ~{extra * 100:.2f} % compute for a {job}"
    )
    return Finding(
        kind="dci_imbalance",
        device=device,
        port=port,
        devices=tuple(sorted({d for d, _ in g.members})),
        ports=tuple(named) or tuple(f"{d}:{p}" for d, p in g.members),
        start_ts=start,
        detected_ts=now,
        severity="critical" if cause == "member_down" or j.alpha_lb < 0.8 else "warning",
        confidence=min(1.0, 0.5 + j.skew),
        summary=summary,
        evidence={
            "group": g.label,
            "dci": g.dci,
            "skew": round(j.skew, 4),
            "alpha_lb": round(j.alpha_lb, 4),
            "utilisation": round(j.utilisation, 4),
            "load_share": shares,
            "down": [f"{d}:{p}" for (d, p), u in j.up.items() if not u],
            "cause": cause,
            "fix": fix,
            "compute_loss": round(today, 5),
            "extra_compute_loss": round(extra, 5),
            "job": job,
            "window_s": cfg.window_s,
        },
    )


def _drops(
    cfg: DciPortsConfig, state: DciPortsState, dci: str, groups: list[tuple[Group, Judgement]], now: int
) -> Finding | None:
    per_port: dict[Port, tuple[float, float]] = {}
    samples: dict[Port, int] = {}
    ecn: dict[Port, float] = {}
    pauses: dict[Port, float] = {}
    for _, j in groups:
        per_port.update(j.drops)
        samples.update(j.drop_samples)
        ecn.update(j.ecn)
        pauses.update(j.pauses)
    rate = {p: n / o if o > 0 else 0.0 for p, (n, o) in per_port.items()}
    dropping = sorted(
        p
        for p, (n, _) in per_port.items()
        if n >= cfg.min_drops and rate[p] >= cfg.drop_rate and samples[p] >= cfg.min_drop_samples
    )
    active = state.drops.get(dci)
    if not dropping:
        if active is not None and all(n == 0 for n, _ in per_port.values()):
            del state.drops[dci]  # clear once a whole window holds no drop at all
        if dci not in state.drops:
            return None
    if active is None:
        worst = max(dropping, key=lambda p: (rate[p], p))
        active = state.drops[dci] = (now, worst[0], worst[1])
    start, device, port = active
    # the DCI's own figures (its long-haul group) when it was judged this pass, else a DR's uplinks
    g, j = min(groups, key=lambda gj: gj[0].kind != "dci")
    total = len(per_port)
    imbalanced = state.imbalance.get(g.label) is not None
    heavy = {p for p in j.loads if j.loads[p] > 1.05 * (sum(j.loads.values()) / len(j.loads))}
    if imbalanced and dropping and set(dropping) <= heavy:
        cause, fix = "imbalance", "the overloaded members drop: fix the imbalance (see the dci_imbalance finding)"
    elif len(dropping) >= max(2, total // 2):
        cause, fix = (
            "congestion",
            "many DR ports drop: senders are not slowed in time; check DR-generated CNP and the long-haul ECN "
            "thresholds (`fabricd intent`), spread load (DLB), or add DCI capacity",
        )
    else:
        cause, fix = "port", "one or few ports drop: check their queue and buffer configuration and optics"
    _, extra = cost(cfg, g, j.alpha_lb, j.drop_rate)
    names = [f"{d}:{p}" for d, p in dropping]
    rates = {
        f"{d}:{p}": {"drops": int(n), "drop_rate": float(f"{rate[(d, p)]:.3g}")}
        for (d, p), (n, _) in per_port.items()
        if n
    }
    summary = (
        f"DCI {dci}: {len(dropping)} of {total} DR ports drop"
        + (f" (worst {max(rate.values()):.2g} of packets)" if dropping else " (subsiding)")
        + f"; likely {cause}; today's imbalance and drops cost ~{extra * 100:.2f} % compute for a {_job_text(cfg)}"
    )
    return Finding(
        kind="dci_drops",
        device=device,
        port=port,
        devices=tuple(sorted({d for d, _ in per_port})),
        ports=tuple(names) or (f"{device}:{port}",),
        start_ts=start,
        detected_ts=now,
        severity="critical" if len(dropping) >= max(2, total // 2) else "warning",
        confidence=0.9 if dropping else 0.6,
        summary=summary,
        evidence={
            "dci": dci,
            "dropping_ports": len(dropping),
            "ports_watched": total,
            "drops": rates,
            "ecn_marked": {f"{d}:{p}": int(v) for (d, p), v in ecn.items() if v and (d, p) in set(dropping)},
            "pause_frames_in": {f"{d}:{p}": int(v) for (d, p), v in pauses.items() if v and (d, p) in set(dropping)},
            "group_drop_rate": float(f"{j.drop_rate:.3g}"),
            "alpha_lb": round(j.alpha_lb, 4),
            "cause": cause,
            "fix": fix,
            "extra_compute_loss": round(extra, 5),
            "window_s": cfg.window_s,
        },
    )
