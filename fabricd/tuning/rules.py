"""Judge: one pure function per tuning rule of shared/reference/congestion-tuning.md §7, over one window.

Each returns a Verdict: fired, clear, or not judged (a counter the rule needs is missing or too short; the why says
which), with the numbers it saw and its source key. Thresholds the reference gives are cited; the others are
fabricd's choices, named as such here and in docs/tuning.md.
"""

from __future__ import annotations

import itertools
import statistics
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from enum import StrEnum

from policies.policy import DlbPolicy

from .bounds import skew_floor_us
from .inputs import GroupSample, GroupWindow, PortClass, PortWindow, Sample
from .series import MIN_INTERVALS, Missing, Series, correlation, counter, gauge


class Rule(StrEnum):
    PFC_BEFORE_ECN = "pfc_before_ecn"
    MARKING_BUT_PAUSING = "marking_but_pausing"
    CNP_NOT_ACTED_ON = "cnp_not_acted_on"
    MARKS_UNDERUSED = "marks_underused"
    QUEUE_GROWS_WITH_FAN_IN = "queue_grows_with_fan_in"
    OSCILLATION = "oscillation"
    LONG_HAUL_SLOW_LOOP = "long_haul_slow_loop"
    REORDERS_SHORT_GAP = "reorders_short_gap"
    ECMP_IMBALANCE = "ecmp_imbalance"


# Where each rule comes from: congestion-tuning.md §7 rule number and the reference's source keys.
SOURCE: Mapping[Rule, str] = {
    Rule.PFC_BEFORE_ECN: "congestion-tuning.md §7.1, §1.4 [dcqcn15][huawei-aiecn]",
    Rule.MARKING_BUT_PAUSING: "congestion-tuning.md §7.2, §1.2 [barre]",
    Rule.CNP_NOT_ACTED_ON: "congestion-tuning.md §7.3, §3.3 [mlx5-counters][ofed-ecn]",
    Rule.MARKS_UNDERUSED: "congestion-tuning.md §7.4, §1.4 [hpe][barre]",
    Rule.QUEUE_GROWS_WITH_FAN_IN: "congestion-tuning.md §7.5, §1.3 (DERIVED from [fluid-py])",
    Rule.OSCILLATION: "congestion-tuning.md §7.6 [ecn-delay][hpe]",
    Rule.LONG_HAUL_SLOW_LOOP: "congestion-tuning.md §7.7, §1.3, §1.4 [hpe]",
    Rule.REORDERS_SHORT_GAP: "congestion-tuning.md §7.8, §4 [sonic-ars][meta24][hpe]",
    Rule.ECMP_IMBALANCE: "congestion-tuning.md §7.9, §4 [meta24]; 20 % from domain.md",
}

# Rule 2: CNPs count as acted on when the senders handled at least this share of those the receivers sent
# (the reference's "np_cnp_sent ≈ rp_cnp_handled"; the 80 % is fabricd's reading of ≈).
HANDLED_SHARE = 0.8
# Rule 4: HPE's low-Kmin runs held 96-98 Gb/s of 100 (§1.4 [hpe]): below 98 % of line rate is that under-use.
UNDERUSED_UTIL = 0.98
# Rule 4: "queue watermark < Kmin + small" is read as "the queue peaks inside the marking ramp, below Kmax" (fabricd's
# reading of "small"): an under-used link means the queue ran dry within the interval, so its peak is what it held
# when the senders cut. Below Kmax the marks came from the ramp while the link still had room: the ramp sits too low
# for the loop (the senders cannot answer sooner than one feedback delay, and a queue shallower than what the link
# sends meanwhile drains dry after a cut; HPE's 0.5 -> 0.75 x RTT Kmin restored line rate, §1.4 [hpe]). At or
# above Kmax every packet is marked: under-use there is the loop over-reacting to overload (oscillation's case).
# Rule 5: the queue "grows" with fan-in when its mean at the upper half of fan-in is 1.5 x the lower half's, and
# fan-in itself must vary 2 x to tell (fabricd's choices).
FAN_IN_GROWTH = 1.5
FAN_IN_SPAN = 2.0
# Rule 6: at least 6 intervals; throughput varies (CV >= 0.1), turns direction in >= 70 % of steps, and marks move
# against it (correlation <= -0.5) (fabricd's choices: the reference gives the symptom, not a test).
OSC_MIN_INTERVALS = 6
OSC_CV = 0.1
OSC_ALTERNATION = 0.7
OSC_ANTI_CORRELATION = -0.5
# Rule 7: HPE's good long-haul profile peaked at about 1 RTT of queue (§1.4 [hpe]); "≫ 1 RTT" is read as above
# the 1.5 x RTT of its Kmax.
LONG_HAUL_PEAK_RTTS = 1.5
# Rule 8: Meta's flowlets with 256-512 us gaps gave < 1 out-of-order packet per second (§4 [meta24]).
REORDERS_PER_S = 1.0
# Rule 9: per-uplink spread above ~20 % (domain.md), judged only under load (>= 10 % of the group, fabricd's choice).
IMBALANCE_SPREAD = 0.2
IMBALANCE_MIN_LOAD = 0.1


