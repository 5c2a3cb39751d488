"""Verify (confirm or roll back from KPI windows) and admission (budget, hold-off, no flapping) as tables; KPIs
measured from counter histories."""

from __future__ import annotations

from dataclasses import replace

import pytest

from fabricd.tuning.inputs import PortClass
from fabricd.tuning.kpis import Kpi, group_kpis, port_kpis
from fabricd.tuning.propose import Change, Knob, Proposal
from fabricd.tuning.rules import Rule
from fabricd.tuning.verify import Admission, Decision, LedgerEntry, Result, admit, no_effect_values, verify
from policies.policy import TuningPolicy

from .windows import LINE, cum, group, hist, lin, port

T = TuningPolicy()
P, TH, D, R, Q = Kpi.PAUSE, Kpi.THROUGHPUT, Kpi.DROPS, Kpi.REORDERS, Kpi.QUEUE_DELAY
BASE = {P: 100_000.0, TH: 40e9, D: 0.0, R: 0.0, Q: 50.0}

# before, after, target -> decision, a piece of the why
VERIFY = [
    pytest.param(BASE, BASE | {P: 20_000.0}, P, Decision.CONFIRM, "target pause_us_per_s 100000 -> 20000",
                 id="pause down 80 %, nothing else moved"),
    pytest.param(BASE, BASE | {P: 95_000.0}, P, Decision.ROLL_BACK, "not better by 10%", id="5 % is within noise"),
    pytest.param(BASE, BASE | {P: 90_000.0}, P, Decision.CONFIRM, "", id="exactly the 10 % margin"),
    pytest.param(BASE, BASE | {P: 20_000.0, TH: 38e9}, P, Decision.ROLL_BACK, "regressed: throughput_bytes_per_s",
                 id="throughput 5 % lower: guard"),
    pytest.param(BASE, BASE | {P: 20_000.0, TH: 39.5e9}, P, Decision.CONFIRM, "",
                 id="throughput 1.25 % lower: inside 2 %"),
    pytest.param(BASE, BASE | {P: 20_000.0, D: 3.0}, P, Decision.ROLL_BACK, "drops_per_s 0 -> 3",
                 id="new drops: guard, no tolerance from zero"),
    pytest.param(BASE, BASE | {P: 20_000.0, R: 0.5}, P, Decision.CONFIRM, "", id="reorders under 1/s: noise"),
    pytest.param(BASE, BASE | {Q: 30.0, P: 102_500.0}, Q, Decision.CONFIRM, "",
                 id="pause +2.5 %: inside 2 % plus its 1 ms/s noise floor"),
    pytest.param(BASE, BASE | {Q: 30.0, P: 103_500.0}, Q, Decision.ROLL_BACK, "regressed: pause_us_per_s",
                 id="pause +3.5 %: beyond them"),
    pytest.param(BASE, BASE | {Q: 30.0, P: 150_000.0}, Q, Decision.ROLL_BACK, "pause_us_per_s 100000 -> 150000",
                 id="queue better, pause worse: rolled back"),
    pytest.param(BASE, {P: 20_000.0, D: 0.0, R: 0.0, Q: 50.0}, P, Decision.ROLL_BACK,
                 "guard throughput_bytes_per_s not measured after", id="a guard lost after the change"),
    pytest.param(BASE, BASE | {TH: 45e9}, TH, Decision.CONFIRM, "", id="throughput as the target: higher is better"),
    pytest.param(BASE, BASE | {TH: 35e9}, TH, Decision.ROLL_BACK, "not better", id="throughput target got worse"),
    pytest.param({TH: 40e9}, {TH: 40e9, P: 5.0}, P, Decision.ROLL_BACK, "target pause_us_per_s not measured before",
                 id="target unmeasured before"),
    pytest.param(BASE | {P: 0.0}, BASE | {P: 0.0}, P, Decision.ROLL_BACK, "not better", id="nothing to improve"),
    pytest.param(BASE, BASE | {TH: 39.9e9}, None, Decision.CONFIRM, "a correction, no guard worse",
                 id="a correction: kept when no guard regressed"),
    pytest.param(BASE, BASE | {D: 1.0}, None, Decision.ROLL_BACK, "drops_per_s", id="a correction that drops"),
]  # fmt: skip


NO_EFFECT = [
    pytest.param(BASE, BASE | {P: 98_000.0}, P, True, id="target flat, nothing worse: harmless"),
    pytest.param(BASE, BASE | {P: 140_000.0}, P, False, id="target worse: harmful"),
    pytest.param(BASE, BASE | {P: 98_000.0, D: 2.0}, P, False, id="target flat, a guard worse: harmful"),
    pytest.param(BASE, BASE | {P: 20_000.0}, P, False, id="confirmed: not a no-effect"),
    pytest.param(BASE | {Kpi.UNDERUSE: 0.03}, BASE | {Kpi.UNDERUSE: 0.029}, Kpi.UNDERUSE, True,
                 id="under-use 3 % -> 2.9 %: flat"),
]  # fmt: skip


