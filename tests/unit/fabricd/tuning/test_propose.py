"""Bounds and proposals: tables of settings and fired rules -> the change (or why none), the NIC/NCCL advice with the
exact ConnectX names, and a property test that no proposal ever leaves its bounds or proposes nothing."""

from __future__ import annotations

import math
from dataclasses import replace
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fabricd.tuning.bounds import dynamic_xoff_trigger, flowlet_bounds, port_bounds, skew_floor_us, us_bytes
from fabricd.tuning.inputs import DrCnp, GroupWindow, PortClass, PortWindow, Sample
from fabricd.tuning.kpis import Kpi
from fabricd.tuning.propose import Advice, Knob, propose_group, propose_port
from fabricd.tuning.rules import Outcome, Rule, Verdict, judge_group, judge_port
from policies.policy import DlbPolicy, PfcPolicy, Policy
from policies.tuning import flowlet_inactivity, pfc_headroom

from .windows import KMAX, KMIN, XOFF, dci, group, port

POLICY = Policy()
BOUND = XOFF - math.ceil(50e9 * 85e-6)  # Kmax's bound at 400G: XOFF minus 85 us of line rate = 7,750,000 B
BDP = 50e9 * 120_000 * 2 / 1.98e8  # 120 km at 400G: 60.6 MB


def fire(rule: Rule, subject: str = "leaf-1:Ethernet1/1", **evidence: float) -> Verdict:
    return Verdict(rule, subject, PortClass.SERVER, Outcome.FIRED, f"{rule} seen", evidence)


def changes(a: Advice) -> dict[Knob, tuple[int, int]]:
    return {c.knob: (c.before, c.after) for c in a.proposal.changes} if a.proposal else {}


def test_bounds_from_physics_and_policy() -> None:
    b = port_bounds(port(), POLICY)
    assert (b.kmax.lo, b.kmax.hi) == (us_bytes(10, 400), BOUND) and "XOFF trigger 12000000 B" in b.kmax.why
    assert (b.kmin.lo, b.kmin.hi) == (50_000, 6_000_000) and (b.pmax.lo, b.pmax.hi) == (1, 100)
    assert b.feedback_s == pytest.approx(85e-6) and b.infeasible == ""
    assert port_bounds(port(pfc=False), POLICY).kmax.hi == us_bytes(480, 400)  # lossy: the class's max only
    e2e = port_bounds(dci(), POLICY)  # end-to-end CNP over 120 km: the loop includes the RTT
    assert e2e.feedback_s == pytest.approx(85e-6 + 120_000 * 2 / 1.98e8)
    assert e2e.kmax.hi == math.floor(1.5 * BDP) and "[hpe]" in e2e.kmax.why
    assert port_bounds(dci(buffer=100_000_000), POLICY).kmax.hi == 60_000_000  # 60 % of the buffer
    on = DrCnp(capable=True, enabled=True, min_bytes=500_000, max_bytes=2_000_000)
    with_dr = port_bounds(dci(dr=on), POLICY)
    assert with_dr.feedback_s == pytest.approx(85e-6) and with_dr.kmax.hi == us_bytes(8000, 400)
    assert with_dr.dr_cnp_max is not None and with_dr.dr_cnp_max.hi == us_bytes(8000, 400)


def test_dynamic_xoff_trigger_gives_the_dcqcn_papers_ecn_ceiling() -> None:
    """§1.4 [dcqcn15]: Trident II, 12 MB, 32 ports, 22.4 KB headroom, beta 8: ECN must fire below 21.75 KB per queue.
    At that threshold, with every queue of every priority holding it (s = 8 n t_ECN), one ingress fed by all 32
    egress backlogs reaches XOFF exactly: n x t_ECN = the trigger."""
    n, t_flight, buffer = 32, 22_400, 12_000_000
    t_ecn = 8 * (buffer - 8 * n * t_flight) / (8 * n * 9)
    assert t_ecn == pytest.approx(21_750, rel=1e-3)
    trigger = dynamic_xoff_trigger(buffer, n, t_flight, in_use_bytes=8 * n * t_ecn, beta=8)
    assert n * t_ecn == pytest.approx(trigger, rel=1e-3)
    assert dynamic_xoff_trigger(buffer, n, t_flight, 0, beta=8) == 6_265_600  # an empty buffer: beta x free / 8
    assert dynamic_xoff_trigger(buffer, n, t_flight, buffer, beta=8) == 0  # full: XOFF at once


