"""Spans of time the invariants share: the stretches a condition held at every sample that saw its place
(`episodes`), when fabricd was in observe mode or could not act (`observe_spans`, `outage_spans`), and when a spell
has lasted its grace outside those (`spell_due`)."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Iterable, Sequence

from .history import Event, Sample


def episodes(
    samples: list[Sample],
    check: Callable[[Sample], Iterable[str]],
    sees: Callable[[Sample, str], bool] | None = None,
) -> dict[str, list[tuple[float, float]]]:
    """For each place, the stretches of time (first, last sample) during which `check` named it in every sample
    that saw it. A sample that does not see the place (its switch or the API silent; `sees`, by default a port's)
    neither ends nor extends one."""
    sees = sees or _sees
    open_: dict[str, tuple[float, float]] = {}
    out: dict[str, list[tuple[float, float]]] = defaultdict(list)
    for s in samples:
        named = set(check(s))
        for where in named:
            first, _ = open_.get(where, (s.t, s.t))
            open_[where] = (first, s.t)
        for where in list(open_):
            if where not in named and sees(s, where):
                out[where].append(open_.pop(where))
    for where, span in open_.items():
        out[where].append(span)
    return out


def _sees(s: Sample, where: str) -> bool:
    return where in s.ports and (not where.startswith("hold:") or s.held is not None)


def observe_spans(events: Sequence[Event]) -> list[tuple[float, float]]:
    """When the remediation mode was `observe` (an operator's `POST /api/v1/mode`), as (from, until) spans."""
    spans: list[tuple[float, float]] = []
    since: float | None = None
    for e in sorted((e for e in events if e.what == "operator" and e.kind == "mode"), key=lambda e: e.t):
        if e.where == "observe" and since is None:
            since = e.t
        elif e.where != "observe" and since is not None:
            spans.append((since, e.t))
            since = None
    if since is not None:
        spans.append((since, float("inf")))
    return spans


FAILOVER_S = 2.0  # after a kill or pause ends: a lease TTL (0.6 s by default) and a takeover pass


def outage_spans(events: Sequence[Event]) -> list[tuple[float, float]]:
    """When fabricd could not act on what it saw, merged: each process fault (a kill, a pause, a restart of the bus,
    the state or the twin; not a GC-length pause) from its start until its end (a restart's end includes the
    resync, RESYNC_S) plus FAILOVER_S."""
    return merged(
        (e.t, (e.end_s if e.end_s is not None else e.t) + FAILOVER_S)
        for e in events
        if e.what == "process" and e.kind in ("kill", "pause", "restart", "twin_restart")
    )


def merged(spans: Iterable[tuple[float, float]]) -> list[tuple[float, float]]:
    """Spans of time, sorted, the overlapping ones made one (what `spell_due` takes)."""
    merged: list[tuple[float, float]] = []
    for lo, hi in sorted(spans):
        if merged and lo <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(merged[-1][1], hi))
        else:
            merged.append((lo, hi))
    return merged


def spell_due(first: float, last: float, grace_s: float, outages: Sequence[tuple[float, float]]) -> float | None:
    """When a spell from `first` to `last` has lasted `grace_s` outside the outages (sorted, merged), or None."""
    t, left = first, grace_s
    for lo, hi in outages:
        if hi <= t:
            continue
        if lo >= last or lo - t >= left:
            break
        left -= max(0.0, lo - t)
        t = hi
    return t + left if t + left <= last else None
