"""fabricd's promises as pure functions over what the checker observed (lab/chaos/history.py): each returns the
violations it finds, each naming the time, the place and what was seen. Nothing here reads fabricd's internals:
the switches' ports (eAPI, SSH), the documented API's holds, actions, findings and audit, the twin's fault log and
the chaos run's own events are the whole input."""

from __future__ import annotations

import contextlib
import itertools
import math
from collections import defaultdict
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

from .facts import FabricFacts
from .history import ActionRec, Event, FaultRec, FindingRec, Limits, Run, Sample, TuneRec

INVARIANTS = (
    "capacity",
    "capacity_held",
    "marks_records",
    "hold_released",
    "foreign_enable",
    "exactly_once",
    "budgets",
    "wrong_neighbour",
    "detection",
    "convergence",
    "tuning_once",
    "tuning_settled",
    "tuning_audited",
    "tuning_running",
)


@dataclass(frozen=True)
class Violation:
    invariant: str
    t: float
    where: str
    detail: str

    def line(self, start_s: float, seed: int) -> str:
        return f"{self.invariant} at +{self.t - start_s:.1f}s (seed {seed}) {self.where}: {self.detail}"


def _episodes(
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
        for where, spans in _episodes(samples, check).items():
            for first, last in spans:
                due = _due(first, last, grace_s, outages)
                if due is not None:
                    out.append(Violation("marks_records", due, where, f"{what} for {last - first:.1f} s"))
    return sorted(out, key=lambda v: v.t)


FAILOVER_S = 2.0  # after a kill or pause ends: a lease TTL (0.6 s by default) and a takeover pass


def outage_spans(events: Sequence[Event]) -> list[tuple[float, float]]:
    """When fabricd could not act on what it saw, merged: each process fault (a kill, a pause, a restart of the bus,
    the state or the twin; not a GC-length pause) from its start until its end (a restart's end includes the
    resync, RESYNC_S) plus FAILOVER_S."""
    return _merged(
        (e.t, (e.end_s if e.end_s is not None else e.t) + FAILOVER_S)
        for e in events
        if e.what == "process" and e.kind in ("kill", "pause", "restart", "twin_restart")
    )


def _merged(spans: Iterable[tuple[float, float]]) -> list[tuple[float, float]]:
    """Spans of time, sorted, the overlapping ones made one (what `_due` takes)."""
    merged: list[tuple[float, float]] = []
    for lo, hi in sorted(spans):
        if merged and lo <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(merged[-1][1], hi))
        else:
            merged.append((lo, hi))
    return merged


def _due(first: float, last: float, grace_s: float, outages: Sequence[tuple[float, float]]) -> float | None:
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
    for where, spans in _episodes(samples, over).items():
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


def _lost(s: Sample, facts: FabricFacts, port: str) -> bool:
    """A link is lost to capacity when either end is down or its BGP session is down (unseen ends count up)."""
    for p in (port, facts.peer.get(port, "")):
        o = s.ports.get(p)
        if o is not None and (not o.admin_up or not o.oper_up or o.bgp_up is False):
            return True
    return False


# How recent a loss fabricd's guard cannot be judged to have known when it decided: the twin sends an oper-status
# change as it happens but BGP's state by comparing it once a second (lab/gnmi_server.py CHANGE_POLL_NS), and fabricd
# acts on what its last pass read (detectors.tick_s 0.5 s in the runs). Seed 4902, +50 s: a floor take 37 ms after
# the fourth down phase of a flap train on another uplink began; the sample after read 2 of 4.
TELEMETRY_LATENCY_S = 1.0