def test_bounds_refuse_a_port_whose_headroom_is_below_physics() -> None:
    floor = pfc_headroom(3.0, 400, PfcPolicy())[0]
    assert port_bounds(port(headroom=floor), POLICY).infeasible == ""
    b = port_bounds(port(headroom=floor - 1), POLICY)
    assert b.infeasible.startswith(f"PFC headroom {floor - 1} B is below the physics' {floor} B")
    assert port_bounds(port(headroom=0, pfc=False), POLICY).infeasible == ""  # lossy: no headroom needed


def test_bounds_say_when_xoff_leaves_no_room() -> None:
    b = port_bounds(port(xoff=4_500_000), POLICY)  # 4.5 MB - 4.25 MB in flight < the class's 500 KB Kmax floor
    assert b.infeasible.startswith("no room for Kmax: bound 500000..250000")


def test_flowlet_floor_is_flowlet_inactivity_without_its_default() -> None:
    paths = (100.0, 20_000.0)
    assert skew_floor_us(paths, DlbPolicy()) == 218  # 2 x 100.5 us + 16 us margin
    assert flowlet_inactivity(list(paths), DlbPolicy())[0] == 256  # the intent's own value keeps its 256 us default
    lim = flowlet_bounds(group(paths=paths), POLICY)
    assert (lim.lo, lim.hi) == (218, 1024)
    assert flowlet_bounds(group(paths=(100.0, 100.0)), POLICY).lo == 64  # the class's low when the skew is small


DR_OFF = DrCnp(capable=True, enabled=False, min_bytes=500_000, max_bytes=2_000_000)
DR_ON = DrCnp(capable=True, enabled=True, min_bytes=500_000, max_bytes=2_000_000)

