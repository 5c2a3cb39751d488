"""The tuning loop's invariants (issue 51): each change applied once, settled, audited, and the switches running what
the ledger says."""

from __future__ import annotations

import math
from collections.abc import Sequence

from .history import TuneRec
from .violation import Violation

_PUSHING = ("applying", "rolling_back")  # a push or a roll back under way: seconds, unless left half done
_ENDED = ("confirmed", "rolled_back")


def tuning_once(tuning: Sequence[TuneRec]) -> list[Violation]:
    """Never two tuning changes open on one subject at once (`admit` refuses a proposal for a subject with a change
    pending, across restarts and failovers: docs/tuning.md): a change is open from its record to its end."""
    out = []
    last: dict[str, TuneRec] = {}
    for t in sorted(tuning, key=lambda t: (t.created_s, t.id)):
        prev = last.get(t.subject)
        if prev is not None and t.created_s < _end(prev):
            out.append(Violation("tuning_once", t.created_s, t.subject,
                                 f"change {t.id} opened while change {prev.id} was {prev.status}"))  # fmt: skip
        if prev is None or _end(t) > _end(prev):
            last[t.subject] = t
    return out


def _end(t: TuneRec) -> float:
    return math.inf if t.ended_s is None else t.ended_s  # still open when the run ended


def tuning_settled(tuning: Sequence[TuneRec], settled_s: float, end_s: float, wait_s: float) -> list[Violation]:
    """No push of a tuning change begun before the settle is still under way when the run ends (`end_s`, the last
    sample), unless it began less than `wait_s` (fabricd's tuning.revert_in_s) before: a push a new leader resumes
    waits for the old leader's revert timer first. One left `applying` or `rolling_back` longer is a push a restart or
    failover lost. `verifying` is not one: its verify window may outlast the settle."""
    return [
        Violation("tuning_settled", t.applied_s or t.created_s, t.subject, f"change {t.id} left {t.status}")
        for t in tuning
        if t.status in _PUSHING and (t.applied_s or t.created_s) < min(settled_s, end_s - wait_s)
    ]


def tuning_audited(tuning: Sequence[TuneRec], audited_actions: set[int]) -> list[Violation]:
    """Every tuning change that ran and ended (confirmed or rolled back) is in the audit under its action."""
    return [
        Violation(
            "tuning_audited",
            t.ended_s or t.created_s,
            t.subject,
            f"change {t.id} {t.status} but action {t.action_id} is not in the audit",
        )
        for t in tuning
        if t.status in _ENDED and t.action_id is not None and t.action_id not in audited_actions
    ]


def _same(knob: str, want: int, got: int) -> bool:
    """Thresholds as EOS keeps them: in kbytes (drivers/eos/render.py `_kbytes`), at least 1."""
    if knob.endswith("_bytes"):
        return max(1, round(want / 1000)) * 1000 == got
    return want == got


def tuning_running(tuning: Sequence[TuneRec], running: dict[str, dict[str, int]], at_s: float) -> list[Violation]:
    """After the settle, a port whose tuning changes all ended runs the ledger's last word on each knob: the value
    after its last confirmed change, or before its last rolled-back one (a restart, a failover or a twin restart lost
    nothing the ledger calls done). Ports with a change still open, and knobs not read, are not judged."""
    out = []
    for subject, got in sorted(running.items()):
        mine = sorted((t for t in tuning if t.subject == subject), key=lambda t: t.id)
        if any(t.status not in (*_ENDED, "refused") for t in mine):
            continue
        want: dict[str, tuple[int, TuneRec]] = {}
        for t in mine:
            if t.status in _ENDED:
                for knob, before, after in t.changes:
                    want[knob] = (after if t.status == "confirmed" else before, t)
        for knob, (value, t) in sorted(want.items()):
            if knob in got and not _same(knob, value, got[knob]):
                out.append(
                    Violation(
                        "tuning_running",
                        at_s,
                        subject,
                        f"{knob} runs {got[knob]}, the ledger says {value} (change {t.id} {t.status})",
                    )
                )
    return out
