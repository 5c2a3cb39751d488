"""The pure pieces composed the way the service loop will call them (judge -> propose -> admit -> apply -> verify ->
record), against a toy plant: a few lines that turn a port's Kmin into counters. The toy is not DCQCN (the twin's
congestion model, issue 50, is); it has the two failure modes the issue's bad starting points have, so the test shows
the pieces converge from both, stop changing at steady state and never flap; a step that does not yet cross the
toy's threshold is rolled back as harmless and the next proposal steps past it.

Toy plant, one 400G server port under a steady incast: the standing queue wants 3 MB. With Kmin at or above 2 MB the
ingress reaches XOFF before marking cuts the senders (pauses, no marks); with Kmin below 300 KB the senders back off
below line rate while the queue sits near Kmin (marks, 90 % of line rate); in between, marks and line rate.
"""

from __future__ import annotations

from dataclasses import replace

import pytest

from fabricd.tuning.inputs import PortWindow, Sample
from fabricd.tuning.kpis import port_kpis
from fabricd.tuning.propose import Knob, propose_port
from fabricd.tuning.rules import judge_port
from fabricd.tuning.verify import Decision, LedgerEntry, Result, admit, no_effect_values, verify
from policies.policy import Policy

from .windows import LINE, port

POLICY = Policy()
WINDOW_S = 300.0  # one verify window per round: 5 minutes


def plant(w: PortWindow, t0: float) -> PortWindow:
    kmin = w.settings.kmin_bytes
    pausing, underused = kmin >= 2_000_000, kmin < 300_000
    rate = 0.9 * LINE if underused else (0.97 * LINE if pausing else LINE)
    wm = kmin + 1000 if underused else 3_000_000
    samples = tuple(
        Sample(
            t_s=t0 + i * 60.0,
            ecn_marked_pkts=0 if pausing else i * 10_000,
            pfc_tx_pkts=i * 5_000 if pausing else 0,
            pfc_tx_pause_us=i * 20_000_000 if pausing else 0,
            tx_bytes=int(i * 60 * rate),
            drops=0,
            queue_watermark_bytes=wm,
        )
        for i in range(6)
    )
    return replace(w, samples=samples)


def run(kmin: int, rounds: int = 10) -> tuple[list[int], list[LedgerEntry]]:
    w = plant(port(kmin=kmin), 0.0)
    ledger: list[LedgerEntry] = []
    seen = [kmin]
    for r in range(1, rounds + 1):
        now = r * WINDOW_S
        tried = no_effect_values(ledger, w.subject, now, POLICY.tuning)
        p = propose_port(w, judge_port(w), POLICY, tried=tried).proposal
        if p is None or not admit(p, ledger, now, POLICY.tuning).allowed:
            w = plant(w, now)
            continue
        new = {c.knob: c.after for c in p.changes}
        trial = plant(replace(w, settings=replace(w.settings, kmin_bytes=new[Knob.KMIN])), now)
        check = verify(port_kpis(w), port_kpis(trial), p.target, POLICY.tuning)
        keep = check.decision is Decision.CONFIRM
        result = Result.CONFIRMED if keep else Result.ROLLED_BACK
        ledger.append(LedgerEntry(now, p.subject, p.port_class, p.changes, result, no_effect=check.no_effect))
        if keep:
            w = trial
            seen.append(w.settings.kmin_bytes)
    return seen, ledger


@pytest.mark.parametrize(
    ("start", "path", "no_effect"),
    [
        pytest.param(5_000_000, [5_000_000, 1_250_000], [2_500_000],
                     id="Kmin above XOFF's reach: 2.5 MB still pauses (rolled back, harmless), 1.25 MB does not"),
        pytest.param(50_000, [50_000, 400_000], [100_000, 200_000],
                     id="Kmin far too low: under-use until 400 KB, each harmless step stepped past"),
        pytest.param(600_000, [600_000], [], id="the static intent's 12 us: nothing to do"),
    ],
)  # fmt: skip
def test_converges_then_stops(start: int, path: list[int], no_effect: list[int]) -> None:
    seen, ledger = run(start)
    assert seen == path
    rolled = [e.changes[0].after for e in ledger if e.result is Result.ROLLED_BACK]
    assert rolled == no_effect and all(e.no_effect for e in ledger if e.result is Result.ROLLED_BACK)
    assert len(ledger) == len(path) - 1 + len(no_effect)  # nothing after: 0 changes at steady state
    assert len(ledger) <= 10  # the bound on rounds