# window, fired rules (with evidence), expected {knob: (before, after)}, rule chosen, target KPI, a note expected
PORT = [
    pytest.param(port(), [fire(Rule.PFC_BEFORE_ECN)], {Knob.KMIN: (KMIN, 300_000)}, Rule.PFC_BEFORE_ECN, Kpi.PAUSE, "",
                 id="PFC first: Kmin halves"),
    pytest.param(port(kmin=50_000), [fire(Rule.PFC_BEFORE_ECN)], {}, None, None, "pfc_before_ecn fired but its knobs "
                 "are at their bounds", id="Kmin at the class floor: nothing, said"),
    pytest.param(port(kmax=10_000_000), [fire(Rule.PFC_BEFORE_ECN)], {Knob.KMAX: (10_000_000, BOUND)}, None, None,
                 "pfc_before_ecn deferred: bounds first", id="ECN above XOFF: corrected in one step, rule waits"),
    pytest.param(port(kmin=9_000_000, kmax=10_000_000), [], {Knob.KMIN: (9_000_000, 6_000_000),
                 Knob.KMAX: (10_000_000, BOUND)}, None, None, "", id="both above: corrected even with no rule fired"),
    pytest.param(port(kmin=5_000_000, kmax=10_000_000, xoff=9_000_000), [], {Knob.KMIN: (5_000_000, 2_375_000),
                 Knob.KMAX: (10_000_000, 4_750_000)}, None, None, "", id="Kmax below Kmin: Kmin keeps its share"),
    pytest.param(port(pmax=0), [], {Knob.PMAX: (0, 1)}, None, None, "", id="Pmax 0 corrected to the class's 1"),
    pytest.param(port(headroom=1000), [fire(Rule.PFC_BEFORE_ECN)], {}, None, None, "not tuned: PFC headroom 1000 B",
                 id="headroom below physics: never tuned on top"),
    pytest.param(port(), [fire(Rule.MARKS_UNDERUSED)], {Knob.KMIN: (KMIN, 1_200_000), Knob.KMAX: (KMAX, BOUND)},
                 Rule.MARKS_UNDERUSED, Kpi.UNDERUSE, "", id="under-used: Kmin doubles, Kmax follows to its bound"),
    pytest.param(port(kmin=50_000, kmax=1_000_000), [fire(Rule.MARKS_UNDERUSED)],
                 {Knob.KMIN: (50_000, 100_000), Knob.KMAX: (1_000_000, 2_000_000)}, Rule.MARKS_UNDERUSED,
                 Kpi.UNDERUSE, "", id="under-used: the whole ramp doubles"),
    pytest.param(port(kmin=6_000_000, kmax=7_000_000), [fire(Rule.MARKS_UNDERUSED)], {}, None, None, "at their bounds",
                 id="under-used with Kmin at its class max"),
    pytest.param(port(kmin=4_000_000, kmax=4_750_000, xoff=9_000_000), [fire(Rule.MARKS_UNDERUSED)],
                 {Knob.KMIN: (4_000_000, 4_749_999)}, Rule.MARKS_UNDERUSED, Kpi.UNDERUSE, "",
                 id="Kmax at its bound: Kmin stops below it"),
    pytest.param(dci(dr=DR_OFF, pfc=True, xoff=15_739_477, headroom=70_000_000), [], {Knob.DR_CNP: (0, 1)}, None,
                 None, "", id="long haul end-to-end, no room below XOFF: the DR's CNPs on, a correction"),
    pytest.param(dci(dr=DR_OFF, pfc=True, xoff=15_739_477, headroom=70_000_000), [fire(Rule.MARKS_UNDERUSED)],
                 {Knob.DR_CNP: (0, 1)}, None, None, "marks_underused deferred: bounds first",
                 id="no room below XOFF: the correction first, the rule waits"),
    pytest.param(dci(dr=DR_OFF, pfc=True, xoff=15_739_477, headroom=1000), [fire(Rule.MARKS_UNDERUSED)], {}, None,
                 None, "not tuned: PFC headroom 1000 B", id="headroom below physics: DR CNPs would not help"),
    pytest.param(dci(pfc=True, xoff=15_739_477, headroom=70_000_000), [fire(Rule.MARKS_UNDERUSED)], {}, None, None,
                 "not tuned: no room for Kmax", id="no room below XOFF and no DR CNPs to turn on: not tuned"),
    pytest.param(port(), [fire(Rule.QUEUE_GROWS_WITH_FAN_IN)], {Knob.PMAX: (5, 10)}, Rule.QUEUE_GROWS_WITH_FAN_IN,
                 Kpi.QUEUE_DELAY, "", id="fan-in: Pmax doubles"),
    pytest.param(port(pmax=100), [fire(Rule.QUEUE_GROWS_WITH_FAN_IN)], {Knob.KMAX: (KMAX, BOUND)},
                 Rule.QUEUE_GROWS_WITH_FAN_IN, Kpi.QUEUE_DELAY, "", id="fan-in at Pmax 100: the ramp widens"),
    pytest.param(port(), [fire(Rule.OSCILLATION)], {Knob.PMAX: (5, 3)}, Rule.OSCILLATION, Kpi.THROUGHPUT_CV, "",
                 id="oscillation: Pmax down"),
    pytest.param(port(pmax=1, kmax=3_000_000), [fire(Rule.OSCILLATION)], {Knob.KMAX: (3_000_000, 6_000_000)},
                 Rule.OSCILLATION, Kpi.THROUGHPUT_CV, "", id="oscillation at Pmax 1: widen the ramp"),
    pytest.param(port(), [fire(Rule.MARKS_UNDERUSED), fire(Rule.PFC_BEFORE_ECN)], {Knob.KMIN: (KMIN, 300_000)},
                 Rule.PFC_BEFORE_ECN, Kpi.PAUSE, "marks_underused deferred: one change per round",
                 id="opposite wishes: the pauses win, one change per round"),
    pytest.param(dci(), [fire(Rule.LONG_HAUL_SLOW_LOOP, drops=5)],
                 {Knob.KMIN: (12_000_000, 24_000_000), Knob.KMAX: (60_000_000, math.floor(1.5 * BDP))},
                 Rule.LONG_HAUL_SLOW_LOOP, Kpi.DROPS, "", id="long haul end-to-end: toward HPE's 0.75/1.5 RTT"),
    pytest.param(dci(dr=DR_OFF), [fire(Rule.LONG_HAUL_SLOW_LOOP)], {Knob.DR_CNP: (0, 1)}, Rule.LONG_HAUL_SLOW_LOOP,
                 Kpi.QUEUE_DELAY, "", id="long haul, the DR can send CNPs: turn them on"),
    pytest.param(dci(dr=DR_ON), [fire(Rule.LONG_HAUL_SLOW_LOOP)],
                 {Knob.DR_CNP_MIN: (500_000, 250_000), Knob.DR_CNP_MAX: (2_000_000, 1_000_000)},
                 Rule.LONG_HAUL_SLOW_LOOP, Kpi.QUEUE_DELAY, "", id="long haul with DR CNPs: earlier CNPs"),
    pytest.param(port(), [fire(Rule.MARKING_BUT_PAUSING), fire(Rule.CNP_NOT_ACTED_ON)], {}, None, None, "",
                 id="NIC-only rules: advice, no switch change"),
]  # fmt: skip


