"""NCCL settings for a long-haul path, from its bandwidth-delay product, with the reason for each number.

Untuned, NCCL keeps NCCL_STEPS x chunk x channels (2 MiB) in flight per GPU pair across the network: enough for a
few metres, not for 1.2 ms of fibre, so a message over a couple of MB waits a round trip per window
(reference/domain.md: untuned NCCL adds >= 1 RTT above 1 MB and > 100 RTT at 256 MB; tuning channels, chunk and
buffer sizes cut 16 MB latency 7x and 256 MB 20x). The plan sizes the window to the path and predicts message
latency before and after with the same pair-rate model as the compute-loss what-if (policies.dci_loss).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

from policies.dci_loss import (
    NCCL_DEFAULT_CHANNELS_PER_PEER,
    NCCL_DEFAULT_P2P_CHUNK,
    NCCL_STEPS,
    UNTUNED_WINDOW_BYTES,
    DciPath,
    pair_rate,
    transfer_s,
)

MIB = 1024 * 1024
# NCCL documentation (environment variables): NCCL_BUFFSIZE 4 MiB, NCCL_IB_QPS_PER_CONNECTION 1,
# NCCL_IB_TIMEOUT 20 (InfiniBand local ACK timeout 4.096 us x 2^t, so 4.3 s).
DEFAULT_BUFFSIZE = 4 * MIB
DEFAULT_QPS = 1
DEFAULT_IB_TIMEOUT = 20
IB_TIMEOUT_UNIT_S = 4.096e-6
WINDOW_MARGIN = 1.25  # in-flight bytes above the BDP, so jitter and the DR's queue do not starve the pipe (ours)
CHANNELS = 4  # per network peer: 4 x more in flight and 4 x the flows for the DRs' ECMP hash (ours)
# Meta (SIGCOMM 2024, reference/domain.md): more QPs per connection and hashing on the QP gave up to +40 % allreduce.
QPS_PER_CONNECTION = 4
MESSAGE_SIZES = (1 * MIB, 16 * MIB, 256 * MIB)


@dataclass(frozen=True)
class Setting:
    name: str
    default: int
    value: int
    reason: str


@dataclass(frozen=True)
class Latency:
    bytes: int
    before_ms: float
    after_ms: float

    @property
    def speedup(self) -> float:
        return self.before_ms / self.after_ms


@dataclass(frozen=True)
class NcclPlan:
    rtt_ms: float
    pair_gbps: float
    bdp_bytes: float
    window_before: int
    window_after: int
    settings: list[Setting]
    latencies: list[Latency]

    def env(self) -> str:
        return "\n".join(f"export {s.name}={s.value}" for s in self.settings)

    def to_dict(self) -> dict[str, object]:
        return {
            "rtt_ms": round(self.rtt_ms, 4),
            "pair_gbps": round(self.pair_gbps, 3),
            "bdp_bytes": round(self.bdp_bytes),
            "window_bytes": {"before": self.window_before, "after": self.window_after},
            "settings": [
                {"name": s.name, "default": s.default, "value": s.value, "reason": s.reason} for s in self.settings
            ],
            "latency_ms": [
                {
                    "bytes": x.bytes,
                    "before": round(x.before_ms, 4),
                    "after": round(x.after_ms, 4),
                    "speedup": round(x.speedup, 2),
                }
                for x in self.latencies
            ],
        }


def _pow2_at_least(n: float) -> int:
    return 1 << max(0, math.ceil(math.log2(max(n, 1))))


def _mib(n: float) -> str:
    return f"{n / MIB:g} MiB" if n >= MIB else f"{n / 1024:g} KiB"


def plan(path: DciPath, line_gbps: float, pairs: int = 1, dr_queue_s: float = 0.0) -> NcclPlan:
    """Settings for GPU pairs that each get their share of the path (`pairs` at once; 1 = one pair at NIC line
    rate, the microbenchmark case); `dr_queue_s` is the longest queue a DR buffer can hold (for the ACK timeout)."""
    tuned = replace(path, window_bytes=None)
    rate = pair_rate(tuned, pairs, line_gbps)
    bdp = rate * path.rtt_s
    per_channel = bdp * WINDOW_MARGIN / CHANNELS
    chunk = max(NCCL_DEFAULT_P2P_CHUNK, _pow2_at_least(per_channel / NCCL_STEPS))
    buffsize = max(DEFAULT_BUFFSIZE, _pow2_at_least(per_channel))
    window = CHANNELS * NCCL_STEPS * chunk
    need_timeout = path.rtt_s + dr_queue_s
    timeout = max(DEFAULT_IB_TIMEOUT, math.ceil(math.log2(need_timeout / IB_TIMEOUT_UNIT_S)))
    rtt_ms = path.rtt_s * 1e3
    bdp_text = f"BDP {_mib(bdp)} = {rate * 8 / 1e9:.0f} Gb/s x RTT {rtt_ms:.2f} ms"
    settings = [
        Setting(
            "NCCL_NCHANNELS_PER_NET_PEER",
            NCCL_DEFAULT_CHANNELS_PER_PEER,
            CHANNELS,
            f"{CHANNELS} channels per peer: each holds its own window, and {CHANNELS}x the flows spread over the "
            "DR ports' ECMP members",
        ),
        Setting(
            "NCCL_P2P_NET_CHUNKSIZE",
            NCCL_DEFAULT_P2P_CHUNK,
            chunk,
            f"{CHANNELS} channels x {NCCL_STEPS} steps x {_mib(chunk)} = {_mib(window)} in flight >= "
            f"{WINDOW_MARGIN:g} x {bdp_text} (default {_mib(UNTUNED_WINDOW_BYTES)}: one window per round trip)",
        ),
        Setting(
            "NCCL_BUFFSIZE",
            DEFAULT_BUFFSIZE,
            buffsize,
            f"collectives keep one buffer per channel in flight: {_mib(buffsize)} x {CHANNELS} channels >= "
            f"{WINDOW_MARGIN:g} x BDP",
        ),
        Setting(
            "NCCL_IB_QPS_PER_CONNECTION",
            DEFAULT_QPS,
            QPS_PER_CONNECTION,
            f"{QPS_PER_CONNECTION} QPs per connection: more distinct flows for the DR ports' hash (fewer "
            "collisions, less port imbalance); Meta saw up to +40 % allreduce with more QPs",
        ),
        Setting(
            "NCCL_IB_TIMEOUT",
            DEFAULT_IB_TIMEOUT,
            timeout,
            f"ACK timeout 4.096 us x 2^{timeout} = {IB_TIMEOUT_UNIT_S * 2**timeout * 1e3:.0f} ms must exceed RTT "
            f"{rtt_ms:.2f} ms + the deepest DR queue {dr_queue_s * 1e3:.1f} ms = {need_timeout * 1e3:.1f} ms"
            + (" (the default already does: keep it)" if timeout == DEFAULT_IB_TIMEOUT else ""),
        ),
    ]
    before = replace(path, window_bytes=UNTUNED_WINDOW_BYTES)
    after = replace(path, window_bytes=window)
    lat = [
        Latency(
            size,
            transfer_s(size, pair_rate(before, pairs, line_gbps), path) * 1e3,
            transfer_s(size, pair_rate(after, pairs, line_gbps), path) * 1e3,
        )
        for size in MESSAGE_SIZES
    ]
    return NcclPlan(rtt_ms, rate * 8 / 1e9, bdp, UNTUNED_WINDOW_BYTES, window, settings, lat)
