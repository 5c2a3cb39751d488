"""The chaos schedule: a pure function of the seed, the fabric and the options, so a seed replays the same run.

What happens at run time and cannot be known in advance (which ticket opens, which port fabricd holds) is drawn in
advance too: the n-th repair takes the n-th `Repair` (its delay, whether the cable goes back wrong and a rank that
picks the wrong port among the candidates), an operator's `enable_held` takes a rank among the held ports. The run
itself then depends on what fabricd does; the schedule does not.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import Any

from .facts import FabricFacts

FAULT_KINDS = (
    "link_flap",
    "link_down",
    "pfc_storm",
    "pfc_deadlock",
    "link_corruption",
    "optics",
    "miscable",
    "bgp_down",
    "bgp_flap",
    "reboot",
    "gnmi_drop",
)
PROCESS_KINDS = ("kill", "pause", "gc_pause", "twin_restart", "restart")
OPERATOR_KINDS = ("shut_by_hand", "enable_held", "mode")
# Relative weights of the fault kinds: flaps and corruption are most of a fabric's repairs (docs/detectors.md).
WEIGHT = {
    "link_flap": 4,
    "link_corruption": 2,
    "link_down": 2,
    "bgp_flap": 1,
    "bgp_down": 1,
    "pfc_storm": 1,
    "pfc_deadlock": 1,
    "optics": 1,
    "miscable": 1,
    "reboot": 1,
    "gnmi_drop": 1,
}
PROCESS_WEIGHT = {"kill": 3, "pause": 2, "gc_pause": 3, "twin_restart": 1, "restart": 2}


class ScheduleError(ValueError):
    """Options no schedule can be made of (an unknown kind, a port the fabric lacks)."""


@dataclass(frozen=True)
class ChaosOptions:
    minutes: float = 5.0
    kinds: tuple[str, ...] = FAULT_KINDS
    faults_per_min: float = 8.0
    process_per_min: float = 0.8
    operator_per_min: float = 1.0
    process_kinds: tuple[str, ...] = PROCESS_KINDS
    ports: tuple[str, ...] = ()  # link faults only on these ports (default: every cabled switch port)
    wrong_cable_share: float = 0.2  # one repair in five puts the wrong cable back
    fast_repair_share: float = 0.25  # repairs resolved within a second of the disable


@dataclass(frozen=True)
class Step:
    at_s: float
    what: str  # fault | clear | process | operator
    kind: str
    params: dict[str, Any] = field(default_factory=dict)
    ref: int = 0  # a fault's number in the schedule; its clear names it

    def line(self) -> str:
        args = " ".join(f"{k}={v}" for k, v in sorted(self.params.items()))
        ref = f" #{self.ref}" if self.ref else ""
        return f"{self.at_s:8.2f}s {self.what:8} {self.kind}{ref} {args}".rstrip()


@dataclass(frozen=True)
class Repair:
    delay_s: float  # after the disable is done
    wrong_cable: bool  # the technician puts the wrong cable back (a miscable with another rail's port)
    rank: int  # picks the wrong port among the candidates, in their sorted order


@dataclass(frozen=True)
class Schedule:
    seed: int
    fabric: str
    options: ChaosOptions
    steps: tuple[Step, ...]
    repairs: tuple[Repair, ...]

    @property
    def duration_s(self) -> float:
        return self.options.minutes * 60

    def counts(self) -> dict[str, int]:
        out: dict[str, int] = {}
        for s in self.steps:
            if s.what != "clear":
                out[f"{s.what}:{s.kind}"] = out.get(f"{s.what}:{s.kind}", 0) + 1
        return out


# The range of each number of a run: (lowest, highest, lowest itself allowed). The schedule is made whole before the
# run and kept in memory, so each is bounded (`--minutes inf` never began and grew ~40 MB/s; NaN fails every check):
# a day is longer than any soak run docs/lab.md suggests; a fault a second keeps far more faults open than fabricd's
# budgets let it act on (safety.max_down_fabric 8); a process fault (kill -9, a pause, a twin restart) takes fabricd
# seconds to come back from, so more than one in 6 s leaves nothing running to judge, and operators likewise.
BOUNDS: dict[str, tuple[float, float, bool]] = {
    "minutes": (0.0, 1440.0, False),
    "faults_per_min": (0.0, 60.0, True),
    "process_per_min": (0.0, 10.0, True),
    "operator_per_min": (0.0, 10.0, True),
}


def out_of_range(option: str, value: float, bounds: tuple[float, float, bool]) -> str | None:
    """The one line that refuses `value` for --OPTION (its range named), or None when it lies in `bounds`."""
    low, high, low_allowed = bounds
    if (value >= low if low_allowed else value > low) and value <= high:
        return None
    least = f"at least {_number(low)}" if low_allowed else f"more than {_number(low)}"
    return f"--{option.replace('_', '-')} {_number(value)}: must be {least} and at most {_number(high)}"


def _number(x: float) -> str:
    """As a person would write it: 1440, 0.75, inf, nan (and 1e9 whole)."""
    if isinstance(x, int):
        return str(x)
    return str(int(x)) if x.is_integer() and abs(x) < 1e15 else f"{x:g}"


def check_options(facts: FabricFacts, options: ChaosOptions) -> None:
    check_without_fabric(options)
    bad = [p for p in options.ports if p not in facts.peer or not facts.is_switch_port(p)]
    if bad:
        raise ScheduleError(f"port {', '.join(bad)} is not a cabled switch port of {facts.name} (device:port)")


def check_without_fabric(options: ChaosOptions) -> None:
    """What can be refused without the fabric, before anything is made of it: a number out of its range (BOUNDS),
    no fault kind, an unknown one."""
    for name, bounds in BOUNDS.items():
        problem = out_of_range(name, getattr(options, name), bounds)
        if problem:
            raise ScheduleError(problem)
    if not options.kinds:
        raise ScheduleError(f"--kinds names no fault kind: use some of {', '.join(FAULT_KINDS)}")
    bad = [k for k in options.kinds if k not in FAULT_KINDS]
    if bad:
        raise ScheduleError(f"unknown fault kind {', '.join(bad)}: use some of {', '.join(FAULT_KINDS)}")
    bad = [k for k in options.process_kinds if k not in PROCESS_KINDS]
    if bad:
        raise ScheduleError(f"unknown process fault {', '.join(bad)}: use some of {', '.join(PROCESS_KINDS)}")


def make_schedule(seed: int, facts: FabricFacts, options: ChaosOptions) -> Schedule:
    """Every step of a run, in time order: a pure function of its arguments."""
    check_options(facts, options)
    rng = random.Random(seed)
    end = options.minutes * 60
    steps: list[Step] = []
    ref = 0
    kinds = sorted(options.kinds)
    for at in _times(rng, options.faults_per_min, end):
        kind = rng.choices(kinds, [WEIGHT[k] for k in kinds])[0]
        made = _fault(rng, facts, options, kind)
        if made is None:
            continue
        params, lasts = made
        ref += 1
        steps.append(Step(at, "fault", kind, params, ref))
        steps.append(Step(min(at + lasts, end), "clear", kind, {}, ref))
    pkinds = sorted(options.process_kinds)
    for at in _times(rng, options.process_per_min, end) if pkinds else []:
        kind = rng.choices(pkinds, [PROCESS_WEIGHT[k] for k in pkinds])[0]
        steps.append(Step(at, "process", kind, _process(rng, kind)))
    for at in _times(rng, options.operator_per_min, end):
        kind = rng.choice(OPERATOR_KINDS)
        steps.extend(_operator(rng, facts, options, kind, at, end))
    repairs = tuple(
        Repair(
            round(rng.uniform(0.05, 0.9) if rng.random() < options.fast_repair_share else rng.uniform(2, 25), 3),
            rng.random() < options.wrong_cable_share,
            rng.randrange(1 << 16),
        )
        for _ in range(max(64, int(end)))
    )
    steps.sort(key=lambda s: (s.at_s, s.what != "clear", s.ref))
    return Schedule(seed, facts.name, options, tuple(steps), repairs)


def _times(rng: random.Random, per_min: float, end: float) -> list[float]:
    """A Poisson process of `per_min` events a minute, in [0, end - 5 s) so the last have time to act."""
    out: list[float] = []
    t = 0.0
    while per_min > 0:
        t += rng.expovariate(per_min / 60)
        if t >= end - 5:
            return out
        out.append(round(t, 3))
    return out


def _ports(facts: FabricFacts, options: ChaosOptions, uplinks_only: bool = False) -> list[str]:
    pool = list(facts.uplinks) if uplinks_only else [*facts.server_ports, *facts.uplinks]
    if options.ports:
        pool = [p for p in pool if p in options.ports or facts.peer.get(p) in options.ports]
    return pool


def _fault(
    rng: random.Random, facts: FabricFacts, options: ChaosOptions, kind: str
) -> tuple[dict[str, Any], float] | None:
    """A fault's params and how long it lasts before it is cleared (None: nowhere to put it)."""
    ports = _ports(facts, options, uplinks_only=kind in ("bgp_down", "bgp_flap"))
    if kind in ("link_flap", "link_down", "link_corruption", "optics", "bgp_down", "bgp_flap", "miscable"):
        if not ports:
            return None
        port = rng.choice(ports)
    if kind == "link_flap":
        count, period = rng.randint(6, 14), round(rng.uniform(0.3, 1.0), 2)
        return {"port": port, "count": count, "period_s": period}, count * period + rng.uniform(0, 5)
    if kind == "link_down":
        return {"port": port}, rng.uniform(5, 30)
    if kind == "link_corruption":
        return {"port": port, "rate": float(f"{10 ** rng.uniform(-6, -4):.2g}"), "direction": "rx"}, rng.uniform(10, 40)
    if kind == "optics":
        return {"port": port, "loss_db": round(rng.uniform(8, 12), 1)}, rng.uniform(10, 40)
    if kind == "bgp_down":
        return {"port": port}, rng.uniform(5, 30)
    if kind == "bgp_flap":
        count, period = rng.randint(3, 6), round(rng.uniform(2, 4), 1)
        return {"port": port, "count": count, "period_s": period}, count * period + 1
    if kind == "miscable":
        same = facts.server_ports if port in facts.server_ports else facts.uplinks
        here = port.split(":", 1)[0]
        rail = facts.rail.get(here)
        others = [p for p in same if (d := p.split(":", 1)[0]) != here and facts.rail.get(d) != rail]
        if not others:
            return None
        return {"port": port, "other": rng.choice(others)}, rng.uniform(10, 30)
    if kind == "pfc_storm":
        return {"nic": rng.choice(facts.nics), "priority": 3}, rng.uniform(5, 20)
    if kind == "pfc_deadlock":
        if not facts.cycles:
            return None
        return {"cycle": ",".join(rng.choice(facts.cycles)), "priority": 3}, rng.uniform(5, 20)
    if kind == "reboot":
        down = round(rng.uniform(2, 6), 1)
        return {"device": rng.choice(facts.switches), "down_s": down}, down + 1
    if kind == "gnmi_drop":
        seconds = round(rng.uniform(3, 15), 1)
        return {"device": rng.choice(facts.switches), "seconds": seconds}, seconds
    raise ScheduleError(f"unknown fault kind {kind}")


