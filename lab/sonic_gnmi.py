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
from .eos_identity import system_mac
from .eos_interfaces import lane_offset  # the lanes EOS switches report, so both platforms agree
from .model import Switch, Twin
from .sonic_config import lldp_port_descr, lldp_port_id, sonic_port, system_description
from .sonic_releases import serves_pfcwd, serves_rates

TARGETS = frozenset({"COUNTERS_DB", "APPL_DB", "STATE_DB"})
# Watermark tables keyed by queue / PG OID, and the name maps that give each OID its `EthernetN:Q` (reference/
# congestion-tuning.md §3.1, sonic-utilities watermarkstat). The twin clears no watermark on request: the USER and
# PERSISTENT flavours hold the same values (highest since boot), PERIODIC too.
WATERMARKS = ("USER_WATERMARKS", "PERSISTENT_WATERMARKS", "PERIODIC_WATERMARKS")
NAME_MAPS = {"COUNTERS_QUEUE_NAME_MAP": "0x15", "COUNTERS_PG_NAME_MAP": "0x1a"}  # SAI object type of the OID
TABLES = {"COUNTERS_DB": ("COUNTERS", "RATES", *WATERMARKS, *NAME_MAPS), "APPL_DB": ("PORT_TABLE", "LLDP_ENTRY_TABLE"),
          "STATE_DB": ("TRANSCEIVER_DOM_SENSOR", "NEIGH_STATE_TABLE")}  # fmt: skip
LLDP = "LLDP_ENTRY_TABLE"  # APPL_DB: each port's LLDP neighbour, as lldp_syncd writes it from lldpd
NEIGH = "NEIGH_STATE_TABLE"  # STATE_DB: each BGP neighbour's `state`, keyed by its address, as bgpmon writes it
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
        row[f"SAI_PORT_STAT_PFC_{p}_TX_PAUSE_DURATION_US"] = v(f"pfc{p}.pfc-on-total-tx-time") // 1000
    return {k: str(n) for k, n in row.items()}


def _queues(sw: Switch, row: int, name: str, c: np.ndarray) -> dict[str, dict[str, str]]:
    """Every queue's counters; a watchdog queue (a lossless priority) also carries the watchdog's fields, on every
    release (reference/sonic-releases.md)."""
    out = {}
    for q in PRIORITIES:
        out[f"{name}:{q}"] = {
            "SAI_QUEUE_STAT_PACKETS": str(int(c[COL[f"q{q}.transmit-pkts"]])),
            "SAI_QUEUE_STAT_BYTES": str(int(c[COL[f"q{q}.transmit-octets"]])),
            "SAI_QUEUE_STAT_DROPPED_PACKETS": str(int(c[COL[f"q{q}.dropped-pkts"]])),
            "SAI_QUEUE_STAT_WRED_ECN_MARKED_PACKETS": str(int(c[COL[f"q{q}.ecn-marked-pkts"]])),
            "SAI_QUEUE_STAT_WRED_DROPPED_PACKETS": str(int(c[COL[f"q{q}.wred-dropped-pkts"]])),
        }
        if sw.config[row].honours_pause(q):
            out[f"{name}:{q}"].update(_watchdog(c, q))
    return out


def _watchdog(c: np.ndarray, q: int) -> dict[str, str]:
    return {
        "PFC_WD_QUEUE_STATS_DEADLOCK_DETECTED": str(int(c[COL[f"wd{q}.stuck-count"]])),
        "PFC_WD_QUEUE_STATS_DEADLOCK_RESTORED": str(int(c[COL[f"wd{q}.recovery-count"]])),
        "PFC_WD_STATUS": "operational",
    }


def _rates(sw: Switch, row: int, c: np.ndarray) -> dict[str, str]:
    """RATES (202411+): the `_last` copies of the port's octet and FEC counters, and the BERs (strings of floats)."""
    return {
        "SAI_PORT_STAT_IF_IN_OCTETS_last": str(int(c[COL["if.in-octets"]])),
        "SAI_PORT_STAT_IF_OUT_OCTETS_last": str(int(c[COL["if.out-octets"]])),
        "SAI_PORT_STAT_IF_FEC_CORRECTABLE_FRAMES_last": str(int(c[COL["fec.corrected-codewords"]])),
        "SAI_PORT_STAT_IF_FEC_NOT_CORRECTABLE_FARMES_last": str(int(c[COL["fec.uncorrected-codewords"]])),  # sic
        "FEC_PRE_BER": f"{float(sw.pre_fec_ber[row]):.2e}",
        "FEC_POST_BER": "0.00e+00",
    }