def _train_state(f: FaultRec, t: float) -> tuple[bool, float] | None:
    """A flap train's state at `t` from its schedule (lab/faults.py: down `down_s`, default half, each `period_s`
    from its start, `count` times): (down, when that phase began), or None when it is not running at `t`."""
    if f.kind not in TRAINS or not fault_active(f, t):
        return None
    try:
        period = float(f.params["period_s"])
        down_s = float(f.params.get("down_s", period / 2))
    except (KeyError, TypeError, ValueError):
        return None
    if period <= 0:
        return None
    began = f.start_s + math.floor((t - f.start_s) / period) * period
    return (t - began < down_s, began if t - began < down_s else began + down_s)


def _known_lost(u: str, facts: FabricFacts, faults: Sequence[FaultRec], decided: float) -> bool:
    """Whether fabricd could know at `decided` that uplink `u`, lost in the samples around its shutdown, was lost:
    not when the only fault on its link then is a flap train whose state at `decided` is up, or down for less than
    TELEMETRY_LATENCY_S (the checker's samples, a second apart, may catch a later or just-begun down phase)."""
    ends = {u, facts.peer.get(u, "")}
    on = [f for f in faults if ends & set(f.ports) and fault_active(f, decided)]
    states = [_train_state(f, decided) for f in on]
    if not on or any(st is None for st in states):
        return True  # no train, or another fault on the link: the samples' word stands
    return any(down and decided - began >= TELEMETRY_LATENCY_S for down, began in (st for st in states if st))


def _decided(actions: Sequence[ActionRec], link: set[str], lo: float, hi: float) -> float:
    """When fabricd decided the shutdown the sample at `hi` shows: its disable's creation on either end of the link
    since the sample before (`lo`, less a pass), else `hi`."""
    ts = [a.created_s for a in actions if a.op == "disable" and a.port in link and lo - 1 <= a.created_s <= hi]
    return max(ts) if ts else hi


def capacity(
    samples: list[Sample],
    facts: FabricFacts,
    limits: Limits,
    faults: Sequence[FaultRec] = (),
    actions: Sequence[ActionRec] = (),
) -> list[Violation]:
    """When fabricd shuts a port (its mark appears on a shut port), no switch whose uplink that port's link is may
    be left below min_uplink_fraction of its uplink capacity, counting links down or BGP-down as lost, as far as
    fabricd could know when it decided (lost in the sample before too; a flap train's phase at the decision from
    the schedule: `_known_lost`)."""
    out = []
    prev: dict[str, bool] = {}
    before: Sample | None = None
    for s in samples:
        for p, o in s.ports.items():
            shut = o.marked and not o.admin_up
            # a new shutdown: not a hold coming back (an enable rolled back restores what fabricd held already)
            if shut and prev.get(p) is False and not (before is not None and p in (before.held or {})):
                for sw in {p.split(":", 1)[0], facts.peer.get(p, ":").split(":", 1)[0]}:
                    ups = facts.uplinks_of.get(sw, ())
                    if p not in ups and facts.peer.get(p) not in ups:
                        continue
                    total = sum(facts.speed[u] for u in ups)
                    link = {p, facts.peer.get(p)}
                    # what fabricd could know when it decided: an uplink lost since the sample before (seed 2718:
                    # a BGP flap 20 ms after the disable) is not counted against its decision
                    decided = _decided(actions, {x for x in link if x}, before.t if before else s.t, s.t)
                    left = sum(
                        facts.speed[u]
                        for u in ups
                        if not (
                            _lost(s, facts, u)
                            and (
                                u in link
                                or before is None
                                or (_lost(before, facts, u) and _known_lost(u, facts, faults, decided))
                            )
                        )
                    )
                    if total and left / total < limits.min_uplink_fraction:
                        out.append(
                            Violation(
                                "capacity",
                                s.t,
                                sw,
                                f"fabricd shut {p}: {sw} keeps {left:g} of "
                                f"{total:g} Gb/s uplink ({left / total:.0%} < "
                                f"{limits.min_uplink_fraction:.0%})",
                            )
                        )
            prev[p] = shut
        before = s
    return out


# --- capacity_held: fabricd's own holds never keep a switch under its floor (issue 49) ----------------------------

