"""Detection: every injected fault found by the finding kinds that should see it within its deadline (recall), and
every finding explained by a fault, an operator or fabricd's own action (precision)."""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass

from .facts import FabricFacts
from .history import FaultRec, FindingRec, Run
from .violation import Violation

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
    if f.kind == "link_flap" and _visible_flaps(f, run, facts) < FLAPS_TO_FIND:
        return True
    ports, _ = _footprint(f, facts)
    for e in run.events:  # an operator shut its port while the detector had it to find: nothing left to see
        if e.what == "operator" and e.kind == "shut_by_hand" and e.where in ports and lo <= e.t <= hi:
            return True
    # its port (or the switch's end of a NIC's link: a storm's NIC is no switch port) shut when it began
    before = [s for s in run.samples if f.start_s - 2 <= s.t <= f.start_s + 0.5]
    return any(p in s.ports and not s.ports[p].admin_up for s in before[-1:] for p in ports)


FLAPS_TO_FIND = 5  # link_flap's threshold: five flaps within 10 s are a finding, four are not (docs/detectors.md)


def _visible_flaps(f: FaultRec, run: Run, facts: FabricFacts) -> int:
    """The flaps of a link_flap train its link could show: not those that fell while a link_down of the same link held
    it down (seed 4961, HA: a 7-flap train begun 11 s into a link_down of its link, which cleared after the last
    flap had begun: not one flap to see)."""
    count, period = int(f.params.get("count", 0)), float(f.params.get("period_s", 0.0))
    ports, _ = _footprint(f, facts)
    held = [
        (g.start_s, g.cleared_s if g.cleared_s is not None else float("inf"))
        for g in run.faults
        if g is not f
        and g.kind == "link_down"
        and (set(g.ports) | {facts.peer[p] for p in g.ports if p in facts.peer}) & ports
    ]
    flaps = (f.start_s + k * period for k in range(count))
    return sum(1 for t in flaps if not any(lo <= t < hi for lo, hi in held))


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