def _pfcwd(sw: Switch, row: int, name: str, c: np.ndarray) -> dict[str, dict[str, str]]:
    """The watchdog's queues: those of the priorities the port treats as lossless (the queue rows' own objects)."""
    q = _queues(sw, row, name, c)
    return {key: fields for key, fields in q.items() if "PFC_WD_STATUS" in fields}


def port_table(sw: Switch, row: int) -> dict[str, str]:
    cfg = sw.config[row]
    return {"admin_status": "up" if cfg.admin_up else "down", "oper_status": "up" if sw.oper_up[row] else "down",
            "speed": str(int(sw.speeds[row] * 1000)), "mtu": "9100", "description": cfg.description,
            "alias": sw.aliases[row]}  # fmt: skip


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


def lldp_entry(twin: Twin, sw: Switch, row: int) -> dict[str, str] | None:
    """LLDP_ENTRY_TABLE's row of a port (lldp_syncd's fields, from lldpd's view): its neighbour's name, the port id
    it advertises (a SONiC neighbour's alias, an EOS one's interface name) and description; None without one (the
    link is down: no LLDPDU)."""
    if twin.daemons is not None:  # lldpd's own view (lldp_syncd writes what lldpd knows)
        got = twin.daemons.lldp.get(sw.name, {}).get(sw.ports[row])
        if got is None:
            return None
        return {"lldp_rem_port_id": got.port_id, "lldp_rem_port_desc": got.port_descr,
                "lldp_rem_chassis_id": got.chassis_id, "lldp_rem_sys_name": got.system,
                "lldp_rem_sys_desc": got.system_descr, "lldp_rem_index": "1"}  # fmt: skip
    peer = twin.lldp_heard(sw, row)  # 802.1AB: none while the link is down, none until the first LLDPDU after it
    if peer is None:
        return None
    far = twin.switches.get(peer.device)
    pid = lldp_port_id(twin, peer)
    return {
        "lldp_rem_port_id_subtype": "7" if far is not None else "5",  # local (a SONiC alias), interface name
        "lldp_rem_port_id": pid,
        "lldp_rem_port_desc": lldp_port_descr(twin, peer),
        "lldp_rem_chassis_id_subtype": "4",
        "lldp_rem_chassis_id": system_mac(peer.device),
        "lldp_rem_sys_name": peer.device,
        "lldp_rem_sys_desc": system_description(far) if far is not None and far.platform == "sonic" else "",
        "lldp_rem_sys_cap_supported": "28 00" if far is not None else "80 00",
        "lldp_rem_sys_cap_enabled": "28 00" if far is not None else "80 00",
        "lldp_rem_index": "1",
    }


def neigh_rows(twin: Twin, sw: Switch, key: str) -> list[Row]:
    """NEIGH_STATE_TABLE's rows a key selects (`*`, a prefix with `*`, or one address): what bgpmon last wrote,
    nothing before its first read after a boot (lab/bgp.py BgpMon). A key with no row selects nothing."""
    table = twin.bgpmon.tables.get(sw.name, {})
    picked = [a for a in table if a.startswith(key[:-1])] if key.endswith("*") else [a for a in table if a == key]
    order = sorted(picked, key=lambda a: tuple(int(x) for x in a.split(".")))
    return [([NEIGH, a], {"state": table[a]}) for a in order]


def _rows_of(sw: Switch, key: str, names: list[str]) -> list[int]:
    if key == "*":
        return list(range(len(sw.ports)))
    if key.endswith("*"):
        return [i for i, n in enumerate(names) if n.startswith(key[:-1])]
    if key in names:
        return [names.index(key)]
    raise DbPathError(f"{key} is not a key of this switch")


def keys(twin: Twin, sw: Switch, target: str) -> list[str]:
    """The row keys of a switch's ports: names, or in alias mode the aliases for COUNTERS_DB's virtual paths
    (reference/sonic-releases.md: with vendor aliases, `Ethernet0/1` and `Ethernet0/1:3`)."""
    if twin.sonic_aliases and target == "COUNTERS_DB":
        return list(sw.aliases)
    return [sonic_port(p) for p in sw.ports]


def oid(kind: str, row: int, index: int) -> str:
    """A queue's or PG's SAI object id, stable per port row and index (a switch's OIDs are its own business)."""
    return f"oid:{NAME_MAPS[kind]}{row * 8 + index + 1:012x}"


