"""Detector accuracy bench, DR part (`bench_detector_accuracy.py --dci`): DCI imbalance and drops on the twin of
examples/small-dci.yaml (2 DRs x 4 long-haul 400G ports to campus-b, 120 km).

Each case is one recording; its fault goes in `ONSET_S` seconds after subscribing and stays to the end:
- balanced (no fault) and 10 % skew: nothing may be found (10 % is under the 15 % raise threshold: a tolerance);
- 20 % and 40 % skew, polarized (half the members high, half low): a dci_imbalance naming DCI campus-b whose cause
  is hash_polarization; 20 % spread evenly over the members: a dci_imbalance whose cause is too_few_flows;
- drops on one DR port (1e-4) and on half of them (1e-5): a dci_drops naming exactly those ports;
- a 2 s burst of 40 % skew: noise, nothing may be found.
Matching: same kind, detected no earlier than the fault, and the place (the DCI for an imbalance, the exact set of
dropping ports for drops). Precision = matching findings / findings; recall = matched cases / cases with a fault;
a right finding with the wrong cause counts as found and is listed. Delay = detected_ts - injection time.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass, field
from typing import Any

from accuracy_plan import Episode, Scenario, Step

DCI = "campus-b"
LONG_HAUL = [f"dr-{DCI}-{d}:Ethernet{p}/1" for d in (0, 1) for p in (5, 6, 7, 8)]
ONSET_S = 3.0
DCI_KINDS = ("dci_imbalance", "dci_drops")


def _case(index: int, duration: float, name: str, kind: str, truth: bool, steps: list[Step], where: str) -> Episode:
    return Episode(index, duration, [Scenario(f"d{index:02d}.{name}", kind, truth, None, where, steps)])


def plan(rounds: int, duration_s: float = 30.0) -> list[Episode]:
    """Every case once per round, in a fixed order (no randomness: the cases are the point)."""
    out: list[Episode] = []
    for _ in range(rounds):
        cases: list[tuple[str, str, bool, list[Step], str]] = [
            ("balanced", "balanced", False, [], DCI),
            ("skew10", "dci_imbalance", False, [_skew(0.10)], DCI),
            ("skew20", "dci_imbalance", True, [_skew(0.20)], DCI),
            ("skew40", "dci_imbalance", True, [_skew(0.40)], DCI),
            ("skew20-spread", "dci_imbalance", True, [_skew(0.20, "spread")], DCI),
            ("drops-one", "dci_drops", True, [_drop(LONG_HAUL[5], 1e-4)], LONG_HAUL[5]),
            ("drops-half", "dci_drops", True, [_drop(p, 1e-5) for p in LONG_HAUL[::2]], ",".join(LONG_HAUL[::2])),
            ("burst", "burst", False, [_skew(0.40, clear_s=2.0)], DCI),
        ]
        for name, kind, truth, steps, where in cases:
            out.append(_case(len(out), duration_s, name, kind, truth, steps, where))
    return out


def _skew(skew: float, pattern: str = "polarized", clear_s: float | None = None) -> Step:
    return Step(ONSET_S, "dci_imbalance", {"dci": DCI, "skew": skew, "pattern": pattern}, clear_s)


def _drop(port: str, rate: float) -> Step:
    return Step(ONSET_S, "dci_drops", {"port": port, "rate": rate})


@dataclass
class DciScore:
    cases: int = 0
    found: int = 0
    findings: int = 0
    matching: int = 0
    delays: list[float] = field(default_factory=list)
    wrong_cause: list[str] = field(default_factory=list)
    misses: list[str] = field(default_factory=list)
    false: list[str] = field(default_factory=list)

    @property
    def precision(self) -> float:
        return self.matching / self.findings if self.findings else 1.0

    @property
    def recall(self) -> float:
        return self.found / self.cases if self.cases else 1.0


def _matches(f: dict[str, Any], sc: Scenario, start_ns: int) -> bool:
    if f["kind"] != sc.kind or not sc.truth or f["detected_ts"] < start_ns:
        return False
    if sc.kind == "dci_imbalance":
        return bool(f["evidence"].get("dci") == DCI and "long-haul" in str(f["evidence"].get("group")))
    return set(f["ports"]) == set(sc.where.split(","))


def score(results: list[tuple[Episode, int, list[dict[str, Any]]]]) -> dict[str, DciScore]:
    """`results`: (episode, injection time in the twin's clock, findings of `fabricd detect`)."""
    out = {k: DciScore() for k in DCI_KINDS}
    for ep, start_ns, findings in results:
        (sc,) = ep.scenarios
        mine = [f for f in findings if f["kind"] in DCI_KINDS]
        for f in mine:
            out[f["kind"]].findings += 1
        if sc.truth:
            s = out[sc.kind]
            s.cases += 1
            hits = [f for f in mine if _matches(f, sc, start_ns)]
            if hits:
                s.found += 1
                s.delays.append((min(f["detected_ts"] for f in hits) - start_ns) / 1e9)
                want = {"polarized": "hash_polarization", "spread": "too_few_flows"}.get(
                    str(sc.steps[0].params.get("pattern")), ""
                )
                if sc.kind == "dci_imbalance" and hits[0]["evidence"].get("cause") != want:
                    s.wrong_cause.append(f"{sc.name}: {hits[0]['evidence'].get('cause')} (want {want})")
            else:
                s.misses.append(sc.name)
        for f in mine:
            if _matches(f, sc, start_ns):
                out[f["kind"]].matching += 1
            else:
                out[f["kind"]].false.append(f"{sc.name}: {f['summary']}")
    return out


def report(scores: dict[str, DciScore]) -> list[str]:
    lines = [
        "| kind | cases | recall | findings | precision | delay p50 / max (s) | wrong cause |",
        "|---|---|---|---|---|---|---|",
    ]
    for k, s in scores.items():
        d = f"{statistics.median(s.delays):.1f} / {max(s.delays):.1f}" if s.delays else "-"
        lines.append(
            f"| {k} | {s.cases} | {s.recall * 100:.0f} % | {s.findings} | {s.precision * 100:.0f} % | {d} | "
            f"{len(s.wrong_cause)} |"
        )
    for k, s in scores.items():
        lines += [f"MISSED {k}: {m}" for m in s.misses]
        lines += [f"FALSE {k}: {m}" for m in s.false]
        lines += [f"CAUSE {k}: {m}" for m in s.wrong_cause]
    return lines