class Outcome(StrEnum):
    FIRED = "fired"
    CLEAR = "clear"
    NOT_JUDGED = "not_judged"


@dataclass(frozen=True)
class Verdict:
    rule: Rule
    subject: str  # "device:port" or "device:group"
    port_class: PortClass
    outcome: Outcome
    why: str
    evidence: Mapping[str, float] = field(default_factory=dict)

    @property
    def source(self) -> str:
        return SOURCE[self.rule]

    @property
    def fired(self) -> bool:
        return self.outcome is Outcome.FIRED


def _sum(*vals: int | None) -> int | None:
    present = [v for v in vals if v is not None]
    return sum(present) if present else None


def _t(s: Sample) -> float:
    return s.t_s


def _c(w: PortWindow, name: str, get: Callable[[Sample], int | None]) -> Series | Missing:
    return counter(w.samples, name, get, _t)


def _g(w: PortWindow, name: str, get: Callable[[Sample], int | None]) -> Series | Missing:
    return gauge(w.samples, name, get, _t)


def pause_frames(w: PortWindow) -> Series | Missing:
    return _c(w, "PFC pause frames", lambda s: _sum(s.pfc_rx_pkts, s.pfc_tx_pkts))


def pause_us(w: PortWindow) -> Series | Missing:
    return _c(w, "PFC pause duration", lambda s: _sum(s.pfc_rx_pause_us, s.pfc_tx_pause_us))


def marks(w: PortWindow) -> Series | Missing:
    return _c(w, "ECN marked packets", lambda s: s.ecn_marked_pkts)


def tx_bytes(w: PortWindow) -> Series | Missing:
    return _c(w, "tx bytes", lambda s: s.tx_bytes)


def drops(w: PortWindow) -> Series | Missing:
    return _c(w, "drops", lambda s: s.drops)


def queue_watermark(w: PortWindow) -> Series | Missing:
    return _g(w, "queue watermark", lambda s: s.queue_watermark_bytes)


def _nic(w: PortWindow, name: str) -> Series | Missing:
    return _c(w, name, lambda s: getattr(s.nic, name) if s.nic is not None else None)


class _Judge:
    """Builds the verdicts of one rule for one subject."""

    def __init__(self, rule: Rule, subject: str, cls: PortClass):
        self.rule, self.subject, self.cls = rule, subject, cls

    def missing(self, *series: Series | Missing) -> Verdict | None:
        for s in series:
            if isinstance(s, Missing):
                return Verdict(self.rule, self.subject, self.cls, Outcome.NOT_JUDGED, s.why)
        return None

    def not_judged(self, why: str, **evidence: float) -> Verdict:
        return Verdict(self.rule, self.subject, self.cls, Outcome.NOT_JUDGED, why, evidence)

    def clear(self, why: str, **evidence: float) -> Verdict:
        return Verdict(self.rule, self.subject, self.cls, Outcome.CLEAR, why, evidence)

    def fired(self, why: str, **evidence: float) -> Verdict:
        return Verdict(self.rule, self.subject, self.cls, Outcome.FIRED, why, evidence)


