"""The twin's fabric state: switches, ports, links, and the effects faults and config have on counters.

Everything here is driven by explicit times (unix ns) so tests can step it; the servers call
`Twin.advance(now)` from their loop. State changes mark the twin dirty; the next `advance` rebases every
port's counters at that instant and recomputes rates from the whole state (traffic model, admin/oper state,
PFC pause propagation, corruption, optics), which keeps the rules in one place instead of in each fault.

A change that only takes ports up or down (a flap, a `shutdown`) updates the ports, their events and BGP at once,
and the rates RATES_LAG_NS later: the counters show the traffic as it was until then, as a switch's polled counters
trail its wire. A burst of such changes (ten links flapping, ten commits) costs one traffic solve, not ten.
"""

from __future__ import annotations

import enum
import heapq
import itertools
import time
import zlib
from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from topology.fabric import Fabric
from topology.model import TIER, Endpoint, Link, Role
from topology.underlay import Underlay
from topology.units import NS

from . import nics, traffic
from .bgp import Bgp, BgpMon
from .congestion import CONNECTX, FlowletResult, NicParams, QueueConfig, simulate_flowlets
from .congestion.params import FIBRE_M_PER_S, sonic_headroom
from .congestion.ports import HotPort, Ingress, PortOutcome, Solver
from .control_plane import ControlPlane
from .counters import (
    BURST_BYTES,
    CODEWORD_BITS,
    COL,
    COLUMNS,
    DR_UTILISATION,
    FRAME_BYTES,
    HEALTHY_PRE_FEC_BER,
    NIC_COUNTERS,
    PRIORITIES,
    QUEUE_SHARE,
    dr_utilisation,
    ecn_mark_share,
    module_temperature,
    optics_wander,
    pause_frames_per_s,
    utilisation,
)
from .sonic_releases import DEFAULT_RELEASE as DEFAULT_SONIC_RELEASE
from .sonic_releases import version_text

LinkKey = tuple[Endpoint, Endpoint]
OperListener = Callable[[str, str, bool, int], None]
# (device, port, counter column, time): a counter the switch moves on an event, not with traffic (a PFC watchdog
# declaring a queue stuck, or recovered); ON_CHANGE streams send it when it moves
CounterListener = Callable[[str, str, str, int], None]
QueueKey = tuple[str, str, int]  # (switch, port, priority): the port's egress queue of that priority
# How long after ports went up or down the rates follow (the traffic re-spread over the paths left). ASSUMPTION, no
# figure in the reference: a switch publishes counters from periodic polls of its ASIC, so what a sample shows
# trails the wire by at least this; fabricd samples at 0.5 s or more.
RATES_LAG_NS = 50_000_000
# LLDP (IEEE 802.1AB-2016): a port that stops being operational deletes its remote systems' information (the receive
# state machine's rxInfoAge on portEnabled FALSE, 9.2.7.7), and learns the neighbour again from the first LLDPDU after
# link up; with fast start the peer sends it within msgFastTx = 1 s (9.2.5.5). The twin hears it 1 s after link up.
LLDP_LEARN_NS = 1_000_000_000
# The ECMP weight of a path through a switch in maintenance: RFC 8326's receivers set LOCAL_PREF 0 on its routes, so
# they lose to every other path and carry traffic only where no other is left (reference/maintenance-lldp-bgp-state.md).
MAINTENANCE_WEIGHT = 1e-9


class Recompute(enum.Enum):
    """What a change needs redone: FULL (every rule), LINKS (ports up/down: the rates may follow RATES_LAG_NS
    later), RATES (the deferred rates, if still owed), TRAFFIC (only what is offered changed, a workload's phase: the
    ports' states stand, the rates are solved again)."""

    FULL = "full"
    LINKS = "links"
    RATES = "rates"
    TRAFFIC = "traffic"


def link_key(a: Endpoint, b: Endpoint) -> LinkKey:
    return (a, b) if (a.device, a.port) <= (b.device, b.port) else (b, a)


@dataclass
class PortConfig:
    """What the running config says about one port (the config engine keeps this in step)."""

    admin_up: bool = True
    pfc_enabled: bool = False
    no_drop: frozenset[int] = frozenset()
    # queue -> (min_bytes, max_bytes, max_probability %)
    ecn: dict[int, tuple[int, int, int]] = field(default_factory=dict)
    watchdog: bool = False
    # SONiC PFC_WD defaults, detection 200 ms and restoration 200 ms (reference/platforms.md); EOS' own defaults are
    # not in the reference, and fabricd's policy sets both explicitly anyway.
    watchdog_timeout_ns: int = 200_000_000
    watchdog_recovery_ns: int = 200_000_000
    description: str = ""  # shown by `show interfaces`; no effect on traffic
    # The ingress buffer of the port's lossless priority groups (SONiC BUFFER_PG -> BUFFER_PROFILE `xoff` and
    # `dynamic_th`); 0 / None: the twin's default (lab/congestion/params.py sonic_headroom, dynamic_th -2).
    pg_headroom_bytes: int = 0
    pg_dynamic_th: int | None = None

    def honours_pause(self, priority: int) -> bool:
        return self.pfc_enabled and priority in self.no_drop


@dataclass(frozen=True)
class PauseSource:
    """`sender` keeps `priority` on its link paused for `fraction` of the time (a NIC storm, a deadlock edge)."""

    sender: Endpoint
    priority: int
    fraction: float = 1.0
    # A stuck queue backs up its switch, which pauses its own upstream ports (how a storm spreads).
    propagate: bool = True


# Each priority's share of a port's traffic (QUEUE_SHARE), and the columns of its queues' transmit counts.
SHARES = np.array([QUEUE_SHARE.get(q, 0.0) for q in PRIORITIES])
NIC_COLS = [COL[c] for c in NIC_COUNTERS]
TRANSMIT_PKTS = [COL[f"q{q}.transmit-pkts"] for q in PRIORITIES]
TRANSMIT_OCTETS = [COL[f"q{q}.transmit-octets"] for q in PRIORITIES]
MAX_QUEUE_LEN = [COL[f"q{q}.max-queue-len"] for q in PRIORITIES]
# Every column the traffic model sets (Twin._apply_traffic).
TRAFFIC = sorted(
    {COL[c] for c in ("if.out-pkts", "if.out-unicast-pkts", "if.out-octets", "if.in-pkts", "if.in-unicast-pkts",
                      "if.in-octets", "if.out-discards", "q3.dropped-pkts", "fec.corrected-codewords")}
    | set(TRANSMIT_PKTS) | set(TRANSMIT_OCTETS)
)  # fmt: skip


# A port's egress whose offered load reaches this share of its line rate goes to the congestion model (lab/congestion):
# below it the lossless queue only sees bursts (lab/counters.py ecn_mark_share), which a fluid model cannot show.
HOT_SHARE = 0.98
# what the twin may hold of throttled rates per traffic state (Twin._throttled): a workload's two phases at 512 switches
THROTTLED_MEMO_BYTES = 96 << 20
HOT_MEMO = 16  # traffic states whose congested queues are remembered (a workload's phases flip between a few)
# RoCE queue pairs per NIC in an aggregate: Meta measured ~4 AllReduce QPs per GPU (reference §4 [meta24]).
QPS_PER_NIC = 4
# Per switch hop and NIC, what a packet and its CNP lose besides the cables (serialisation, pipeline, NIC turnaround):
# ASSUMPTION, no figure in the reference; 1 us each way, 4 hops (NIC, leaf, spine, leaf, NIC).
HOP_DELAY_S = 1e-6
PATH_HOPS = 4
DEFAULT_CABLE_M = 3.0  # a link with no length in the spec: a rack cable
# Each congested queue is solved as if its ingresses brought what they would offer unthrottled; where flows cross
# several congested queues the throttles compound, so they are corrected until each queue sends what the model
# served (within RECONCILE_TOLERANCE), in at most this many more traffic solves.
RECONCILE_ROUNDS = 4
RECONCILE_TOLERANCE = 0.01
RECONCILE_GAIN = 0.7
# SONiC's lossless PG dynamic_th (drivers/sonic/render.py LOSSLESS_DYNAMIC_TH): alpha = 2^-2 of the free pool
DEFAULT_DYNAMIC_TH = -2
# plain ints: an IntEnum member looked up in a hot loop costs a class __getattr__ each time
KIND_UP, KIND_SERVER, KIND_REMOTE = int(traffic.Kind.UP), int(traffic.Kind.SERVER), int(traffic.Kind.REMOTE)
LOSSLESS = 3  # the RoCE class the model runs (QUEUE_SHARE: it carries almost everything; its watermark moves)
LN_1000 = float(np.log(1000.0))


@dataclass
class CongestionSettings:
    """The twin's congestion settings that no switch config holds (issue 51's tuning loop sets them): the NICs' DCQCN
    parameters, which DRs generate CNPs for long-haul traffic (seed 004's DR-CNP; policies: EOS can, SONiC cannot),
    and the flowlet inactivity gap of DLB groups (EOS renders DLB without a gap, SONiC ARS is not rendered: the
    twin keeps SONiC's default 256 us, reference §4)."""

    nic: NicParams = CONNECTX
    dr_cnp: frozenset[str] | None = None  # None: every EOS DR
    flowlet_gap_us: float = 256.0