def _oid_rows(sw: Switch, names: list[str], kind: str) -> dict[str, tuple[int, int]]:
    return {oid(kind, r, i): (r, i) for r in range(len(names)) for i in PRIORITIES}


def watermark_rows(twin: Twin, sw: Switch, table: str, key: str) -> list[Row]:
    """`<FLAVOUR>_WATERMARKS/<oid>` (or `*`): a queue's shared watermark, a PG's shared and headroom (XOFF room)
    watermarks, in bytes, as strings."""
    names = keys(twin, sw, "COUNTERS_DB")
    queues = _oid_rows(sw, names, "COUNTERS_QUEUE_NAME_MAP")
    pgs = _oid_rows(sw, names, "COUNTERS_PG_NAME_MAP")
    picked = [*queues, *pgs] if key == "*" else [key]
    out: list[Row] = []
    for k in picked:
        if k in queues:
            r, q = queues[k]
            out.append(([table, k], {"SAI_QUEUE_STAT_SHARED_WATERMARK_BYTES": str(int(sw.queue_watermark[r, q]))}))
        elif k in pgs:
            r, g = pgs[k]
            out.append(([table, k], {
                "SAI_INGRESS_PRIORITY_GROUP_STAT_SHARED_WATERMARK_BYTES": str(int(sw.pg_watermark[r, g])),
                "SAI_INGRESS_PRIORITY_GROUP_STAT_XOFF_ROOM_WATERMARK_BYTES": str(int(sw.headroom_watermark[r, g])),
            }))  # fmt: skip
        else:
            raise DbPathError(f"{k} is not a queue or priority-group OID of this switch")
    return out


def rows(twin: Twin, sw: Switch, target: str, path: Sequence[str], now: int) -> list[Row]:
    """The (update path, row) pairs a DB path selects now; DbPathError if it selects nothing."""
    if target == "COUNTERS_DB" and len(path) == 1 and path[0] in NAME_MAPS:  # one hash: "EthernetN:Q" -> OID
        names = keys(twin, sw, target)
        return [([path[0]], {f"{n}:{i}": oid(path[0], r, i) for r, n in enumerate(names) for i in PRIORITIES})]
    if target == "COUNTERS_DB" and len(path) == 2 and path[0] in WATERMARKS:
        return watermark_rows(twin, sw, path[0], path[1])
    if target not in TARGETS or len(path) not in (2, 3) or path[0] not in TABLES[target]:
        raise DbPathError(f"{target}: no table at /{'/'.join(path)}")
    sub = path[2] if len(path) == 3 else None
    if path[0] in NAME_MAPS:
        raise DbPathError(f"{target}: {path[0]} is one hash, read it whole")
    if (path[0] != "COUNTERS" and sub is not None) or sub not in (None, "Queues", "Pfcwd"):
        raise DbPathError(f"{target}: no virtual path {sub!r} under {path[0]}")
    if path[0] == "RATES" and not serves_rates(sw.os_version):
        raise DbPathError(f"{target}: RATES/{path[1]} is not a virtual path of {sw.os_version} (from 202411)")
    if sub == "Pfcwd" and not serves_pfcwd(sw.os_version):
        return []  # before 202411 the translation reads CONFIG_DB PFC_WD_TABLE, which does not exist: no row
    if path[0] == NEIGH:
        return neigh_rows(twin, sw, path[1])
    names = keys(twin, sw, target)
    picked = _rows_of(sw, path[1], names)
    if target == "APPL_DB" and path[0] == LLDP:
        return [([LLDP, sonic_port(sw.ports[r])], e) for r in picked if (e := lldp_entry(twin, sw, r)) is not None]
    if target == "APPL_DB":
        return [([path[0], sonic_port(sw.ports[r])], port_table(sw, r)) for r in picked]
    if target == "STATE_DB":
        return [([path[0], sonic_port(sw.ports[r])], dom(twin, sw, r)) for r in picked]
    values = sw.values(now, np.array(picked, dtype=np.int64))
    out: list[Row] = []
    for i, r in enumerate(picked):
        name = names[r]
        if path[0] == "RATES":
            out.append((["RATES", name], _rates(sw, r, values[i])))
        elif sub is None:
            out.append((["COUNTERS", name], dict(_port_row(values[i]))))
        elif sub == "Queues":
            out.append((["COUNTERS", name, "Queues"], dict(_queues(sw, r, name, values[i]))))
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
