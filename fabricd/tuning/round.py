"""One tuning round over a fabric's windows: judge every port and group, propose per subject. Pure: what `fabricd
tune` prints and what a service loop would admit, apply and verify (docs/tuning.md)."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from policies.policy import Policy

from .inputs import GroupWindow, PortWindow
from .propose import Advice, Proposal, Recommendation, Tried, propose_group, propose_port
from .rules import Verdict, judge_group, judge_port


@dataclass(frozen=True)
class Judged:
    """One subject's verdicts and what they lead to."""

    subject: str
    port_class: str
    verdicts: tuple[Verdict, ...]
    advice: Advice


@dataclass(frozen=True)
class Round:
    judged: tuple[Judged, ...]

    @property
    def proposals(self) -> list[Proposal]:
        return [j.advice.proposal for j in self.judged if j.advice.proposal is not None]

    @property
    def recommendations(self) -> list[Recommendation]:
        seen: dict[tuple[str, str], Recommendation] = {}
        for j in self.judged:
            for r in j.advice.recommendations:
                seen.setdefault((r.rule, r.name), r)  # the same NIC advice for many ports is printed once
        return list(seen.values())

    @property
    def fired(self) -> list[Verdict]:
        return [v for j in self.judged for v in j.verdicts if v.fired]

    @property
    def notes(self) -> list[str]:
        return [n for j in self.judged for n in j.advice.notes]

    def to_dict(self) -> dict[str, Any]:
        return {
            "subjects": len(self.judged),
            "verdicts": [_verdict(v) for v in self.fired],
            "not_judged": sorted({f"{v.rule}: {v.why}" for j in self.judged for v in j.verdicts if _nj(v)}),
            "proposals": [_proposal(p) for p in self.proposals],
            "recommendations": [_rec(r) for r in self.recommendations],
            "notes": self.notes,
        }


def _nj(v: Verdict) -> bool:
    return str(v.outcome) == "not_judged"


def _verdict(v: Verdict) -> dict[str, Any]:
    return {
        "rule": str(v.rule),
        "subject": v.subject,
        "class": str(v.port_class),
        "why": v.why,
        "evidence": dict(v.evidence),
        "source": v.source,
    }


def _proposal(p: Proposal) -> dict[str, Any]:
    return {
        "subject": p.subject,
        "class": str(p.port_class),
        "rule": str(p.rule) if p.rule else None,
        "corrective": p.corrective,
        "changes": [
            {"knob": str(c.knob), "before": c.before, "after": c.after, "low": c.low, "high": c.high} for c in p.changes
        ],
        "reason": p.reason,
        "target": str(p.target) if p.target else None,
        "source": p.source,
        "diff": p.diff(),
    }


def _rec(r: Recommendation) -> dict[str, Any]:
    return {"rule": str(r.rule), "name": r.name, "default": r.default, "value": r.value, "how": list(r.how),
            "reason": r.reason}  # fmt: skip


@dataclass(frozen=True)
class Skipped:
    """A subject not judged this round, and why (the fault open on it)."""

    subject: str
    why: str


def without_faults(
    ports: Sequence[PortWindow], groups: Sequence[GroupWindow], faulted: Mapping[str, str]
) -> tuple[list[PortWindow], list[GroupWindow], list[Skipped]]:
    """The subjects to judge: none with a fault open on it. `faulted` maps "device:port" to the fault on it (an
    active finding naming that port or its link's other end). A fault's counters are the fault's, not the load's: a
    PFC storm's pauses are no congestion an ECN threshold could cure, a flapping, corrupting or held link carries
    no steady load, and a change verified across a fault would be judged by the fault. A group is skipped when any
    of its members is."""
    keep_p, keep_g, skipped = [], [], []
    for w in ports:
        if (why := faulted.get(w.subject)) is not None:
            skipped.append(Skipped(w.subject, why))
        else:
            keep_p.append(w)
    for g in groups:
        hit = [faulted[f"{g.device}:{m}"] for m in g.members if f"{g.device}:{m}" in faulted]
        if hit:
            skipped.append(Skipped(g.subject, hit[0]))
        else:
            keep_g.append(g)
    return keep_p, keep_g, skipped


def fault_on(window: PortWindow | GroupWindow, faulted: Mapping[str, str]) -> str | None:
    """The fault open on a subject (`without_faults`'s rule: the port, or any member of the group), or None."""
    _, _, skipped = without_faults(*(([window], []) if isinstance(window, PortWindow) else ([], [window])), faulted)
    return skipped[0].why if skipped else None


def judge_round(
    ports: Sequence[PortWindow],
    groups: Sequence[GroupWindow],
    policy: Policy,
    tried_of: Callable[[str], Tried] = lambda _s: {},
) -> Round:
    """Every subject judged and proposed for; `tried_of(subject)`: values to step past (verify.no_effect_values)."""
    out = []
    for w in ports:
        v = judge_port(w)
        out.append(Judged(w.subject, str(w.port_class), v, propose_port(w, v, policy, tried=tried_of(w.subject))))
    for g in groups:
        v = judge_group(g, policy.settings.dlb)
        out.append(Judged(g.subject, str(g.port_class), v, propose_group(g, v, policy, tried=tried_of(g.subject))))
    return Round(tuple(out))
