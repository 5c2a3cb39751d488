"""Propose: from a window's verdicts, at most one bounded switch-side change per subject, and advice for what a
switch cannot set (the NICs' DCQCN parameters, NCCL).

- Bounds first (bounds.py): a running setting outside its bounds is brought to the nearest bound in one step, before
  any rule (`corrective`: it is a safety fix, not an experiment).
- Otherwise the first fired rule, in order of risk (pauses, a long-haul loop, oscillation, queueing, under-use),
  that can still move a knob proposes; the others wait for the next round. One change at a time, so verify can tell
  what it did (congestion-tuning.md §7 rule 12 [evolve]).
- Step: a knob moves by at most `tuning.max_step` (x2 by default) per round, or by one unit where that rounds to
  none: the queue at DCQCN's fixed point moves linearly with the thresholds (§1.3), so one bad step costs at most one
  verify window at twice the delay, and ten rounds span 2^10, more than the widest class range (1-480 us), which the
  issue's "within 10 rounds" needs. Kmin follows Kmax down when needed to stay below it.
- Never a no-op: a knob already at the value (or the bound) it would move to is not in the proposal; a rule that
  cannot move anything leaves a note saying so.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from enum import StrEnum

from policies.nccl_tuning import DEFAULT_QPS, QPS_PER_CONNECTION
from policies.policy import DlbPolicy, PfcPolicy, Policy

from .bounds import Limit, PortBounds, flowlet_bounds, port_bounds
from .inputs import GroupWindow, PortClass, PortWindow
from .kpis import Kpi
from .rules import SOURCE, Rule, Verdict

BOUNDS_SOURCE = "congestion-tuning.md §1.4, §7.1, §7.8 [dcqcn15][hpe][sonic-ars]; policy `tuning.classes`"
# HPE's long-haul profile: Kmin 0.75 x RTT, Kmax 1.5 x RTT (§1.4 [hpe]).
DCI_KMIN_RTTS = 0.75
DCI_KMAX_RTTS = 1.5


class Knob(StrEnum):
    """What tuning may change on a switch, named as the intent's fields (policies.intent.PortIntent)."""

    KMIN = "ecn.min_bytes"
    KMAX = "ecn.max_bytes"
    PMAX = "ecn.max_probability"
    FLOWLET = "dlb.inactivity_us"
    DR_CNP = "cnp.dr_enabled"  # 0/1
    DR_CNP_MIN = "cnp.dr_min_bytes"
    DR_CNP_MAX = "cnp.dr_max_bytes"


@dataclass(frozen=True)
class Change:
    knob: Knob
    before: int
    after: int
    low: int  # the bounds it was checked against
    high: int


@dataclass(frozen=True)
class Proposal:
    subject: str
    port_class: PortClass
    rule: Rule | None  # None: a correction into bounds
    changes: tuple[Change, ...]
    reason: str
    target: Kpi | None  # the KPI verify judges it by (None for a correction: only the guards)
    source: str

    @property
    def corrective(self) -> bool:
        return self.rule is None

    def diff(self) -> list[str]:
        """`plan`-like lines: one per knob, then why."""
        lines = [
            f"  {self.subject}  {c.knob}: {c.before} -> {c.after}  (bounds {c.low}..{c.high})" for c in self.changes
        ]
        lines.append(f"    why: {self.reason} [{self.rule or 'bounds'}; {self.source}]")
        return lines


@dataclass(frozen=True)
class Recommendation:
    """A NIC or NCCL setting fabricd cannot set itself, printed for the people who can (like `fabricd dci nccl`)."""

    rule: Rule
    name: str
    default: str
    value: str
    how: tuple[str, ...]  # exact commands: sysfs, mlxconfig, mlxreg, environment
    reason: str


@dataclass(frozen=True)
class Advice:
    """What one subject's verdicts lead to: a switch-side proposal (or none), NIC/NCCL advice, and notes on what
    fired but could not move (at a bound, deferred, or the port is not tunable)."""

    proposal: Proposal | None
    recommendations: tuple[Recommendation, ...] = ()
    notes: tuple[str, ...] = field(default_factory=tuple)


def _one_step(cur: int, want: int, lim: Limit, step: float) -> int:
    if want > cur:
        v = max(cur + 1, min(want, math.floor(cur * step)))
    elif want < cur:
        v = min(cur - 1, max(want, math.ceil(cur / step)))
    else:
        v = cur
    return lim.clamp(v)


