"""More of EOS's per-interface show commands, in the JSON shapes EOS answers with: descriptions, counter rates, egress
queue and VoQ drops, transceiver DOM with thresholds, and the PHY's FEC and pre-FEC BER. They read the same twin
state as gNMI and the other show commands, so every client sees one switch.

ANTA's interface tests send these (VerifyInterfacesStatus, VerifyInterfaceUtilization, VerifyInterfacesEgressQueueDrops,
VerifyInterfacesVoqAndEgressQueueDrops, VerifyInterfacesOpticsReceivePower/Temperature, VerifyInterfacesBER).
"""

from __future__ import annotations

import zlib
from typing import Any

import numpy as np

from topology.units import NS

from .counters import COL, PRIORITIES
from .eos_show_text import media_type
from .model import Switch, Twin

Json = dict[str, Any]

# DOM alarm and warning thresholds of a 400G-DR4 QSFP-DD module as vendors' datasheets typically set them (SFF-8636 /
# CMIS pages hold them per module; these are typical values, not from the reference): receive power per lane (dBm)
# and module temperature (C, the same limits `show system environment temperature transceiver` uses).
RX_THRESHOLDS = {"lowAlarm": -10.0, "lowWarn": -8.0, "highWarn": 4.0, "highAlarm": 5.0}
TEMP_THRESHOLDS = {"lowAlarm": -5.0, "lowWarn": 0.0, "highWarn": 70.0, "highAlarm": 75.0}
LANES = 4  # DR4: four optical lanes per port
RATE_INTERVAL_S = 300  # EOS's default load-interval


def _status(sw: Switch, row: int) -> tuple[str, str]:
    """(interfaceStatus, lineProtocolStatus) as `show interfaces description` words them."""
    if not sw.config[row].admin_up:
        return "adminDown", "down"
    return ("up", "up") if sw.oper_up[row] else ("down", "down")


def descriptions(twin: Twin, sw: Switch, now: int, rows: list[int]) -> Json:
    out: Json = {}
    for row in rows:
        status, proto = _status(sw, row)
        out[sw.ports[row]] = {"description": sw.config[row].description, "interfaceStatus": status,
                              "lineProtocolStatus": proto}  # fmt: skip
    return {"interfaceDescriptions": out}


def counter_rates(twin: Twin, sw: Switch, now: int, rows: list[int]) -> Json:
    out: Json = {}
    for row in rows:
        r = sw.rate[row]
        out[sw.ports[row]] = {
            "description": sw.config[row].description,
            "interval": RATE_INTERVAL_S,
            "inBpsRate": float(r[COL["if.in-octets"]] * 8),
            "inPktsRate": float(r[COL["if.in-pkts"]]),
            "inPpsRate": float(r[COL["if.in-pkts"]]),
            "outBpsRate": float(r[COL["if.out-octets"]] * 8),
            "outPktsRate": float(r[COL["if.out-pkts"]]),
            "outPpsRate": float(r[COL["if.out-pkts"]]),
            "lastUpdateTimestamp": now / NS,
        }
    return {"interfaces": out}


def _queue(values: np.ndarray, i: int, q: int) -> tuple[int, int, int, int]:
    """(enqueued packets, enqueued bytes, dropped packets, dropped bytes) of egress queue q of row i."""
    c = values[i]
    return (int(c[COL[f"q{q}.transmit-pkts"]]), int(c[COL[f"q{q}.transmit-octets"]]),
            int(c[COL[f"q{q}.dropped-pkts"]]), 0)  # fmt: skip