MAINTENANCE = "maintenance"  # the kind a drain's shut writes in fabricd's mark (docs/operations.md, maintenance)
TRAINS = ("link_flap", "bgp_flap")  # faults whose flaps are over after `count` periods, cleared or not
# What fabricd promises to give back (docs/operations.md, "Capacity floor", "Never returned"), with its defaults:
# a port whose flap train ended less than `remediation.return_quiet_s` ago is still flapping ...
RETURN_QUIET_S = 60.0
# ... and a link measured corrupting above `remediation.max_return_loss` stays down: a shut port carries no frames,
# so nothing shows fabricd its corruption ended (seed 4902, +288 s: held at 3.6e-05, cleared by the twin 0.5 s before
# the hold, judged "over" 10 s after a second uplink went down)
MAX_RETURN_LOSS = 1e-5
CORRUPTION_WINDOW_S = 300.0  # link_corruption's window (docs/detectors.md): errors this old still made the finding


@dataclass(frozen=True)
class Shortfall:
    """A switch under its capacity floor in one sample, with fabricd holding ports whose return restores it."""

    switch: str
    kept: int  # uplinks not lost, of `total`
    total: int
    left_gbps: float
    total_gbps: float
    missing: tuple[tuple[str, str], ...]  # (uplink, why: drained | held at PORT | shut | down | BGP down)
    returnable: tuple[str, ...]  # the fewest held ports whose return restores the floor


def fault_end(f: FaultRec) -> float:
    """When the fault is over: its clear; a flap train's when its flaps are (`count` periods from its start: the twin
    clears it later, `lab/faults.py`); never when neither came."""
    end = f.cleared_s if f.cleared_s is not None else float("inf")
    if f.kind in TRAINS:
        with contextlib.suppress(KeyError, TypeError, ValueError):
            end = min(end, f.start_s + float(f.params["count"]) * float(f.params["period_s"]))
    return end


def fault_active(f: FaultRec, t: float) -> bool:
    """Whether the fault is on at `t`: begun and not over (`fault_end`)."""
    return f.start_s <= t < fault_end(f)


def _why(s: Sample, ends: tuple[str, ...]) -> str:
    """Why a lost uplink is lost, as the guard counts it: a drain, fabricd's hold, a shutdown, the link, BGP."""
    seen = {p: s.ports[p] for p in ends if p in s.ports}
    if any(not o.admin_up and o.mark_kind == MAINTENANCE for o in seen.values()):
        return "drained"
    held = [p for p, o in seen.items() if not o.admin_up and s.held is not None and p in s.held]
    if held:
        return f"held at {held[0]}"
    if any(not o.admin_up for o in seen.values()):
        return "shut"
    if any(not o.oper_up for o in seen.values()):
        return "down"
    return "BGP down"


def still_faulty(f: FaultRec, t: float, held_since: float) -> bool:
    """Whether fabricd, by its documented rules, still counts the fault faulty at `t` for a hold begun at
    `held_since`: on (`fault_active`); a link flap train until RETURN_QUIET_S after its flaps; a corruption above
    MAX_RETURN_LOSS for the rest of the hold when its errors were in the detector's window as the hold began."""
    if fault_active(f, t):
        return True
    if f.kind == "link_flap":
        return f.start_s <= t < fault_end(f) + RETURN_QUIET_S
    if f.kind == "link_corruption":
        rate = f.params.get("rate")
        above = isinstance(rate, int | float) and rate > MAX_RETURN_LOSS
        return above and f.start_s <= t and (f.cleared_s is None or f.cleared_s >= held_since - CORRUPTION_WINDOW_S)
    return False


