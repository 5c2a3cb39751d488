"""Counter columns of a twin port, and the steady traffic model that moves them.

Counters are lazy: each port keeps a uint64 base, a float rate per second and the time the base was taken,
so a value is `base + rate * (now - t0)` computed only when someone reads it. A change of state (fault,
shutdown, config) rebases the port first, so counters stay monotonic across rate changes. uint64 addition
wraps at 2**64 exactly as a switch's 64-bit counter does.
"""

from __future__ import annotations

import zlib

import numpy as np

from .nics import NAMES as NIC_NAMES

PRIORITIES = tuple(range(8))

# /interfaces/interface/state/counters/<leaf>
INTERFACE_COUNTERS = (
    "in-pkts",
    "out-pkts",
    "in-octets",
    "out-octets",
    "in-unicast-pkts",
    "out-unicast-pkts",
    "in-errors",
    "in-fcs-errors",
    "in-discards",
    "out-discards",
    "carrier-transitions",
)
# /interfaces/interface/ethernet/state/counters/<leaf>
ETHERNET_COUNTERS = ("in-crc-errors", "in-mac-pause-frames", "out-mac-pause-frames", "in-symbol-error")
# .../ethernet/phys/phy[index=1]/ingress/fec/state/<leaf>
FEC_COUNTERS = ("corrected-codewords", "uncorrected-codewords")
# .../ethernet/pfc/priorities/priority[index=P]/state/<leaf>
PFC_COUNTERS = ("in-frames", "out-frames", "pfc-on-total-rx-time")
# /qos/interfaces/interface/output/queues/queue[name=Q]/state/<leaf>
QUEUE_COUNTERS = ("transmit-pkts", "transmit-octets", "dropped-pkts", "ecn-marked-pkts", "wred-dropped-pkts")
# ... and `max-queue-len` (bytes, the queue's watermark since boot [oc-qos]): a gauge kept in the counter's base with
# no rate, so it only moves when the congestion model raises it (lab/model.py _apply_congestion)
QUEUE_GAUGES = ("max-queue-len",)
# .../ethernet/pfc/watchdog/tx-queues/tx-queue[index=Q][queue-type=UNICAST]/state/<leaf>
WATCHDOG_COUNTERS = ("stuck-count", "recovery-count")


# Counters real switches keep beyond the OpenConfig leaves above, filled by the congestion model (lab/congestion):
# PFC pause time a port asked of its peer (SAI_PORT_STAT_PFC_<n>_TX_PAUSE_DURATION_US, ns here), CNPs a DR generated
# on the port's behalf, and DLB flowlets started / moved to another member on a port's ECMP group (SAI ARS).
PFC_TX_TIME = "pfc-on-total-tx-time"
EXTRA_COUNTERS = ("cnp.sent", "ars.flowlets", "ars.reassignments")
# The DCQCN counters of the server NIC on a port's far end (ConnectX hw_counters names, lab/nics.py): no switch serves
# them; the control API does (a real host's /sys/class/infiniband/.../hw_counters)
NIC_COUNTERS = tuple(f"nic.{name}" for name in NIC_NAMES)


def _columns() -> tuple[str, ...]:
    cols = [f"if.{c}" for c in INTERFACE_COUNTERS]
    cols += [f"eth.{c}" for c in ETHERNET_COUNTERS]
    cols += [f"fec.{c}" for c in FEC_COUNTERS]
    cols += [f"pfc{p}.{c}" for p in PRIORITIES for c in PFC_COUNTERS]
    cols += [f"q{q}.{c}" for q in PRIORITIES for c in (*QUEUE_COUNTERS, *QUEUE_GAUGES)]
    cols += [f"wd{q}.{c}" for q in PRIORITIES for c in WATCHDOG_COUNTERS]
    cols += [f"pfc{p}.{PFC_TX_TIME}" for p in PRIORITIES]
    cols += list(EXTRA_COUNTERS)
    cols += list(NIC_COUNTERS)
    return tuple(cols)


COLUMNS = _columns()
COL = {name: i for i, name in enumerate(COLUMNS)}

