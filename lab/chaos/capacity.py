"""The capacity invariants: no switch below its floor where a port fabricd shut is part of the shortfall (`capacity`,
judged when fabricd acts), and none left under it while fabricd holds a port whose return would restore it and
whose fault has ended (`capacity_held`, issue 49, judged at every sample)."""

from __future__ import annotations

import contextlib
import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from .detection import AFTERMATH_S
from .facts import FabricFacts
from .history import ActionRec, Event, FaultRec, Limits, Sample
from .spans import episodes, merged, observe_spans, outage_spans, spell_due
from .violation import Violation


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
    excused = merged([*outage_spans(events), *observe_spans(events)])
    found: dict[tuple[str, float], Shortfall] = {}

    def short(s: Sample) -> Iterable[str]:
        for x in held_shortfalls(s, facts, limits, faults):
            found[(x.switch, s.t)] = x
            yield x.switch

    def sees(s: Sample, sw: str) -> bool:
        far = {facts.peer.get(u, ":").split(":", 1)[0] for u in facts.uplinks_of.get(sw, ())}
        return s.held is not None and not ({sw} | far) & s.unreachable

    out = []
    for sw, spans in episodes(samples, short, sees).items():
        for first, last in spans:
            due = spell_due(first, last, grace_s, excused)
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