def _returnable(s: Sample, facts: FabricFacts, faults: Sequence[FaultRec], port: str) -> bool:
    """fabricd's hold on `port` (shut) could be given back: its link's other end is not shut, no fault of the
    schedule on the link is still faulty as fabricd counts it (`still_faulty`), and no miscable was on it since the
    hold began (or in the AFTERMATH_S before: an open `miscabled` finding outlives the cable put right by a pass).
    fabricd never returns a port facing the wrong cable (docs/operations.md, "Capacity floor"): a repair that put
    the wrong cable back pins the hold until a person resolves its ticket again, since a shut port's LLDP cannot
    tell that the cable was put right (seed 4931: leaf-g1-r1:Ethernet5/1, its cable put right unseen at +73.9 s)."""
    ends = {port, facts.peer.get(port, "")}
    other = s.ports.get(facts.peer.get(port, ""))
    if other is not None and not other.admin_up:
        return False
    since = s.held[port].since_s if s.held is not None and port in s.held else s.t
    for f in faults:
        if not ends & set(f.ports):
            continue
        if still_faulty(f, s.t, since):
            return False
        cleared = f.cleared_s if f.cleared_s is not None else float("inf")
        if f.kind == "miscable" and f.start_s <= s.t and cleared + AFTERMATH_S > since:
            return False
    return True


def held_shortfalls(s: Sample, facts: FabricFacts, limits: Limits, faults: Sequence[FaultRec]) -> list[Shortfall]:
    """Every switch under `min_uplink_fraction` of its uplink capacity in this sample (links down, BGP-down, drained
    or held count lost, either end, as the guard counts them: fabricd/service/guard.py `_capacity`) for which fabricd
    holds ports, either end of its missing uplinks, that could be given back (`_returnable`) and whose return, the
    fastest links first, restores the floor: those ports, the fewest needed."""
    if s.held is None:
        return []
    out = []
    for sw, ups in facts.uplinks_of.items():
        total = sum(facts.speed[u] for u in ups)
        lost = [u for u in ups if _lost(s, facts, u)]
        left = total - sum(facts.speed[u] for u in lost)
        if not total or left / total >= limits.min_uplink_fraction:
            continue
        missing = tuple((u, _why(s, (u, facts.peer.get(u, "")))) for u in lost)
        candidates = sorted(
            ((u, why.removeprefix("held at ")) for u, why in missing if why.startswith("held at ")),
            key=lambda c: (-facts.speed[c[0]], c[1]),
        )
        back: list[str] = []
        restored = left
        for u, port in candidates:
            if restored / total >= limits.min_uplink_fraction:
                break
            if port not in s.to_reapply and _returnable(s, facts, faults, port):
                back.append(port)
                restored += facts.speed[u]
        if back and restored / total >= limits.min_uplink_fraction:
            out.append(Shortfall(sw, len(ups) - len(lost), len(ups), left, total, missing, tuple(back)))
    return out