def _toward(cur: int, want: int, lim: Limit, step: float, tried: frozenset[int] = frozenset()) -> int:
    """One step from cur toward want: at most x step (or / step), at least 1, inside the limit. A value already tried
    without effect (`tried`) is stepped past: the next step starts from it, a value shown harmless, so a plateau in
    the response (a threshold not yet crossed) does not stall the search (verify.no_effect_values)."""
    v = _one_step(cur, want, lim, step)
    while v in tried:
        nxt = _one_step(v, want, lim, step)
        if nxt == v:
            break  # at the bound: the proposal stays on a tried value and admission holds it off
        v = nxt
    return v


Tried = Mapping[Knob, frozenset[int]]  # per knob, values rolled back within the hold-off for want of an effect


@dataclass
class _Ecn:
    """Kmin/Kmax/Pmax being decided for one port."""

    b: PortBounds
    kmin: int
    kmax: int
    pmax: int
    tried: Tried = field(default_factory=dict)

    def move(self, knob: Knob, cur: int, want: int, lim: Limit, step: float) -> int:
        return _toward(cur, want, lim, step, self.tried.get(knob, frozenset()))

    def ordered(self) -> None:
        self.kmin = min(self.kmin, self.kmax - 1)  # Kmax's bound keeps kmax - 1 >= Kmin's low (bounds.py)


def _changes(w: PortWindow, e: _Ecn, dr: tuple[int, int, int] | None = None) -> tuple[Change, ...]:
    s, b = w.settings, e.b
    out = [
        Change(knob, before, after, lim.lo, lim.hi)
        for knob, before, after, lim in (
            (Knob.KMIN, s.kmin_bytes, e.kmin, b.kmin),
            (Knob.KMAX, s.kmax_bytes, e.kmax, b.kmax),
            (Knob.PMAX, s.pmax_percent, e.pmax, b.pmax),
        )
        if before != after
    ]
    if dr is not None and s.dr_cnp is not None and b.dr_cnp_min is not None and b.dr_cnp_max is not None:
        on, lo, hi = dr
        cur = s.dr_cnp
        for knob, before, after, low, high in (
            (Knob.DR_CNP, int(cur.enabled), on, 0, 1),
            (Knob.DR_CNP_MIN, cur.min_bytes, lo, b.dr_cnp_min.lo, b.dr_cnp_min.hi),
            (Knob.DR_CNP_MAX, cur.max_bytes, hi, b.dr_cnp_max.lo, b.dr_cnp_max.hi),
        ):
            if before != after:
                out.append(Change(knob, before, after, low, high))
    return tuple(out)