@pytest.mark.parametrize(("before", "after", "target", "no_effect"), NO_EFFECT)
def test_no_effect(before: dict[Kpi, float], after: dict[Kpi, float], target: Kpi, no_effect: bool) -> None:
    assert verify(before, after, target, T).no_effect is no_effect


def test_underuse_is_judged_on_the_shortfall() -> None:
    """97 % -> 99 % of line rate is a 2 % throughput gain but a two-thirds cut of the shortfall: confirmed."""
    before, after = BASE | {Kpi.UNDERUSE: 0.03, TH: 0.97 * LINE}, BASE | {Kpi.UNDERUSE: 0.01, TH: 0.99 * LINE}
    assert verify(before, after, Kpi.UNDERUSE, T).decision is Decision.CONFIRM
    assert verify(before, after, Kpi.THROUGHPUT, T).decision is Decision.ROLL_BACK  # as a plain KPI it would not be


@pytest.mark.parametrize(("before", "after", "target", "decision", "why"), VERIFY)
def test_verify(
    before: dict[Kpi, float], after: dict[Kpi, float], target: Kpi | None, decision: Decision, why: str
) -> None:
    check = verify(before, after, target, T)
    assert check.decision is decision, check
    assert why in check.why
    if decision is Decision.CONFIRM:
        assert check.regressions == ()
    if decision is Decision.ROLL_BACK and ("regressed:" in why or why.startswith("guard")):
        assert check.regressions != ()


def test_a_workload_change_inside_the_verify_window_rolls_back() -> None:
    """Issue 51: a change made worse after its commit is rolled back (the fan-in doubled during the window)."""
    before = port_kpis(port(hist(tx_bytes=lin(4, 0.9 * LINE), pfc_tx_pause_us=lin(4, 200_000), drops=lin(4, 0))))
    after = port_kpis(port(hist(tx_bytes=lin(4, 0.8 * LINE), pfc_tx_pause_us=lin(4, 100_000), drops=lin(4, 0))))
    check = verify(before, after, Kpi.PAUSE, T)
    assert check.decision is Decision.ROLL_BACK and check.regressions == (Kpi.THROUGHPUT,)


def test_kpis_from_counters() -> None:
    w = port(hist(tx_bytes=lin(4, 0.5 * LINE), pfc_rx_pause_us=lin(4, 1000), pfc_tx_pause_us=lin(4, 500),
                  drops=[0, 0, 5, 2, 4], queue_watermark_bytes=[0, 1_000_000, 2_000_000, 500_000, 50_000_000],
                  nic_out_of_sequence=lin(4, 3)))  # fmt: skip
    k = port_kpis(w)
    assert k[Kpi.THROUGHPUT] == pytest.approx(0.5 * LINE) and k[Kpi.UNDERUSE] == pytest.approx(0.5)
    assert k[Kpi.PAUSE] == pytest.approx(1500)
    assert k[Kpi.DROPS] == pytest.approx(7 / 3)  # the reset interval (5 -> 2) is not counted
    assert k[Kpi.REORDERS] == pytest.approx(3)
    assert k[Kpi.QUEUE_DELAY] == pytest.approx(1000)  # p99 of 4 watermarks is the largest: 50 MB at 50 GB/s
    assert k[Kpi.THROUGHPUT_CV] == pytest.approx(0)
    assert Kpi.IMBALANCE not in k  # a port has none
    only_tx = {Kpi.THROUGHPUT, Kpi.UNDERUSE, Kpi.THROUGHPUT_CV}
    assert port_kpis(port(hist(tx_bytes=lin(4, 1)))).keys() == only_tx  # the others absent, never 0
    g = group_kpis(group(members={"a": lin(4, 0.4 * 50e9), "b": lin(4, 0.2 * 50e9)}, oos=cum([2, 2, 2, 2])))
    assert g[Kpi.IMBALANCE] == pytest.approx(2 / 3) and g[Kpi.REORDERS] == pytest.approx(2)
    assert g[Kpi.THROUGHPUT] == pytest.approx(0.6 * 50e9)


H = 3600.0
NOW = 10 * H
SUBJ = "leaf-1:Ethernet1/1"


def prop(
    knob: Knob = Knob.KMIN, before: int = 600_000, after: int = 300_000, subject: str = SUBJ,
    cls: PortClass = PortClass.SERVER, rule: Rule | None = Rule.PFC_BEFORE_ECN,
) -> Proposal:  # fmt: skip
    return Proposal(subject, cls, rule, (Change(knob, before, after, 1, 10**9),), "why", Kpi.PAUSE, "src")