def capacity_held(
    samples: list[Sample],
    facts: FabricFacts,
    limits: Limits,
    faults: Sequence[FaultRec],
    events: Sequence[Event],
    grace_s: float,
) -> list[Violation]:
    """No switch stays under `min_uplink_fraction` of its uplink capacity for longer than `grace_s` while fabricd
    holds a port of one of its missing uplinks whose fault is over and whose return restores the floor
    (`held_shortfalls`; issue 49: a flap train on leaf-g0-r1:Ethernet6/1 ended, fabricd held it, 12 s later
    Ethernet5/1's BGP session went down, and the leaf stayed at 2 of 4 uplinks to the end of the run). Time while
    fabricd could not act (`outage_spans`) or was in `observe` mode does not count towards the grace. A sample
    without fabricd's holds (the API silent), or with the switch or one of its uplinks' far ends silent, neither
    ends nor extends a spell."""
    excused = _merged([*outage_spans(events), *observe_spans(events)])
    found: dict[tuple[str, float], Shortfall] = {}

    def short(s: Sample) -> Iterable[str]:
        for x in held_shortfalls(s, facts, limits, faults):
            found[(x.switch, s.t)] = x
            yield x.switch

    def sees(s: Sample, sw: str) -> bool:
        far = {facts.peer.get(u, ":").split(":", 1)[0] for u in facts.uplinks_of.get(sw, ())}
        return s.held is not None and not ({sw} | far) & s.unreachable

    out = []
    for sw, spans in _episodes(samples, short, sees).items():
        for first, last in spans:
            due = _due(first, last, grace_s, excused)
            if due is None:
                continue
            x = next(found[(sw, s.t)] for s in samples if s.t >= due and (sw, s.t) in found)
            missing = ", ".join(f"{u} ({why})" for u, why in x.missing)
            out.append(Violation("capacity_held", due, sw,
                                 f"{x.kept} of {x.total} uplinks ({x.left_gbps:g} of {x.total_gbps:g} Gb/s, "
                                 f"{x.left_gbps / x.total_gbps:.0%} < {limits.min_uplink_fraction:.0%}) for "
                                 f"{last - first:.1f} s while fabricd holds {', '.join(x.returnable)}, its fault "
                                 f"over, whose return restores the floor; missing: {missing}"))  # fmt: skip
    return sorted(out, key=lambda v: v.t)


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
FINDS = {
    "link_flap": ("link_flap",),
    "pfc_storm": ("pfc_storm",),
    "pfc_deadlock": ("pfc_deadlock",),
    "link_corruption": ("link_corruption",),
    "optics": ("link_corruption", "predicted_failure"),
    "bgp_down": ("bgp_session",),
    "bgp_flap": ("bgp_session",),
    "miscable": ("miscabled",),
}
DEADLINE_S = {
    "link_flap": 12.0,
    "pfc_storm": 3.0,
    "pfc_deadlock": 3.0,
    "link_corruption": 20.0,
    "optics": 20.0,
    "bgp_down": 8.0,
    "bgp_flap": 8.0,
    "miscable": 6.0,
}
AFTERMATH_S = 30.0  # a finding up to this long after its cause cleared is still explained by it
# ... longer for a detector that judges a window: link_corruption sums errors over 300 s (docs/detectors.md), so a
# link that corrupted stays (or, seen by an instance that takes over or restarts, becomes) a finding that long after
AFTERMATH_BY_KIND = {"link_corruption": 300.0 + AFTERMATH_S}
# docs/detectors.md, pfc_storm and pfc_deadlock, "No decision": not for 5 s after an oper-status change of the port
OPER_QUIET_S = 5.0
LINK_CHANGES = ("link_flap", "link_down", "miscable")  # faults that change a port's oper-status


@dataclass(frozen=True)
class KindScore:
    kind: str
    injected: int
    judged: int  # lasted their deadline with nothing hiding them (no restart, pause, reboot or drop of their switch)
    found: int

    @property
    def recall(self) -> float | None:
        return self.found / self.judged if self.judged else None


@dataclass(frozen=True)
class FindingScore:
    kind: str
    findings: int
    explained: int

    @property
    def precision(self) -> float | None:
        return self.explained / self.findings if self.findings else None


def _footprint(f: FaultRec, facts: FabricFacts) -> tuple[set[str], set[str]]:
    ports = set(f.ports) | {facts.peer[p] for p in f.ports if p in facts.peer}
    devices = set(f.devices) | {p.split(":", 1)[0] for p in ports}
    if f.kind in ("reboot", "gnmi_drop"):
        for d in f.devices:
            ports |= {p for p in facts.peer if p.startswith(d + ":")} | {
                facts.peer[p] for p in facts.peer if p.startswith(d + ":")
            }
        devices |= {p.split(":", 1)[0] for p in ports}
    return ports, devices


# Findings about a group of ports (an ECMP group's balance) are caused by any of the group's links, named or not:
# a DR's campus uplink going down unbalances the others, so they are placed by their switch, not their ports.
GROUP_KINDS = ("dci_imbalance",)


def _at(finding: FindingRec, ports: set[str], devices: set[str]) -> bool:
    if finding.ports and finding.kind not in GROUP_KINDS:
        return bool(set(finding.ports) & ports)
    return bool(set(finding.devices or (finding.device,)) & devices)


