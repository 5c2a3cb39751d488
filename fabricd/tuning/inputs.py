"""What the tuning rules read: a window of counter samples per egress queue (and per ECMP group), the port's current
settings and its physics. Named types only; an adapter (live telemetry, the twin, a recording) fills them.

Counters are cumulative as switches and NICs report them (a decrease is a reset: that interval is not used);
watermarks and fan-in are gauges: the peak, or the value, over the interval that ends at the sample. `None` means the
source does not report that counter (a platform without it, a recording without NIC counters): the rules that need
it say "not judged" and why, they never guess.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Literal

from policies.linkclass import LinkClass
from policies.tuning import rtt_s
from topology.model import Role


class PortClass(StrEnum):
    """The classes tuning keeps apart: each has its own bounds (policy `tuning.classes`) and budget."""

    SERVER = "server"  # a leaf's server-facing port
    LEAF_SPINE = "leaf_spine"
    SPINE_SUPERSPINE = "spine_superspine"
    DCI = "dci"  # a DR's long-haul port


def port_class(link_class: LinkClass, role: Role, peer_role: Role) -> PortClass:
    """The tuning class of a port from its link class (policies.linkclass) and the roles at both ends."""
    if link_class is LinkClass.DCI:
        return PortClass.DCI
    if link_class is LinkClass.SERVER:
        return PortClass.SERVER
    if Role.SUPERSPINE in (role, peer_role) or Role.DR in (role, peer_role):
        return PortClass.SPINE_SUPERSPINE  # a DR's campus side sits on the top campus tier
    return PortClass.LEAF_SPINE


@dataclass(frozen=True)
class NicCounters:
    """ConnectX hw_counters of the NIC(s) behind the port, cumulative (congestion-tuning.md §3.3 [mlx5-counters])."""

    np_ecn_marked_roce_packets: int | None = None
    np_cnp_sent: int | None = None
    rp_cnp_handled: int | None = None
    rp_cnp_ignored: int | None = None
    out_of_sequence: int | None = None


@dataclass(frozen=True)
class Sample:
    """One poll of one egress queue (the lossless priority) and its port. Names follow SONiC COUNTERS_DB / EOS
    (congestion-tuning.md §3.1, §3.2)."""

    t_s: float
    ecn_marked_pkts: int | None = None  # SAI_QUEUE_STAT_WRED_ECN_MARKED_PACKETS / ecn-marked-pkts
    pfc_rx_pkts: int | None = None  # SAI_PORT_STAT_PFC_<n>_RX_PKTS: pause frames received (downstream paused us)
    pfc_tx_pkts: int | None = None  # ..._TX_PKTS: pause frames sent (our ingress PG reached XOFF)
    pfc_rx_pause_us: int | None = None  # SAI_PORT_STAT_PFC_<n>_RX_PAUSE_DURATION_US
    pfc_tx_pause_us: int | None = None  # ..._TX_PAUSE_DURATION_US
    queue_watermark_bytes: int | None = None  # gauge: SAI_QUEUE_STAT_SHARED_WATERMARK_BYTES / max-queue-len
    pg_watermark_bytes: int | None = None  # gauge: SAI_INGRESS_PRIORITY_GROUP_STAT_SHARED_WATERMARK_BYTES
    tx_bytes: int | None = None  # transmit-octets of the queue (or the port)
    drops: int | None = None  # WRED + tail drops of the queue (dropped-pkts)
    dr_cnp_sent: int | None = None  # CNPs the DR generated for traffic out of this port
    fan_in: int | None = None  # gauge: concurrent senders into the queue (ARS flow table, or a workload's fan-in)
    nic: NicCounters | None = None


@dataclass(frozen=True)
class DrCnp:
    """A DR's own CNP generation on a long-haul port: on, and the queue depths between which it sends CNPs."""

    capable: bool  # the platform can (policy `platforms.<p>.dr_generated_cnp`)
    enabled: bool
    min_bytes: int
    max_bytes: int


@dataclass(frozen=True)
class PortSettings:
    """The port's running settings for the lossless priority, as `fabricd apply` set them (or the switch reports)."""

    kmin_bytes: int
    kmax_bytes: int
    pmax_percent: int
    pfc_enabled: bool
    # Ingress PG fill at which the port sends XOFF: SONiC BUFFER_PROFILE static_th, or dynamic_th's share of the free
    # pool at the window's buffer use (the adapter computes it); ignored when PFC is off.
    xoff_trigger_bytes: int
    headroom_bytes: int  # BUFFER_PROFILE xoff: the room above the trigger for bytes in flight
    dr_cnp: DrCnp | None = None  # long-haul ports of a DR only


@dataclass(frozen=True)
class Physics:
    """What no setting changes: line rate, cable, and (for the bound on the flowlet gap) the group's paths."""

    speed_gbps: int
    length_m: float
    buffer_bytes: int | None = None  # the port's share of the packet buffer, where known (long-haul bound)

    @property
    def bytes_per_s(self) -> float:
        return self.speed_gbps * 1e9 / 8

    @property
    def rtt_s(self) -> float:
        return rtt_s(self.length_m)


@dataclass(frozen=True)
class PortWindow:
    """One egress queue over one window: the unit every port rule judges."""

    device: str
    port: str
    port_class: PortClass
    samples: tuple[Sample, ...]
    settings: PortSettings
    physics: Physics

    @property
    def subject(self) -> str:
        return f"{self.device}:{self.port}"


@dataclass(frozen=True)
class GroupSample:
    """One poll of an ECMP group (SONiC ARS_NEXTHOP_GROUP counters, §4 [sonic-ars]) and the NICs receiving via it."""

    t_s: float
    member_tx_bytes: Mapping[str, int] = field(default_factory=dict)  # cumulative transmit-octets per member port
    reassignments: int | None = None  # SAI_NEXT_HOP_GROUP_ATTR_ARS_PORT_REASSIGNMENTS
    drops: int | None = None  # PFC/WRED/tail drops summed over the members (loss also makes retransmissions)
    out_of_sequence: int | None = None  # NIC out_of_sequence summed over the receivers behind the group


@dataclass(frozen=True)
class GroupWindow:
    """An ECMP group of one switch over one window: the unit of the load-balancing rules."""

    device: str
    group: str  # a name for the group (e.g. "uplinks", or the peer)
    port_class: PortClass
    members: tuple[str, ...]
    samples: tuple[GroupSample, ...]
    mode: Literal["off", "flowlet", "per-packet"]
    flowlet_us: int  # the running flowlet idle time (SONiC flowlet_idle_time)
    path_lengths_m: tuple[float, ...]  # the cable lengths of the members' paths (policies.tuning.flowlet_inactivity)
    speed_gbps: int  # one member's line rate

    @property
    def subject(self) -> str:
        return f"{self.device}:{self.group}"