def _judge(rule: Rule, w: PortWindow | GroupWindow) -> _Judge:
    return _Judge(rule, w.subject, w.port_class)


def pfc_before_ecn(w: PortWindow) -> Verdict:
    """§7.1: pause frames rise while the queue's ECN marks stay flat: PFC fires before ECN."""
    j = _judge(Rule.PFC_BEFORE_ECN, w)
    p, m = pause_frames(w), marks(w)
    if (bad := j.missing(p, m)) is not None:
        return bad
    assert isinstance(p, Series) and isinstance(m, Series)
    s = w.settings
    ev = {"pause_frames": p.total, "ecn_marks": m.total, "kmin_bytes": s.kmin_bytes, "kmax_bytes": s.kmax_bytes}
    if s.pfc_enabled:
        ev["xoff_trigger_bytes"] = s.xoff_trigger_bytes
    if isinstance(pg := _g(w, "PG watermark", lambda x: x.pg_watermark_bytes), Series):
        ev["pg_peak_bytes"] = max(pg.delta)  # how close the ingress came to XOFF
    if isinstance(q := queue_watermark(w), Series):
        ev["queue_peak_bytes"] = max(q.delta)  # below Kmin: the queue never reached the marking ramp
    if p.total == 0:
        return j.clear("no PFC pause frames in the window", **ev)
    if m.total > 0:
        return j.clear(f"ECN marked {m.total:.0f} packets beside {p.total:.0f} pause frames: ECN fires", **ev)
    return j.fired(
        f"{p.total:.0f} PFC pause frames and no ECN mark: PFC fires before ECN (Kmin {s.kmin_bytes} B, "
        f"Kmax {s.kmax_bytes} B)",
        **ev,
    )


def marking_but_pausing(w: PortWindow) -> Verdict:
    """§7.2: marks and pauses rise together while the senders handle the CNPs: they react too slowly."""
    j = _judge(Rule.MARKING_BUT_PAUSING, w)
    p, m = pause_frames(w), marks(w)
    sent, handled = _nic(w, "np_cnp_sent"), _nic(w, "rp_cnp_handled")
    if (bad := j.missing(p, m, sent, handled)) is not None:
        return bad
    assert isinstance(p, Series) and isinstance(m, Series)
    assert isinstance(sent, Series) and isinstance(handled, Series)
    ev = {"pause_frames": p.total, "ecn_marks": m.total, "np_cnp_sent": sent.total, "rp_cnp_handled": handled.total}
    if p.total == 0 or m.total == 0:
        return j.clear("not marking and pausing together", **ev)
    if sent.total == 0:
        return j.clear("no CNP sent for the marks: see cnp_not_acted_on", **ev)
    share = handled.total / sent.total
    ev["handled_share"] = share
    if share < HANDLED_SHARE:
        return j.clear(f"only {share:.0%} of the CNPs handled: see cnp_not_acted_on", **ev)
    return j.fired(
        f"{m.total:.0f} marks and {p.total:.0f} pause frames while senders handle {share:.0%} of the CNPs: "
        "they cut too slowly",
        **ev,
    )


def cnp_not_acted_on(w: PortWindow) -> Verdict:
    """§7.3: CNPs ignored, or CE packets arriving with no CNP handled: CC off for the priority, or a DSCP mismatch."""
    j = _judge(Rule.CNP_NOT_ACTED_ON, w)
    ignored, ce, handled = _nic(w, "rp_cnp_ignored"), _nic(w, "np_ecn_marked_roce_packets"), _nic(w, "rp_cnp_handled")
    if isinstance(ignored, Series) and ignored.total > 0:
        return j.fired(f"{ignored.total:.0f} CNPs received and ignored", rp_cnp_ignored=ignored.total)
    if isinstance(ce, Series) and isinstance(handled, Series):
        ev = {"np_ecn_marked_roce_packets": ce.total, "rp_cnp_handled": handled.total}
        if isinstance(ignored, Series):
            ev["rp_cnp_ignored"] = ignored.total
        if ce.total > 0 and handled.total == 0:
            return j.fired(f"{ce.total:.0f} CE-marked packets arrived and no CNP was handled", **ev)
        return j.clear("CNPs are handled", **ev)
    if isinstance(ignored, Series):
        return j.clear("no CNP ignored", rp_cnp_ignored=ignored.total)
    bad = j.missing(ignored)
    assert bad is not None
    return bad


