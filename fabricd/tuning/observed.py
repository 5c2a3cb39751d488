"""The adapter from fabricd's telemetry to tuning's inputs: samples of each port's lossless queue taken from the
store's Snapshot once per window tick (live: the service's store; offline: a recorded trace replayed through the
service's own ingestion, as `fabricd detect --trace` does), then the intent's ports and ECMP groups as `PortWindow`
and `GroupWindow` (from_intent), per port class.

Units: the store keeps PFC pause time in nanoseconds (OpenConfig pfc-on-total-rx-time, and fabricd's
pfc-on-total-tx-time, fabricd/telemetry/sonic.py); `Sample` wants microseconds. `queue.max-queue-len` is OpenConfig's
watermark since boot (SONiC: the persistent watermark), so a window's "peak per interval" is that watermark: it only
tells a queue that got deeper. Counters fabricd does not ingest (a DR's CNPs, the NICs' hw_counters, ARS
reassignments) are `None`: the rules that need them say "not judged" (fabricd/tuning/inputs.py).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

from fabricd.telemetry import NEVER, CounterStore, Ingestor, replay
from fabricd.telemetry.snapshot import Snapshot
from policies.intent import DeviceIntent, Intent, PortIntent
from policies.policy import Policy
from topology.fabric import Fabric

from .from_intent import group_window, port_window
from .inputs import GroupSample, GroupWindow, PortWindow, Sample

NS = 1_000_000_000
# The XOFF trigger of a SONiC lossless PG with nothing else in use: dynamic_th -2 (drivers/sonic/render.py
# LOSSLESS_DYNAMIC_TH) of the ingress_lossless_pool, 47,218,432 B on the twin's SKU (lab/congestion/params.py
# QueueConfig.pool_bytes). A switch reporting a static threshold, or a known pool, overrides it (`xoff_of`).
POOL_BYTES = 47_218_432
DEFAULT_XOFF_BYTES = POOL_BYTES // 4
Key = tuple[str, str]  # (device, port)


def _int(snap: Snapshot, device: str, port: str, leaf: str, index: str) -> int | None:
    i = snap.find(device, port, leaf, index)
    if i is None:
        return None
    v = snap.current(i)
    return None if v is None or isinstance(v, str) else int(v)


def _ns_to_us(v: int | None) -> int | None:
    return None if v is None else v // 1000


def sample_of(snap: Snapshot, device: str, port: str, priority: int, t_s: float) -> Sample | None:
    """One poll of the port's lossless queue `priority` as the store holds it now; None when the store has nothing of
    the port's queue or PFC counters yet."""
    p = str(priority)
    # The time the switch counted the bytes (the update's own timestamp), not when the service looks: a stream that
    # arrives late (a busy switch, a loaded host) would otherwise read as less traffic, and one that catches up as
    # more (the twin under CI load showed -10 % in a 4 s window)
    i = snap.find(device, port, "queue.transmit-octets", p)
    counted = int(snap.ts[i]) if i is not None else NEVER
    s = Sample(
        t_s=counted / NS if counted != NEVER else t_s,
        ecn_marked_pkts=_int(snap, device, port, "queue.ecn-marked-pkts", p),
        pfc_rx_pkts=_int(snap, device, port, "pfc.in-frames", p),
        pfc_tx_pkts=_int(snap, device, port, "pfc.out-frames", p),
        pfc_rx_pause_us=_ns_to_us(_int(snap, device, port, "pfc.pfc-on-total-rx-time", p)),
        pfc_tx_pause_us=_ns_to_us(_int(snap, device, port, "pfc.pfc-on-total-tx-time", p)),
        queue_watermark_bytes=_int(snap, device, port, "queue.max-queue-len", p),
        pg_watermark_bytes=_int(snap, device, port, "pg.shared-watermark", p),  # SONiC only (the port as ingress)
        tx_bytes=_int(snap, device, port, "queue.transmit-octets", p),
        drops=_int(snap, device, port, "queue.dropped-pkts", p),
    )
    have = (s.ecn_marked_pkts, s.pfc_rx_pkts, s.pfc_tx_pkts, s.tx_bytes, s.queue_watermark_bytes)
    return s if any(v is not None for v in have) else None


@dataclass(frozen=True)
class PortOctets:
    """A port's cumulative transmit-octets (all queues), for an ECMP group's members' shares."""

    t_s: float
    octets: int | None