@pytest.mark.parametrize(("w", "verdicts", "want", "rule", "kpi", "note"), PORT)
def test_propose_port(
    w: PortWindow, verdicts: list[Verdict], want: dict[Knob, tuple[int, int]], rule: Rule | None, kpi: Kpi | None,
    note: str,
) -> None:  # fmt: skip
    a = propose_port(w, verdicts, POLICY)
    assert changes(a) == want
    if a.proposal is not None:
        assert a.proposal.rule == rule and a.proposal.target == kpi
        assert a.proposal.corrective == (rule is None)
    if note:
        assert any(note in n for n in a.notes), a.notes
    else:
        assert a.notes == ()


def test_a_proposal_reads_as_a_plan() -> None:
    w = port()  # an empty window: the verdict is given
    v = Verdict(Rule.PFC_BEFORE_ECN, w.subject, w.port_class, Outcome.FIRED, "30 pause frames")
    a = propose_port(w, [v], POLICY)
    assert a.proposal is not None
    assert a.proposal.diff() == [
        "  leaf-1:Ethernet1/1  ecn.min_bytes: 600000 -> 300000  (bounds 50000..6000000)",
        "    why: 30 pause frames: lower Kmin so ECN marks before the ingress reaches XOFF [pfc_before_ecn; "
        "congestion-tuning.md §7.1, §1.4 [dcqcn15][huawei-aiecn]]",
    ]


@pytest.mark.parametrize(
    ("kmin", "tried", "after"),
    [
        pytest.param(KMIN, {}, 300_000, id="nothing tried: one step"),
        pytest.param(KMIN, {Knob.KMIN: frozenset({300_000})}, 150_000, id="a harmless value is stepped past"),
        pytest.param(KMIN, {Knob.KMIN: frozenset({300_000, 150_000})}, 75_000, id="and the next"),
        pytest.param(KMIN, {Knob.KMAX: frozenset({300_000})}, 300_000, id="another knob's tries do not count"),
        pytest.param(100_000, {Knob.KMIN: frozenset({50_000})}, 50_000, id="at the bound it stays on the tried value"),
    ],
)
def test_a_plateau_does_not_stall_the_search(kmin: int, tried: dict[Knob, frozenset[int]], after: int) -> None:
    a = propose_port(port(kmin=kmin), [fire(Rule.PFC_BEFORE_ECN)], POLICY, tried=tried)
    assert changes(a) == {Knob.KMIN: (kmin, after)}


def _how(a: Advice) -> dict[str, tuple[str, tuple[str, ...]]]:
    return {r.name: (r.value, r.how) for r in a.recommendations}


