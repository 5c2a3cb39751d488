"""A twin SONiC switch's gNMI DB paths, as sonic-gnmi serves its Redis databases (reference/platforms.md: target
`COUNTERS_DB`, paths `COUNTERS/Ethernet*` with SAI counters; oper status in APPL_DB `PORT_TABLE`).

The request's prefix target names the database; a path is `TABLE/KEY[/SUB]` with `*` allowed in the key
(`COUNTERS/Ethernet*`), and the virtual sub-paths `Queues` and `Pfcwd` give a port's queue and PFC-watchdog
counters keyed `EthernetN:Q`. Each update carries one whole row as a JSON_IETF object whose values are strings, as
Redis holds them; only JSON and JSON_IETF encodings exist for these paths (PROTO is refused, UNIMPLEMENTED).
The counters are the twin's own (the same state EOS switches serve as OpenConfig), under SAI's names.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import numpy as np
from pygnmi.spec.v080 import gnmi_pb2

from .counters import COL, PRIORITIES
from .eos_interfaces import lane_offset  # the lanes EOS switches report, so both platforms agree
from .model import Switch, Twin
from .sonic_config import sonic_port

TARGETS = frozenset({"COUNTERS_DB", "APPL_DB", "STATE_DB"})
TABLES = {"COUNTERS_DB": "COUNTERS", "APPL_DB": "PORT_TABLE", "STATE_DB": "TRANSCEIVER_DOM_SENSOR"}
LANES = 4  # DR4 optics: four receive lanes (as `show interfaces transceiver dom thresholds` reports)
Row = tuple[list[str], dict[str, Any]]


class DbPathError(LookupError):
    """A path the database does not have (gRPC NOT_FOUND)."""


def _port_row(c: np.ndarray) -> dict[str, str]:
    def v(col: str) -> int:
        return int(c[COL[col]])

    row = {
        "SAI_PORT_STAT_IF_IN_OCTETS": v("if.in-octets"),
        "SAI_PORT_STAT_IF_OUT_OCTETS": v("if.out-octets"),
        "SAI_PORT_STAT_IF_IN_UCAST_PKTS": v("if.in-unicast-pkts"),
        "SAI_PORT_STAT_IF_IN_NON_UCAST_PKTS": v("if.in-pkts") - v("if.in-unicast-pkts"),
        "SAI_PORT_STAT_IF_OUT_UCAST_PKTS": v("if.out-unicast-pkts"),
        "SAI_PORT_STAT_IF_OUT_NON_UCAST_PKTS": v("if.out-pkts") - v("if.out-unicast-pkts"),
        "SAI_PORT_STAT_IF_IN_ERRORS": v("if.in-errors"),
        "SAI_PORT_STAT_IF_IN_DISCARDS": v("if.in-discards"),
        "SAI_PORT_STAT_IF_OUT_DISCARDS": v("if.out-discards"),
        "SAI_PORT_STAT_IF_OUT_ERRORS": 0,
        "SAI_PORT_STAT_ETHER_STATS_CRC_ALIGN_ERRORS": v("eth.in-crc-errors"),
        "SAI_PORT_STAT_IF_IN_FEC_CORRECTABLE_FRAMES": v("fec.corrected-codewords"),
        "SAI_PORT_STAT_IF_IN_FEC_NOT_CORRECTABLE_FRAMES": v("fec.uncorrected-codewords"),
        "SAI_PORT_STAT_IF_IN_FEC_SYMBOL_ERRORS": v("eth.in-symbol-error"),
    }
    for p in PRIORITIES:
        row[f"SAI_PORT_STAT_PFC_{p}_RX_PKTS"] = v(f"pfc{p}.in-frames")
        row[f"SAI_PORT_STAT_PFC_{p}_TX_PKTS"] = v(f"pfc{p}.out-frames")
        row[f"SAI_PORT_STAT_PFC_{p}_RX_PAUSE_DURATION_US"] = v(f"pfc{p}.pfc-on-total-rx-time") // 1000
    return {k: str(n) for k, n in row.items()}


def _queues(name: str, c: np.ndarray) -> dict[str, dict[str, str]]:
    return {
        f"{name}:{q}": {
            "SAI_QUEUE_STAT_PACKETS": str(int(c[COL[f"q{q}.transmit-pkts"]])),
            "SAI_QUEUE_STAT_BYTES": str(int(c[COL[f"q{q}.transmit-octets"]])),
            "SAI_QUEUE_STAT_DROPPED_PACKETS": str(int(c[COL[f"q{q}.dropped-pkts"]])),
            "SAI_QUEUE_STAT_WRED_ECN_MARKED_PACKETS": str(int(c[COL[f"q{q}.ecn-marked-pkts"]])),
            "SAI_QUEUE_STAT_WRED_DROPPED_PACKETS": str(int(c[COL[f"q{q}.wred-dropped-pkts"]])),
        }
        for q in PRIORITIES
    }


def _pfcwd(sw: Switch, row: int, name: str, c: np.ndarray) -> dict[str, dict[str, str]]:
    """The watchdog's queues: those of the priorities the port treats as lossless."""
    return {
        f"{name}:{q}": {
            "PFC_WD_QUEUE_STATS_DEADLOCK_DETECTED": str(int(c[COL[f"wd{q}.stuck-count"]])),
            "PFC_WD_QUEUE_STATS_DEADLOCK_RESTORED": str(int(c[COL[f"wd{q}.recovery-count"]])),
            "PFC_WD_STATUS": "operational",
        }
        for q in PRIORITIES
        if sw.config[row].honours_pause(q)
    }