class SampleLog:
    """The last `keep` samples of each watched port, taken from a Snapshot at each window tick."""

    def __init__(self, ports: Iterable[Key], priority: int, keep: int = 64) -> None:
        self.priority = priority
        self.ports: dict[Key, deque[Sample]] = {k: deque(maxlen=keep) for k in ports}
        self.octets: dict[Key, deque[PortOctets]] = {k: deque(maxlen=keep) for k in self.ports}

    def take(self, snap: Snapshot, t_s: float) -> None:
        for (dev, port), log in self.ports.items():
            s = sample_of(snap, dev, port, self.priority, t_s)
            if s is not None and (not log or s.t_s > log[-1].t_s):  # no update since the last sample: none new
                log.append(s)
            self.octets[(dev, port)].append(PortOctets(t_s, _int_any(snap, dev, port, "if.out-octets")))

    def samples(self, device: str, port: str) -> tuple[Sample, ...]:
        return tuple(self.ports.get((device, port), ()))

    def group_samples(self, device: str, members: Iterable[str]) -> tuple[GroupSample, ...]:
        """Per tick, the members' transmit-octets (ticks where a member has none are left out)."""
        names = list(members)
        logs = [list(self.octets.get((device, m), ())) for m in names]
        out = []
        for row in zip(*logs, strict=False):
            if all(r.octets is not None for r in row):
                out.append(GroupSample(row[0].t_s, {n: int(r.octets or 0) for n, r in zip(names, row, strict=True)}))
        return tuple(out)


def _int_any(snap: Snapshot, device: str, port: str, leaf: str) -> int | None:
    i = snap.find(device, port, leaf)
    v = None if i is None else snap.current(i)
    return None if v is None or isinstance(v, str) else int(v)


class _Sampler(Ingestor):
    """Ingestion that takes the log's samples on trace time: at each tick boundary, from what arrived before it."""

    def __init__(self, log: SampleLog, tick_ns: int) -> None:
        super().__init__(CounterStore())
        self.samples, self.tick_ns = log, tick_ns
        self.next_ns: int | None = None

    def ingest(self, data: bytes | object, channel: str, now: int | None = None) -> None:
        if now is not None:
            if self.next_ns is None:
                self.next_ns = (now // self.tick_ns + 1) * self.tick_ns
            while now >= self.next_ns:
                self.samples.take(self.snapshot(), self.next_ns / NS)
                self.next_ns += self.tick_ns
        super().ingest(data, channel, now)

    def close(self) -> None:
        if self.next_ns is not None:
            self.samples.take(self.snapshot(), self.next_ns / NS)


def replay_samples(trace: str | Path, fabric: Fabric, log: SampleLog, tick_s: float) -> None:
    """Replay a recorded trace (docs/formats.md) through the service's ingestion into `log`, one sample per tick of
    trace time; raises TraceError on a malformed line or a device not in `fabric`."""
    sampler = _Sampler(log, int(tick_s * NS))
    replay(trace, sampler, known={d.name for d in fabric.devices()})
    sampler.close()


def _peer(p: PortIntent) -> str:
    return p.peer.split(":", 1)[0]  # "device:port"


def lossless_ports(intent: Intent) -> list[tuple[DeviceIntent, PortIntent]]:
    """The ports tuning watches: every switch port of the intent with PFC or ECN on its lossless class."""
    return [(d, p) for d in intent.devices for p in d.ports if p.pfc.enabled or p.ecn.enabled]


def port_windows(
    intent: Intent,
    fabric: Fabric,
    log: SampleLog,
    policy: Policy,
    xoff_of: Callable[[str, str], int] = lambda _d, _p: DEFAULT_XOFF_BYTES,
) -> list[PortWindow]:
    """A window per watched port that has samples, its settings from the intent (what `apply` pushed)."""
    out = []
    for dev, port in lossless_ports(intent):
        samples = log.samples(dev.device, port.port)
        if not samples or _peer(port) not in fabric:
            continue
        peer_role = fabric.device(_peer(port)).role
        out.append(port_window(dev, port, peer_role, samples, xoff_of(dev.device, port.port), policy))
    return out


def ecmp_groups(dev: DeviceIntent, fabric: Fabric) -> Mapping[str, list[PortIntent]]:
    """A switch's ECMP groups under DLB: its switch-facing ports of one link class toward one role of peer."""
    groups: dict[str, list[PortIntent]] = {}
    for p in dev.ports:
        if p.dlb.mode == "off" or _peer(p) not in fabric or p.link_class == "server":
            continue
        groups.setdefault(f"to-{fabric.device(_peer(p)).role}-{p.link_class}", []).append(p)
    return {k: v for k, v in groups.items() if len(v) > 1}


def group_windows(intent: Intent, fabric: Fabric, log: SampleLog) -> list[GroupWindow]:
    out = []
    for dev in intent.devices:
        for name, members in ecmp_groups(dev, fabric).items():
            samples = log.group_samples(dev.device, [m.port for m in members])
            if samples:
                peer_role = fabric.device(_peer(members[0])).role
                out.append(group_window(dev, name, members, peer_role, samples))
    return out
