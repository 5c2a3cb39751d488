"""What a training job loses when it spans two campuses: the cross-DCI compute-loss model (docs/dci.md derives it).

Pure arithmetic over a workload and a DCI path; every figure a default comes from is cited where it is set.
The shape (reference/domain.md, long-haul DCI): the time a job spends waiting on cross-campus transfers is
    t_cross ~ k x msg x pairs / (bw_DR x alpha_LB) + RTT terms,
and its compute loss is t_cross / (t_compute + t_cross). What crosses depends on how the job is split:
- pp: the pipeline is cut at the DCI (two stages, one per campus). Every micro-batch sends its activations across
  forward and their gradients back; 1F1B overlaps a transfer with the other micro-batches' compute, so the pipeline
  fill and drain pay one transfer each, and the steady state pays only what a transfer takes beyond a stage's
  forward compute.
- dp: each campus holds half of the data-parallel replicas; the gradient all-reduce crosses (~2 x params x bytes per
  param in a flat ring), overlapped with the backward pass, so only what does not fit under the backward pass and
  the last bucket's round trip are paid. ZeRO-3 also all-gathers every layer's parameters in the forward and
  backward passes; each gather waits a round trip before its layer can run.
NCCL matters through its in-flight window per GPU pair: untuned, p2p transfers over the network keep
NCCL_STEPS x chunk x channels bytes in flight, far below the bandwidth-delay product of a 120 km path.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from enum import StrEnum

from policies.tuning import FIBRE_M_PER_S


class Split(StrEnum):
    PP = "pp"
    DP = "dp"


# NCCL defaults (NCCL documentation, environment variables: NCCL_P2P_NET_CHUNKSIZE 128 KiB,
# NCCL_NCHANNELS_PER_NET_PEER 2; NCCL_STEPS = 8 slots per connection buffer is a compile-time constant of NCCL).
NCCL_STEPS = 8
NCCL_DEFAULT_P2P_CHUNK = 128 * 1024
NCCL_DEFAULT_CHANNELS_PER_PEER = 2
UNTUNED_WINDOW_BYTES = NCCL_STEPS * NCCL_DEFAULT_P2P_CHUNK * NCCL_DEFAULT_CHANNELS_PER_PEER  # 2 MiB

# H100 SXM dense BF16 peak (NVIDIA H100 datasheet: 989 TFLOPS) at 40 % model FLOPs utilisation, a typical figure
# for large dense training (PaLM reports 46 %, Llama-3 38-43 %): our default, override with --iteration-s.
GPU_PEAK_FLOPS = 989e12
MFU = 0.40
# Llama 2 (Touvron et al. 2023): 4M-token global batch, sequence length 4096, BF16.
GLOBAL_BATCH_TOKENS = 4 * 1024 * 1024
SEQ_LEN = 4096
BYTES_PER_PARAM = 2
# Dense transformer shape: params ~ 12 x layers x hidden^2 with hidden / layers ~ 128 (Llama 2 7B: 4096 / 32).
HIDDEN_PER_LAYER = 128


@dataclass(frozen=True)
class Workload:
    """One training job; what is None is derived (docs/dci.md says how)."""

    params: float
    gpus: int
    split: Split
    zero: int = 0
    tp: int = 8  # tensor parallel inside one server (NVLink), never across the DCI
    seq_len: int = SEQ_LEN
    micro_batch: int = 1
    global_batch_tokens: int = GLOBAL_BATCH_TOKENS
    bytes_per_param: int = BYTES_PER_PARAM
    microbatches: int | None = None
    iteration_s: float | None = None
    activation_mb: float | None = None

    @property
    def pp(self) -> int:
        return 2 if self.split is Split.PP else 1

    @property
    def dp(self) -> int:
        return max(1, self.gpus // (self.tp * self.pp))

    @property
    def layers(self) -> int:
        return max(1, round(self.hidden / HIDDEN_PER_LAYER))

    @property
    def hidden(self) -> int:
        h = float((HIDDEN_PER_LAYER * self.params / 12) ** (1 / 3))
        return max(256, round(h / 256) * 256)

    @property
    def activation_bytes(self) -> float:
        """One micro-batch's activations at the cut: tokens x hidden x 2 bytes (BF16)."""
        if self.activation_mb is not None:
            return self.activation_mb * 1e6
        return float(self.seq_len * self.micro_batch * self.hidden * 2)

    @property
    def n_microbatches(self) -> int:
        if self.microbatches is not None:
            return self.microbatches
        return max(1, round(self.global_batch_tokens / (self.seq_len * self.micro_batch * self.dp)))

    @property
    def compute_s(self) -> float:
        """Iteration time with no DCI in the way: 6 x params x tokens FLOPs over the GPUs at MFU."""
        if self.iteration_s is not None:
            return self.iteration_s
        return 6 * self.params * self.global_batch_tokens / (self.gpus * GPU_PEAK_FLOPS * MFU)