def port_table(sw: Switch, row: int) -> dict[str, str]:
    cfg = sw.config[row]
    return {"admin_status": "up" if cfg.admin_up else "down", "oper_status": "up" if sw.oper_up[row] else "down",
            "speed": str(int(sw.speeds[row] * 1000)), "mtu": "9100", "description": cfg.description,
            "alias": f"etp{row + 1}"}  # fmt: skip


def dom(twin: Twin, sw: Switch, row: int) -> dict[str, str]:
    """TRANSCEIVER_DOM_SENSOR as xcvrd writes it: module temperature and voltage, per-lane receive power (dBm; `-inf`
    on a dark lane), transmit bias and power."""
    out = {"temperature": f"{twin.temperature(sw, row):.2f}", "voltage": "3.2950"}
    rx = twin.rx_power(sw, row)
    for k in range(LANES):
        out[f"rx{k + 1}power"] = "-inf" if not sw.oper_up[row] else f"{rx + lane_offset(sw, row, k):.4f}"
        out[f"tx{k + 1}bias"] = "6.5000"
        out[f"tx{k + 1}power"] = "0.9500"
    return out


def _rows_of(sw: Switch, key: str) -> list[int]:
    names = [sonic_port(p) for p in sw.ports]
    if key in ("*", "Ethernet*"):
        return list(range(len(sw.ports)))
    if key in names:
        return [names.index(key)]
    raise DbPathError(f"{key} is not a key of this switch")


def rows(twin: Twin, sw: Switch, target: str, path: Sequence[str], now: int) -> list[Row]:
    """The (update path, row) pairs a DB path selects now; DbPathError if it selects nothing."""
    if target not in TARGETS or len(path) not in (2, 3) or path[0] != TABLES[target]:
        raise DbPathError(f"{target}: no table at /{'/'.join(path)}")
    sub = path[2] if len(path) == 3 else None
    if (target != "COUNTERS_DB" and sub is not None) or sub not in (None, "Queues", "Pfcwd"):
        raise DbPathError(f"{target}: no virtual path {sub!r} under {path[0]}")
    picked = _rows_of(sw, path[1])
    if target == "APPL_DB":
        return [([path[0], sonic_port(sw.ports[r])], port_table(sw, r)) for r in picked]
    if target == "STATE_DB":
        return [([path[0], sonic_port(sw.ports[r])], dom(twin, sw, r)) for r in picked]
    values = sw.values(now, np.array(picked, dtype=np.int64))
    out: list[Row] = []
    for i, r in enumerate(picked):
        name = sonic_port(sw.ports[r])
        if sub is None:
            out.append((["COUNTERS", name], dict(_port_row(values[i]))))
        elif sub == "Queues":
            out.append((["COUNTERS", name, "Queues"], dict(_queues(name, values[i]))))
        else:
            out.append((["COUNTERS", name, "Pfcwd"], dict(_pfcwd(sw, r, name, values[i]))))
    return out


def notifications(target: str, selected: Sequence[Row], ts: int) -> list[bytes]:
    """One SubscribeResponse per row (sonic-gnmi sends a key per notification), the database in the prefix."""
    out = []
    for path, row in selected:
        n = gnmi_pb2.Notification(timestamp=ts)
        n.prefix.target = target
        u = n.update.add()
        for e in path:
            u.path.elem.add(name=e)
        u.val.json_ietf_val = json.dumps(row).encode()
        out.append(gnmi_pb2.SubscribeResponse(update=n).SerializeToString())
    return out