# RoCE traffic: 4096-byte payloads plus headers; the lossless class carries almost everything.
FRAME_BYTES = 4200
QUEUE_SHARE = {3: 0.95, 6: 0.005, 0: 0.045}
# Pause quanta are 512 bit times; a paused sender keeps refreshing at about half the pause time
# (IEEE 802.1Qbb, 65535 quanta per frame), so a fully paused 400G port sees ~24k frames/s.
PAUSE_QUANTA = 65535
PAUSE_REFRESH = 2.0
# Pre-FEC BER of a healthy 400G-FR4 link is around 1e-8..1e-6 (RS(544,514) corrects up to ~2.4e-4).
HEALTHY_PRE_FEC_BER = 2e-8
CODEWORD_BITS = 5440


# A DR spreads cross-campus traffic over its ECMP members; with many RoCE flows (and QPs) hashed over them their
# loads sit within a few percent of each other. The twin's healthy DR ports carry this load, +-2 %.
DR_UTILISATION = 0.50
DR_SPREAD = 0.02


# An optic's receive power wanders with its temperature: a daily cycle of a few tenths of a dB, plus reading noise.
# Our figures (no datasheet gives them): 0.2 dB amplitude, 0.03 dB noise; readings are rounded to 0.01 dBm.
WANDER_DAILY_DB = 0.2
WANDER_NOISE_DB = 0.03
DAY_NS = 86_400 * 1_000_000_000


def optics_wander(device: str, port: str, now_ns: int) -> float:
    """dB to add to a receiver's power at `now_ns`: deterministic per port and minute, so traces repeat."""
    h = zlib.crc32(f"{device}:{port}".encode())
    phase = (h % 1000) / 1000.0 * 2 * np.pi
    daily = WANDER_DAILY_DB * float(np.sin(2 * np.pi * (now_ns % DAY_NS) / DAY_NS + phase))
    minute = now_ns // 60_000_000_000
    noise = (zlib.crc32(f"{h}:{minute}".encode()) % 2001 - 1000) / 1000.0 * WANDER_NOISE_DB
    return daily + noise


# Module temperature: 33-39 C per port (as the twin always showed), a 2 C daily cycle in step with the power wander.
TEMP_DAILY_C = 2.0


def module_temperature(device: str, port: str, now_ns: int) -> float:
    h = zlib.crc32(f"{device}:{port}".encode())
    base = 33.0 + (zlib.crc32(f"{device}:{port}".encode()) % 600) / 100.0
    phase = (h % 1000) / 1000.0 * 2 * np.pi
    return base + TEMP_DAILY_C * float(np.sin(2 * np.pi * (now_ns % DAY_NS) / DAY_NS + phase))


def pause_frames_per_s(speed_gbps: float) -> float:
    return speed_gbps * 1e9 / (PAUSE_QUANTA * 512) * PAUSE_REFRESH


def utilisation(device: str, port: str) -> float:
    """A steady, plausible load per port (30-60 %), deterministic so tests and traces are repeatable."""
    h = zlib.crc32(f"{device}:{port}".encode())
    return 0.30 + (h % 3001) / 10000.0


def dr_utilisation(device: str, port: str) -> float:
    """A DR port's load: one ECMP group's share, within DR_SPREAD of its members (deterministic)."""
    h = zlib.crc32(f"{device}:{port}".encode())
    return DR_UTILISATION * (1 - DR_SPREAD + 2 * DR_SPREAD * (h % 1001) / 1000.0)


# A RoCE queue's depth: a burst of this many bytes (one 64 KiB RDMA message at line rate: our figure) arriving at a
# queue served at utilisation rho leaves a mean depth of BURST * rho / (1 - rho) (the M/M/1 shape), exponentially
# distributed. A queue paused a share f of the time has only 1 - f to serve its load: rho / (1 - f).
BURST_BYTES = 64 * 1024


def ecn_mark_share(util: float, paused: float, min_bytes: int, max_bytes: int, max_probability: int) -> float:
    """The share of a queue's packets WRED marks with ECN: 0 below the minimum threshold, rising linearly to
    `max_probability` % at the maximum, all above it; averaged over an exponential depth of the queue's mean."""
    rho = 0.999 if paused >= 1.0 else min(0.999, util / (1.0 - paused))
    if rho <= 0:
        return 0.0
    mean = BURST_BYTES * rho / (1.0 - rho)
    lo, hi = float(min_bytes), float(max(max_bytes, min_bytes + 1))
    above_lo, above_hi = np.exp(-lo / mean), np.exp(-hi / mean)
    ramp = (mean * (above_lo - above_hi) - (hi - lo) * above_hi) / (hi - lo)
    return float(min(1.0, max(0.0, max_probability / 100.0 * ramp + above_hi)))
