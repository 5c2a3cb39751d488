"""The numbers: PFC headroom, ECN thresholds and flowlet timers as pure functions of a port.

Each returns (value, reason) so the intent can say how every number was derived.
"""

from __future__ import annotations

import math

from policies.policy import DlbPolicy, EcnPolicy, PfcPolicy

# Speed of light in fibre used by SONiC's headroom formula (domain.md: c ~ 1.98e8 m/s, ~5 us/km).
FIBRE_M_PER_S = 1.98e8
PAUSE_QUANTUM_BYTES = 64  # one pause quantum is 512 bit times


def _mb(n: float) -> str:
    return f"{n / 1e6:.1f} MB" if n >= 1e6 else f"{n / 1e3:.1f} KB"


def _length(m: float) -> str:
    return f"{m / 1000:g} km" if m >= 1000 else f"{m:g} m"


def cable_bytes(length_m: float, speed_gbps: int) -> float:
    """Bytes in flight on the cable in both directions after XOFF: 2 x length x speed / c."""
    return 2 * length_m * speed_gbps * 1e9 / FIBRE_M_PER_S / 8


def rtt_s(length_m: float) -> float:
    return 2 * length_m / FIBRE_M_PER_S


def pfc_headroom(length_m: float, speed_gbps: int, pfc: PfcPolicy) -> tuple[int, str]:
    """SONiC (Mellanox) xoff: MTU + (MTU + cable + 2 x gearbox + MAC/PHY + peer response) x cell occupancy."""
    quanta = pfc.peer_response_quanta_high_speed if speed_gbps > 100 else pfc.peer_response_quanta_low_speed
    peer = quanta * PAUSE_QUANTUM_BYTES
    cable = cable_bytes(length_m, speed_gbps)
    inner = pfc.mtu_bytes + cable + 2 * pfc.gearbox_delay_bytes + pfc.mac_phy_delay_bytes + peer
    total = math.ceil(pfc.mtu_bytes + inner * pfc.cell_occupancy)
    occupancy = f" x cell occupancy {pfc.cell_occupancy:g}" if pfc.cell_occupancy != 1 else ""
    return total, (
        f"headroom {_mb(total)} = 2 x {_length(length_m)} x {speed_gbps} Gb/s / c ({_mb(cable)}) + 2 x MTU "
        f"{pfc.mtu_bytes} B + peer response {quanta} quanta x 64 B{occupancy}"
    )


def ecn_thresholds(speed_gbps: int, ecn: EcnPolicy) -> tuple[int, int, str]:
    """Campus ports: thresholds set as time at line rate, converted to bytes for this speed."""
    per_us = speed_gbps * 1e9 / 8 / 1e6
    lo, hi = round(ecn.min_us * per_us), round(ecn.max_us * per_us)
    return (
        lo,
        hi,
        (
            f"ECN {_mb(lo)}-{_mb(hi)} = {ecn.min_us:g}-{ecn.max_us:g} us of queue at {speed_gbps} Gb/s, "
            f"marking up to {ecn.max_probability}%"
        ),
    )


def ecn_thresholds_dci(length_m: float, speed_gbps: int, ecn: EcnPolicy) -> tuple[int, int, str]:
    """Long haul: thresholds follow the bandwidth-delay product of the link."""
    rtt = rtt_s(length_m)
    bdp = speed_gbps * 1e9 * rtt / 8
    lo, hi = round(bdp * ecn.dci_min_bdp_fraction), round(bdp * ecn.dci_max_bdp_fraction)
    return (
        lo,
        hi,
        (
            f"ECN {_mb(lo)}-{_mb(hi)} = {ecn.dci_min_bdp_fraction:g}-{ecn.dci_max_bdp_fraction:g} x BDP "
            f"{_mb(bdp)} ({speed_gbps} Gb/s x RTT {rtt * 1e3:.2f} ms over {_length(length_m)})"
        ),
    )


def flowlet_inactivity(path_lengths_m: list[float], dlb: DlbPolicy) -> tuple[int, str]:
    """The flowlet gap must exceed the largest path-delay difference of the ECMP group, or packets reorder."""
    if len(path_lengths_m) < 2:
        return dlb.inactivity_us, f"flowlet inactivity {dlb.inactivity_us} us (policy default; single path)"
    diff_us = (max(path_lengths_m) - min(path_lengths_m)) / FIBRE_M_PER_S * 1e6
    need = math.ceil(2 * diff_us) + dlb.margin_us
    value = max(dlb.inactivity_us, need)
    why = "policy default" if value == dlb.inactivity_us else f"2 x path-delay difference + {dlb.margin_us} us"
    return value, (
        f"flowlet inactivity {value} us ({why}); largest path-delay difference in the ECMP group {diff_us:.1f} us"
    )