def test_nic_advice_names_the_connectx_knobs() -> None:
    recs = _how(propose_port(port(), [fire(Rule.MARKING_BUT_PAUSING)], POLICY))
    np_path = "/sys/class/net/<if>/ecn/roce_np/min_time_between_cnps"
    assert recs["min_time_between_cnps"] == ("2 us", (f"echo 2 > {np_path}",))
    assert recs["rate_reduce_monitor_period"][1] == (
        "echo 2 > /sys/class/net/<if>/ecn/roce_rp/rate_reduce_monitor_period",
    )
    recs = _how(propose_port(port(), [fire(Rule.CNP_NOT_ACTED_ON)], POLICY))
    assert set(recs) == {"roce_np/enable/3", "roce_rp/enable/3", "cnp_dscp", "cnp_802p_prio", "ROCE_CC_PRIO_MASK"}
    assert recs["cnp_dscp"][0] == "48" and recs["cnp_802p_prio"][0] == "6"
    recs = _how(propose_port(dci(), [fire(Rule.LONG_HAUL_SLOW_LOOP)], POLICY))
    assert recs["rpg_time_reset"] == ("5000 us", ("echo 5000 > /sys/class/net/<if>/ecn/roce_rp/rpg_time_reset",
                                                  "mlxconfig -d <dev> set RPG_TIME_RESET_P1=5000"))  # fmt: skip
    assert recs["rpg_min_dec_fac"][1][-1] == "mlxconfig -d <dev> set RPG_MIN_DEC_FAC_P1=95"
    assert recs["roce_adp_retrans_en"][1] == ("mlxreg -d <dev> --reg_name ROCE_ACCL --set roce_adp_retrans_en=0x0",)
    far = _how(propose_port(port(cls=PortClass.DCI, length=500_000.0, pfc=False), [fire(Rule.LONG_HAUL_SLOW_LOOP)],
                            POLICY))  # fmt: skip
    assert far["rpg_time_reset"][0] == "7000 us"  # HPE: 7 ms at 500 km
    recs = _how(propose_group(group(flowlet_us=64), [fire(Rule.ECMP_IMBALANCE)], POLICY))
    assert recs["NCCL_IB_QPS_PER_CONNECTION"] == ("4", ("export NCCL_IB_QPS_PER_CONNECTION=4",))


SKEWED = (100.0, 20_000.0)  # a 19.9 km difference: the gap must be >= 218 us
GROUP = [
    pytest.param(group(flowlet_us=64, paths=SKEWED), [Rule.REORDERS_SHORT_GAP], (64, 218), None, "",
                 id="gap below the skew: corrected to the floor at once"),
    pytest.param(group(flowlet_us=256), [Rule.REORDERS_SHORT_GAP], (256, 512), Rule.REORDERS_SHORT_GAP, "",
                 id="reorders: the gap doubles"),
    pytest.param(group(flowlet_us=256), [Rule.ECMP_IMBALANCE], (256, 128), Rule.ECMP_IMBALANCE, "",
                 id="imbalance: the gap halves"),
    pytest.param(group(flowlet_us=256, paths=SKEWED), [Rule.ECMP_IMBALANCE], (256, 218), Rule.ECMP_IMBALANCE, "",
                 id="imbalance: never below the skew"),
    pytest.param(group(flowlet_us=256), [Rule.ECMP_IMBALANCE, Rule.REORDERS_SHORT_GAP], (256, 512),
                 Rule.REORDERS_SHORT_GAP, "", id="both: reorders win"),
    pytest.param(group(flowlet_us=1024), [Rule.REORDERS_SHORT_GAP, Rule.ECMP_IMBALANCE], None, None,
                 "reorders_short_gap fired but the flowlet gap is at its bound", id="reorders at the max"),
    pytest.param(group(flowlet_us=64), [Rule.ECMP_IMBALANCE], None, None, "at its bound (64 us)",
                 id="imbalance at the min: NCCL advice only"),
    pytest.param(group(flowlet_us=256, mode="per-packet"), [Rule.ECMP_IMBALANCE], None, None, "DLB mode per-packet",
                 id="no flowlets to tune"),
    pytest.param(group(flowlet_us=3000), [], (3000, 1024), None, "", id="outside the class: corrected"),
]  # fmt: skip


@pytest.mark.parametrize(("g", "rules", "want", "rule", "note"), GROUP)
def test_propose_group(
    g: GroupWindow, rules: list[Rule], want: tuple[int, int] | None, rule: Rule | None, note: str
) -> None:
    a = propose_group(g, [fire(r, g.subject) for r in rules], POLICY)
    got = changes(a)
    assert got == ({Knob.FLOWLET: want} if want else {})
    if a.proposal is not None:
        assert a.proposal.rule == rule
    if note:
        assert any(note in n for n in a.notes), a.notes