def marks_underused(w: PortWindow) -> Verdict:
    """§7.4: marks while the link runs below line rate and the queue peaks inside the ramp (below Kmax): the ramp marks
    before the queue can carry the link through the senders' cuts."""
    j = _judge(Rule.MARKS_UNDERUSED, w)
    m, tx, wm = marks(w), tx_bytes(w), queue_watermark(w)
    if (bad := j.missing(m, tx, wm)) is not None:
        return bad
    assert isinstance(m, Series) and isinstance(tx, Series) and isinstance(wm, Series)
    s, rate = w.settings, w.physics.bytes_per_s
    marking, under_util, under_wm = 0, [], []
    for t, dt, dm in zip(m.t_s, m.dt_s, m.delta, strict=True):
        dtx, q = tx.at(t), wm.at(t)
        if dm <= 0 or dtx is None or q is None:
            continue
        marking += 1
        util = dtx / dt / rate
        if util < UNDERUSED_UTIL and q < s.kmax_bytes:
            under_util.append(util)
            under_wm.append(q)
    ev: dict[str, float] = {"marking_intervals": marking, "underused_intervals": len(under_util)}
    ev |= {"kmin_bytes": s.kmin_bytes, "kmax_bytes": s.kmax_bytes}
    if marking == 0:
        return j.clear("no ECN marks in the window", **ev)
    if len(under_util) < 2 or 2 * len(under_util) < marking:
        return j.clear(f"{len(under_util)} of {marking} marking intervals under-used with the queue below Kmax", **ev)
    ev |= {"utilisation": statistics.fmean(under_util), "queue_peak_bytes": max(under_wm)}
    return j.fired(
        f"marks in {marking} intervals, {len(under_util)} of them at {ev['utilisation']:.0%} of line rate with the "
        f"queue at most {max(under_wm):.0f} B (ramp {s.kmin_bytes}..{s.kmax_bytes} B): senders back off below the link",
        **ev,
    )


def queue_grows_with_fan_in(w: PortWindow) -> Verdict:
    """§7.5: the standing queue rises with the number of senders and reaches Kmax: p* has passed Pmax."""
    j = _judge(Rule.QUEUE_GROWS_WITH_FAN_IN, w)
    fan, wm = _g(w, "fan-in", lambda s: s.fan_in), queue_watermark(w)
    if (bad := j.missing(fan, wm)) is not None:
        return bad
    assert isinstance(fan, Series) and isinstance(wm, Series)
    pairs = sorted((n, q) for t, n in zip(fan.t_s, fan.delta, strict=True) if (q := wm.at(t)) is not None)
    if len(pairs) < MIN_INTERVALS:
        return j.not_judged(f"{len(pairs)} intervals with both fan-in and a watermark, need {MIN_INTERVALS}")
    lo_n, hi_n = pairs[0][0], pairs[-1][0]
    ev = {"fan_in_low": lo_n, "fan_in_high": hi_n}
    if lo_n <= 0 or hi_n < FAN_IN_SPAN * lo_n:
        return j.not_judged(f"fan-in varied only {lo_n:.0f}..{hi_n:.0f}: growth with fan-in cannot be seen", **ev)
    half = len(pairs) // 2
    low_q = statistics.fmean(q for _, q in pairs[:half])
    high = [q for _, q in pairs[len(pairs) - half :]]
    high_q, peak = statistics.fmean(high), max(high)
    kmax = w.settings.kmax_bytes
    ev |= {"queue_low_bytes": low_q, "queue_high_bytes": high_q, "queue_peak_bytes": peak, "kmax_bytes": kmax}
    grows = high_q >= FAN_IN_GROWTH * low_q if low_q > 0 else high_q > 0
    if not grows:
        return j.clear("the queue does not grow with fan-in", **ev)
    if peak < kmax:
        return j.clear("the queue grows with fan-in as DCQCN's fixed point says (p* ~ N^4/3), inside the ramp", **ev)
    return j.fired(
        f"the queue grows with fan-in ({low_q:.0f} B at {lo_n:.0f} senders -> {high_q:.0f} B at up to {hi_n:.0f}) "
        f"and reaches Kmax {kmax} B: the marking needed exceeds Pmax {w.settings.pmax_percent} %",
        **ev,
    )


