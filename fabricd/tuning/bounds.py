"""The ranges a proposal may never leave: physics first, then the policy's per-class min/max (policy `tuning`).

Physics (congestion-tuning.md §1.4, §7 rules 1, 4, 7, 8):
- ECN must fire before PFC: Kmax <= the XOFF trigger minus what the port sends at line rate in one feedback delay
  (mark -> CNP -> sender's cut) [dcqcn15][huawei-aiecn]; Kmin < Kmax.
- Long haul with end-to-end CNP: Kmax <= 1.5 x RTT x C, and with a known buffer at most 60 % of it (HPE: buffer
  2.5 x RTT, Kmax 1.5 x RTT) [hpe].
- The flowlet gap stays above the group's path-delay skew (policies.tuning.flowlet_inactivity's rule) and inside
  SONiC's flowlet_idle_time range 2..2047 us [sonic-ars].
- PFC headroom is never tuned and never below policies.tuning.pfc_headroom: a port whose running headroom is below
  the physics is not tuned at all (its lossless guarantee is already broken; `fabricd apply` of the intent fixes it).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from policies.policy import FLOWLET_PLATFORM_US, DlbPolicy, PfcPolicy, Policy, TuningClass
from policies.tuning import flowlet_inactivity, pfc_headroom

from .inputs import GroupWindow, PortClass, PortWindow

# HPE's long-haul profile: Kmax 1.5 x RTT and buffer 2.5 x RTT, so Kmax at most 60 % of the buffer (§1.4 [hpe]).
DCI_KMAX_RTTS = 1.5
DCI_KMAX_BUFFER_SHARE = 1.5 / 2.5


@dataclass(frozen=True)
class Limit:
    lo: int
    hi: int
    why: str  # what set each end

    def holds(self, v: int) -> bool:
        return self.lo <= v <= self.hi

    def clamp(self, v: int) -> int:
        return min(self.hi, max(self.lo, v))


@dataclass(frozen=True)
class PortBounds:
    kmin: Limit
    kmax: Limit
    pmax: Limit
    dr_cnp_min: Limit | None
    dr_cnp_max: Limit | None
    feedback_s: float  # the loop's delay the Kmax bound used
    infeasible: str  # "" when every range is non-empty and the port may be tuned; else why not


def us_bytes(us: float, speed_gbps: int) -> int:
    """Time at line rate as bytes (the policy's thresholds are times, like `settings.ecn`)."""
    return round(us * speed_gbps * 1e9 / 8 / 1e6)


def _class(policy: Policy, cls: PortClass) -> TuningClass:
    c: TuningClass = getattr(policy.tuning.classes, cls.value)
    return c


def dynamic_xoff_trigger(
    buffer_bytes: float, ports: int, headroom_bytes: float, in_use_bytes: float, beta: float, priorities: int = 8
) -> int:
    """The ingress fill at which a dynamic-threshold switch sends XOFF (Trident's beta; congestion-tuning.md §1.4
    [dcqcn15]): beta x (buffer - every port's headroom for every priority - the shared buffer in use) / priorities.
    For an adapter whose switch reports a dynamic threshold rather than a static XOFF trigger."""
    free = buffer_bytes - priorities * ports * headroom_bytes - in_use_bytes
    return max(0, math.floor(beta * free / priorities))


def feedback_s(w: PortWindow, policy: Policy) -> float:
    """Mark -> CNP -> sender: a campus loop, plus the long-haul RTT when the far end's receiver sends the CNP."""
    campus = policy.tuning.campus_feedback_us * 1e-6
    dr = w.settings.dr_cnp
    if w.port_class is PortClass.DCI and not (dr is not None and dr.enabled):
        return campus + w.physics.rtt_s
    return campus


def port_bounds(w: PortWindow, policy: Policy, pfc: PfcPolicy | None = None) -> PortBounds:
    """Bounds for Kmin/Kmax/Pmax (and a DR's CNP thresholds) of one port; `pfc` is the port's effective PFC policy
    (default: the policy's settings)."""
    cls, s, ph = _class(policy, w.port_class), w.settings, w.physics
    speed, rate = ph.speed_gbps, ph.bytes_per_s
    fb = feedback_s(w, policy)
    hi_candidates = [(us_bytes(cls.kmax_us[1], speed), f"class {w.port_class} max {cls.kmax_us[1]:g} us")]
    if s.pfc_enabled:
        in_flight = math.ceil(rate * fb)
        hi_candidates.append(
            (
                s.xoff_trigger_bytes - in_flight,
                f"XOFF trigger {s.xoff_trigger_bytes} B - {in_flight} B sent in one feedback delay "
                f"({fb * 1e6:.0f} us at {speed} Gb/s) [dcqcn15]",
            )
        )
    if w.port_class is PortClass.DCI and fb > policy.tuning.campus_feedback_us * 1e-6:
        bdp = rate * ph.rtt_s
        hi_candidates.append((math.floor(DCI_KMAX_RTTS * bdp), f"1.5 x RTT x C ({ph.rtt_s * 1e3:.2f} ms) [hpe]"))
        if ph.buffer_bytes is not None:
            hi_candidates.append(
                (math.floor(DCI_KMAX_BUFFER_SHARE * ph.buffer_bytes), f"60 % of the {ph.buffer_bytes} B buffer [hpe]")
            )
    kmax_hi, kmax_hi_why = min(hi_candidates)
    kmin_lo = max(1, us_bytes(cls.kmin_us[0], speed))
    kmax_lo = max(kmin_lo + 1, us_bytes(cls.kmax_us[0], speed))
    kmax = Limit(kmax_lo, kmax_hi, f"low: class min {cls.kmax_us[0]:g} us; high: {kmax_hi_why}")
    kmin_hi = min(us_bytes(cls.kmin_us[1], speed), kmax_hi - 1)
    kmin = Limit(kmin_lo, kmin_hi, f"class {cls.kmin_us[0]:g}-{cls.kmin_us[1]:g} us, below Kmax's bound")
    pmax = Limit(math.ceil(cls.pmax_percent[0]), math.floor(cls.pmax_percent[1]), "class pmax_percent")
    dr_min = dr_max = None
    if s.dr_cnp is not None:
        lo, hi = max(1, us_bytes(cls.dr_cnp_us[0], speed)), us_bytes(cls.dr_cnp_us[1], speed)
        why = f"class dr_cnp_us {cls.dr_cnp_us[0]:g}-{cls.dr_cnp_us[1]:g} us"
        if s.pfc_enabled:
            campus = math.ceil(rate * policy.tuning.campus_feedback_us * 1e-6)
            hi = min(hi, s.xoff_trigger_bytes - campus)
            why += ", below the XOFF trigger minus one campus feedback delay"
        dr_min = Limit(lo, hi - 1, why)
        dr_max = Limit(lo + 1, hi, why)
    infeasible = ""
    if s.pfc_enabled:
        floor, _ = pfc_headroom(ph.length_m, speed, pfc or policy.settings.pfc)
        if s.headroom_bytes < floor:
            infeasible = (
                f"PFC headroom {s.headroom_bytes} B is below the physics' {floor} B (policies.tuning.pfc_headroom): "
                "`fabricd apply` the intent first; tuning leaves this port alone"
            )
    if not infeasible:
        for name, lim in (("Kmax", kmax), ("Kmin", kmin), ("Pmax", pmax), ("DR CNP", dr_min)):
            if lim is not None and lim.lo > lim.hi:
                infeasible = f"no room for {name}: bound {lim.lo}..{lim.hi} ({lim.why})"
                break
    return PortBounds(kmin, kmax, pmax, dr_min, dr_max, fb, infeasible)


def skew_floor_us(path_lengths_m: tuple[float, ...], dlb: DlbPolicy) -> int:
    """The shortest flowlet gap the physics allows: policies.tuning.flowlet_inactivity's rule without its default."""
    value, _ = flowlet_inactivity(list(path_lengths_m), dlb.model_copy(update={"inactivity_us": 1}))
    return value


def flowlet_bounds(g: GroupWindow, policy: Policy, dlb: DlbPolicy | None = None) -> Limit:
    cls = _class(policy, g.port_class)
    floor = skew_floor_us(g.path_lengths_m, dlb or policy.settings.dlb)
    lo = max(math.ceil(cls.flowlet_us[0]), floor, FLOWLET_PLATFORM_US[0])
    hi = min(math.floor(cls.flowlet_us[1]), FLOWLET_PLATFORM_US[1])
    return Limit(
        lo,
        hi,
        f"above the path-delay skew ({floor} us, policies.tuning.flowlet_inactivity), class "
        f"{cls.flowlet_us[0]:g}-{cls.flowlet_us[1]:g} us, SONiC 2..2047 us",
    )
