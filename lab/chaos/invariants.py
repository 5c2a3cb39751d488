"""fabricd's promises as pure functions over what the checker observed (lab/chaos/history.py): each returns the
violations it finds, each naming the time, the place and what was seen. Nothing here reads fabricd's internals:
the switches' ports (eAPI, SSH), the documented API's holds, actions, findings and audit, the twin's fault log and
the chaos run's own events are the whole input."""

from __future__ import annotations

import itertools
from collections import defaultdict
from collections.abc import Iterable, Sequence

from .capacity import capacity, capacity_held
from .detection import detection
from .facts import FabricFacts
from .history import ActionRec, Event, FaultRec, Limits, Run, Sample
from .spans import episodes, observe_spans, outage_spans, spell_due
from .tuning_checks import tuning_audited, tuning_once, tuning_running, tuning_settled
from .violation import Violation


def marks_records(samples: list[Sample], grace_s: float, events: Sequence[Event] = ()) -> list[Violation]:
    """Every port carrying fabricd's mark is shut and held, every hold is a shut port, no up port carries the mark;
    each for longer than `grace_s` (the reconcile interval plus the verify timeout) is a violation. A hold fabricd
    declares to re-apply (health's `to_reapply`: up, its guard refusing to take it down again) is up and marked by
    design (issue 42); `hold_released` watches that it is not given up. While the mode is `observe` fabricd touches no
    switch (docs/operations.md), so a mark it would remove from an up port (a hold released then) stays until the
    mode acts again: an up port's mark counts from then on (seed 3133: an operator's `no shutdown` on a held port,
    the mode switched to observe for 15 s). Time while fabricd could not act (`outage_spans`: a restart of the bus,
    the state or the twin, a kill or pause of an instance or a collector, and the resync after) does not count
    towards the grace (seed 3135: an enable verifying across a bus restart held its port up for 11 s)."""
    observing = observe_spans(events)
    outages = outage_spans(events)

    def mark_up(s: Sample) -> Iterable[str]:
        if any(a <= s.t < b for a, b in observing):
            return ()
        return (p for p, o in s.ports.items() if o.marked and o.admin_up and p not in s.to_reapply)

    def mark_unheld(s: Sample) -> Iterable[str]:
        if s.held is None:
            return ()
        return (p for p, o in s.ports.items() if o.marked and not o.admin_up and p not in s.held)

    def hold_up(s: Sample) -> Iterable[str]:
        if s.held is None:
            return ()
        return (p for p in s.held if p in s.ports and s.ports[p].admin_up and p not in s.to_reapply)

    out = []
    for what, check in (
        ("a port that is up carries fabricd's down mark", mark_up),
        ("a shut port carries fabricd's mark but fabricd holds no record of it", mark_unheld),
        ("fabricd holds a port that is up", hold_up),
    ):
        for where, spans in episodes(samples, check).items():
            for first, last in spans:
                due = spell_due(first, last, grace_s, outages)
                if due is not None:
                    out.append(Violation("marks_records", due, where, f"{what} for {last - first:.1f} s"))
    return sorted(out, key=lambda v: v.t)


def hold_released(samples: list[Sample], events: list[Event], grace_s: float) -> list[Violation]:
    """No hold whose ticket is open is given up without a person or a resolve (issue 42): a port fabricd held under
    an open ticket that is no longer held, while that ticket stays open, for longer than `grace_s` (a re-apply holds
    it again within it), with no repair of that port (a resolve) since the hold was last seen."""
    last: dict[str, tuple[float, int]] = {}  # port -> (when last seen held, its ticket) while that ticket was open
    gone: dict[str, tuple[float, float, int]] = {}  # port -> (first, last sample without the hold, ticket)
    out: list[Violation] = []

    def repaired(port: str, since: float) -> bool:
        return any(e.what == "repair" and e.where == port and e.t >= since - 1.0 for e in events)

    for smp in samples:
        if smp.held is None or smp.open_tickets is None:
            continue
        for port, h in smp.held.items():
            if h.ticket_id is not None and h.ticket_id in smp.open_tickets:
                last[port] = (smp.t, h.ticket_id)
                gone.pop(port, None)
        for port, (seen, ticket) in list(last.items()):
            if port in smp.held:
                continue
            if ticket not in smp.open_tickets or repaired(port, seen):
                last.pop(port)  # resolved (or being resolved): the hold goes with the repair
                gone.pop(port, None)
                continue
            first, _, _ = gone.get(port, (smp.t, smp.t, ticket))
            gone[port] = (first, smp.t, ticket)
            if smp.t - first >= grace_s:
                out.append(Violation("hold_released", first + grace_s, port,
                                     f"held under open ticket {ticket}, no longer held for {smp.t - first:.1f} s "
                                     "though the ticket is open and nobody resolved or released it"))  # fmt: skip
                last.pop(port)
                gone.pop(port)
    return out