def oscillation(w: PortWindow) -> Verdict:
    """§7.6: throughput and marks alternate against each other: the loop over-reacts."""
    j = _judge(Rule.OSCILLATION, w)
    tx, m = tx_bytes(w), marks(w)
    if (bad := j.missing(tx, m)) is not None:
        return bad
    assert isinstance(tx, Series) and isinstance(m, Series)
    both = [
        (d / dt, dm / dt) for t, d, dt in zip(tx.t_s, tx.delta, tx.dt_s, strict=True) if (dm := m.at(t)) is not None
    ]
    if len(both) < OSC_MIN_INTERVALS:
        return j.not_judged(f"{len(both)} intervals with throughput and marks, need {OSC_MIN_INTERVALS}")
    xs, ms = [b[0] for b in both], [b[1] for b in both]
    mean = statistics.fmean(xs)
    if mean == 0:
        return j.clear("no traffic")
    cv = statistics.pstdev(xs) / mean
    steps = [b - a for a, b in itertools.pairwise(xs)]
    flips = sum(1 for a, b in itertools.pairwise(steps) if a * b < 0)
    alternation = flips / (len(steps) - 1)
    corr = correlation(xs, ms)
    ev = {"throughput_cv": cv, "alternation": alternation, "marks_throughput_correlation": corr}
    ev["period_s"] = 2 * statistics.fmean(tx.dt_s)
    if cv >= OSC_CV and alternation >= OSC_ALTERNATION and corr <= OSC_ANTI_CORRELATION:
        return j.fired(
            f"throughput swings (CV {cv:.2f}) and turns in {alternation:.0%} of intervals against the marks "
            f"(correlation {corr:.2f})",
            **ev,
        )
    return j.clear("throughput and marks do not alternate", **ev)


def long_haul_slow_loop(w: PortWindow) -> Verdict:
    """§7.7: a long-haul port's queue peaks well above one RTT of line rate, or it drops: the loop is too slow."""
    j = _judge(Rule.LONG_HAUL_SLOW_LOOP, w)
    if w.port_class is not PortClass.DCI:
        return j.not_judged("applies to long-haul (dci) ports only")
    wm, d = queue_watermark(w), drops(w)
    if isinstance(wm, Missing) and isinstance(d, Missing):
        return j.not_judged(f"{wm.why}; {d.why}")
    bdp = w.physics.bytes_per_s * w.physics.rtt_s
    dr = w.settings.dr_cnp
    ev = {"rtt_ms": w.physics.rtt_s * 1e3, "bdp_bytes": bdp, "dr_cnp": float(dr is not None and dr.enabled)}
    why = []
    if isinstance(wm, Series):
        peak = max(wm.delta)
        ev |= {"queue_peak_bytes": peak, "queue_peak_rtts": peak / bdp if bdp else 0.0}
        if bdp and peak > LONG_HAUL_PEAK_RTTS * bdp:
            why.append(f"the queue peaked at {peak / bdp:.1f} x RTT x C")
    if isinstance(d, Series):
        ev["drops"] = d.total
        if d.total > 0:
            why.append(f"{d.total:.0f} drops")
    if isinstance(cnps := _c(w, "DR CNPs", lambda s: s.dr_cnp_sent), Series):
        ev["dr_cnps_sent"] = cnps.total  # none while the queue peaks: the DR's CNP thresholds are too high
    if not why:
        return j.clear("the long-haul queue stays within 1.5 RTT, no drops", **ev)
    return j.fired(f"{' and '.join(why)} over {w.physics.length_m / 1000:g} km (RTT {ev['rtt_ms']:.2f} ms)", **ev)