def entry(
    ago_min: float, before: int, after: int, result: Result, subject: str = SUBJ, knob: Knob = Knob.KMIN,
    cls: PortClass = PortClass.SERVER,
) -> LedgerEntry:  # fmt: skip
    return LedgerEntry(NOW - ago_min * 60, subject, cls, (Change(knob, before, after, 1, 10**9),), result)


def others(n: int, cls: PortClass = PortClass.LEAF_SPINE, ago_min: float = 10) -> list[LedgerEntry]:
    return [entry(ago_min, 1, 2, Result.CONFIRMED, subject=f"spine-{i}:Ethernet1/1", cls=cls) for i in range(n)]


# proposal, ledger -> allowed, a piece of the why
ADMIT = [
    pytest.param(prop(), [], True, "within budget", id="empty ledger"),
    pytest.param(prop(), [entry(5, 1_200_000, 600_000, Result.PENDING)], False, "still being verified",
                 id="one experiment per subject at a time"),
    pytest.param(prop(subject="leaf-2:Ethernet1/1"), [entry(5, 1_200_000, 600_000, Result.PENDING)], True, "",
                 id="another port may start"),
    pytest.param(prop(), others(12), False, "12 changes in the last hour (budget 12)", id="hourly budget spent"),
    pytest.param(prop(), others(12, ago_min=61), True, "", id="budget entries older than an hour do not count"),
    pytest.param(prop(), others(6, cls=PortClass.SERVER), False,
                 "6 server changes in the last hour (budget 6 per class)", id="class budget spent"),
    pytest.param(prop(cls=PortClass.LEAF_SPINE), others(6, cls=PortClass.SERVER), True, "",
                 id="another class still has budget"),
    pytest.param(prop(), [entry(30, 600_000, 300_000, Result.ROLLED_BACK)], False,
                 "ecn.min_bytes -> 300000 was rolled back 30 min ago", id="no return to a rolled-back value"),
    pytest.param(prop(), [replace(entry(30, 600_000, 300_000, Result.ROLLED_BACK), refused=True)], False,
                 "ecn.min_bytes -> 300000 was refused 30 min ago", id="a refused value is held off, and says so"),
    pytest.param(prop(), [entry(61, 600_000, 300_000, Result.ROLLED_BACK)], True, "", id="after the hold-off it may"),
    pytest.param(prop(after=250_000), [entry(30, 600_000, 300_000, Result.ROLLED_BACK)], True, "",
                 id="another value may be tried"),
    pytest.param(prop(before=1_200_000, after=600_000), [entry(20, 600_000, 1_200_000, Result.CONFIRMED)], False,
                 "would reverse 600000 -> 1200000", id="A -> B -> A: flapping"),
    pytest.param(prop(before=1_200_000, after=900_000), [entry(20, 600_000, 1_200_000, Result.CONFIRMED)], False,
                 "no flapping", id="A -> B -> A': still a reversal"),
    pytest.param(prop(before=1_200_000, after=2_400_000), [entry(20, 600_000, 1_200_000, Result.CONFIRMED)], True, "",
                 id="the same direction again"),
    pytest.param(prop(knob=Knob.PMAX, before=5, after=3), [entry(20, 600_000, 1_200_000, Result.CONFIRMED)], True, "",
                 id="another knob"),
    pytest.param(prop(before=1_200_000, after=600_000, rule=None), [entry(20, 600_000, 1_200_000, Result.CONFIRMED)],
                 True, "a correction into bounds", id="a correction skips the hold-off"),
    pytest.param(prop(rule=None), others(12), False, "budget 12", id="...but not the budget"),
]  # fmt: skip


@pytest.mark.parametrize(("p", "ledger", "allowed", "why"), ADMIT)
def test_admit(p: Proposal, ledger: list[LedgerEntry], allowed: bool, why: str) -> None:
    a = admit(p, ledger, NOW, T)
    assert a == Admission(allowed, a.why) and why in a.why


def test_no_effect_values() -> None:
    ledger = [
        replace(entry(10, 600_000, 300_000, Result.ROLLED_BACK), no_effect=True),
        replace(entry(20, 600_000, 450_000, Result.ROLLED_BACK), no_effect=False),  # harmful: not stepped past
        replace(entry(70, 600_000, 150_000, Result.ROLLED_BACK), no_effect=True),  # past the hold-off
        replace(entry(5, 5, 3, Result.ROLLED_BACK, knob=Knob.PMAX), no_effect=True),
        replace(entry(5, 1, 2, Result.ROLLED_BACK, subject="leaf-2:Ethernet1/1"), no_effect=True),
    ]
    assert no_effect_values(ledger, SUBJ, NOW, T) == {Knob.KMIN: frozenset({300_000}), Knob.PMAX: frozenset({3})}


def test_budget_zero_turns_changes_off() -> None:
    off = TuningPolicy(changes_per_hour=0)
    assert admit(prop(), [], NOW, off) == Admission(False, "0 changes in the last hour (budget 0)")