def _hidden(f: FaultRec, run: Run, facts: FabricFacts, deadline: float) -> bool:
    """Something that keeps any detector from seeing the fault in time: fabricd or the twin restarted or paused,
    its switch rebooting or not streaming, its port already shut (by fabricd or by hand)."""
    lo, hi = f.start_s - 1, f.start_s + deadline
    for e in run.events:
        if e.what == "process" and e.t <= hi and (e.end_s or e.t + 1) >= lo and e.kind != "gc_pause":
            return True
    _, devices = _footprint(f, facts)
    for g in run.faults:
        if (
            g.kind in ("reboot", "gnmi_drop")
            and set(g.devices) & devices
            and g.start_s <= hi
            and (g.cleared_s is None or g.cleared_s + 5 >= lo)
        ):
            return True
    # link_corruption (docs/detectors.md): a down port is not counted, nor 10 s after an oper-status change
    if f.kind in ("link_corruption", "optics"):
        ports, _ = _footprint(f, facts)
        for g in run.faults:
            ends = set(g.ports) | {facts.peer[p] for p in g.ports if p in facts.peer}
            if g.kind in LINK_CHANGES and ends & ports and g.start_s <= hi and (g.cleared_s or hi) + 10 >= lo:
                return True
    if f.kind.startswith(("bgp_", "pfc_")) and _link_changed(f, run, facts, lo, hi):
        return True
    ports, _ = _footprint(f, facts)
    for e in run.events:  # an operator shut its port while the detector had it to find: nothing left to see
        if e.what == "operator" and e.kind == "shut_by_hand" and e.where in ports and lo <= e.t <= hi:
            return True
    # its port (or the switch's end of a NIC's link: a storm's NIC is no switch port) shut when it began
    before = [s for s in run.samples if f.start_s - 2 <= s.t <= f.start_s + 0.5]
    return any(p in s.ports and not s.ports[p].admin_up for s in before[-1:] for p in ports)


HAND_CHANGES = ("shut_by_hand", "no_shut_by_hand", "enable_held")  # an operator's shut or no shut of a port


def _link_changed(f: FaultRec, run: Run, facts: FabricFacts, lo: float, hi: float) -> bool:
    """A link of the fault's went up or down between `lo` - OPER_QUIET_S and `hi`: a fault that does it, or an
    operator's shut or no shut. pfc_storm and pfc_deadlock decide nothing for OPER_QUIET_S after a port's
    oper-status changes, and bgp_session lays a session's drops to its link going up or down (docs/detectors.md;
    seed 3136: a BGP flap train begun while its link was down; seed 2719: a storm 1.2 s after its port was
    enabled by hand)."""
    ports, _ = _footprint(f, facts)
    for g in run.faults:
        ends = set(g.ports) | {facts.peer[p] for p in g.ports if p in facts.peer}
        changes = g.kind in LINK_CHANGES and ends & ports
        if changes and g.start_s <= hi and (g.cleared_s is None or g.cleared_s + OPER_QUIET_S >= lo):
            return True
    for e in run.events:
        ends = {e.where} | ({facts.peer[e.where]} if e.where in facts.peer else set())
        if e.what == "operator" and e.kind in HAND_CHANGES and ends & ports and lo - OPER_QUIET_S <= e.t <= hi:
            return True
    return False