@dataclass(frozen=True)
class DciPath:
    distance_km: float
    dci_tbps: float  # one direction, all DR ports of the DCI
    alpha_lb: float = 1.0  # load-balance quality across the DR ports (1 = perfectly even)
    k: float = 1.0  # transmission factor: windowing, retransmission, collective buffers (lossless keeps it ~1)
    window_bytes: float | None = None  # NCCL in-flight bytes per GPU pair; None = tuned (never the limit)
    drop_rate: float = 0.0  # packet loss on the DR ports (each loss costs go-back-N a round trip)

    @property
    def one_way_s(self) -> float:
        return self.distance_km * 1000 / FIBRE_M_PER_S

    @property
    def rtt_s(self) -> float:
        return 2 * self.one_way_s


@dataclass(frozen=True)
class Phase:
    """One kind of cross-DCI transfer on the iteration's critical path."""

    name: str
    count: int  # how many times per iteration
    bytes_per_pair: float
    pairs: int
    exposed_s: float  # time it adds to one iteration (all `count` of them)


@dataclass(frozen=True)
class Result:
    workload: Workload
    path: DciPath
    rtt_ms: float
    pairs: int
    per_pair_gbps: float
    compute_s: float
    cross_dc_seconds_per_iteration: float
    compute_loss: float
    phases: list[Phase] = field(default_factory=list)
    required_dci_tbps: float | None = None
    target_loss: float | None = None

    def to_dict(self) -> dict[str, object]:
        w = self.workload
        out: dict[str, object] = {
            "split": w.split.value,
            "params": w.params,
            "gpus": w.gpus,
            "zero": w.zero,
            "tp": w.tp,
            "pp": w.pp,
            "dp": w.dp,
            "microbatches": w.n_microbatches,
            "activation_mb": round(w.activation_bytes / 1e6, 3),
            "distance_km": self.path.distance_km,
            "dci_tbps": self.path.dci_tbps,
            "alpha_lb": self.path.alpha_lb,
            "k": self.path.k,
            "nccl": "untuned" if self.path.window_bytes is not None else "tuned",
            "rtt_ms": round(self.rtt_ms, 4),
            "pairs": self.pairs,
            "per_pair_gbps": round(self.per_pair_gbps, 3),
            "compute_seconds_per_iteration": round(self.compute_s, 6),
            "cross_dc_seconds_per_iteration": round(self.cross_dc_seconds_per_iteration, 6),
            "compute_loss": round(self.compute_loss, 6),
            "phases": [
                {
                    "name": p.name,
                    "count": p.count,
                    "bytes_per_pair": round(p.bytes_per_pair),
                    "pairs": p.pairs,
                    "exposed_s": round(p.exposed_s, 6),
                }
                for p in self.phases
            ],
        }
        if self.target_loss is not None:
            out["target_loss"] = self.target_loss
            out["required_dci_tbps"] = None if self.required_dci_tbps is None else round(self.required_dci_tbps, 3)
        return out


def pair_rate(path: DciPath, pairs: int, line_gbps: float | None = None) -> float:
    """Bytes/s one GPU pair gets across: its share of the DCI (k and alpha_LB applied), capped by the NCCL window
    per round trip and, with `line_gbps`, by the NIC; loss costs a round trip per lost packet (go-back-N)."""
    share = path.dci_tbps * 1e12 / 8 * path.alpha_lb / (path.k * max(pairs, 1))
    if line_gbps is not None:
        share = min(share, line_gbps * 1e9 / 8 / path.k)
    if path.window_bytes is not None:
        share = min(share, path.window_bytes / path.rtt_s)
    if path.drop_rate > 0:
        # RoCE NICs retransmit go-back-N: each lost 4 KB packet stalls the pair about one RTT (our model).
        per_packet = 4096 / share
        share = 4096 / (per_packet + path.drop_rate * path.rtt_s)
    return share