def queue_detail(twin: Twin, sw: Switch, now: int, rows: list[int]) -> Json:
    """Egress queue counters per traffic class and drop precedence (the twin's queues are unicast, DP0)."""
    values = sw.values(now, np.array(rows, dtype=np.int64))
    zero = {"enqueuedPackets": 0, "enqueuedBytes": 0, "droppedPackets": 0, "droppedBytes": 0}
    out: Json = {}
    for i, row in enumerate(rows):
        ucast, mcast = {}, {}
        for q in PRIORITIES:
            pkts, octets, drops, drop_bytes = _queue(values, i, q)
            dp0 = {"enqueuedPackets": pkts, "enqueuedBytes": octets, "droppedPackets": drops,
                   "droppedBytes": drop_bytes}  # fmt: skip
            ucast[f"TC{q}"] = {"dropPrecedences": {"DP0": dp0}}
            mcast[f"TC{q}"] = {"dropPrecedences": {"DP0": dict(zero)}}
        out[sw.ports[row]] = {"ucastQueues": {"trafficClasses": ucast}, "mcastQueues": {"trafficClasses": mcast}}
    return {"egressQueueCounters": {"interfaces": out}}


def queue_drops(twin: Twin, sw: Switch, now: int, rows: list[int]) -> Json:
    """Per traffic class: drops in the ingress VoQs (none: the twin drops at egress) and at the egress queue."""
    values = sw.values(now, np.array(rows, dtype=np.int64))
    out: Json = {}
    for i, row in enumerate(rows):
        tcs = {}
        for q in PRIORITIES:
            _, _, drops, _ = _queue(values, i, q)
            tcs[f"TC{q}"] = {
                "ingressVoqCounters": {"countersSum": {"droppedPackets": 0, "droppedBytes": 0}},
                "egressQueueCounters": {"countersSum": {"droppedPackets": drops, "droppedBytes": 0}},
            }
        out[sw.ports[row]] = {"trafficClasses": tcs}
    return {"interfaces": out}


def lane_offset(sw: Switch, row: int, lane: int) -> float:
    return ((zlib.crc32(f"{sw.name}:{sw.ports[row]}:{lane}".encode()) % 41) - 20) / 100.0  # +-0.2 dB between lanes


def dom_thresholds(twin: Twin, sw: Switch, now: int, rows: list[int]) -> Json:
    """Transceiver DOM with the module's thresholds: receive power per lane and temperature."""
    out: Json = {}
    for row in rows:
        rx = twin.rx_power(sw, row)
        dark = not sw.oper_up[row]
        lanes = {str(k + 1): -40.0 if dark else round(rx + lane_offset(sw, row, k), 2) for k in range(LANES)}
        out[sw.ports[row]] = {
            "mediaType": media_type(float(sw.speeds[row])),
            "displayName": sw.ports[row],
            "parameters": {
                "rxPower": {"unit": "dBm", "channels": lanes, "threshold": dict(RX_THRESHOLDS)},
                "temperature": {"unit": "C", "channels": {"-": round(twin.temperature(sw, row), 2)},
                                "threshold": dict(TEMP_THRESHOLDS)},
            },
        }  # fmt: skip
    return {"interfaces": out}


def phy_detail(twin: Twin, sw: Switch, now: int, rows: list[int]) -> Json:
    """The PHY's RS-FEC counters and pre-FEC BER (what gNMI's `phys/phy/ingress/fec` carries)."""
    values = sw.values(now, np.array(rows, dtype=np.int64))
    out: Json = {}
    for i, row in enumerate(rows):
        c = values[i]

        def counter(col: str, _c: np.ndarray = c) -> Json:
            return {"value": int(_c[COL[col]]), "changes": 0, "lastChange": sw.boot_ns / NS}

        out[sw.ports[row]] = {"phyStatuses": [{
            "fec": {"encoding": "reedSolomon544", "correctedCodewords": counter("fec.corrected-codewords"),
                    "uncorrectedCodewords": counter("fec.uncorrected-codewords")},
            "preFecBer": {"value": float(sw.pre_fec_ber[row])},
            "phyState": {"value": "linkUp" if sw.oper_up[row] else "linkDown"},
        }]}  # fmt: skip
    return {"interfacePhyStatuses": out}