def _correction(w: PortWindow, b: PortBounds) -> Proposal | None:
    s = w.settings
    e = _Ecn(b, b.kmin.clamp(s.kmin_bytes), b.kmax.clamp(s.kmax_bytes), b.pmax.clamp(s.pmax_percent))
    if s.kmin_bytes >= e.kmax:
        # Kmax came down past the running Kmin: Kmin follows in the running ramp's proportion, not to Kmax - 1, which
        # would collapse RED's ramp into a step at Kmax (fabricd's choice; bench_tuning's 120 km DR port showed it)
        e.kmin = b.kmin.clamp(e.kmax * s.kmin_bytes // max(s.kmax_bytes, 1))
    e.ordered()
    dr = None
    if s.dr_cnp is not None and b.dr_cnp_min is not None and b.dr_cnp_max is not None:
        lo, hi = b.dr_cnp_min.clamp(s.dr_cnp.min_bytes), b.dr_cnp_max.clamp(s.dr_cnp.max_bytes)
        dr = (int(s.dr_cnp.enabled), min(lo, hi - 1), hi)
    changes = _changes(w, e, dr)
    if not changes:
        return None
    named = ", ".join(f"{c.knob} {c.before} outside {c.low}..{c.high}" for c in changes)
    return Proposal(w.subject, w.port_class, None, changes, f"brought into bounds: {named}", None, BOUNDS_SOURCE)


def _dr_cnp_for_room(w: PortWindow, b: PortBounds, policy: Policy, pfc: PfcPolicy | None) -> Proposal | None:
    """A long-haul port whose end-to-end loop leaves ECN no room below XOFF (one RTT at line rate is more than the
    XOFF trigger: marks can never answer before PFC, §1.4 [dcqcn15]) on a DR that can send CNPs itself: turning those
    on shortens the loop to the campus, ~50 us (domain.md "Long-haul DCI": end-to-end CNP over 100+ km arrives > 1 ms
    late; draft-tian-ccwg-long-haul-cnp), the one change that makes room.
    A correction like any other into bounds; the thresholds come into the campus loop's bounds the round after."""
    dr = w.settings.dr_cnp
    if dr is None or not dr.capable or dr.enabled:
        return None
    on = replace(w, settings=replace(w.settings, dr_cnp=replace(dr, enabled=True)))
    if port_bounds(on, policy, pfc).infeasible:
        return None  # not the loop's length (the headroom, a class range): DR CNPs would not make room
    change = Change(Knob.DR_CNP, 0, 1, 0, 1)
    why = f"brought into bounds: {b.infeasible}; with the DR's own CNPs the loop is a campus one"
    return Proposal(w.subject, w.port_class, None, (change,), why, None, f"{BOUNDS_SOURCE}; domain.md Long-haul DCI")


def _pmax_or_ramp(e: _Ecn, pmax_want: int, step: float, move: str, so: str) -> str:
    """Move Pmax toward `pmax_want`; at its bound widen the ramp instead (Kmax up): both change the marking slope."""
    before = e.pmax
    e.pmax = e.move(Knob.PMAX, before, pmax_want, e.b.pmax, step)
    if e.pmax != before:
        return f"{move}: {so}"
    e.kmax = e.move(Knob.KMAX, e.kmax, e.b.kmax.hi, e.b.kmax, step)
    return f"widen the ramp (Kmax up): {so}"


def _port_rule(
    w: PortWindow, v: Verdict, b: PortBounds, step: float, tried: Tried
) -> tuple[tuple[Change, ...], str, Kpi]:
    """The change one fired port rule asks for (empty when every knob it may move is at its bound)."""
    s = w.settings
    e = _Ecn(b, s.kmin_bytes, s.kmax_bytes, s.pmax_percent, tried)
    if v.rule is Rule.PFC_BEFORE_ECN:
        e.kmin = e.move(Knob.KMIN, s.kmin_bytes, b.kmin.lo, b.kmin, step)
        return _changes(w, e), "lower Kmin so ECN marks before the ingress reaches XOFF", Kpi.PAUSE
    if v.rule is Rule.LONG_HAUL_SLOW_LOOP:
        dr = s.dr_cnp
        target = Kpi.DROPS if v.evidence.get("drops", 0) > 0 else Kpi.QUEUE_DELAY
        if dr is not None and dr.capable and not dr.enabled:
            return _changes(w, e, (1, dr.min_bytes, dr.max_bytes)), "turn on the DR's own CNPs", target
        if dr is not None and dr.enabled and b.dr_cnp_min is not None and b.dr_cnp_max is not None:
            hi = e.move(Knob.DR_CNP_MAX, dr.max_bytes, b.dr_cnp_max.lo, b.dr_cnp_max, step)
            lo = min(e.move(Knob.DR_CNP_MIN, dr.min_bytes, b.dr_cnp_min.lo, b.dr_cnp_min, step), hi - 1)
            return _changes(w, e, (1, lo, hi)), "lower the DR's CNP thresholds so senders cut earlier", target
        bdp = w.physics.bytes_per_s * w.physics.rtt_s
        e.kmax = e.move(Knob.KMAX, s.kmax_bytes, round(DCI_KMAX_RTTS * bdp), b.kmax, step)
        e.kmin = e.move(Knob.KMIN, s.kmin_bytes, round(DCI_KMIN_RTTS * bdp), b.kmin, step)
        e.ordered()
        return _changes(w, e), "Kmin toward 0.75 x RTT and Kmax toward 1.5 x RTT of line rate (HPE's profile)", target
    if v.rule is Rule.OSCILLATION:
        why = _pmax_or_ramp(e, b.pmax.lo, step, "lower Pmax", "a gentler marking slope, a calmer loop")
        return _changes(w, e), why, Kpi.THROUGHPUT_CV
    if v.rule is Rule.QUEUE_GROWS_WITH_FAN_IN:
        why = _pmax_or_ramp(e, b.pmax.hi, step, "raise Pmax", "the marking many senders need stays inside the ramp")
        return _changes(w, e), why, Kpi.QUEUE_DELAY
    if v.rule is Rule.MARKS_UNDERUSED:
        e.kmin = e.move(Knob.KMIN, s.kmin_bytes, b.kmin.hi, b.kmin, step)
        # Kmax follows in the running ramp's proportion: raising Kmin alone would squeeze the ramp into a step at a
        # Kmax that may itself sit below what the loop needs (bench_tuning's DR port at 50 KB..1 MB: 88 % of line
        # rate). The queue at DCQCN's fixed point moves linearly with the thresholds (§1.3), so scaling the ramp
        # scales the queue that carries the link through a cut (HPE raised Kmin toward 0.75 x RTT, §1.4 [hpe]).
        if e.kmin > s.kmin_bytes:
            want = math.ceil(s.kmax_bytes * e.kmin / max(s.kmin_bytes, 1))
            kmax = e.move(Knob.KMAX, s.kmax_bytes, want, b.kmax, step)
            if kmax not in e.tried.get(Knob.KMAX, frozenset()):
                e.kmax = kmax  # at its bound on a value tried without effect, Kmax stays: admit would hold it off
        e.ordered()
        why = "raise the ramp (Kmin, Kmax with it) so senders stop backing off below line rate"
        return _changes(w, e), why, Kpi.UNDERUSE
    return (), "", Kpi.THROUGHPUT


# The order fired port rules are tried in: the riskiest symptom first.
PORT_ORDER = (
    Rule.PFC_BEFORE_ECN,
    Rule.LONG_HAUL_SLOW_LOOP,
    Rule.OSCILLATION,
    Rule.QUEUE_GROWS_WITH_FAN_IN,
    Rule.MARKS_UNDERUSED,
)


def propose_port(
    w: PortWindow,
    verdicts: Sequence[Verdict],
    policy: Policy,
    pfc: PfcPolicy | None = None,
    tried: Tried | None = None,
) -> Advice:
    """At most one switch-side proposal for the port, NIC advice for every fired rule that has some. `tried`: values
    rolled back for want of an effect within the hold-off (verify.no_effect_values), stepped past."""
    fired = {v.rule: v for v in verdicts if v.fired}
    recs = tuple(r for v in verdicts if v.fired for r in recommendations(v, w, policy))
    b = port_bounds(w, policy, pfc)
    if b.infeasible:
        if (fix := _dr_cnp_for_room(w, b, policy, pfc)) is not None:
            return Advice(fix, recs, tuple(f"{w.subject}: {r} deferred: bounds first" for r in fired))
        return Advice(None, recs, (f"{w.subject}: not tuned: {b.infeasible}",) if fired else ())
    fix = _correction(w, b)
    if fix is not None:
        return Advice(fix, recs, tuple(f"{w.subject}: {r} deferred: bounds first" for r in fired))
    notes: list[str] = []
    chosen: Proposal | None = None
    for rule in PORT_ORDER:
        v = fired.get(rule)
        if v is None:
            continue
        if chosen is not None:
            notes.append(f"{w.subject}: {rule} deferred: one change per round ({chosen.rule} goes first)")
            continue
        changes, why, kpi = _port_rule(w, v, b, policy.tuning.max_step, tried or {})
        if changes:
            chosen = Proposal(w.subject, w.port_class, rule, changes, f"{v.why}: {why}", kpi, SOURCE[rule])
        else:
            notes.append(f"{w.subject}: {rule} fired but its knobs are at their bounds")
    return Advice(chosen, recs, tuple(notes))


def propose_group(
    g: GroupWindow,
    verdicts: Sequence[Verdict],
    policy: Policy,
    dlb: DlbPolicy | None = None,
    tried: Tried | None = None,
) -> Advice:
    """The flowlet gap of an ECMP group: longer for reorders (first), shorter for imbalance, never below the skew."""
    fired = {v.rule: v for v in verdicts if v.fired}
    recs = tuple(r for v in verdicts if v.fired for r in recommendations(v, None, policy))
    if g.mode != "flowlet":
        return Advice(None, recs, (f"{g.subject}: DLB mode {g.mode}: no flowlet gap to tune",) if fired else ())
    lim = flowlet_bounds(g, policy, dlb)
    if lim.lo > lim.hi:
        return Advice(None, recs, (f"{g.subject}: no room for the flowlet gap: {lim.lo}..{lim.hi} ({lim.why})",))

    def proposal(rule: Rule | None, after: int, why: str, kpi: Kpi | None, source: str) -> Proposal:
        c = Change(Knob.FLOWLET, g.flowlet_us, after, lim.lo, lim.hi)
        return Proposal(g.subject, g.port_class, rule, (c,), why, kpi, source)

    if not lim.holds(g.flowlet_us):
        after = lim.clamp(g.flowlet_us)
        why = f"brought into bounds: {Knob.FLOWLET} {g.flowlet_us} outside {lim.lo}..{lim.hi} ({lim.why})"
        return Advice(proposal(None, after, why, None, BOUNDS_SOURCE), recs)
    step = policy.tuning.max_step
    notes: list[str] = []
    for rule, want, why, kpi in (
        (Rule.REORDERS_SHORT_GAP, lim.hi, "lengthen the flowlet gap past the path-delay skew", Kpi.REORDERS),
        (Rule.ECMP_IMBALANCE, lim.lo, "shorten the flowlet gap: more chances to rebalance", Kpi.IMBALANCE),
    ):
        v = fired.get(rule)
        if v is None:
            continue
        after = _toward(g.flowlet_us, want, lim, step, (tried or {}).get(Knob.FLOWLET, frozenset()))
        if after != g.flowlet_us:
            if rule is Rule.ECMP_IMBALANCE and Rule.REORDERS_SHORT_GAP in fired:
                break  # never shorten a gap that reorders
            return Advice(proposal(rule, after, f"{v.why}: {why}", kpi, SOURCE[rule]), recs, tuple(notes))
        notes.append(f"{g.subject}: {rule} fired but the flowlet gap is at its bound ({g.flowlet_us} us)")
    return Advice(None, recs, tuple(notes))


def _rp(name: str, value: int, mlx: str | None = None) -> tuple[str, ...]:
    """Commands for a reaction-point (sender) parameter: sysfs, and mlxconfig where it has a firmware name (§1.2)."""
    how = [f"echo {value} > /sys/class/net/<if>/ecn/roce_rp/{name}"]
    if mlx:
        how.append(f"mlxconfig -d <dev> set {mlx}_P1={value}")
    return tuple(how)


def _np(name: str, value: int) -> tuple[str, ...]:
    return (f"echo {value} > /sys/class/net/<if>/ecn/roce_np/{name}",)


def recommendations(v: Verdict, w: PortWindow | None, policy: Policy) -> tuple[Recommendation, ...]:
    """NIC/NCCL settings for a fired rule, with the ConnectX names and defaults of congestion-tuning.md §1.2."""
    r = v.rule
    if r is Rule.MARKING_BUT_PAUSING:
        return (
            Recommendation(r, "min_time_between_cnps", "4 us", "2 us", _np("min_time_between_cnps", 2),
                           "CNP pacing per QP: ByteDance ran 0-2 us [barre]"),
            Recommendation(r, "rate_reduce_monitor_period", "4 us", "2 us", _rp("rate_reduce_monitor_period", 2),
                           "minimum time between two rate cuts: 1-2 us lets senders cut as marks arrive [barre]"),
        )  # fmt: skip
    if r is Rule.CNP_NOT_ACTED_ON:
        dscp = next((d for d, tc in sorted(policy.dscp_to_tc.items()) if tc == policy.cnp_priority), 48)
        out = [
            Recommendation(r, f"roce_{side}/enable/{p}", "per driver", "1",
                           (f"echo 1 > /sys/class/net/<if>/ecn/roce_{side}/enable/{p}",),
                           f"congestion control must be on for lossless priority {p} at both ends [ofed-ecn]")
            for p in policy.lossless_priorities for side in ("np", "rp")
        ]  # fmt: skip
        out += [
            Recommendation(r, "cnp_dscp", "48", str(dscp), _np("cnp_dscp", dscp),
                           "CNPs must carry the DSCP the switches map to the CNP priority (policy dscp_to_tc)"),
            Recommendation(r, "cnp_802p_prio", "6", str(policy.cnp_priority), _np("cnp_802p_prio", policy.cnp_priority),
                           "the CNP priority of the policy (cnp_priority)"),
            Recommendation(r, "ROCE_CC_PRIO_MASK", "255", "255", ("mlxconfig -d <dev> set ROCE_CC_PRIO_MASK_P1=255",),
                           "congestion control enabled on every priority (the firmware default)"),
        ]  # fmt: skip
        return tuple(out)
    if r is Rule.MARKS_UNDERUSED:
        return (
            Recommendation(r, "rpg_min_dec_fac", "50 %", "80 %", _rp("rpg_min_dec_fac", 80, "RPG_MIN_DEC_FAC"),
                           "one CNP may cut a sender to at most 80 %, not 50 %: ByteDance ran 80-98 [barre]"),
        )  # fmt: skip
    if r is Rule.QUEUE_GROWS_WITH_FAN_IN:
        return (
            Recommendation(r, "rpg_time_reset", "300 us", "600 us", _rp("rpg_time_reset", 600, "RPG_TIME_RESET"),
                           "a slower rate-increase timer lowers the marking DCQCN's fixed point needs (§1.3)"),
        )  # fmt: skip
    if r is Rule.OSCILLATION:
        return (
            Recommendation(r, "rpg_time_reset", "300 us", "600 us", _rp("rpg_time_reset", 600, "RPG_TIME_RESET"),
                           "slower increases after a cut [ecn-delay]"),
            Recommendation(r, "rpg_hai_rate", "50 Mbps", "25 Mbps", _rp("rpg_hai_rate", 25, "RPG_HAI_RATE"),
                           "smaller hyper-increase steps"),
            Recommendation(r, "clamp_tgt_rate", "0", "1", _rp("clamp_tgt_rate", 1, "CLAMP_TGT_RATE"),
                           "target rate := current rate on every CNP [hpe]"),
        )  # fmt: skip
    if r is Rule.LONG_HAUL_SLOW_LOOP:
        rtt_us = w.physics.rtt_s * 1e6 if w is not None else 0.0
        # HPE: 5 ms for 50-400 km (RTT 0.63-4.1 ms), 7 ms at 500 km (RTT 5.2 ms): at least ~1.2 x RTT (§1.3 [hpe]).
        reset = max(5000, math.ceil(1.2 * rtt_us / 1000) * 1000)
        return (
            Recommendation(r, "rpg_time_reset", "300 us", f"{reset} us", _rp("rpg_time_reset", reset, "RPG_TIME_RESET"),
                           f"no rate increase before a CNP can answer it: >= 1.2 x RTT ({rtt_us:.0f} us) [hpe]"),
            Recommendation(r, "rpg_min_dec_fac", "50 %", "95 %", _rp("rpg_min_dec_fac", 95, "RPG_MIN_DEC_FAC"),
                           "at most a 5 % cut per CNP on a long loop [hpe]"),
            Recommendation(r, "clamp_tgt_rate", "0", "1", _rp("clamp_tgt_rate", 1, "CLAMP_TGT_RATE"), "[hpe]"),
            Recommendation(r, "roce_slow_restart_en", "1", "0",
                           ("mlxreg -d <dev> --reg_name ROCE_ACCL --set roce_slow_restart_en=0x0",), "[hpe]"),
            Recommendation(r, "roce_adp_retrans_en", "1", "0",
                           ("mlxreg -d <dev> --reg_name ROCE_ACCL --set roce_adp_retrans_en=0x0",),
                           "its 4 us minimum timer resends duplicates over a long RTT [hpe]"),
            Recommendation(r, "NCCL window", "2 MiB", "the path's BDP", ("fabricd dci nccl --spec <spec>",),
                           "NCCL's in-flight window sized to the long-haul path"),
        )  # fmt: skip
    if r is Rule.REORDERS_SHORT_GAP:
        return (
            Recommendation(r, "RDMA_SELECTIVE_REPEAT_EN", "0", "1",
                           ("mlxconfig -d <dev> set RDMA_SELECTIVE_REPEAT_EN=0x1",),
                           "ConnectX-6 Dx on resend only what was lost, not the whole window (§4 [lossy-notes])"),
        )  # fmt: skip
    if r is Rule.ECMP_IMBALANCE:
        return (
            Recommendation(r, "NCCL_IB_QPS_PER_CONNECTION", str(DEFAULT_QPS), str(QPS_PER_CONNECTION),
                           (f"export NCCL_IB_QPS_PER_CONNECTION={QPS_PER_CONNECTION}",),
                           "more QPs per NIC pair: more flows to hash; Meta used 4x-16x [meta24]"),
        )  # fmt: skip
    return ()
