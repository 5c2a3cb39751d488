"""A small synthetic telemetry trace (docs/formats.md JSON Lines) of one leaf of examples/small-pod.yaml: what the
twin streams for a congested lossless queue, with chosen rates, so the adapter and `fabricd tune` can be checked
against numbers known in advance."""

from __future__ import annotations

import json
from pathlib import Path

from fabricd.telemetry.paths import render

NS = 1_000_000_000
T0 = 1_800_000_000 * NS  # a whole second (ticks fall on whole seconds)
LEAF = "leaf-g0-r0"
SERVER_PORT = "Ethernet1/1"  # toward gpu-g0-000:nic0
UPLINKS = ("Ethernet5/1", "Ethernet6/1", "Ethernet7/1", "Ethernet8/1")  # flowlet DLB toward the rail's spines
TX_BPS = 48_000_000_000  # bytes/s out of the server port: 96 % of 400G


def write(
    path: Path,
    seconds: int = 8,
    pause_ns_per_s: int = 200_000_000,
    marks_per_s: int = 0,
    watermark: int = 3_000_000,
    uplink_bps: tuple[int, ...] = (10**9, 10**9, 10**9, 10**9),
) -> Path:
    """Samples at T0 + 0.5 s, 1.5 s, ...: the server port pausing `pause_ns_per_s` (its ingress sent XOFF), marking
    `marks_per_s`; the uplinks carrying `uplink_bps` each."""
    lines = []
    for i in range(seconds):
        ts = T0 + i * NS + NS // 2
        q = {
            "queue.ecn-marked-pkts": marks_per_s * i,
            "queue.transmit-octets": TX_BPS * i,
            "queue.dropped-pkts": 0,
            "queue.max-queue-len": watermark,
            "pfc.out-frames": 5000 * i if pause_ns_per_s else 0,
            "pfc.in-frames": 0,
            "pfc.pfc-on-total-tx-time": pause_ns_per_s * i,
            "pfc.pfc-on-total-rx-time": 0,
        }
        for leaf, v in q.items():
            lines.append({"ts": ts, "device": LEAF, "path": render(SERVER_PORT, leaf, "3"), "value": v})
        for port, bps in zip(UPLINKS, uplink_bps, strict=True):
            lines.append({"ts": ts, "device": LEAF, "path": render(port, "if.out-octets", None), "value": bps * i})
    path.write_text("".join(json.dumps(x) + "\n" for x in lines))
    return path