def _down_spell_start(samples: list[Sample], port: str, before: float) -> tuple[float, bool] | None:
    """When the port's last admin-down spell before `before` began, and whether it carried fabricd's mark."""
    start, marked = None, False
    for s in samples:
        if s.t > before:
            break
        o = s.ports.get(port)
        if o is None:
            continue
        if o.admin_up:
            start, marked = None, False
        else:
            start = s.t if start is None else start
            marked = marked or o.marked
    return None if start is None else (start, marked)


def _operator_shut(events: list[Event], port: str, around: float) -> bool:
    return any(e.kind == "shut_by_hand" and e.where == port and around - 3 <= e.t <= around + 1.5 for e in events)


def foreign_enable(samples: list[Sample], actions: list[ActionRec], events: list[Event]) -> list[Violation]:
    """fabricd enables only ports it shut: the spell of shutdown an enable ends began with fabricd's mark, not with
    an operator's `shutdown` (the chaos run's own log says which ports it shut by hand, and when)."""
    out = []
    for a in actions:
        if a.op != "enable" or a.status != "done":
            continue
        spell = _down_spell_start(samples, a.port, a.created_s)
        if spell is None:
            continue
        start, marked = spell
        if _operator_shut(events, a.port, start):
            out.append(
                Violation(
                    "foreign_enable",
                    a.created_s,
                    a.port,
                    f"action {a.id} enabled a port an operator shut by hand at +{start:.1f}",
                )
            )
        elif not marked:
            out.append(
                Violation(
                    "foreign_enable",
                    a.created_s,
                    a.port,
                    f"action {a.id} enabled a port that was shut without fabricd's mark",
                )
            )
    return out


def exactly_once(samples: list[Sample], actions: list[ActionRec]) -> list[Violation]:
    """No incident gets two disables while its port stays down between them (a re-apply after the port came back
    up is a new act, not a repeat), and no action key is used twice."""
    out = []
    seen: dict[str, int] = {}
    for a in actions:
        if a.key is not None:
            if a.key in seen:
                out.append(
                    Violation(
                        "exactly_once", a.created_s, a.port, f"actions {seen[a.key]} and {a.id} share the key {a.key}"
                    )
                )
            seen[a.key] = a.id
    by_incident: dict[tuple[str, int | None], list[ActionRec]] = defaultdict(list)
    for a in sorted(actions, key=lambda x: x.created_s):
        if a.op == "disable" and a.status in ("done", "running") and a.finding_id is not None:
            by_incident[(a.port, a.finding_id)].append(a)
    for (port, finding), acts in by_incident.items():
        for first, second in itertools.pairwise(acts):
            between = [s for s in samples if first.updated_s < s.t < second.created_s]
            came_up = any(port not in s.ports or s.ports[port].admin_up for s in between)
            if not came_up:
                out.append(
                    Violation(
                        "exactly_once",
                        second.created_s,
                        port,
                        f"finding {finding} got a second "
                        f"disable (actions {first.id} and {second.id}) while its port stayed down",
                    )
                )
    return out


def _adopted(samples: list[Sample], a: ActionRec) -> bool:
    """A disable recorded for a port that was already shut with fabricd's mark in the sample before it: fabricd
    adopted what the switch showed (docs/operations.md, reconciliation), it shut nothing (seed 4932, +294 s: a twin
    restart booted a port from a saved config holding fabricd's old shutdown; its adoption was counted an 11th disable
    within the hour)."""
    before = [s for s in samples if s.t < a.created_s]
    o = before[-1].ports.get(a.port) if before else None
    return o is not None and o.marked and not o.admin_up