@dataclass(frozen=True)
class FlowletView:
    """A DLB switch's uplink ECMP group under the flowlet model: per second, flowlets begun, moved to another
    member and reordered (packets a flow's new member delivered before its old one's), and each member's share."""

    members: tuple[str, ...]
    flowlets_ps: float
    moves_ps: float
    reorders_ps: float
    shares: tuple[float, ...]
    skew_us: float


# The flowlet model's run per group: this many flows (at most) and messages each; flows of 1 MiB messages whose idle
# times are uniform in [0, 2 x mean], the mean set by the group's load (a flow at load u idles (1 - u) / u of the
# time). ASSUMPTIONS: the reference gives no message-size or idle-time distribution for collectives.
FLOWLET_FLOWS, FLOWLET_MESSAGES = 64, 200
FLOWLET_MESSAGE_BYTES = 1 << 20


@dataclass(frozen=True)
class CongestionView:
    """What the model says about one congested egress queue (switch, port), for telemetry and `lab status`."""

    outcome: PortOutcome
    ingress_rows: tuple[int, ...]
    dr_cnp: bool


# The EOS release the twin plays unless told otherwise (`--eos-version`): a current one (eos_releases.py).
DEFAULT_EOS_VERSION = "4.36.1F"


class Switch:
    def __init__(self, name: str, role: Role, platform: str, ports: list[str], speeds: list[float], boot_ns: int):
        self.name = name
        self.role = role
        self.platform = platform
        self.hostname = name  # what `show hostname` says; the EOS config engine sets it from `hostname X`
        self.os_version = DEFAULT_EOS_VERSION  # EOS: the release `show version` reports and gNMI serves (eos_releases)
        self.ports = ports
        self.index = {p: i for i, p in enumerate(ports)}
        self.speeds = np.asarray(speeds, dtype=np.float64)
        n = len(ports)
        self.base = np.zeros((n, len(COLUMNS)), dtype=np.uint64)
        self.rate = np.zeros((n, len(COLUMNS)), dtype=np.float64)  # per second; the twin's rules set it
        self.frac = np.zeros((n, len(COLUMNS)), dtype=np.float64)  # the part of a count not yet in `base`
        self.t0 = np.full(n, boot_ns, dtype=np.int64)
        self.oper_up = np.ones(n, dtype=bool)
        # when each port last came up (LLDP hears its neighbour LLDP_LEARN_NS later); up at boot, neighbours known
        self.up_since = np.full(n, boot_ns - LLDP_LEARN_NS, dtype=np.int64)
        h = np.array([zlib.crc32(f"{name}:{p}".encode()) % 100 for p in ports], dtype=np.float64)
        self.rx_power_nominal = -2.5 + h / 100.0  # dBm, healthy DR4/FR4 receive power
        self.rx_power = self.rx_power_nominal.copy()
        self.pre_fec_ber = np.full(n, HEALTHY_PRE_FEC_BER)
        self.config = [PortConfig() for _ in ports]
        # Watermarks (bytes, highest since boot or clear): egress queues, ingress PGs (shared) and PG headroom used;
        # the congestion model raises them (SAI *_WATERMARK_BYTES, OpenConfig max-queue-len)
        self.queue_watermark = np.zeros((n, len(PRIORITIES)))
        self.pg_watermark = np.zeros((n, len(PRIORITIES)))
        self.headroom_watermark = np.zeros((n, len(PRIORITIES)))
        self.resets = 0  # counter resets (reboots, clears): what the twin applied to the watermarks before is gone
        # SONiC: each port's CONFIG_DB alias (the config engine keeps it in step); sonic-gnmi keys its virtual
        # paths by it when the twin runs with aliases (Twin.sonic_aliases)
        self.aliases = [f"etp{i + 1}" for i in range(n)]
        self.boot_ns = boot_ns
        self.rebooting_until = 0
        # gNMI: a stream drop bumps the epoch (servers end their streams) and blocks new ones until the time.
        self.stream_epoch = 0
        self.gnmi_blocked_until = 0

    def values(self, now_ns: int, rows: slice | np.ndarray | None = None) -> np.ndarray:
        """Cumulative counters (uint64, wrapping at 2**64) of the given ports at `now_ns`."""
        sel = slice(None) if rows is None else rows
        out: np.ndarray = self.base[sel] + self._grown(now_ns, sel).astype(np.uint64)
        return out

    def _grown(self, now_ns: int, sel: slice | np.ndarray) -> np.ndarray:
        """What each counter grew since `t0`, with the fraction of a count left over at the last rebase: a counter
        moving slower than the twin changes state (0.5 frame errors/s, while flaps change it every second) still
        counts at its rate instead of losing its fraction at every change."""
        dt = (now_ns - self.t0[sel]).astype(np.float64) / NS
        grown: np.ndarray = self.frac[sel] + self.rate[sel] * dt[:, None]
        return grown

    def value(self, port: str, column: str, now_ns: int) -> int:
        i = self.index[port]
        return int(self.values(now_ns, np.array([i]))[0, COL[column]])

    def rebase(self, now_ns: int) -> None:
        grown = self._grown(now_ns, slice(None))
        whole = np.floor(grown)
        self.base = self.base + whole.astype(np.uint64)
        self.frac = grown - whole
        self.t0[:] = now_ns

    def reset_counters(self, now_ns: int) -> None:
        self.resets += 1
        self.queue_watermark[:] = 0
        self.pg_watermark[:] = 0
        self.headroom_watermark[:] = 0
        self.base[:] = 0
        self.frac[:] = 0.0
        self.t0[:] = now_ns

    def bump(self, row: int, column: str, by: int = 1) -> None:
        self.base[row, COL[column]] += np.uint64(by)