# -- property: over random counter histories and settings, a proposal never leaves its bounds, never a no-op --


def _history(draw: st.DrawFn, n: int) -> list[int | None] | None:
    kind = draw(st.sampled_from(["none", "flat", "rising", "resets"]))
    if kind == "none":
        return None
    out, v = [], draw(st.integers(0, 2**40))
    for _ in range(n):
        if kind == "resets" and draw(st.booleans()):
            v = draw(st.integers(0, 1000))
        elif kind != "flat":
            v += draw(st.integers(0, 10**11))
        out.append(v if draw(st.integers(0, 9)) else None)
    return out


@st.composite
def windows(draw: st.DrawFn) -> PortWindow:
    cls = draw(st.sampled_from([*PortClass, PortClass.DCI]))  # long haul twice: it has the most bounds
    n = draw(st.integers(0, 9))
    cols = {
        name: _history(draw, n)
        for name in ("ecn_marked_pkts", "pfc_rx_pkts", "pfc_tx_pkts", "pfc_tx_pause_us", "queue_watermark_bytes",
                     "tx_bytes", "drops", "fan_in")
    }  # fmt: skip
    fields: list[dict[str, Any]] = [{k: v[i] for k, v in cols.items() if v is not None} for i in range(n)]
    samples = tuple(Sample(t_s=float(i), **f) for i, f in enumerate(fields))
    size = st.integers(0, 300_000_000)
    dr = None
    if cls is PortClass.DCI and draw(st.integers(0, 3)):
        dr = DrCnp(draw(st.booleans()), draw(st.booleans()), draw(size), draw(size))
    length = draw(st.floats(10_000, 500_000) if cls is PortClass.DCI else st.floats(1, 2000))
    speed = draw(st.sampled_from([100, 200, 400, 800]))
    floor = pfc_headroom(length, speed, PfcPolicy())[0]
    kmin, kmax, pmax, xoff = draw(size), draw(size), draw(st.integers(0, 100)), draw(size)
    if draw(st.booleans()):  # half the time inside the class's ranges with room below XOFF: the rules get to move
        c = getattr(POLICY.tuning.classes, cls.value)
        kmin = draw(st.integers(us_bytes(c.kmin_us[0], speed), us_bytes(c.kmin_us[1], speed)))
        kmax = draw(st.integers(max(kmin + 1, us_bytes(c.kmax_us[0], speed)), us_bytes(c.kmax_us[1], speed)))
        pmax = draw(st.integers(1, 100))
        # room for the whole loop, or (half the time) only for a campus one: end-to-end CNP then leaves no room
        rtt = 2 * length / 1.98e8 if draw(st.booleans()) else 0.0
        xoff = kmax + math.ceil(speed * 1e9 / 8 * (85e-6 + rtt)) + draw(st.integers(0, 10**7))
        if dr is not None:
            lo = draw(st.integers(us_bytes(c.dr_cnp_us[0], speed), us_bytes(c.dr_cnp_us[1], speed) - 1))
            dr = DrCnp(dr.capable, dr.enabled, lo, draw(st.integers(lo + 1, us_bytes(c.dr_cnp_us[1], speed))))
    return port(
        samples,
        cls=cls,
        kmin=kmin,
        kmax=kmax,
        pmax=pmax,
        pfc=draw(st.booleans()),
        xoff=xoff,
        headroom=draw(st.sampled_from([floor, floor - 1, floor * 2])),
        speed=speed,
        length=length,
        dr=dr,
    )


TRIED = st.dictionaries(st.sampled_from(list(Knob)), st.frozensets(st.integers(0, 300_000_000), max_size=4))


@settings(max_examples=400, deadline=None)
@given(w=windows(), extra=st.lists(st.sampled_from(list(Rule)), max_size=4), drops=st.integers(0, 3),
       step=st.floats(1.1, 4.0), tried=TRIED)  # fmt: skip