def budgets(samples: list[Sample], actions: list[ActionRec], facts: FabricFacts, limits: Limits) -> list[Violation]:
    """The ports fabricd holds down (its mark on a shut port) never pass the per-switch, per-rail and fabric
    budgets; its disables never pass the hourly rate."""

    def over(s: Sample) -> Iterable[str]:
        held = [p for p, o in s.ports.items() if o.marked and not o.admin_up]
        per_switch: dict[str, int] = defaultdict(int)
        per_rail: dict[int, int] = defaultdict(int)
        for p in held:
            dev = p.split(":", 1)[0]
            per_switch[dev] += 1
            if (rail := facts.rail.get(dev)) is not None:
                per_rail[rail] += 1
        out = [
            f"switch {d} ({n} > {limits.max_down_per_switch})"
            for d, n in per_switch.items()
            if n > limits.max_down_per_switch
        ]
        out += [
            f"rail {r} ({n} > {limits.max_down_per_rail})" for r, n in per_rail.items() if n > limits.max_down_per_rail
        ]
        if len(held) > limits.max_down_fabric:
            out.append(f"fabric ({len(held)} > {limits.max_down_fabric})")
        return out

    result = []
    for where, spans in episodes(samples, over).items():
        for first, last in spans:
            result.append(
                Violation("budgets", first, where, f"ports held down past the budget for {last - first:.1f} s")
            )
    disables = sorted(
        a.created_s
        for a in actions
        if a.op == "disable" and a.status in ("done", "running") and not _adopted(samples, a)
    )
    for i, t in enumerate(disables):
        inside = [x for x in disables[: i + 1] if x > t - 3600]
        if len(inside) == limits.max_actions_per_hour + 1:
            result.append(
                Violation(
                    "budgets", t, "rate", f"{len(inside)} disables within an hour (limit {limits.max_actions_per_hour})"
                )
            )
    return sorted(result, key=lambda v: v.t)


def wrong_neighbour(
    samples: list[Sample],
    facts: FabricFacts,
    events: list[Event],
    settle_s: float = 3.0,
    window_s: float = 10.0,
    actions: Sequence[ActionRec] = (),
    faults: Sequence[FaultRec] = (),
) -> list[Violation]:
    """A port fabricd brings back (its marked shutdown ends) never runs facing a neighbour other than the
    blueprint's: two samples in a row up, LLDP naming another neighbour, `settle_s` to `window_s` after the enable
    (LLDP learns a new neighbour within about a second of link up; a cable swapped later is not the enable's: nor
    is a `miscable` of the schedule begun after the sample that saw the port up, seed 4931 +301 s, 2.3 s after). An
    enable that fabricd rolled back (its check of the cable failed) brought nothing back: the port was up only under
    test (seed 2718: fabricd killed with -9 during that test, the port stayed up on the wrong cable until the resumed
    enable rolled it back)."""
    rolled = [(a.port, a.created_s) for a in actions if a.op == "enable" and a.status == "rolled_back"]
    out = []
    prev: dict[str, bool] = {}
    enabled_at: dict[str, float] = {}
    streak: dict[str, int] = defaultdict(int)
    for s in samples:
        for p, o in s.ports.items():
            was_held = prev.get(p, False)
            if (
                was_held
                and o.admin_up
                and not any(e.kind == "enable_held" and e.where == p and abs(e.t - s.t) < 3 for e in events)
                and not any(port == p and -2 <= s.t - t <= settle_s + 2 for port, t in rolled)
            ):
                enabled_at[p] = s.t
            prev[p] = o.marked and not o.admin_up
            t0 = enabled_at.get(p)
            if t0 is None or not t0 + settle_s <= s.t <= t0 + window_s:
                continue
            later = any(f.kind == "miscable" and p in f.ports and f.start_s > t0 for f in faults)
            wrong = not later and o.admin_up and o.oper_up and o.neighbor not in (None, facts.peer.get(p))
            streak[p] = streak[p] + 1 if wrong else 0
            if streak[p] == 2:
                out.append(
                    Violation(
                        "wrong_neighbour",
                        s.t,
                        p,
                        f"brought back by fabricd {s.t - t0:.1f} s before, faces {o.neighbor}, "
                        f"not {facts.peer.get(p)} as the blueprint cables it",
                    )
                )
                enabled_at.pop(p)
    return out