def detection(run: Run, facts: FabricFacts) -> tuple[list[KindScore], list[FindingScore], list[Violation]]:
    out: list[Violation] = []
    scores = []
    for kind in sorted({f.kind for f in run.faults}):
        faults = [f for f in run.faults if f.kind == kind]
        if kind not in FINDS:
            scores.append(KindScore(kind, len(faults), 0, 0))
            continue
        judged = found = 0
        for f in faults:
            deadline = _deadline(f)
            lasted = (f.cleared_s or run.settled_s or f.start_s + deadline) - f.start_s
            if lasted < _needs(f, deadline) or _hidden(f, run, facts, deadline):
                continue
            judged += 1
            ports, devices = _footprint(f, facts)
            hit = any(
                g.kind in FINDS[kind]
                and _at(g, ports, devices)
                and g.detected_s <= f.start_s + deadline
                and g.last_seen_s >= f.start_s - 1
                for g in run.findings
            )
            found += hit
            if not hit:
                where = ", ".join(f.ports or f.devices)
                out.append(
                    Violation(
                        "detection",
                        f.start_s + deadline,
                        where,
                        f"{kind} {f.id} ({_params(f)}) not found within {deadline:g} s",
                    )
                )
        scores.append(KindScore(kind, len(faults), judged, found))
    by_kind: dict[str, list[bool]] = defaultdict(list)
    for g in run.findings:
        ok = _explained(g, run, facts)
        by_kind[g.kind].append(ok)
        if not ok:
            out.append(
                Violation(
                    "detection",
                    g.detected_s,
                    ", ".join(g.ports or g.devices or (g.device,)),
                    f"finding {g.id} ({g.kind}) with no fault, operator or fabricd action there",
                )
            )
    precision = [FindingScore(k, len(v), sum(v)) for k, v in sorted(by_kind.items())]
    return scores, precision, sorted(out, key=lambda v: v.t)


def _deadline(f: FaultRec) -> float:
    """A fault's deadline: its kind's, except a BGP flap train, which bgp_session calls flapping at its third drop
    (two periods in; its flap_count is 3), then its documented 3 s and an interval (docs/detectors.md)."""
    if f.kind == "bgp_flap":
        try:
            return max(DEADLINE_S["bgp_flap"], 2 * float(f.params["period_s"]) + 4)
        except (KeyError, TypeError, ValueError):
            pass
    return DEADLINE_S[f.kind]


def _needs(f: FaultRec, deadline: float) -> float:
    """How long a fault must have lasted to be judged: its deadline, or a flap train's whole length when shorter
    (a train is found while it runs; it is cleared once its flaps are over)."""
    if f.kind in ("link_flap", "bgp_flap"):
        try:
            return min(deadline, float(f.params["count"]) * float(f.params["period_s"]) * 0.9)
        except (KeyError, TypeError, ValueError):
            return deadline
    return deadline


def _params(f: FaultRec) -> str:
    return " ".join(f"{k}={v}" for k, v in sorted(f.params.items()) if k not in ("port", "device"))


def _explained(g: FindingRec, run: Run, facts: FabricFacts) -> bool:
    t = g.detected_s
    after = AFTERMATH_BY_KIND.get(g.kind, AFTERMATH_S)
    for f in run.faults:
        ports, devices = _footprint(f, facts)
        if f.start_s - 2 <= t <= (f.cleared_s or float("inf")) + after and _at(g, ports, devices):
            return True
    for e in run.events:
        if e.what == "process" and e.kind == "twin_restart" and e.t - 2 <= t <= e.t + 60:
            return True
        if e.where and e.t - 2 <= t <= (e.end_s or e.t) + AFTERMATH_S:
            ports = {e.where} | ({facts.peer[e.where]} if e.where in facts.peer else set())
            if _at(g, ports, {p.split(":", 1)[0] for p in ports}):
                return True
    for a in run.actions:  # fabricd's own shutdown or enable moves the link too
        acted = a.status not in ("refused", "awaiting_approval", "cancelled")
        if acted and a.created_s - 2 <= t <= a.updated_s + AFTERMATH_S:
            ports = {a.port} | ({facts.peer[a.port]} if a.port in facts.peer else set())
            if _at(g, ports, {p.split(":", 1)[0] for p in ports}):
                return True
    return False


# --- tuning (issue 51): with a workload running and tuning.mode auto, the ledger as the run ended ---------------
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