def test_a_port_proposal_never_leaves_its_bounds(
    w: PortWindow, extra: list[Rule], drops: int, step: float, tried: dict[Knob, frozenset[int]]
) -> None:
    policy = Policy.model_validate({"tuning": {"max_step": step}})
    verdicts = [*judge_port(w), *(fire(r, w.subject, drops=drops) for r in extra)]
    # values "tried without effect": half the time near the settings, so the search steps past them
    near = {k: frozenset(v for x in vals for v in (x, w.settings.kmin_bytes // 2, w.settings.kmin_bytes * 2))
            for k, vals in tried.items()}  # fmt: skip
    a = propose_port(w, verdicts, policy, tried=near)
    if a.proposal is None:
        return
    s, cls = w.settings, getattr(policy.tuning.classes, w.port_class.value)
    assert a.proposal.changes, "an empty proposal"
    for c in a.proposal.changes:
        assert c.after != c.before, f"no-op {c}"
        assert c.low <= c.after <= c.high, c
    final = {Knob.KMIN: s.kmin_bytes, Knob.KMAX: s.kmax_bytes, Knob.PMAX: s.pmax_percent}
    final |= {c.knob: c.after for c in a.proposal.changes}
    speed, rate = w.physics.speed_gbps, w.physics.bytes_per_s
    if port_bounds(w, policy).infeasible:
        # only one way out of bounds that leave no room: the DR's own CNPs on (the campus loop makes room), alone
        assert s.dr_cnp is not None and a.proposal.corrective
        assert [(c.knob, c.before, c.after) for c in a.proposal.changes] == [(Knob.DR_CNP, 0, 1)]
        on = replace(w, settings=replace(s, dr_cnp=replace(s.dr_cnp, enabled=True)))
        assert port_bounds(on, policy).infeasible == ""
        return
    if s.dr_cnp is not None:  # a DR's own CNP thresholds: ordered, in the class's range, below XOFF by a campus loop
        lo = final.get(Knob.DR_CNP_MIN, s.dr_cnp.min_bytes)
        hi = final.get(Knob.DR_CNP_MAX, s.dr_cnp.max_bytes)
        assert us_bytes(cls.dr_cnp_us[0], speed) <= lo < hi <= us_bytes(cls.dr_cnp_us[1], speed)
        if s.pfc_enabled:
            assert hi <= s.xoff_trigger_bytes - rate * 85e-6 + 1
    assert final[Knob.KMIN] < final[Knob.KMAX]
    assert us_bytes(cls.kmin_us[0], speed) <= final[Knob.KMIN] <= us_bytes(cls.kmin_us[1], speed)
    assert us_bytes(cls.kmax_us[0], speed) <= final[Knob.KMAX] <= us_bytes(cls.kmax_us[1], speed)
    assert cls.pmax_percent[0] <= final[Knob.PMAX] <= cls.pmax_percent[1]
    dr_on = s.dr_cnp is not None and (s.dr_cnp.enabled or final.get(Knob.DR_CNP) == 1)
    if s.pfc_enabled:  # ECN before XOFF: one feedback delay of line rate between Kmax and the trigger
        assert s.headroom_bytes >= pfc_headroom(w.physics.length_m, speed, PfcPolicy())[0]
        loop = 85e-6 + (w.physics.rtt_s if w.port_class is PortClass.DCI and not (s.dr_cnp and s.dr_cnp.enabled) else 0)
        assert final[Knob.KMAX] <= s.xoff_trigger_bytes - rate * loop + 1
    if w.port_class is PortClass.DCI and not dr_on and s.dr_cnp is None:
        assert final[Knob.KMAX] <= 1.5 * rate * w.physics.rtt_s
    if not a.proposal.corrective:
        for c in a.proposal.changes:
            if c.knob is Knob.DR_CNP or (c.knob in (Knob.KMIN, Knob.DR_CNP_MIN) and c.after < c.before):
                continue  # DR CNPs on is 0 -> 1; a low threshold may follow its high one down to stay below it
            # at most one step (or one unit) from the running value, or from a value tried without effect on the way
            starts = [
                c.before,
                *(v for v in near.get(c.knob, ()) if min(c.before, c.after) <= v <= max(c.before, c.after)),
            ]
            assert any(
                1 / step - 1e-9 <= max(c.after, 1) / max(x, 1) <= step + 1e-9 or abs(c.after - x) == 1 for x in starts
            ), c


@settings(max_examples=100, deadline=None)
@given(
    length=st.floats(10_000, 500_000),
    speed=st.sampled_from([100, 200, 400, 800]),
    room=st.floats(0.0, 1.0),
    extra=st.lists(st.sampled_from(list(Rule)), max_size=4),
    tried=TRIED,
)
def test_a_long_haul_port_without_room_below_xoff_only_turns_the_drs_cnps_on(
    length: float, speed: int, room: float, extra: list[Rule], tried: dict[Knob, frozenset[int]]
) -> None:
    """End-to-end CNP over the long haul with the XOFF trigger between one campus loop and one long-haul loop of line
    rate above Kmax's floor: no threshold fits, and the only proposal is the DR's own CNPs on, whatever fired."""
    rate = speed * 1e9 / 8
    floor = us_bytes(POLICY.tuning.classes.dci.kmax_us[0], speed)
    campus, loop = math.ceil(rate * 85e-6), math.ceil(rate * (85e-6 + 2 * length / 1.98e8))
    xoff = floor + campus + 1 + int(room * (loop - campus - 2))
    w = dci(dr=DR_OFF, pfc=True, xoff=xoff, headroom=pfc_headroom(length, speed, PfcPolicy())[0], speed=speed,
            length=length)  # fmt: skip
    assert port_bounds(w, POLICY).infeasible.startswith("no room for Kmax")
    a = propose_port(w, [fire(r, w.subject, drops=1) for r in extra], POLICY, tried=tried)
    assert changes(a) == {Knob.DR_CNP: (0, 1)} and a.proposal is not None and a.proposal.corrective
    on = replace(w, settings=replace(w.settings, dr_cnp=replace(DR_OFF, enabled=True)))
    assert port_bounds(on, POLICY).infeasible == ""


@settings(max_examples=300, deadline=None)
@given(
    gap=st.integers(0, 5000),
    paths=st.lists(st.floats(1, 200_000), min_size=1, max_size=6),
    mode=st.sampled_from(["off", "flowlet", "per-packet"]),
    fired=st.lists(st.sampled_from([Rule.REORDERS_SHORT_GAP, Rule.ECMP_IMBALANCE]), max_size=2),
    cls=st.sampled_from(list(PortClass)),
    step=st.floats(1.1, 4.0),
    tried=st.frozensets(st.integers(0, 5000), max_size=4),
    oos=st.none() | st.lists(st.integers(0, 10**7), min_size=5, max_size=5),
    drops=st.none() | st.lists(st.integers(0, 10), min_size=5, max_size=5),
)
def test_a_flowlet_proposal_stays_above_the_skew(
    gap: int, paths: list[float], mode: str, fired: list[Rule], cls: PortClass, step: float, tried: frozenset[int],
    oos: list[int | None] | None, drops: list[int | None] | None,
) -> None:  # fmt: skip
    # random counter histories (resets included: a list need not rise) judged as well as random fired rules
    g = group(flowlet_us=gap, paths=tuple(paths), mode=mode, oos=oos, drops=drops)  # type: ignore[arg-type]
    g = GroupWindow(g.device, g.group, cls, g.members, g.samples, g.mode, g.flowlet_us, g.path_lengths_m, 400)
    policy = Policy.model_validate({"tuning": {"max_step": step}})
    # values "tried without effect" half the time one step either side of the gap: the search steps past them
    near = tried | {round(gap * step), round(gap / step)} if tried else tried
    a = propose_group(g, [*judge_group(g), *(fire(r, g.subject) for r in fired)], policy, tried={Knob.FLOWLET: near})
    if a.proposal is None:
        return
    (c,) = a.proposal.changes
    assert c.knob is Knob.FLOWLET and c.after != c.before and mode == "flowlet"
    cls_range = getattr(POLICY.tuning.classes, cls.value).flowlet_us
    assert skew_floor_us(tuple(paths), DlbPolicy()) <= c.after <= 2047
    assert c.after >= 2 and cls_range[0] <= c.after <= cls_range[1]