def unsettled(s: Sample, peer: dict[str, str]) -> list[tuple[str, str]]:
    """The ports of a sample that are neither up (unmarked) nor held with an open ticket (shut, marked, held), nor the
    other end of such a hold (up by hand, down by its link: seed 4902, +661 s, the spine's end of a hold whose
    settle resolve fabricd refused with 409 while its miscabled finding was still open), each with why."""
    tickets = s.open_tickets or frozenset()

    def kept(p: str) -> bool:
        o, h = s.ports.get(p), (s.held or {}).get(p)
        return o is not None and not o.admin_up and o.marked and h is not None and h.ticket_id in tickets

    bad = []
    for p, o in s.ports.items():
        if o.admin_up and o.oper_up and not o.marked:
            continue
        if kept(p) or (o.admin_up and not o.marked and kept(peer.get(p, ""))):
            continue
        held = s.held is not None and p in s.held
        ticket = held and s.held is not None and s.held[p].ticket_id in tickets
        bad.append(
            (
                p,
                f"admin {'up' if o.admin_up else 'down'}, oper {'up' if o.oper_up else 'down'}, "
                f"{'marked' if o.marked else 'no mark'}, {'held' if held else 'not held'}"
                f"{'' if ticket or not held else ', no open ticket'}",
            )
        )
    return bad


def convergence(run: Run, peer: dict[str, str] | None = None, window_s: float = 60.0) -> list[Violation]:
    """Once the schedule is over, its faults cleared and every ticket resolved, within `window_s` every port is up
    or held with an open ticket (shut, marked, held) or the other end of such a hold (`unsettled`), no hold is
    stale, no mark is stale; the audit log has no gap and names every action that ran."""

    def wrong(s: Sample) -> list[tuple[str, str]]:
        return unsettled(s, peer or {})

    after = [s for s in run.samples if s.t >= run.settled_s]
    out: list[Violation] = []
    if not after:
        return [Violation("convergence", run.settled_s, "fabric", "no sample after the schedule ended")]
    last = after[-1]
    ok = [s for s in after if s.t <= run.settled_s + window_s and not wrong(s) and s.held is not None]
    if not ok:
        for p, why in wrong(last):
            out.append(
                Violation("convergence", last.t, p, f"not settled {last.t - run.settled_s:.0f} s after the end: {why}")
            )
        if last.held is None:
            out.append(Violation("convergence", last.t, "api", "fabricd's API did not answer at the end"))
    ids = sorted(run.audit_ids)
    missing = sorted(set(range(ids[0], ids[-1] + 1)) - set(ids)) if ids else []
    if missing:
        out.append(Violation("convergence", last.t, "audit", f"audit ids missing: {missing[:10]}"))
    for a in run.actions:
        if a.status in ("done", "failed", "rolled_back") and a.id not in run.audited_actions:
            out.append(
                Violation("convergence", a.created_s, a.port, f"action {a.id} ({a.op}, {a.status}) has no audit entry")
            )
    return out


# --- detection: recall and precision per fault kind against the twin's fault log --------------------------------


# The finding kinds each fault should raise, and the delay docs/detectors.md documents for them ("measured delay"),
# with slack for a fabric under chaos: link_flap on the crossing event (the train needs several flaps to pass the
# suppress threshold), pfc_* on the watchdog's declaration, link_corruption "seconds at 1e-6", bgp_session 3 s + an
# interval, miscabled 1 s after the last end + a pass. link_down, reboot and gnmi_drop are claimed by no detector.
def check(run: Run, facts: FabricFacts, limits: Limits, grace_s: float) -> list[Violation]:
    """Every invariant over one run, in time order."""
    out = [
        *capacity(run.samples, facts, limits, run.faults, run.actions),
        *capacity_held(run.samples, facts, limits, run.faults, run.events, grace_s),
        *marks_records(run.samples, grace_s, run.events),
        *hold_released(run.samples, run.events, grace_s),
        *foreign_enable(run.samples, run.actions, run.events),
        *exactly_once(run.samples, run.actions),
        *budgets(run.samples, run.actions, facts, limits),
        *wrong_neighbour(run.samples, facts, run.events, actions=run.actions, faults=run.faults),
        *detection(run, facts)[2],
        *convergence(run, facts.peer),
        *tuning_once(run.tuning),
        *tuning_settled(run.tuning, run.settled_s, run.samples[-1].t if run.samples else 0.0, limits.tuning_revert_s),
        *tuning_audited(run.tuning, run.audited_actions),
        *tuning_running(run.tuning, run.running, run.settled_s),
    ]
    return sorted(out, key=lambda v: (v.t, v.invariant, v.where))