def _process(rng: random.Random, kind: str) -> dict[str, Any]:
    """A process fault's params; `instance` picks which of several fabricd instances (HA) among those running."""
    if kind == "kill":
        return {"restart_after_s": round(rng.uniform(0.5, 3), 2), "instance": rng.randrange(1 << 16)}
    if kind == "pause":
        return {"seconds": round(rng.uniform(2, 8), 2), "instance": rng.randrange(1 << 16)}
    if kind == "gc_pause":  # a stop-the-world collection's length (tens to hundreds of ms)
        return {"seconds": round(rng.uniform(0.02, 0.3), 3), "instance": rng.randrange(1 << 16)}
    if kind == "restart":  # one of the run's --restart commands (the bus, PostgreSQL, a collector), picked by rank
        return {"target": rng.randrange(1 << 16)}
    return {"down_s": round(rng.uniform(1, 4), 1)}  # twin_restart


def _operator(
    rng: random.Random, facts: FabricFacts, options: ChaosOptions, kind: str, at: float, end: float
) -> list[Step]:
    if kind == "shut_by_hand":
        ports = _ports(facts, options)
        if not ports:
            return []
        port = rng.choice(ports)
        back = min(at + rng.uniform(5, 30), end)
        return [
            Step(at, "operator", "shut_by_hand", {"port": port}),
            Step(back, "operator", "no_shut_by_hand", {"port": port}),
        ]
    if kind == "enable_held":
        return [Step(at, "operator", "enable_held", {"rank": rng.randrange(1 << 16)})]
    mode = rng.choice(("observe", "approve"))
    back = min(at + rng.uniform(5, 20), end)
    out = [Step(at, "operator", "mode", {"mode": mode})]
    if mode == "approve":
        t = at + rng.uniform(1, 3)
        while t < back:
            out.append(Step(round(t, 3), "operator", "approve", {}))
            t += rng.uniform(1, 3)
    out.append(Step(back, "operator", "mode", {"mode": "auto"}))
    return out