class Twin:
    """All switches of one fabric, plus the endpoints (server NICs, far-end DRs) they connect to."""

    def __init__(
        self,
        fabric: Fabric,
        clock: Callable[[], int] = time.time_ns,
        eos_version: str | None = None,
        sonic_version: str | None = None,
    ):
        """`eos_version`: the release every EOS switch runs (default DEFAULT_EOS_VERSION); `sonic_version` every
        SONiC switch's (lab/sonic_releases.py, default 202411); `Switch.os_version` sets one switch apart."""
        self.fabric = fabric
        self.clock = clock
        now = clock()
        self.switches: dict[str, Switch] = {}
        self.sonic_aliases = False  # sonic-gnmi's alias mode: COUNTERS_DB keys are the ports' aliases
        self.peers: dict[tuple[str, str], Endpoint] = {}
        self.lldp_swaps: dict[tuple[str, str], Endpoint] = {}  # miscable faults: port -> the end it is really on
        self.links: dict[LinkKey, float] = {}  # link -> speed
        for dev in fabric.switches():
            if dev.is_remote:
                continue
            ports, speeds = [], []
            for link in sorted(fabric.links_of(dev.name), key=lambda lk: _port_order(_local(lk, dev.name).port)):
                local = _local(link, dev.name)
                ports.append(local.port)
                speeds.append(float(link.speed_gbps or 0))
                self.peers[(dev.name, local.port)] = link.other(dev.name, local.port)
                self.links[link_key(link.a, link.b)] = float(link.speed_gbps or 0)
            self.switches[dev.name] = Switch(dev.name, dev.role, dev.platform or "eos", ports, speeds, now)
            if dev.platform == "sonic":
                self.switches[dev.name].os_version = version_text(sonic_version or DEFAULT_SONIC_RELEASE)
            elif eos_version is not None:
                self.switches[dev.name].os_version = eos_version
        # Each DCI's long-haul ports (DR side), one ECMP group: cross-campus traffic spreads over its up members.
        self.dci_ports: dict[str, list[Endpoint]] = {}
        for (device, port), peer in sorted(self.peers.items()):
            far = fabric.device(peer.device) if peer.device in fabric else None
            if far is not None and far.site is not None:
                self.dci_ports.setdefault(far.site, []).append(Endpoint(device, port))
        self.traffic = self._structure()  # its node order is self.switches' order
        self.bgp = Bgp(Underlay(fabric), self.switches, now)  # the eBGP underlay (lab/bgp.py)
        # Per switch (in self.switches' order): each port's link as an id (cut links are found by id), and the
        # ports facing another twin switch, grouped by it: (its index, our rows, its rows).
        self._link_ids: dict[LinkKey, int] = {}
        self._row_link_ids: list[np.ndarray] = []
        for name, sw in self.switches.items():
            keys = [link_key(Endpoint(name, p), self.peers[(name, p)]) for p in sw.ports]
            ids = [self._link_ids.setdefault(k, len(self._link_ids)) for k in keys]
            self._row_link_ids.append(np.asarray(ids, dtype=np.int64))
        self._switch_peers: list[list[tuple[int, np.ndarray, np.ndarray]]] = []
        for t in self.traffic.ports:
            facing = t.peer >= 0
            self._switch_peers.append([
                (int(y), np.nonzero(facing & (t.peer == y))[0], t.peer_row[facing & (t.peer == y)])
                for y in np.unique(t.peer[facing])
            ])  # fmt: skip
        self._flowed: dict[object, dict[str, np.ndarray]] = {}  # recent traffic inputs -> columns (a few)
        # as many as hold a workload's on and off phases with their reconcile rounds on a small fabric, fewer on a big
        # one (each is every port's traffic columns: ~9 MB at 512 switches)
        total_ports = sum(len(sw.ports) for sw in self.switches.values())
        self._flowed_max = max(4, min(16, 200_000 // max(total_ports, 1)))
        # Workloads laid over the traffic (lab/workloads.py): id -> record with `overlay`, `duty`, `on`
        self.workloads: dict[str, Any] = {}
        self.congestion = CongestionSettings()
        self._solver = Solver()
        self.congested: dict[tuple[str, str], CongestionView] = {}  # the model's last answer per (switch, port)
        self._cong_passes: dict[tuple[str, str], float] = {}  # a congested egress: share DCQCN lets through
        self._cong_drops: dict[tuple[str, str], float] = {}  # its headroom overflow / tail drops
        self._cong_pauses: list[PauseSource] = []  # XOFF its ingresses send upstream
        self._cables: dict[tuple[str, str], float] = {}  # (switch, port) -> its cable's length (m), as looked up
        self._cable_arrays: dict[int, np.ndarray] = {}  # switch number -> each row's cable length (m)
        self._node = {name: x for x, name in enumerate(self.switches)}
        self._traffic_key: object = None  # the inputs of the last traffic solve (_apply_traffic)
        self._routes: tuple[object, traffic.Routes] | None = None  # the last routes, with the cables up they are for
        self._hot_memo: dict[object, list[tuple[str, int, int, tuple[Ingress, ...], float]]] = {}
        self._nic_memo: dict[object, dict[tuple[int, int], np.ndarray]] = {}  # traffic state -> NIC counter rates
        self._nic_rows: set[tuple[int, int]] = set()  # (switch number, row) whose NIC counters move now
        self._hot_key: object = None  # the traffic state the last hot ports were found in
        self._solved: dict[object, list[PortOutcome]] = {}  # (hot key, configs, NIC knobs) -> the model's answer
        self._watermarked: set[object] = set()  # traffic states whose watermarks are applied (since any reset)
        self._solve_key: object = None
        # (clean traffic, answer) -> every rate after the throttles, the pauses, the reconciled passes; as many as fit
        # THROTTLED_MEMO_BYTES (each entry is every port's rate row: ~0.3 MB at small-pod, ~37 MB at 512 switches)
        self._throttled_memo: dict[object, tuple[list[np.ndarray], dict[QueueKey, float], dict[Any, float]]] = {}
        entry = sum(sw.rate.nbytes for sw in self.switches.values())
        self._throttled_max = min(HOT_MEMO, THROTTLED_MEMO_BYTES // max(entry, 1))
        self.dlb: set[str] = set()  # switches with DLB (flowlets) on their ECMP groups (EOS config)
        self.flowlets: dict[str, FlowletView] = {}  # the flowlet model's answer per DLB switch (its uplink group)
        self._flowlet_cache: dict[object, FlowletResult] = {}
        self._dlb_weights: dict[tuple[str, str], float] = {}  # DLB members' ECMP weights from the flowlet shares
        self.link_down: set[LinkKey] = set()
        self.flap_down: set[LinkKey] = set()
        self.pause_sources: dict[str, list[PauseSource]] = {}
        self.corruption: dict[tuple[str, str], float] = {}  # receiving (device, port) -> frame error rate
        self.optics_loss_db: dict[tuple[str, str], float] = {}
        self.silent: dict[str, float] = {}  # switch -> rate of packets corrupted inside it
        self.egress_scale: dict[tuple[str, str], float] = {}  # a port's share of its ECMP group's load, x nominal
        self.egress_drops: dict[tuple[str, str], float] = {}  # (device, port) -> share of its egress packets dropped
        # switches in maintenance (EOS `maintenance`/`unit System`/`quiesce`, SONiC `TSA`): their peers de-prefer them
        self.maintenance: set[str] = set()
        # per switch, the peer addresses its outbound policy de-prefers (set_depreferred): a drained link's sessions
        self.depreferred: dict[str, frozenset[str]] = {}
        self.optics_heat_c: dict[tuple[str, str], float] = {}  # (device, port) -> degrees a failing module runs hotter
        # The switches' PFC watchdogs (detection and counters only: the twin models every action as notify-only,
        # so a stuck queue keeps its pause dynamics): queue -> when it became stuck, the queues declared stormed,
        # and a stormed queue -> when it was last freed of pause (it recovers after the recovery time free).
        self.wd_stuck_since: dict[QueueKey, int] = {}
        self.wd_stormed: set[QueueKey] = set()
        self.wd_freed: dict[QueueKey, int] = {}
        self.oper_events: deque[tuple[int, str, str, bool]] = deque(maxlen=10_000)
        self.listeners: list[OperListener] = []
        self.counter_listeners: list[CounterListener] = []
        self._timers: list[tuple[int, int, Callable[[int], None], Recompute]] = []
        self._seq = itertools.count()
        self.dirty = True
        self.links_dirty = False  # only ports' up/down inputs changed since the last recompute (Recompute.LINKS)
        self._rates_owed: int | None = None  # when the rates deferred after a LINKS change are due
        self.now = now
        # each SONiC switch's STATE_DB NEIGH_STATE_TABLE, as bgpmon writes it from FRR every 15 s (lab/bgp.py)
        self.daemons: ControlPlane | None = None  # `lab up --daemons real`: FRR and lldpd under the SONiC surfaces
        sonic = [name for name, sw in self.switches.items() if sw.platform == "sonic"]
        self.bgpmon = BgpMon(sonic, self.frr_states, lambda at, fn: self.schedule(at, fn, Recompute.RATES), now)
        self.advance(now)

    # --- queries -------------------------------------------------------------------------------
    def switch(self, name: str) -> Switch:
        try:
            return self.switches[name]
        except KeyError:
            raise KeyError(f"no switch {name!r} in this twin") from None

    def peer(self, device: str, port: str) -> Endpoint | None:
        return self.peers.get((device, port))

    def lldp_peer(self, device: str, port: str) -> Endpoint | None:
        """Who is at the far end of this port's cable: the cabled peer, unless a `miscable` fault put another cable's
        far end on it (the traffic model keeps the blueprint's paths: the fault is about what the fabric says it is
        wired as). What LLDP has learned of it is `lldp_heard`."""
        return self.lldp_swaps.get((device, port)) or self.peers.get((device, port))

    def frr_states(self, device: str) -> dict[str, str]:
        """Each BGP neighbour's state as the switch's FRR names it (`show bgp summary json`), by neighbour address."""
        return {s.peer_address: self.bgp.frr_state(s, st) for s, st in self.bgp.sessions_of(device)}

    def lldp_heard(self, sw: Switch, row: int, now: int | None = None) -> Endpoint | None:
        """The neighbour LLDP knows on the port at `now` (default: the twin's time): none while the port is not
        operational (802.1AB deletes it), none until LLDP_LEARN_NS after it came up (the peer's first LLDPDU)."""
        if not sw.oper_up[row] or (self.now if now is None else now) < sw.up_since[row] + LLDP_LEARN_NS:
            return None
        return self.lldp_peer(sw.name, sw.ports[row])

    def is_switch(self, device: str) -> bool:
        return device in self.switches

    def port_config(self, device: str, port: str) -> PortConfig:
        sw = self.switch(device)
        return sw.config[sw.index[port]]

    # --- changes -------------------------------------------------------------------------------
    def set_port_config(self, device: str, port: str, config: PortConfig) -> None:
        sw = self.switch(device)
        row = sw.index[port]
        before = sw.config[row]
        sw.config[row] = config
        if replace(before, admin_up=config.admin_up, description=config.description) == config:
            self.links_dirty = True  # `shutdown` / `no shutdown` or a description: the ports first, rates soon
        else:
            self.dirty = True

    def schedule(self, at_ns: int, action: Callable[[int], None], needs: Recompute = Recompute.FULL) -> None:
        """Run `action(at)` at `at_ns` (twin clock), then recompute what `needs` says (Recompute)."""
        heapq.heappush(self._timers, (at_ns, next(self._seq), action, needs))

    def touch(self) -> None:
        self.dirty = True

    def set_depreferred(self, device: str, addresses: frozenset[str]) -> None:
        """The peers `device` advertises least preferred paths to (RFC 8326, a prepended AS path): each of them stops
        sending over its link to `device` where it has another path."""
        if self.depreferred.get(device, frozenset()) != addresses:
            if addresses:
                self.depreferred[device] = addresses
            else:
                self.depreferred.pop(device, None)
            self.dirty = True

    def _depreferred_egress(self) -> set[tuple[str, str]]:
        """The ports whose switch de-prefers the link they are on: the far ends of the de-preferred sessions."""
        out = set()
        for device, addresses in self.depreferred.items():
            for s in self.bgp.underlay.sessions(device):
                if s.peer_address in addresses:
                    out.add((s.peer.device, s.peer.port))
        return out

    def set_dlb(self, device: str, on: bool) -> None:
        """The switch load-balances its ECMP groups by flowlets (its config says so)."""
        if (device in self.dlb) != on:
            (self.dlb.add if on else self.dlb.discard)(device)
            self.dirty = True

    def set_maintenance(self, device: str, on: bool) -> None:
        """The switch enters or leaves maintenance (its config says so): traffic moves off it, or back."""
        if (device in self.maintenance) != on:
            (self.maintenance.add if on else self.maintenance.discard)(device)
            self.dirty = True

    def next_timer(self) -> int | None:
        """When the earliest scheduled change is due (twin clock, ns), or None."""
        return self._timers[0][0] if self._timers else None

    def advance(self, now_ns: int | None = None) -> int:
        """Run due timers (each at its own time) and bring rates up to date; returns the time reached."""
        now = self.clock() if now_ns is None else now_ns
        while self._timers and self._timers[0][0] <= now:
            at, _, action, needs = heapq.heappop(self._timers)
            if self.dirty or self.links_dirty:
                self._recompute(at, defer=not self.dirty)
            action(at)
            if needs is Recompute.RATES:
                if self._rates_owed == at:
                    self._recompute(at)
            elif needs is Recompute.TRAFFIC:
                self._recompute(at, ports=self.dirty or self.links_dirty)
            else:
                self._recompute(at, defer=needs is Recompute.LINKS and not self.dirty)
        if self.dirty or self.links_dirty:
            self._recompute(now, defer=not self.dirty)
        self.now = max(self.now, now)
        return now

    # --- the rules -----------------------------------------------------------------------------
    def _recompute(self, now: int, defer: bool = False, ports: bool = True) -> None:
        """Bring every port's state and rates up to `now`. `defer`: only ports went up or down (or nothing
        changed), so the rates may follow at RATES_LAG_NS: until then every rate stands as it was, a consistent
        picture of the moment before (one traffic solve for a burst of changes). `ports` False: nothing but the
        offered traffic changed (Recompute.TRAFFIC), the ports' states are not worked out again."""
        for sw in self.switches.values():
            sw.rebase(now)
        changes = self._ports_up(now) if ports else []
        if changes or self.bgp.dirty:
            sws = self.switches
            self.bgp.update(lambda d, p: bool(sws[d].oper_up[sws[d].index[p]]), now)
        if defer:
            # The rates stand (a consistent picture, RATES_LAG_NS old at most) until the solve they are owed.
            if changes and self._rates_owed is None:
                self._rates_owed = now + RATES_LAG_NS
                self.schedule(self._rates_owed, lambda _at: None, Recompute.RATES)
        else:
            self._rates_owed = None
            paused = self._flow(congestion=False)
            if (self.dlb or self._dlb_weights) and self._flowlet_groups():
                paused = self._flow(congestion=False)  # the members carry the flowlet model's shares
            hot = self._hot_ports()
            if hot or self.congested:
                self._solve_congestion(hot)
                if self.congested:
                    paused = self._throttled()
            self._watch(paused, now)
            self._apply_ecn(paused)
            self._apply_congestion()
            self._apply_flowlets()
            self._apply_physical()
        self.dirty = False
        self.links_dirty = False
        for device, port, up in changes:
            self.oper_events.append((now, device, port, up))
            for listener in self.listeners:
                listener(device, port, up, now)

    def _throttled(self) -> dict[QueueKey, float]:
        """The traffic under the model's throttles, reconciled (see _reconcile). The same clean traffic and the same
        answer (a workload's phase seen before) give the same rates: they are remembered whole, as many as fit."""
        key = (self._traffic_key, self._solve_key)
        got = self._throttled_memo.get(key)
        if got is not None:
            rates, paused, passes = got
            for sw, r in zip(self.switches.values(), rates, strict=True):
                sw.rate = r.copy()  # the rules after this one write into it
            self._cong_passes = dict(passes)
            self._traffic_key = ("throttled", key)  # what the rules after this one key their memories by
            return dict(paused)
        paused = self._flow(congestion=True)
        for _ in range(RECONCILE_ROUNDS):
            if not self._reconcile():
                break
            paused = self._flow(congestion=True)
        if self._throttled_max:
            if len(self._throttled_memo) >= self._throttled_max:
                self._throttled_memo.pop(next(iter(self._throttled_memo)))
            rates = [sw.rate.copy() for sw in self.switches.values()]
            self._throttled_memo[key] = (rates, dict(paused), dict(self._cong_passes))
        self._traffic_key = ("throttled", key)
        return paused

    def _flow(self, congestion: bool) -> dict[QueueKey, float]:
        """Rates from zero, pauses, traffic; with the congestion model's last answer (its throttles, drops and
        XOFFs) or without it (what would be offered)."""
        self._rates()
        paused, nic_paused = self._apply_pauses(congestion)
        self._apply_traffic(paused, nic_paused, congestion)
        return paused

    def _ports_up(self, now: int) -> list[tuple[str, str, bool]]:
        """Each port's oper state from the admin states of both ends, reboots and cut links; the ports that
        flipped (carrier transitions counted; a dark port reads -40 dBm)."""
        changes: list[tuple[str, str, bool]] = []
        admin = [
            np.fromiter((c.admin_up for c in sw.config), dtype=bool, count=len(sw.config)) & (now >= sw.rebooting_until)
            for sw in self.switches.values()
        ]
        cut = self.link_down | self.flap_down
        cut_ids = np.fromiter((self._link_ids.get(k, -1) for k in cut), dtype=np.int64, count=len(cut)) if cut else None
        for x, sw in enumerate(self.switches.values()):
            new_up = admin[x].copy()
            for y, rows, peer_rows in self._switch_peers[x]:  # the far end's admin state (NICs, far DRs: up)
                new_up[rows] &= admin[y][peer_rows]
            if cut_ids is not None:
                new_up &= ~np.isin(self._row_link_ids[x], cut_ids)
            flipped = np.nonzero(new_up != sw.oper_up)[0]
            for row in flipped:
                sw.bump(int(row), "if.carrier-transitions")
                changes.append((sw.name, sw.ports[row], bool(new_up[row])))
                if new_up[row]:
                    sw.up_since[row] = now
            sw.oper_up = new_up
            if len(flipped):
                sw.rx_power[flipped] = np.where(new_up[flipped], sw.rx_power_nominal[flipped], -40.0)
                sw.pre_fec_ber[flipped] = np.where(new_up[flipped], HEALTHY_PRE_FEC_BER, 0.0)
        return changes

    def _rates(self) -> None:
        """Every rate from zero and every port's optics at their nominal, before the rules set them."""
        for sw in self.switches.values():
            sw.rate = np.zeros_like(sw.rate)
            sw.rx_power = np.where(sw.oper_up, sw.rx_power_nominal, -40.0)
            sw.pre_fec_ber = np.where(sw.oper_up, HEALTHY_PRE_FEC_BER, 0.0)

    def _row(self, ep: Endpoint) -> tuple[Switch, int] | None:
        sw = self.switches.get(ep.device)
        if sw is None:
            return None
        row = sw.index[ep.port]
        return (sw, row) if sw.oper_up[row] else None

    def _pause(
        self,
        sender: Endpoint,
        priority: int,
        fraction: float,
        stuck: dict[QueueKey, float],
        nics: dict[QueueKey, float] | None = None,
    ) -> bool:
        """Apply one pause on the link from `sender`; True if the receiver honours it fully (its queue is stuck).
        A server NIC always honours it (RoCE NICs run PFC on the lossless class): `nics` gets the paused share
        of its egress, keyed by the switch port that sent the pause."""
        receiver = self.peer_of(sender)
        if receiver is None:
            return False
        tx = self._row(sender)
        rx = self._row(receiver)
        if tx is None and self.is_switch(sender.device):
            return False
        if rx is None and self.is_switch(receiver.device):
            return False
        frames = pause_frames_per_s(self.links.get(link_key(sender, receiver), 400.0)) * fraction
        if tx is not None:
            sw, row = tx
            sw.rate[row, COL[f"pfc{priority}.pfc-on-total-tx-time"]] = min(
                NS, sw.rate[row, COL[f"pfc{priority}.pfc-on-total-tx-time"]] + fraction * NS
            )
            sw.rate[row, COL[f"pfc{priority}.out-frames"]] += frames
            sw.rate[row, COL["eth.out-mac-pause-frames"]] += frames
        if rx is None:
            if nics is not None and tx is not None and receiver.device in self.fabric:
                key = (sender.device, sender.port, priority)
                nics[key] = min(1.0, max(fraction, nics.get(key, 0.0)))
            return False
        sw, row = rx
        sw.rate[row, COL[f"pfc{priority}.in-frames"]] += frames
        sw.rate[row, COL["eth.in-mac-pause-frames"]] += frames
        if not sw.config[row].honours_pause(priority):
            return False
        key = (sw.name, sw.ports[row], priority)
        f = min(1.0, max(fraction, stuck.get(key, 0.0)))
        if f <= stuck.get(key, 0.0):
            return f >= 0.99
        stuck[key] = f
        return f >= 0.99

    def peer_of(self, ep: Endpoint) -> Endpoint | None:
        """The far end of the link on `ep`, which may be a server NIC or far-end DR port."""
        peer = self.peers.get((ep.device, ep.port))
        if peer is not None:
            return peer
        link = self.fabric.link_of(ep.device, ep.port)
        return link.other(ep.device, ep.port) if link else None

    def _apply_pauses(self, congestion: bool = False) -> tuple[dict[QueueKey, float], dict[QueueKey, float]]:
        """Pause frames from every source, spread along the fabric; returns each paused switch queue's paused
        fraction, and each paused NIC's (keyed by the switch port that pauses it). The traffic model turns them
        into what flows."""
        paused: dict[QueueKey, float] = {}
        nics: dict[QueueKey, float] = {}
        frontier: list[tuple[str, int, int]] = []  # (switch whose egress queue is stuck, priority, hop)
        for sources in [*self.pause_sources.values(), self._cong_pauses if congestion else []]:
            for src in sources:
                if self._pause(src.sender, src.priority, src.fraction, paused) and src.propagate:
                    receiver = self.peer_of(src.sender)
                    if receiver is not None:
                        frontier.append((receiver.device, src.priority, 1))
        # A switch with a stuck egress fills its ingress buffers and pauses its other ports: fully toward
        # switches one hop from the origin, partially beyond (traffic still drains, so it is not stuck).
        seen: set[tuple[str, int]] = set()
        while frontier:
            device, prio, hop = frontier.pop()
            if (device, prio) in seen or hop > 2:
                continue
            seen.add((device, prio))
            sw = self.switches[device]
            for row, port in enumerate(sw.ports):
                if not sw.oper_up[row] or not sw.config[row].honours_pause(prio):
                    continue
                if (device, port, prio) in paused:
                    continue  # the stuck port itself
                peer = self.peers[(device, port)]
                fraction = 1.0 if hop == 1 and self.is_switch(peer.device) else 0.5
                if self._pause(Endpoint(device, port), prio, fraction, paused, nics):
                    frontier.append((peer.device, prio, hop + 1))
        for (device, port, prio), f in paused.items():
            sw = self.switches[device]
            sw.rate[sw.index[port], COL[f"pfc{prio}.pfc-on-total-rx-time"]] += f * NS
        return paused, nics

    def _watch(self, paused: dict[QueueKey, float], now: int) -> None:
        """The PFC watchdog of every armed port (platforms.md: paused with nothing sent, held for the detection
        time): `stuck-count` rises once when a queue has been stuck for its timeout, `recovery-count` once it has
        been free of pause for the recovery time. A queue paused < 99% of the time still drains: never stuck."""
        stuck = {k for k, f in paused.items() if f >= 0.99 and self.port_config(k[0], k[1]).watchdog}
        for k in stuck - self.wd_stuck_since.keys():
            self.wd_stuck_since[k] = now
            self.wd_freed.pop(k, None)
            self.schedule(now + self.port_config(k[0], k[1]).watchdog_timeout_ns, self._wd_expiry(k, now))
        for k in self.wd_stuck_since.keys() - stuck:
            del self.wd_stuck_since[k]
            if k in self.wd_stormed:
                self.wd_freed[k] = now
                self.schedule(now + self.port_config(k[0], k[1]).watchdog_recovery_ns, self._wd_recovery(k, now))

    def _wd_expiry(self, key: QueueKey, since: int) -> Callable[[int], None]:
        def fire(at: int) -> None:
            if self.wd_stuck_since.get(key) == since and key not in self.wd_stormed:
                self.wd_stormed.add(key)
                self._event_count(key[0], key[1], f"wd{key[2]}.stuck-count", at)

        return fire

    def _wd_recovery(self, key: QueueKey, freed: int) -> Callable[[int], None]:
        def fire(at: int) -> None:
            if self.wd_freed.get(key) == freed:  # not stuck again since (nor freed again: that one has its timer)
                del self.wd_freed[key]
                self.wd_stormed.discard(key)
                self._event_count(key[0], key[1], f"wd{key[2]}.recovery-count", at)

        return fire

    def _event_count(self, device: str, port: str, column: str, at: int) -> None:
        sw = self.switches[device]
        sw.bump(sw.index[port], column)
        for listener in self.counter_listeners:
            listener(device, port, column, at)

    def forget_watchdogs(self, device: str) -> None:
        """A reboot: the switch's watchdogs start over (its counters were reset with the rest)."""
        for k in [k for k in self.wd_stormed if k[0] == device]:
            self.wd_stormed.discard(k)
        for k in [k for k in self.wd_stuck_since if k[0] == device]:
            del self.wd_stuck_since[k]
        for k in [k for k in self.wd_freed if k[0] == device]:
            del self.wd_freed[k]

    def _structure(self) -> traffic.Structure:
        """The traffic model's view of this twin: what each port faces, what each server NIC offers, and what each
        far campus sends over its DCI."""
        names = list(self.switches)
        node = {name: i for i, name in enumerate(names)}
        sites = sorted(self.dci_ports)
        site_load = {site: 0.0 for site in sites}
        tables: list[traffic.Ports] = []
        for name in names:
            sw = self.switches[name]
            n = len(sw.ports)
            t = traffic.Ports(
                kind=np.full(n, traffic.Kind.OTHER, dtype=np.int64),
                peer=np.full(n, -1, dtype=np.int64),
                peer_row=np.full(n, -1, dtype=np.int64),
                site=np.full(n, -1, dtype=np.int64),
                offered=np.zeros(n),
            )
            for row, port in enumerate(sw.ports):
                peer = self.peers[(name, port)]
                far = self.fabric.device(peer.device) if peer.device in self.fabric else None
                if peer.device in self.switches:
                    t.peer[row], t.peer_row[row] = node[peer.device], self.switches[peer.device].index[peer.port]
                    step = TIER[self.switches[peer.device].role] - TIER[sw.role]
                    t.kind[row] = traffic.Kind.UP if step > 0 else traffic.Kind.DOWN if step < 0 else traffic.Kind.SIDE
                elif far is not None and far.site is not None:
                    t.kind[row], t.site[row] = traffic.Kind.REMOTE, sites.index(far.site)
                    t.offered[row] = dr_utilisation(name, port) / DR_UTILISATION  # the far campus's hash weight
                    site_load[far.site] += dr_utilisation(name, port) * sw.speeds[row] * 1e9 / 8
                elif far is not None and far.role is Role.SERVER:
                    t.kind[row] = traffic.Kind.SERVER
                    t.offered[row] = utilisation(*_lower_end(name, port, peer)) * sw.speeds[row] * 1e9 / 8
            tables.append(t)
        roles = [self.switches[n].role for n in names]
        rails = [self.fabric.device(n).rail for n in names]
        return traffic.build(names, roles, rails, tables, sites, site_load)

    def _apply_traffic(
        self, paused: dict[QueueKey, float], nic_paused: dict[QueueKey, float], congestion: bool = False
    ) -> None:
        """Every port's traffic from the one model (lab/traffic.py): in and out packets and octets, the queues'
        share of what a port sends (a paused queue sends its part only when unpaused) and egress drops. Most
        changes (an optic drifting, a watchdog timer, a description) leave every input the same: the last answer
        is copied then."""
        routed = {name: sw.oper_up & self.bgp.routed(name, sw.ports) for name, sw in self.switches.items()}
        key = (
            tuple(r.tobytes() for r in routed.values()),
            tuple(sorted(paused.items())),
            tuple(sorted(nic_paused.items())),
            tuple(sorted(self.egress_scale.items())),
            tuple(sorted(self._dlb_weights.items())),
            tuple(sorted(self.egress_drops.items())),
            tuple(sorted(self.maintenance)),
            tuple(sorted(self.depreferred.items())),
            tuple((sw.name, row, self._frame_error_rate(sw, row)) for sw, row in self._receiving_errors()),
            tuple((w, r.on, r.duty) for w, r in sorted(self.workloads.items())),
            tuple(sorted(self._cong_passes.items())) if congestion else (),
            tuple(sorted(self._cong_drops.items())) if congestion else (),
        )
        self._traffic_key = key
        cached = self._flowed.get(key)
        if cached is not None:
            for name, block in cached.items():
                self.switches[name].rate[:, TRAFFIC] = block
            return
        names = self.traffic.names
        held = {name: np.zeros((len(self.switches[name].ports), len(PRIORITIES))) for name in names}
        for (device, port, prio), f in paused.items():
            held[device][self.switches[device].index[port], prio] = f
        nic_held = {name: np.zeros(len(self.switches[name].ports)) for name in names}
        for (device, port, prio), f in nic_paused.items():
            nic_held[device][self.switches[device].index[port]] += f * SHARES[prio]
        up, weight, passes, nic_passes, drops, rx_errors = [], [], [], [], [], []
        for name, t in zip(names, self.traffic.ports, strict=True):
            sw = self.switches[name]
            up.append(routed[name])  # a port whose BGP session is down carries no routed traffic (lab/bgp.py)
            weight.append(np.where(t.kind == traffic.Kind.REMOTE, t.offered, 1.0))  # long-haul: the DR's hash
            passes.append(1.0 - held[name] @ SHARES)
            nic_passes.append(1.0 - nic_held[name])
            drops.append(np.zeros(len(sw.ports)))
            rx_errors.append(np.zeros(len(sw.ports)))
        node = {name: i for i, name in enumerate(names)}
        for (device, port), scale in [*self.egress_scale.items(), *self._dlb_weights.items()]:
            weight[node[device]][self.switches[device].index[port]] *= scale
        if self.maintenance:  # RFC 8326: paths through a switch in maintenance are least preferred, used only alone
            quiet = np.array([n in self.maintenance for n in names] + [False], dtype=bool)  # [-1]: not a switch
            for i, t in enumerate(self.traffic.ports):
                weight[i] = np.where(quiet[t.peer], weight[i] * MAINTENANCE_WEIGHT, weight[i])
        for device, port in self._depreferred_egress():  # least preferred: used only where no other path is left
            weight[node[device]][self.switches[device].index[port]] *= MAINTENANCE_WEIGHT
        for (device, port), share in self.egress_drops.items():
            drops[node[device]][self.switches[device].index[port]] = share
        if congestion:
            for (device, port), share in self._cong_passes.items():
                passes[node[device]][self.switches[device].index[port]] *= share
            for (device, port), share in self._cong_drops.items():
                row = self.switches[device].index[port]
                drops[node[device]][row] = 1 - (1 - drops[node[device]][row]) * (1 - share)
        for sw, row in self._receiving_errors():
            rx_errors[node[sw.name]][row] = self._frame_error_rate(sw, row)
        conditions = traffic.Conditions(up, weight, passes, nic_passes, drops, rx_errors)
        if self._routes is None or self._routes[0] != key[0]:  # the routes follow the cables up (key[0]) only
            self._routes = (key[0], traffic.routes(self.traffic, up))
        flowed = traffic.flow(self.traffic, conditions, self._routes[1])
        for rec in self.workloads.values():  # each workload's overlay adds its loads (flow is linear in offers)
            if rec.on:
                extras = traffic.flow(rec.overlay, conditions, self._routes[1])
                for total, extra in zip(flowed, extras, strict=True):
                    total.offered += extra.offered * rec.duty
                    total.sent += extra.sent * rec.duty
                    total.received += extra.received * rec.duty
        for name, loads in zip(names, flowed, strict=True):
            sw = self.switches[name]
            sent = loads.sent / FRAME_BYTES
            for column in ("if.out-pkts", "if.out-unicast-pkts"):
                sw.rate[:, COL[column]] = sent
            sw.rate[:, COL["if.out-octets"]] = loads.sent
            for column in ("if.in-pkts", "if.in-unicast-pkts"):
                sw.rate[:, COL[column]] = loads.received / FRAME_BYTES
            sw.rate[:, COL["if.in-octets"]] = loads.received
            dropped = (loads.offered - loads.sent) / FRAME_BYTES
            sw.rate[:, COL["if.out-discards"]] = dropped
            sw.rate[:, COL["q3.dropped-pkts"]] = dropped  # the RoCE class is the one congested
            queues = SHARES[None, :] * (1.0 - held[name])
            total = queues.sum(axis=1, keepdims=True)
            queues = queues / np.where(total > 0, total, 1.0)
            sw.rate[:, TRANSMIT_PKTS] = sent[:, None] * queues
            sw.rate[:, TRANSMIT_OCTETS] = loads.sent[:, None] * queues
            sw.rate[:, COL["fec.corrected-codewords"]] = sw.speeds * 1e9 * HEALTHY_PRE_FEC_BER * sw.oper_up
        if len(self._flowed) >= self._flowed_max:  # clean, congested and reconciled solves of the last few states
            self._flowed.pop(next(iter(self._flowed)))
        self._flowed[key] = {name: sw.rate[:, TRAFFIC].copy() for name, sw in self.switches.items()}

    def _apply_ecn(self, paused: dict[QueueKey, float]) -> None:
        """ECN marks where a queue passes its thresholds: each configured queue's depth follows its port's load
        (a paused queue has only the unpaused time to send it), and WRED marks that share of what it sends."""
        for sw in self.switches.values():
            util = sw.rate[:, COL["if.out-octets"]] * 8 / np.maximum(sw.speeds * 1e9, 1.0)
            for row, cfg in enumerate(sw.config):
                for q, (min_b, max_b, prob) in cfg.ecn.items():
                    held = paused.get((sw.name, sw.ports[row], q), 0.0)
                    share = ecn_mark_share(float(util[row]), held, min_b, max_b, prob)
                    sw.rate[row, COL[f"q{q}.ecn-marked-pkts"]] = sw.rate[row, COL[f"q{q}.transmit-pkts"]] * share

    # --- the congestion model (lab/congestion): congested lossless queues -------------------------
    def _cable_m(self, device: str, port: str) -> float:
        got = self._cables.get((device, port))
        if got is None:
            link = self.fabric.link_of(device, port)
            got = self._cables[(device, port)] = (
                float(link.length_m) if link is not None and link.length_m else DEFAULT_CABLE_M
            )
        return got

    def dr_cnp(self, device: str) -> bool:
        """Does this switch generate CNPs for long-haul traffic it marks (CongestionSettings.dr_cnp)?"""
        sw = self.switches[device]
        if sw.role is not Role.DR:
            return False
        chosen = self.congestion.dr_cnp
        return sw.platform != "sonic" if chosen is None else device in chosen

    def _cable_rows(self, x: int) -> np.ndarray:
        """Each port's cable length (m) on switch number x, looked up once (cables do not change while the twin
        runs)."""
        got = self._cable_arrays.get(x)
        if got is None:
            sw = self.switches[self.traffic.names[x]]
            got = self._cable_arrays[x] = np.array([self._cable_m(sw.name, port) for port in sw.ports])
        return got

    def _hot_ports(self) -> list[HotPort]:
        """Every up egress port offered at least HOT_SHARE of its line rate, with the ingresses feeding it (each
        brings its received traffic's share of the ports it may go out of: valley-free, nothing from an up port goes
        back up), their flows and feedback delays from the cables."""
        # the same traffic (a workload's phase seen before) feeds the same queues: only their config is read again
        memo_key = self._hot_key = (self._traffic_key, self.congestion.dr_cnp)
        feeds = self._hot_memo.get(memo_key)
        if feeds is None:
            feeds = self._hot_feeds()
            if len(self._hot_memo) >= HOT_MEMO:
                self._hot_memo.pop(next(iter(self._hot_memo)))
            self._hot_memo[memo_key] = feeds
        out = []
        for name, h, x, ingresses, capacity in feeds:
            sw = self.switches[name]
            out.append(HotPort(name, h, x, self._queue_config(sw, h, ingresses, capacity), ingresses))
        return out

    def _hot_feeds(self) -> list[tuple[str, int, int, tuple[Ingress, ...], float]]:
        out: list[tuple[str, int, int, tuple[Ingress, ...], float]] = []
        for x, (name, sw) in enumerate(self.switches.items()):
            offered = sw.rate[:, COL["if.out-octets"]] + sw.rate[:, COL["if.out-discards"]] * FRAME_BYTES
            cap = sw.speeds * 1e9 / 8
            hot = np.nonzero(sw.oper_up & (cap > 0) & (offered >= HOT_SHARE * cap))[0]
            if not len(hot):
                continue
            for h in hot.tolist():
                contrib = self._feed(x, h, offered)
                total = float(contrib.sum())
                if total <= 0:
                    continue
                contrib *= offered[h] * SHARES[LOSSLESS] / total
                ingresses = self._ingresses(sw, x, h, contrib)
                capacity = float(cap[h] * SHARES[LOSSLESS])  # the other classes keep their small share of the line
                out.append((name, h, x, ingresses, capacity))
        return out

    def _feed(self, x: int, h: int, offered: np.ndarray | None = None) -> np.ndarray:
        """What each ingress row of switch x brings to its egress h (bytes/s, unscaled: their received traffic's share
        of the ports it may go out of; valley-free: nothing from an up port goes back up)."""
        sw = self.switches[self.traffic.names[x]]
        if offered is None:
            offered = sw.rate[:, COL["if.out-octets"]] + sw.rate[:, COL["if.out-discards"]] * FRAME_BYTES
        is_up = self.traffic.ports[x].kind == KIND_UP
        received = sw.rate[:, COL["if.in-octets"]] * sw.oper_up
        den_up = float(offered[~is_up].sum())  # what arrives from above leaves by any port but up
        den = float(offered.sum())
        share = np.where(is_up, 0.0 if is_up[h] else offered[h] / max(den_up, 1.0), offered[h] / max(den, 1.0))
        contrib: np.ndarray = received * share
        contrib[h] = 0.0
        return contrib

    def _ingresses(self, sw: Switch, x: int, h: int, contrib: np.ndarray) -> tuple[Ingress, ...]:
        """The ingresses bringing `contrib` (bytes/s per row) into egress h, their delays from the cables (one
        vectorised pass over the rows: this runs at every recompute of a congested twin)."""
        kind = self.traffic.ports[x].kind
        rows = np.nonzero(contrib > 0)[0]
        cables = self._cable_rows(x)
        l_in = cables[rows]
        # a switch ingress: its senders are one more cable away (ASSUMPTION: one like it)
        l_sender = np.where(kind[rows] == KIND_SERVER, l_in, 2 * l_in)
        if kind[h] == KIND_REMOTE and self.dr_cnp(sw.name):
            loop_m, hops = l_sender, PATH_HOPS // 2  # the DR sends the CNP back itself
        else:
            loop_m, hops = l_sender + cables[h], PATH_HOPS
        line = sw.speeds[rows] * 1e9
        bps = contrib[rows] * 8
        flows = QPS_PER_NIC * np.maximum(1, np.round(bps / np.maximum(line, 1.0)))
        feedback = 2 * loop_m / FIBRE_M_PER_S + 2 * hops * HOP_DELAY_S
        hop = 2 * l_in / FIBRE_M_PER_S + HOP_DELAY_S
        return tuple(
            Ingress(row=r, bps=b, flows=int(f), line_bps=li, port_bps=li, feedback_delay_s=fb, hop_delay_s=hd)
            for r, b, f, li, fb, hd in zip(
                rows.tolist(), bps.tolist(), flows.tolist(), line.tolist(), feedback.tolist(), hop.tolist(), strict=True
            )
        )

    def _queue_config(self, sw: Switch, h: int, ingresses: tuple[Ingress, ...], capacity: float) -> QueueConfig:
        """The queue as the switch's running config sets it: ECN on the egress queue, PFC and the PG buffer on the
        ingresses (the first ingress's PG settings stand for all: one switch, one buffer template)."""
        cfg = sw.config[h]
        kmin, kmax, prob = cfg.ecn.get(LOSSLESS, (0, 0, 0))
        first = sw.config[ingresses[0].row]
        speed = int(sw.speeds[ingresses[0].row])
        headroom = first.pg_headroom_bytes or sonic_headroom(self._cable_m(sw.name, sw.ports[ingresses[0].row]), speed)
        dyn = first.pg_dynamic_th if first.pg_dynamic_th is not None else DEFAULT_DYNAMIC_TH
        kind = self.traffic.ports[self._node[sw.name]].kind
        return QueueConfig(
            capacity_bps=capacity * 8,
            kmin_bytes=kmin,
            kmax_bytes=kmax,
            pmax=prob / 100,
            ecn=LOSSLESS in cfg.ecn,
            pfc=any(sw.config[i.row].honours_pause(LOSSLESS) for i in ingresses),
            dynamic_alpha=2.0**dyn,
            headroom_bytes=headroom,
            dr_cnp=bool(kind[h] == KIND_REMOTE and self.dr_cnp(sw.name)),
        )

    def _solve_congestion(self, hot: list[HotPort]) -> None:
        """Run the model over the congested queues (cached) and keep its throttles, drops and XOFFs for the next
        traffic solve."""
        # the same feeds (a phase seen before) under the same configs and NIC knobs: the same answer, without the
        # solver's rounded key over every ingress
        solve_key = self._solve_key = (self._hot_key, tuple(hp.config for hp in hot), self.congestion.nic)
        outcomes = self._solved.get(solve_key)
        if outcomes is None:
            outcomes = self._solver.solve(hot, self.congestion.nic)
            if len(self._solved) >= HOT_MEMO:
                self._solved.pop(next(iter(self._solved)))
            self._solved[solve_key] = outcomes
        self.congested, self._cong_passes, self._cong_drops, self._cong_pauses = {}, {}, {}, []
        for hp, out in zip(hot, outcomes, strict=True):
            sw = self.switches[hp.device]
            key = (hp.device, sw.ports[hp.row])
            self.congested[key] = CongestionView(out, tuple(i.row for i in hp.ingresses), hp.config.dr_cnp)
            # the XOFFs below also hold back the upstream egresses (traffic.passes): count them once
            held = sum(i.bps * (1 - f * SHARES[LOSSLESS]) for i, f in zip(hp.ingresses, out.paused, strict=True))
            held_share = held / max(out.offered_bps, 1.0)
            self._cong_passes[key] = min(1.0, out.served_bps / max(out.offered_bps, 1.0) / max(held_share, 1e-9))
            if out.dropped_bps > 0:
                self._cong_drops[key] = min(1.0, out.dropped_bps / max(out.offered_bps, 1.0))
            for ing, f in zip(hp.ingresses, out.paused, strict=True):
                if f > 1e-4 and hp.config.pfc:
                    sender = Endpoint(hp.device, sw.ports[ing.row])
                    self._cong_pauses.append(PauseSource(sender, LOSSLESS, min(1.0, f), propagate=f >= 0.99))

    def _flowlet_groups(self) -> bool:
        """Each DLB switch's uplink group through the flowlet model (lab/congestion/flowlet.py): the members' one-way
        cable delays give the skew, the group's load the flows and their idle times, the twin's gap the rest. The
        members' shares of the bytes become their ECMP weights in the traffic model (`_dlb_weights`), so the loads
        the twin reports on the members are the shares the flowlet model gives (the group's total does not depend
        on them: one pass settles). True if the weights changed (the traffic is solved again)."""
        self.flowlets = {}
        weights: dict[tuple[str, str], float] = {}
        gap_s = self.congestion.flowlet_gap_us * 1e-6
        for x, (name, sw) in enumerate(self.switches.items()):
            if name not in self.dlb:
                continue
            rows = np.nonzero((self.traffic.ports[x].kind == traffic.Kind.UP) & sw.oper_up)[0]
            if len(rows) < 2:
                continue
            delays = [round(self._cable_m(name, sw.ports[r]) / FIBRE_M_PER_S, 7) for r in rows]
            sent = sw.rate[rows, COL["if.out-octets"]]
            line = sw.speeds[rows] * 1e9 / 8
            load = float(np.clip(sent.sum() / max(line.sum(), 1.0), 0.01, 0.99))
            real_flows = max(len(rows), QPS_PER_NIC * round(float(sent.sum()) / max(float(line.max()), 1.0)))
            flows = int(min(FLOWLET_FLOWS, real_flows))
            busy_s = FLOWLET_MESSAGE_BYTES / float(line.max())
            idle = round(busy_s * (1 - load) / load, 7)
            key = (tuple(delays), gap_s, flows, idle)
            got = self._flowlet_cache.get(key)
            if got is None:
                got = simulate_flowlets(delays, gap_s, flows, FLOWLET_MESSAGES, FLOWLET_MESSAGE_BYTES,
                                        float(line.max()) * 8, (0.0, 2 * idle))  # fmt: skip
                if len(self._flowlet_cache) > 256:
                    self._flowlet_cache.clear()
                self._flowlet_cache[key] = got
            # per second, scaled from the model's flows to the group's (each flow's messages/s are the same)
            per_s = real_flows / flows / max(got.duration_s, 1e-9)
            shares = got.member_bytes / max(float(got.member_bytes.sum()), 1.0)
            view = FlowletView(
                tuple(sw.ports[r] for r in rows),
                got.flowlets * per_s,
                got.moves * per_s,
                got.reorders * per_s,
                tuple(float(v) for v in shares),
                (max(delays) - min(delays)) * 1e6,
            )
            self.flowlets[name] = view
            for r, share in zip(rows.tolist(), shares.tolist(), strict=True):
                weights[(name, sw.ports[r])] = share * len(rows)  # x nominal: 1 each when even
        changed = weights != self._dlb_weights
        self._dlb_weights = weights
        return changed

    def _apply_flowlets(self) -> None:
        """The DLB groups' ARS counters (`ars.flowlets`, `ars.reassignments`), split over the members by share."""
        for name, view in self.flowlets.items():
            sw = self.switches[name]
            rows = [sw.index[p] for p in view.members]
            shares = np.array(view.shares)
            sw.rate[rows, COL["ars.flowlets"]] = view.flowlets_ps * shares
            sw.rate[rows, COL["ars.reassignments"]] = view.moves_ps * shares

    def _reconcile(self) -> bool:
        """Correct the throttle of each congested queue that sends more or less than the model served (an upstream
        queue already held its flows back, or was itself eased); True if any changed."""
        changed = False
        for key, view in self.congested.items():
            sw = self.switches[key[0]]
            sent = sw.rate[sw.index[key[1]], COL["if.out-octets"]] * 8 * SHARES[LOSSLESS]
            target = view.outcome.served_bps
            passes = self._cong_passes.get(key, 1.0)
            if abs(sent - target) > target * RECONCILE_TOLERANCE and (sent > target or passes < 1.0):
                # damped: the queues upstream and downstream of it are corrected in the same round
                self._cong_passes[key] = min(1.0, passes * (target / max(sent, 1.0)) ** RECONCILE_GAIN)
                changed = True
        return changed

    def _apply_congestion(self) -> None:
        """The model's marks, watermarks and DR CNPs on the counters; queues below HOT_SHARE keep the burst
        model's marks, and their watermark is the burst depth's 99.9th percentile (ln 1000 x its exponential mean)."""
        out_octets, wm_col = COL["if.out-octets"], MAX_QUEUE_LEN[LOSSLESS]
        marked_by: dict[tuple[str, str], float] = {}  # what each congested queue marks (packets/s)
        # watermarks only rise: a traffic state already applied since the last counter reset raises none of them again
        state = (self._traffic_key, tuple(sw.resets for sw in self.switches.values()))
        fresh = state not in self._watermarked
        for sw in self.switches.values() if fresh else ():
            rho = np.minimum(sw.rate[:, out_octets] * 8 / np.maximum(sw.speeds * 1e9, 1.0), HOT_SHARE)
            burst = BURST_BYTES * LN_1000 * rho / (1 - rho) * sw.oper_up
            np.maximum(sw.queue_watermark[:, LOSSLESS], burst, out=sw.queue_watermark[:, LOSSLESS])
        for (device, port), view in self.congested.items():
            sw = self.switches[device]
            row, out = sw.index[port], view.outcome
            if LOSSLESS in sw.config[row].ecn:  # the model's marks replace the burst formula's (util ~ 1 there)
                marked = sw.rate[row, COL[f"q{LOSSLESS}.transmit-pkts"]] * out.mark_share
                sw.rate[row, COL[f"q{LOSSLESS}.ecn-marked-pkts"]] = marked
            if view.dr_cnp:
                sw.rate[row, COL["cnp.sent"]] = out.cnp_ps
            marked_by[(device, port)] = float(sw.rate[row, COL[f"q{LOSSLESS}.transmit-pkts"]] * out.mark_share)
            sw.queue_watermark[row, LOSSLESS] = max(sw.queue_watermark[row, LOSSLESS], out.queue_max_bytes)
            for r in view.ingress_rows:
                sw.pg_watermark[r, LOSSLESS] = max(sw.pg_watermark[r, LOSSLESS], out.pg_max_bytes)
                sw.headroom_watermark[r, LOSSLESS] = max(sw.headroom_watermark[r, LOSSLESS], out.headroom_max_bytes)
        if fresh:
            for sw in self.switches.values():  # the OpenConfig gauge: no rate, its value in the base (lab/counters.py)
                sw.base[:, wm_col] = np.maximum(sw.base[:, wm_col], sw.queue_watermark[:, LOSSLESS].astype(np.uint64))
            if len(self._watermarked) >= 4 * HOT_MEMO:
                self._watermarked.clear()
            self._watermarked.add(state)
        self._apply_nics(marked_by)

    def _apply_nics(self, marked_by: dict[tuple[str, str], float]) -> None:
        """The server NICs' DCQCN counters (lab/nics.py) from the congested queues' marks and CNPs, followed along the
        traffic to the receivers (marks, the NP's CNPs) and back to the senders (the CNPs they act on); remembered per
        traffic state (a workload's phases flip between a few)."""
        if not self.congested and not self._nic_rows:
            return
        key = (self._traffic_key, tuple(sorted((k, v.outcome, v.dr_cnp) for k, v in self.congested.items())))
        rates = self._nic_memo.get(key)
        if rates is None:
            rates = self._nic_rates(marked_by)
            if len(self._nic_memo) >= HOT_MEMO:
                self._nic_memo.pop(next(iter(self._nic_memo)))
            self._nic_memo[key] = rates
        for x, row in self._nic_rows:  # the last state's NICs, cleared
            self.switches[self.traffic.names[x]].rate[row, NIC_COLS] = 0.0
        for (x, row), values in rates.items():
            self.switches[self.traffic.names[x]].rate[row, NIC_COLS] = values
        self._nic_rows = set(rates)

    def _nic_rates(self, marked_by: dict[tuple[str, str], float]) -> dict[tuple[int, int], np.ndarray]:
        sws = list(self.switches.values())
        fab = nics.Fabric(
            server=[t.kind == KIND_SERVER for t in self.traffic.ports],
            up=[t.kind == KIND_UP for t in self.traffic.ports],
            peer=[t.peer for t in self.traffic.ports],
            peer_row=[t.peer_row for t in self.traffic.ports],
            sent=[sw.rate[:, COL["if.out-octets"]] for sw in sws],
            feed=self._feed,
        )
        out: dict[tuple[int, int], np.ndarray] = {}

        def add(where: dict[tuple[int, int], float], column: int, scale: float) -> None:
            for k, v in where.items():
                out.setdefault(k, np.zeros(len(NIC_COLS)))[column] += v * scale

        for (device, port), view in self.congested.items():
            x, row, o = self._node[device], self.switches[device].index[port], view.outcome
            if not view.dr_cnp:  # the receivers see the marks and their NPs send the CNPs
                to = nics.receivers(fab, x, row, 1.0)
                add(to, 0, marked_by.get((device, port), 0.0))
                add(to, 1, o.cnp_ps)
            brought = dict(zip(view.ingress_rows, o.ingress_cnp_ps, strict=True))
            add(nics.senders(fab, x, brought), 2, 1.0)
        return out

    def nic_counters(self, now_ns: int) -> list[dict[str, Any]]:
        """Each server NIC the congestion model ever touched: its ConnectX DCQCN counters (cumulative, lab/nics.py),
        with the leaf port it hangs off and its own name."""
        out = []
        for sw in self.switches.values():
            x = self._node[sw.name]
            rows = np.nonzero(self.traffic.ports[x].kind == KIND_SERVER)[0]
            if not len(rows):
                continue
            values = sw.values(now_ns, rows)[:, NIC_COLS]
            for r, v in zip(rows.tolist(), values.tolist(), strict=True):
                if any(v):
                    peer = self.peers.get((sw.name, sw.ports[r]))
                    nic = f"{peer.device}:{peer.port}" if peer is not None else ""
                    out.append(
                        {"switch": sw.name, "port": sw.ports[r], "nic": nic} | dict(zip(nics.NAMES, v, strict=True))
                    )
        return out

    def _frame_error_rate(self, sw: Switch, row: int) -> float:
        """The share of frames a port receives corrupted: from a corruption fault, or from an optic losing more
        than ~6 dB (FEC stops coping)."""
        if not sw.oper_up[row]:
            return 0.0
        key = (sw.name, sw.ports[row])
        rate = self.corruption.get(key, 0.0)
        loss = self.optics_loss_db.get(key, 0.0)
        if loss > 6.0:
            rate = max(rate, 1e-6 * 10 ** ((loss - 6.0) / 2.0))
        return min(1.0, rate)

    def _apply_physical(self) -> None:
        for (device, port), loss in self.optics_loss_db.items():
            hit = self._row(Endpoint(device, port))
            if hit is None:
                continue
            sw, row = hit
            sw.rx_power[row] = sw.rx_power_nominal[row] - loss
            # Each 3 dB lost costs about a decade of pre-FEC BER; past ~6 dB FEC stops coping.
            ber = HEALTHY_PRE_FEC_BER * 10 ** (loss / 3.0)
            sw.pre_fec_ber[row] = ber
            sw.rate[row, COL["fec.corrected-codewords"]] = sw.speeds[row] * 1e9 * ber
        for sw, row in self._receiving_errors():  # what the traffic model discarded as corrupted, where received
            rate = self._frame_error_rate(sw, row)
            if rate > 0:
                self._corrupt(sw, row, rate)

    def _receiving_errors(self) -> list[tuple[Switch, int]]:
        """The switch ports a corruption or an optics fault may make receive bad frames."""
        keys = sorted(self.corruption.keys() | self.optics_loss_db.keys())
        return [(self.switches[d], self.switches[d].index[p]) for d, p in keys if d in self.switches]

    @staticmethod
    def _corrupt(sw: Switch, row: int, frame_error_rate: float) -> None:
        pkts = sw.rate[row, COL["if.in-pkts"]]
        bad = pkts * frame_error_rate
        for c in ("if.in-errors", "if.in-fcs-errors", "eth.in-crc-errors", "fec.uncorrected-codewords"):
            sw.rate[row, COL[c]] = max(sw.rate[row, COL[c]], bad)
        sw.rate[row, COL["eth.in-symbol-error"]] = max(sw.rate[row, COL["eth.in-symbol-error"]], 2 * bad)
        sw.pre_fec_ber[row] = max(sw.pre_fec_ber[row], min(1e-2, 2.4e-4 + frame_error_rate * 1e-2))
        bits = sw.speeds[row] * 1e9
        sw.rate[row, COL["fec.corrected-codewords"]] = max(
            sw.rate[row, COL["fec.corrected-codewords"]], bits / CODEWORD_BITS * min(1.0, frame_error_rate * 100)
        )

    def temperature(self, sw: Switch, row: int) -> float:
        """The port's transceiver module temperature (C) now."""
        heat = self.optics_heat_c.get((sw.name, sw.ports[row]), 0.0)
        return module_temperature(sw.name, sw.ports[row], self.now) + heat

    def rx_power(self, sw: Switch, row: int) -> float:
        """What the port's receiver reads now (dBm): nominal less losses, plus its wander; a dark port reads -40."""
        base = float(sw.rx_power[row])
        return base if not sw.oper_up[row] else base + optics_wander(sw.name, sw.ports[row], self.now)

    # --- convenience for faults and servers -----------------------------------------------------
    def ports_of_links(self, keys: Iterable[LinkKey]) -> list[Endpoint]:
        return [ep for key in keys for ep in key if self.is_switch(ep.device)]


def _lower_end(device: str, port: str, peer: Endpoint) -> tuple[str, str]:
    return min((device, port), (peer.device, peer.port))


def _local(link: Link, device: str) -> Endpoint:
    return link.a if link.a.device == device else link.b


def _port_order(port: str) -> tuple[int, ...]:
    digits = "".join(ch if ch.isdigit() else " " for ch in port).split()
    return tuple(int(d) for d in digits)