def transfer_s(msg_bytes: float, rate: float, path: DciPath) -> float:
    """One message across: one-way propagation plus serialisation at the pair's rate."""
    return path.one_way_s + msg_bytes / rate


def _pp(w: Workload, p: DciPath) -> tuple[list[Phase], int, float]:
    pairs = w.dp * w.tp  # Megatron scatter/gather: each TP rank sends its 1/tp slice to its peer rank
    msg = w.activation_bytes / w.tp
    rate = pair_rate(p, pairs)
    t = transfer_s(msg, rate, p)
    m = w.n_microbatches
    t_mb = w.compute_s / (m + w.pp - 1)  # 1F1B: (m + stages - 1) slots of forward + backward
    t_fwd = t_mb / 3  # forward ~ 1/3 of forward + backward
    phases = [
        Phase("pipeline fill + drain (activation forward, gradient back)", 2, msg, pairs, 2 * t),
        Phase("steady-state transfer beyond a stage's forward compute", 2 * (m - 1), msg, pairs, 0.0),
    ]
    excess = max(0.0, t - t_fwd)
    phases[1] = replace(phases[1], exposed_s=2 * (m - 1) * excess)
    return phases, pairs, rate


def _dp(w: Workload, p: DciPath) -> tuple[list[Phase], int, float]:
    pairs = max(1, w.gpus // 2)  # every rank of one campus exchanges its shard with its peer across
    grad = 2 * w.params * w.bytes_per_param  # flat-ring all-reduce: ~2 x the gradient crosses (the figure)
    msg = grad / pairs
    rate = pair_rate(p, pairs)
    sync = transfer_s(msg, rate, p)
    backward = w.compute_s * 2 / 3
    phases = [Phase("gradient all-reduce beyond the backward pass, + last bucket's round trip", 1, msg, pairs, 0.0)]
    phases[0] = replace(phases[0], exposed_s=max(0.0, sync - backward) + p.rtt_s)
    if w.zero >= 3:
        # ZeRO-3 (DeepSpeed): parameters all-gathered per layer before its forward and again before its backward.
        gather = w.params * w.bytes_per_param / w.layers / pairs
        each = p.rtt_s + gather / rate
        name = "ZeRO-3 parameter all-gather per layer (forward and backward)"
        phases.append(Phase(name, 2 * w.layers, gather, pairs, 2 * w.layers * each))
    return phases, pairs, rate


def evaluate(w: Workload, p: DciPath) -> Result:
    phases, pairs, rate = _pp(w, p) if w.split is Split.PP else _dp(w, p)
    cross = sum(ph.exposed_s for ph in phases)
    compute = w.compute_s
    return Result(
        workload=w,
        path=p,
        rtt_ms=p.rtt_s * 1e3,
        pairs=pairs,
        per_pair_gbps=rate * 8 / 1e9,
        compute_s=compute,
        cross_dc_seconds_per_iteration=cross,
        compute_loss=cross / (compute + cross),
        phases=phases,
    )


def required_tbps(w: Workload, p: DciPath, target_loss: float, max_tbps: float = 10_000.0) -> float | None:
    """The least DCI bandwidth that keeps the loss at or under `target_loss`; None if no bandwidth does (the
    latency terms alone exceed it)."""
    if evaluate(w, replace(p, dci_tbps=max_tbps)).compute_loss > target_loss:
        return None
    lo, hi = 1e-6, max_tbps
    for _ in range(100):  # loss falls monotonically with bandwidth: bisect on a log scale
        mid = math.sqrt(lo * hi)
        if evaluate(w, replace(p, dci_tbps=mid)).compute_loss <= target_loss:
            hi = mid
        else:
            lo = mid
        if hi / lo < 1.0001:
            break
    return hi


def whatif(w: Workload, p: DciPath, target_loss: float | None = None) -> Result:
    r = evaluate(w, p)
    if target_loss is None:
        return r
    return replace(r, target_loss=target_loss, required_dci_tbps=required_tbps(w, p, target_loss))
