"""Per-port metrics for Prometheus, read from the telemetry store at scrape time: the switch counters fabricd already
streams (so Grafana and alert rules need no second gNMI collector), as Prometheus counters of the switch's own
cumulative values (`rate()` them; a switch reboot is a counter reset, which Prometheus handles), and the physical
gauges (pre-FEC BER, receive power, module temperature, oper state).

Labels: device, port, role, rail, group. rail and group are fixed per port (from the cabling), so they add no
series; they let a dashboard sum a rail x aggregation-group grid. PFC and queue counters are the lossless priority's
only, and receive power is the port's weakest lane: bounded at a fixed number of series per port (PORT_SERIES).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass

import numpy as np
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from fabricd.detectors import bgp_session
from fabricd.telemetry import NEVER, Snapshot
from topology.fabric import Fabric

LABELS = ["device", "port", "role", "rail", "group"]


@dataclass(frozen=True)
class PortCounter:
    leaf: str
    lossless: bool  # indexed by priority/queue: the lossless one only
    name: str  # without _total
    help: str
    scale: float = 1.0  # to base units


COUNTERS = (
    PortCounter("if.in-octets", False, "fabricd_port_receive_bytes", "Bytes received (switch counter)"),
    PortCounter("if.out-octets", False, "fabricd_port_transmit_bytes", "Bytes sent (switch counter)"),
    PortCounter("if.in-pkts", False, "fabricd_port_receive_packets", "Packets received"),
    PortCounter("if.out-pkts", False, "fabricd_port_transmit_packets", "Packets sent"),
    PortCounter("if.in-discards", False, "fabricd_port_receive_discards", "Received packets discarded"),
    PortCounter("if.out-discards", False, "fabricd_port_transmit_discards", "Packets discarded on egress"),
    PortCounter("if.in-fcs-errors", False, "fabricd_port_receive_fcs_errors", "Frames received with a bad FCS"),
    PortCounter("if.carrier-transitions", False, "fabricd_port_carrier_transitions", "Link up/down transitions"),
    PortCounter("fec.corrected-codewords", False, "fabricd_port_fec_corrected_codewords", "FEC codewords corrected"),
    PortCounter(
        "fec.uncorrected-codewords", False, "fabricd_port_fec_uncorrected_codewords", "FEC codewords not corrected"
    ),
    PortCounter("pfc.in-frames", True, "fabricd_port_pfc_receive_frames", "PFC pause frames received (lossless)"),
    PortCounter("pfc.out-frames", True, "fabricd_port_pfc_transmit_frames", "PFC pause frames sent (lossless)"),
    # openconfig pfc-on-total-rx-time is in nanoseconds (Arista augment, platforms.md): seconds here
    PortCounter(
        "pfc.pfc-on-total-rx-time", True, "fabricd_port_pfc_paused_seconds", "Time paused by received PFC", 1e-9
    ),
    # SONiC SAI_PORT_STAT_PFC_n_TX_PAUSE_DURATION_US, served in nanoseconds as pfc-on-total-tx-time (issue 50)
    PortCounter(
        "pfc.pfc-on-total-tx-time", True, "fabricd_port_pfc_pause_sent_seconds", "Time the port paused its peer", 1e-9
    ),
    PortCounter("queue.ecn-marked-pkts", True, "fabricd_port_ecn_marked_packets", "Packets ECN-marked (lossless)"),
    PortCounter("queue.dropped-pkts", True, "fabricd_port_queue_dropped_packets", "Packets dropped (lossless queue)"),
)


@dataclass(frozen=True)
class PortGauge:
    leaf: str
    name: str
    help: str
    worst: str  # several series per port (lanes): "min" or "max" of them
    lossless: bool = False  # indexed by queue: the lossless one only


GAUGES = (
    PortGauge("fec.pre-fec-ber", "fabricd_port_pre_fec_ber", "Pre-FEC bit error rate", "max"),
    PortGauge("optics.input-power", "fabricd_port_receive_power_dbm", "Receive power, the weakest lane (dBm)", "min"),
    PortGauge("optics.temperature", "fabricd_port_module_temperature_celsius", "Transceiver module temperature", "max"),
    # OpenConfig max-queue-len (EOS) / SONiC PERSISTENT_WATERMARKS: the lossless queue's high-water mark (issue 50)
    PortGauge(
        "queue.max-queue-len",
        "fabricd_port_queue_watermark_bytes",
        "Lossless queue high-water mark",
        "max",
        lossless=True,
    ),
    # SONiC PERSISTENT_WATERMARKS of the lossless ingress priority group (issue 50; EOS streams no such leaf)
    PortGauge(
        "pg.shared-watermark",
        "fabricd_port_pg_watermark_bytes",
        "Lossless ingress priority group's shared-buffer high-water mark",
        "max",
        lossless=True,
    ),
    PortGauge(
        "pg.headroom-watermark",
        "fabricd_port_pg_headroom_watermark_bytes",
        "Lossless ingress priority group's headroom (XOFF room) high-water mark",
        "max",
        lossless=True,
    ),
)
PORT_SERIES = len(COUNTERS) + len(GAUGES) + 1  # + fabricd_port_up


def _labels(fabric: Fabric, device: str, port: str) -> list[str]:
    d = fabric.get(device)
    role = d.role.value if d is not None else ""
    rail = "" if d is None or d.rail is None else str(d.rail)
    group = "" if d is None or d.group is None else str(d.group)
    return [device, port, role, rail, group]


def port_labels(snapshot: Snapshot, fabric: Fabric) -> list[list[str]]:
    """Per port row of the snapshot: its label values."""
    return [
        _labels(fabric, snapshot.devices[int(snapshot.port_dev[row])], port)
        for row, port in enumerate(snapshot.port_names)
    ]


def families(snapshot: Snapshot, fabric: Fabric, lossless: int = 3) -> Iterator[Metric]:
    """Every per-port family from one snapshot (pure: no clock, no I/O)."""
    labels = port_labels(snapshot, fabric)
    seen = snapshot.ts != NEVER
    for c in COUNTERS:
        fam = CounterMetricFamily(c.name, c.help, labels=LABELS)
        rows = snapshot.select(leaf=c.leaf, index=str(lossless) if c.lossless else None)
        rows = rows[seen[rows]]
        ports = snapshot.series_port[rows].tolist()
        values = snapshot.value[rows].astype(np.float64) * c.scale
        for p, v in zip(ports, values.tolist(), strict=True):
            fam.add_metric(labels[p], v)
        yield fam
    for g in GAUGES:
        fam_g = GaugeMetricFamily(g.name, g.help, labels=LABELS)
        rows = snapshot.select(leaf=g.leaf, index=str(lossless) if g.lossless else None)
        rows = rows[seen[rows]]
        worst: dict[int, float] = {}
        pick = min if g.worst == "min" else max
        for p, v in zip(snapshot.series_port[rows].tolist(), snapshot.gauge[rows].tolist(), strict=True):
            if np.isfinite(v):
                worst[p] = pick(worst.get(p, v), v)
        for p, v in sorted(worst.items()):
            fam_g.add_metric(labels[p], v)
        yield fam_g
    up = GaugeMetricFamily("fabricd_port_up", "1 while the port's oper-status is UP, 0 otherwise", labels=LABELS)
    rows = snapshot.select(leaf="oper-status")
    rows = rows[seen[rows]]
    for r in rows.tolist():
        up.add_metric(labels[int(snapshot.series_port[r])], 1.0 if snapshot.text(r) == "UP" else 0.0)
    yield up


class PortCollector(Collector):
    def __init__(self, snapshot: Callable[[], Snapshot], fabric: Fabric, lossless: int = 3) -> None:
        self.snapshot, self.fabric, self.lossless = snapshot, fabric, lossless

    def collect(self) -> Iterator[Metric]:
        yield from families(self.snapshot(), self.fabric, self.lossless)


class UnderlayCollector(Collector):
    """The routed underlay as telemetry shows it: BGP sessions per switch and state (a handful of series per switch),
    and each session's state on its port (1 established, 0 not) under the same labels as the port metrics."""

    def __init__(self, snapshot: Callable[[], Snapshot], fabric: Fabric) -> None:
        self.snapshot, self.fabric = snapshot, fabric
        self._addresses = bgp_session.BgpSessionState()  # its cache of the routed ports' addresses, between scrapes

    def collect(self) -> Iterator[Metric]:
        sessions = bgp_session.observe(self.snapshot(), self._addresses, fabric=self.fabric)
        counts = GaugeMetricFamily("fabricd_bgp_sessions", "BGP sessions per switch and state (OpenConfig "
                                   "session-state)", labels=["device", "state"])  # fmt: skip
        per: dict[tuple[str, str], int] = {}
        for o in sessions:
            per[(o.device, o.state)] = per.get((o.device, o.state), 0) + 1
        for key, n in sorted(per.items()):
            counts.add_metric(list(key), n)
        yield counts
        up = GaugeMetricFamily("fabricd_bgp_session_established", "1 while the BGP session on the port is "
                               "ESTABLISHED, 0 while it is not", labels=[*LABELS, "peer_address"])  # fmt: skip
        for o in sorted(sessions, key=lambda o: (o.device, o.address)):
            if o.port is not None:
                up.add_metric([*_labels(self.fabric, o.device, o.port), o.address], int(o.state == "ESTABLISHED"))
        yield up
