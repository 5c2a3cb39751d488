"""The settings the congestion model reads: a NIC's DCQCN knobs and a switch queue's ECN/PFC thresholds.

Every default carries its source in shared/reference/congestion-tuning.md (section numbers below). These are the
knobs the tuning loop (issue 51) turns: `NicParams` is a twin setting (the NICs are not switches, so no running config
holds it), `QueueConfig` comes from each switch's running config (lab/model.py PortConfig).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class NicParams:
    """DCQCN reaction point (RP) and notification point (NP) settings of the sending and receiving NICs.

    Field names follow the ConnectX sysfs knobs (reference §1.2). `alpha_g` is the EWMA weight per alpha update and
    `alpha_period_s` the update period (the paper's g and tau'); `cnp_interval_s` is the NP's pacing (the paper's N,
    ConnectX min_time_between_cnps); a sender cuts at most once per max(cnp_interval_s, rate_reduce_monitor_period_s)
    (the fluid model's tau). `min_dec_fac` caps one cut: the rate never drops below that share of itself per CNP.
    `clamp_tgt_rate`: True sets RT := RC on every CNP (the paper, and HPE's long-haul profile); False
    (clamp_tgt_rate_after_time_inc, ConnectX's default) only after timer-driven increases.
    """

    time_reset_s: float = 300e-6  # rpg_time_reset (T) [mlxcfg-dump]
    byte_reset: float = 32767.0  # rpg_byte_reset (B), bytes
    threshold: int = 1  # rpg_threshold (F): increase events before leaving Fast Recovery
    ai_rate_bps: float = 5e6  # rpg_ai_rate (R_AI)
    hai_rate_bps: float = 50e6  # rpg_hai_rate: kept for the record, the fluid model has no hyper-increase term
    min_dec_fac: float = 0.50  # rpg_min_dec_fac 50 %
    min_rate_bps: float = 1e6  # rpg_min_rate
    # dce_tcp_g 1019/1024 every dce_tcp_rtt = 1 us (the exact firmware formula is UNVERIFIED in the reference)
    alpha_g: float = 1019 / 1024
    alpha_period_s: float = 1e-6
    initial_alpha: float = 1023 / 1024
    cnp_interval_s: float = 4e-6  # min_time_between_cnps: 4 us per [barre] (2 us in the dump)
    rate_reduce_monitor_period_s: float = 4e-6
    clamp_tgt_rate: bool = False
    # Whether a CNP refreshes alpha before it cuts: ConnectX updates alpha with weight dce_tcp_g ~ 1 every 1 us from
    # "a CNP arrived", so alpha is ~1 when it cuts and min_dec_fac (50 %) is what bounds the cut; the paper cuts with
    # the old alpha, then updates it. ASSUMPTION (the firmware formula is UNVERIFIED in the reference), chosen because
    # a non-binding min_dec_fac would make Barre's and HPE's retunes of it (§1.2) have no effect.
    alpha_before_cut: bool = True

    @property
    def cut_interval_s(self) -> float:
        """The fluid model's tau: how often a flow can be cut at most."""
        return max(self.cnp_interval_s, self.rate_reduce_monitor_period_s)


# ConnectX defaults (reference §1.2, `mlxconfig query` dump; isekai copies the same).
CONNECTX = NicParams()

# The DCQCN paper's constants (reference §1.1 [dcqcn15]): g = 1/256, N = 50 us, alpha timer 55 us, increase timer
# 55 us, B = 10 MB, F = 5, R_AI = 40 Mbps; the paper cuts by alpha/2 with no floor and always clamps RT.
PAPER = NicParams(
    time_reset_s=55e-6,
    byte_reset=10e6,
    threshold=5,
    ai_rate_bps=40e6,
    min_dec_fac=0.0,
    alpha_g=1 / 256,
    alpha_period_s=55e-6,
    initial_alpha=1.0,
    cnp_interval_s=50e-6,
    rate_reduce_monitor_period_s=0.0,
    clamp_tgt_rate=True,
    alpha_before_cut=False,
)

# HPE/Juniper long-haul profile (reference §1.2 [hpe]): RPG_MIN_DEC_FAC 95, CLAMP_TGT_RATE 1, RPG_TIME_RESET 5 ms for
# 50-400 km (7 ms at 500 km); everything else at ConnectX defaults.
LONG_HAUL = NicParams(time_reset_s=5e-3, min_dec_fac=0.95, clamp_tgt_rate=True)


@dataclass(frozen=True)
class QueueConfig:
    """One lossless egress queue and the ingress buffer behind it.

    ECN (reference §1.1, §2): p(q) = 0 below `kmin`, linear to `pmax` at `kmax`, 1 above. PFC (§1.4): an ingress
    priority group sends XOFF when its occupancy passes its threshold: `xoff_bytes` if static, else `dynamic_alpha` x
    (`pool_bytes` - buffer in use) (Broadcom/SONiC dynamic threshold: SONiC dynamic_th = log2 alpha; the paper's
    beta/8). `headroom_bytes` absorbs what is in flight after XOFF; past it the PG drops. XON at `xon_bytes` below
    the XOFF point. Without PFC the queue tail-drops past `buffer_bytes`.
    """

    capacity_bps: float
    kmin_bytes: float = 0.0
    kmax_bytes: float = 0.0
    pmax: float = 0.0  # 0..1
    ecn: bool = False
    pfc: bool = True
    xoff_bytes: float = 0.0  # static threshold; used when dynamic_alpha is 0
    dynamic_alpha: float = 0.25  # SONiC lossless PG dynamic_th -2 (drivers/sonic/render.py)
    pool_bytes: float = 47_218_432.0  # SONiC ingress_lossless_pool of the twin's SKU (lab/sonic_config.py)
    headroom_bytes: float = 200_000.0
    xon_bytes: float = 18_432.0  # 2 x 9216-byte MTU (drivers/sonic/render.py XON_BYTES)
    buffer_bytes: float = 47_218_432.0
    dr_cnp: bool = False  # the switch generates CNPs itself for traffic it marks (long-haul DR)


def paper_switch(capacity_bps: float = 40e9) -> QueueConfig:
    """The DCQCN paper's switch (reference §1.4): Arista 7050QX32, Trident II, 12 MB shared, 32 x 40G ports, headroom
    22.4 KB per port and priority, dynamic threshold beta = 8 (alpha = beta / 8 = 1); ECN 5 KB / 200 KB / 1 %."""
    return QueueConfig(
        capacity_bps=capacity_bps,
        kmin_bytes=5_000,
        kmax_bytes=200_000,
        pmax=0.01,
        ecn=True,
        pfc=True,
        dynamic_alpha=1.0,
        pool_bytes=12e6 - 8 * 32 * 22_400,
        headroom_bytes=22_400,
        xon_bytes=2 * 1500,
        buffer_bytes=12e6,
    )


# SONiC's (Mellanox) headroom formula, as fabricd's policy computes it (policies/tuning.py pfc_headroom, default
# PfcPolicy; the lab may not import policies): MTU + (MTU + cable both ways + peer response) with a 9216-byte MTU and
# the peer's response 905 pause quanta of 64 bytes above 100G, 394 at 100G and below (reference domain.md).
FIBRE_M_PER_S = 1.98e8
MTU_BYTES = 9216


def sonic_headroom(length_m: float, speed_gbps: float) -> int:
    """The PFC headroom (bytes) a PG needs for its cable: what arrives after XOFF until the peer stops."""
    cable = 2 * length_m * speed_gbps * 1e9 / FIBRE_M_PER_S / 8
    peer = (905 if speed_gbps > 100 else 394) * 64
    return int(MTU_BYTES + MTU_BYTES + cable + peer + 0.999999)