PORT_RULES: tuple[Callable[[PortWindow], Verdict], ...] = (
    pfc_before_ecn,
    marking_but_pausing,
    cnp_not_acted_on,
    marks_underused,
    queue_grows_with_fan_in,
    oscillation,
    long_haul_slow_loop,
)


def judge_port(w: PortWindow) -> tuple[Verdict, ...]:
    return tuple(rule(w) for rule in PORT_RULES)


def _gt(s: GroupSample) -> float:
    return s.t_s


def reorders_short_gap(g: GroupWindow, dlb: DlbPolicy | None = None) -> Verdict:
    """§7.8: out-of-sequence packets without drops behind a flowlet group: the gap is shorter than the skew."""
    j = _judge(Rule.REORDERS_SHORT_GAP, g)
    if g.mode == "off":
        return j.not_judged("DLB is off on this group: no flowlet gap to judge")
    if g.mode == "per-packet":
        return j.not_judged("per-packet mode reorders by design (NICs must accept it): no flowlet gap to judge")
    oos = counter(g.samples, "out_of_sequence", lambda s: s.out_of_sequence, _gt)
    d = counter(g.samples, "drops", lambda s: s.drops, _gt)
    if (bad := j.missing(oos, d)) is not None:
        return bad
    assert isinstance(oos, Series) and isinstance(d, Series)
    floor = skew_floor_us(g.path_lengths_m, dlb or DlbPolicy())
    ev = {"out_of_sequence_per_s": oos.rate, "drops": d.total, "flowlet_us": g.flowlet_us, "skew_floor_us": floor}
    moves = counter(g.samples, "reassignments", lambda s: s.reassignments, _gt)
    if isinstance(moves, Series):
        ev["reassignments"] = moves.total
    if oos.rate <= REORDERS_PER_S:
        return j.clear(f"{oos.rate:.2f} out-of-sequence packets/s (<= {REORDERS_PER_S:g}/s)", **ev)
    if d.total > 0:
        return j.clear(f"{d.total:.0f} drops: the retransmissions may come from loss, not reordering", **ev)
    return j.fired(
        f"{oos.rate:.1f} out-of-sequence packets/s with no drop; flowlet gap {g.flowlet_us} us "
        f"(path-delay skew needs >= {floor} us)",
        **ev,
    )


def _member(port: str) -> Callable[[GroupSample], int | None]:
    return lambda s: s.member_tx_bytes.get(port)


def ecmp_imbalance(g: GroupWindow) -> Verdict:
    """§7.9: the members of an ECMP group carry unequal load under one job."""
    j = _judge(Rule.ECMP_IMBALANCE, g)
    if len(g.members) < 2:
        return j.not_judged("fewer than two members")
    per = [counter(g.samples, f"{m} tx bytes", _member(m), _gt) for m in g.members]
    if (bad := j.missing(*per)) is not None:
        return bad
    series = [s for s in per if isinstance(s, Series)]
    common = set(series[0].t_s).intersection(*(s.t_s for s in series[1:]))
    if len(common) < MIN_INTERVALS:
        return j.not_judged(f"{len(common)} intervals usable on every member, need {MIN_INTERVALS}")
    totals = [sum(d for t, d in zip(s.t_s, s.delta, strict=True) if t in common) for s in series]
    seconds = sum(dt for t, dt in zip(series[0].t_s, series[0].dt_s, strict=True) if t in common)
    mean = statistics.fmean(totals)
    load = mean / seconds / (g.speed_gbps * 1e9 / 8)
    spread = (max(totals) - min(totals)) / mean if mean else 0.0
    ev = {"load": load, "spread": spread, "members": len(totals)}
    if load < IMBALANCE_MIN_LOAD:
        return j.not_judged(f"the group carries {load:.0%} of its capacity: spread means nothing below 10 %", **ev)
    if spread <= IMBALANCE_SPREAD:
        return j.clear(f"member load spread {spread:.0%} (<= 20 %)", **ev)
    return j.fired(f"member load spread {spread:.0%} at {load:.0%} load (> 20 %)", **ev)


def judge_group(g: GroupWindow, dlb: DlbPolicy | None = None) -> tuple[Verdict, ...]:
    return (reorders_short_gap(g, dlb), ecmp_imbalance(g))
