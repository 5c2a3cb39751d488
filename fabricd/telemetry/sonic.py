"""SONiC telemetry: the sonic-gnmi DB paths fabricd subscribes to, and their JSON rows as fabricd's leaves.

SONiC's gNMI server serves its Redis databases (reference/platforms.md: target `COUNTERS_DB`, paths
`COUNTERS/Ethernet*` carrying SAI counters such as `SAI_PORT_STAT_PFC_<n>_RX_PKTS` and
`SAI_QUEUE_STAT_WRED_ECN_MARKED_PACKETS`; oper status in APPL_DB `PORT_TABLE`). The prefix's target names the
database, an update's path names the table and key (`COUNTERS/Ethernet0`, the virtual `.../Queues` and `.../Pfcwd`
sub-paths for a port's queues and PFC watchdog), and its value is the whole row as a JSON_IETF object of strings.
SONiC serves no PROTO encoding for these paths, so SONiC switches are subscribed with JSON_IETF.

A row decodes into (port, leaf, index, value) in fabricd's leaf names (paths.LEAVES), so detectors read SONiC and EOS
switches alike. Port names go back to the topology's (`Ethernet0` -> `Ethernet1/1`, drivers.sonic.render), and so do
the port ids SONiC neighbours advertise in LLDP (their aliases, or names: `advertised_port`). Which
counters an ASIC fills differs (a Broadcom ASIC reports no pause duration); what a switch does not send is reported
by the coverage of `fabricd status`, not guessed.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterator, Mapping, Sequence

from drivers.sonic.render import LANES_PER_PORT

from .paths import Subscription

TARGETS = frozenset({"COUNTERS_DB", "APPL_DB", "STATE_DB"})
Row = tuple[str, str, str | None, int | float | str]  # (topology port, leaf, index, value)

# SAI port counters -> fabricd leaves (one to one).
PORT_COUNTERS: dict[str, str] = {
    "SAI_PORT_STAT_IF_IN_OCTETS": "if.in-octets",
    "SAI_PORT_STAT_IF_OUT_OCTETS": "if.out-octets",
    "SAI_PORT_STAT_IF_IN_UCAST_PKTS": "if.in-unicast-pkts",
    "SAI_PORT_STAT_IF_OUT_UCAST_PKTS": "if.out-unicast-pkts",
    "SAI_PORT_STAT_IF_IN_ERRORS": "if.in-errors",
    "SAI_PORT_STAT_IF_IN_DISCARDS": "if.in-discards",
    "SAI_PORT_STAT_IF_OUT_DISCARDS": "if.out-discards",
    "SAI_PORT_STAT_IF_OUT_ERRORS": "if.out-errors",
    "SAI_PORT_STAT_ETHER_STATS_CRC_ALIGN_ERRORS": "eth.in-crc-errors",
    "SAI_PORT_STAT_IF_IN_FEC_CORRECTABLE_FRAMES": "fec.corrected-codewords",
    "SAI_PORT_STAT_IF_IN_FEC_NOT_CORRECTABLE_FRAMES": "fec.uncorrected-codewords",
    "SAI_PORT_STAT_IF_IN_FEC_SYMBOL_ERRORS": "eth.in-symbol-error",
}
# OpenConfig's in-pkts / out-pkts count every packet: SAI splits unicast from the rest.
PACKET_SUMS = {
    "if.in-pkts": ("SAI_PORT_STAT_IF_IN_UCAST_PKTS", "SAI_PORT_STAT_IF_IN_NON_UCAST_PKTS"),
    "if.out-pkts": ("SAI_PORT_STAT_IF_OUT_UCAST_PKTS", "SAI_PORT_STAT_IF_OUT_NON_UCAST_PKTS"),
}
_PFC_LEAF = {
    "RX_PKTS": "pfc.in-frames",
    "TX_PKTS": "pfc.out-frames",
    "RX_PAUSE_DURATION_US": "pfc.pfc-on-total-rx-time",
    "TX_PAUSE_DURATION_US": "pfc.pfc-on-total-tx-time",  # reference/congestion-tuning.md §3.1 [saiport]
}
QUEUE_COUNTERS: dict[str, str] = {
    "SAI_QUEUE_STAT_PACKETS": "queue.transmit-pkts",
    "SAI_QUEUE_STAT_BYTES": "queue.transmit-octets",
    "SAI_QUEUE_STAT_DROPPED_PACKETS": "queue.dropped-pkts",
    "SAI_QUEUE_STAT_WRED_ECN_MARKED_PACKETS": "queue.ecn-marked-pkts",
    "SAI_QUEUE_STAT_WRED_DROPPED_PACKETS": "queue.wred-dropped-pkts",
}
WATCHDOG_COUNTERS: dict[str, str] = {
    "PFC_WD_QUEUE_STATS_DEADLOCK_DETECTED": "wd.stuck-count",
    "PFC_WD_QUEUE_STATS_DEADLOCK_RESTORED": "wd.recovery-count",
}
STATUS = {"oper_status": "oper-status", "admin_status": "admin-status"}
QUEUE_FIELDS = {**QUEUE_COUNTERS, **WATCHDOG_COUNTERS}  # a watchdog queue's row carries both

PORTS, QUEUES, WATCHDOG = "/COUNTERS/Ethernet*", "/COUNTERS/Ethernet*/Queues", "/COUNTERS/Ethernet*/Pfcwd"
RATES = "/RATES/Ethernet*"  # 202411+: FEC_PRE_BER (reference/sonic-releases.md)
# Queue watermarks (reference/congestion-tuning.md §3.1, watermarkstat): PERSISTENT_WATERMARKS (cleared only on
# request, as OpenConfig's max-queue-len is the highest since boot) keyed by queue OID; COUNTERS_QUEUE_NAME_MAP names
# each OID `EthernetN:Q` (subscribed first, so the map is known when the watermarks come)
QUEUE_NAME_MAP = "/COUNTERS_QUEUE_NAME_MAP"
WATERMARKS = "/PERSISTENT_WATERMARKS/*"
WATERMARK_FIELD = "SAI_QUEUE_STAT_SHARED_WATERMARK_BYTES"
# Ingress priority-group watermarks (same tables, same section): the PG's shared-buffer high-water mark and how much
# of its headroom (XOFF room) it ever used, keyed by PG OID, which COUNTERS_PG_NAME_MAP names `EthernetN:PG`
PG_NAME_MAP = "/COUNTERS_PG_NAME_MAP"
PG_WATERMARK_FIELDS = {
    "SAI_INGRESS_PRIORITY_GROUP_STAT_SHARED_WATERMARK_BYTES": "pg.shared-watermark",
    "SAI_INGRESS_PRIORITY_GROUP_STAT_XOFF_ROOM_WATERMARK_BYTES": "pg.headroom-watermark",
}
PORT_TABLE = "/PORT_TABLE/Ethernet*"
# APPL_DB: each port's LLDP neighbour, as lldp_syncd writes it from lldpd (reference/maintenance-lldp-bgp-state.md)
LLDP = "/LLDP_ENTRY_TABLE/Ethernet*"
LLDP_FIELDS = {"lldp_rem_sys_name": "lldp.system-name", "lldp_rem_port_id": "lldp.port-id"}
LLDP_INDEX = "1"  # one neighbour per port, as the OpenConfig neighbour id the twin's EOS switches stream
DOM = "/TRANSCEIVER_DOM_SENSOR/Ethernet*"  # STATE_DB: the module's DOM, as xcvrd writes it
# STATE_DB: each BGP neighbour's `state` keyed by its address, written by bgpmon from FRR every 15 s (reference/
# maintenance-lldp-bgp-state.md); the rows are OpenConfig's neighbour series: device, neighbour address, state
NEIGH = "/NEIGH_STATE_TABLE/*"
BGPMON_INTERVAL_S = 15.0  # bgpmon's sleep between reads of FRR: how late a session's change may show
_LANE_POWER = re.compile(r"rx([1-8])power$")
# What each subscription delivers, in fabricd's leaves (for the platform plan and the coverage report).
LEAVES: dict[str, frozenset[str]] = {
    PORTS: frozenset({*PORT_COUNTERS.values(), *PACKET_SUMS, *_PFC_LEAF.values()}),
    # the watchdog's fields ride on its queues' rows on every release (Pfcwd lists them only from 202411)
    QUEUES: frozenset({*QUEUE_COUNTERS.values(), *WATCHDOG_COUNTERS.values()}),
    WATCHDOG: frozenset(WATCHDOG_COUNTERS.values()),
    RATES: frozenset({"fec.pre-fec-ber"}),
    QUEUE_NAME_MAP: frozenset(),
    PG_NAME_MAP: frozenset(),
    WATERMARKS: frozenset({"queue.max-queue-len", *PG_WATERMARK_FIELDS.values()}),
    PORT_TABLE: frozenset({*STATUS.values(), "port.alias"}),
    LLDP: frozenset(LLDP_FIELDS.values()),
    DOM: frozenset({"optics.input-power", "optics.temperature"}),
    NEIGH: frozenset({"bgp.session-state"}),
}


def sonic_profile(sample_interval_s: float = 10.0, intervals: Mapping[str, float] | None = None) -> list[Subscription]:
    """SONiC: port status ON_CHANGE from APPL_DB; port and queue counters SAMPLEd from COUNTERS_DB (the PFC counters
    come in the port's row, so the `pfc` interval applies to its queues), the PFC watchdog's from its queues' rows
    (the `Pfcwd` virtual path repeats them from 202411 and yields nothing before: reference/sonic-releases.md), the
    pre-FEC BER from `RATES` (202411 and later; the platform plan leaves it out before), the BGP neighbours' state
    ON_CHANGE from STATE_DB's NEIGH_STATE_TABLE (as bgpmon writes it, up to 15 s after FRR)."""

    def ns(group: str) -> int:
        return int((intervals or {}).get(group, sample_interval_s) * 1e9)

    return [
        Subscription(PORT_TABLE, "on_change", target="APPL_DB"),
        Subscription(LLDP, "on_change", target="APPL_DB"),
        Subscription(PORTS, "sample", ns("counters"), target="COUNTERS_DB"),
        Subscription(QUEUES, "sample", ns("pfc"), target="COUNTERS_DB"),
        Subscription(QUEUE_NAME_MAP, "on_change", target="COUNTERS_DB"),
        Subscription(PG_NAME_MAP, "on_change", target="COUNTERS_DB"),
        Subscription(WATERMARKS, "sample", ns("pfc"), target="COUNTERS_DB"),
        Subscription(RATES, "sample", ns("fec"), target="COUNTERS_DB"),
        Subscription(DOM, "sample", ns("optics"), target="STATE_DB"),
        Subscription(NEIGH, "on_change", target="STATE_DB"),
    ]


def topology_port(name: str) -> str | None:
    """SONiC `Ethernet8` -> the topology's `Ethernet2/1` (the numbering drivers.sonic.render assumes); None if it is
    not a front-panel port name."""
    m = re.fullmatch(r"Ethernet(\d+)", name)
    if m is None or int(m.group(1)) % LANES_PER_PORT:
        return None
    return f"Ethernet{int(m.group(1)) // LANES_PER_PORT + 1}/1"


def row_leaves(
    target: str, path: Sequence[str], aliases: Mapping[str, str] | None = None
) -> list[tuple[str, str, str | None]]:
    """The series a row of a table whose rows come and go stands for, to forget when the switch deletes it:
    APPL_DB LLDP_ENTRY_TABLE (a port's neighbour, gone with its link: IEEE 802.1AB) and STATE_DB NEIGH_STATE_TABLE
    (bgpmon clears it when it starts); nothing for the rest."""
    if len(path) != 2:
        return []
    if target == "APPL_DB" and path[0] == "LLDP_ENTRY_TABLE" and (port := port_of_key(path[1], aliases)):
        return [(port, leaf, LLDP_INDEX) for leaf in LLDP_FIELDS.values()]
    if target == "STATE_DB" and path[0] == "NEIGH_STATE_TABLE":
        return [(path[1], "bgp.session-state", None)]
    return []


def advertised_port(port_id: str, aliases: Mapping[str, str]) -> str:
    """The topology port behind the port id a neighbour's LLDP advertises: SONiC's lldpmgrd advertises the port's
    alias, else its name (reference/maintenance-lldp-bgp-state.md); `aliases` is that neighbour's alias -> topology
    port (what it streams in PORT_TABLE). An EOS name (`Ethernet3/1`) or anything unknown stays as it is."""
    if port_id in aliases:
        return aliases[port_id]
    return topology_port(port_id) or port_id


def _count(v: object) -> int | None:
    """SAI counters are decimal strings (RFC 7951 for 64-bit integers)."""
    if isinstance(v, str) and v.isdigit():
        n = int(v)
        return n if n < 1 << 64 else None
    return v if isinstance(v, int) and not isinstance(v, bool) and 0 <= v < 1 << 64 else None


def known_path(target: str, path: Sequence[str]) -> bool:
    """A table (and virtual sub-path) fabricd reads: its rows may be empty (a port without lossless queues has no
    watchdog row), which is not an unknown path."""
    if target == "APPL_DB":
        return len(path) == 2 and path[0] in ("PORT_TABLE", "LLDP_ENTRY_TABLE")
    if target == "STATE_DB":
        return len(path) == 2 and path[0] in ("TRANSCEIVER_DOM_SENSOR", "NEIGH_STATE_TABLE")
    maps = ([QUEUE_NAME_MAP[1:]], [PG_NAME_MAP[1:]])
    if target == "COUNTERS_DB" and (list(path) in maps or (len(path) == 2 and path[0] == WATERMARKS[1:-2])):
        return True
    if target != "COUNTERS_DB" or len(path) not in (2, 3) or path[0] not in ("COUNTERS", "RATES"):
        return False
    return len(path) == 2 or (path[0] == "COUNTERS" and path[2] in ("Queues", "Pfcwd"))


def port_of_key(key: str, aliases: Mapping[str, str] | None = None) -> str | None:
    """The topology port of a row key: a SONiC name (`Ethernet8`), or an alias when sonic-gnmi runs with vendor
    aliases (reference/sonic-releases.md), mapped back to its name through the switch's PORT_TABLE `alias` fields
    (an alias never seen there is not guessed at: `Ethernet0/1` may be any port)."""
    return topology_port(aliases.get(key, key) if aliases else key)


def queue_names(path: Sequence[str], row: Mapping[str, object]) -> dict[str, str] | None:
    """A COUNTERS_QUEUE_NAME_MAP row as OID -> `EthernetN:Q` (what decode needs for the watermarks); None otherwise."""
    return _oid_names(path, row, QUEUE_NAME_MAP)


def pg_names(path: Sequence[str], row: Mapping[str, object]) -> dict[str, str] | None:
    """A COUNTERS_PG_NAME_MAP row as OID -> `EthernetN:PG` (the PG watermarks' keys); None otherwise."""
    return _oid_names(path, row, PG_NAME_MAP)


def _oid_names(path: Sequence[str], row: Mapping[str, object], table: str) -> dict[str, str] | None:
    if list(path) != [table[1:]]:
        return None
    return {v: k for k, v in row.items() if isinstance(v, str)}


def _named(names: Mapping[str, str] | None, oid: str, aliases: Mapping[str, str] | None) -> tuple[str, str] | None:
    """(topology port, queue or PG number) of an OID its name map names `EthernetN:K`; None if unknown."""
    key, _, index = (names or {}).get(oid, "").rpartition(":")
    port = port_of_key(key, aliases) if index.isdigit() else None
    return None if port is None else (port, index)


def decode(
    target: str,
    path: Sequence[str],
    row: Mapping[str, object],
    aliases: Mapping[str, str] | None = None,
    queues: Mapping[str, str] | None = None,
    pgs: Mapping[str, str] | None = None,
) -> Iterator[Row]:
    """One update of a SONiC DB path as fabricd leaves. Unknown fields are skipped (an ASIC's extra counters);
    a value that is not a counter is skipped too (the caller counts what it could not read). `aliases`: the switch's
    alias -> name map, for a switch that keys its rows by aliases; `queues`: its queue OID -> `EthernetN:Q` map
    (queue_names), for the watermark rows keyed by OID (none is read before the map has come); `pgs`: the same for its
    ingress priority groups (pg_names)."""
    if target == "COUNTERS_DB" and len(path) == 2 and path[0] == WATERMARKS[1:-2]:
        # watermarks are gauges (bytes), not counters
        if (named_queue := _named(queues, path[1], aliases)) is not None:
            if (n := _count(row.get(WATERMARK_FIELD))) is not None:
                yield named_queue[0], "queue.max-queue-len", named_queue[1], float(n)
        elif (pg := _named(pgs, path[1], aliases)) is not None:
            for field, leaf in PG_WATERMARK_FIELDS.items():
                if (n := _count(row.get(field))) is not None:
                    yield pg[0], leaf, pg[1], float(n)
        return
    if len(path) < 2:  # the name maps: no leaf of their own (queue_names, pg_names read them)
        return
    if target == "STATE_DB" and len(path) == 2 and path[0] == "NEIGH_STATE_TABLE":
        if (state := neighbour_state(row.get("state"))) is not None:
            yield path[1], "bgp.session-state", None, state
        return
    if not known_path(target, path) or (port := port_of_key(path[1], aliases)) is None:
        return
    sub = path[2] if len(path) > 2 else None
    if target == "APPL_DB" and path[0] == "LLDP_ENTRY_TABLE":
        for field, leaf in LLDP_FIELDS.items():
            v = row.get(field)
            if isinstance(v, str) and v:
                yield port, leaf, LLDP_INDEX, v
    elif target == "APPL_DB":
        for field, leaf in STATUS.items():
            v = row.get(field)
            if isinstance(v, str) and v:
                yield port, leaf, None, v.upper()
        if isinstance(alias := row.get("alias"), str) and alias:
            yield port, "port.alias", None, alias
    elif target == "STATE_DB":
        yield from _dom(port, row)
    elif path[0] == "RATES":
        if (ber := _ber(row.get("FEC_PRE_BER"))) is not None:
            yield port, "fec.pre-fec-ber", None, ber
    elif sub is None:
        yield from _port_counters(port, row)
    else:
        fields = QUEUE_FIELDS if sub == "Queues" else WATCHDOG_COUNTERS
        for key, counters in row.items():
            _, _, queue = key.rpartition(":")
            if not queue.isdigit() or not isinstance(counters, Mapping):
                continue
            for field, leaf in fields.items():
                if (n := _count(counters.get(field))) is not None:
                    yield port, leaf, queue, n


def neighbour_state(v: object) -> str | None:
    """FRR's state word as OpenConfig's session-state: "Established" -> ESTABLISHED, "Idle (Admin)" -> IDLE (a
    session shut in the config is idle), "OpenSent" -> OPENSENT; None for anything else."""
    if not isinstance(v, str) or not v.strip():
        return None
    word = v.split()[0].upper()
    return word if word in _FSM else None


_FSM = frozenset({"IDLE", "CONNECT", "ACTIVE", "OPENSENT", "OPENCONFIRM", "ESTABLISHED"})  # RFC 4271 8.2.2


def frr_states(summary: object) -> dict[str, str]:
    """`vtysh -c 'show bgp summary json'` (FRR's object per address family, keyed by neighbour under `peers`) ->
    each IPv4 unicast neighbour's state as OpenConfig's session-state, by its address (what bgpmon would write to
    NEIGH_STATE_TABLE, decoded as that table's rows are). FRR prints `{}` where no IPv4 neighbour is configured, so
    a summary without `ipv4Unicast` has no session; a peer whose state is not an FSM word is left out."""
    family = summary.get("ipv4Unicast") if isinstance(summary, Mapping) else None
    peers = family.get("peers") if isinstance(family, Mapping) else None
    if not isinstance(peers, Mapping):
        return {}
    out = {}
    for address, peer in peers.items():
        if isinstance(peer, Mapping) and (state := neighbour_state(peer.get("state"))) is not None:
            out[str(address)] = state
    return out


def _port_fields() -> dict[str, tuple[str, str | None, int]]:
    """Every SAI port field fabricd reads -> (leaf, index, scale), looked up once per field of a row."""
    out: dict[str, tuple[str, str | None, int]] = {f: (leaf, None, 1) for f, leaf in PORT_COUNTERS.items()}
    for p in range(8):
        for what, leaf in _PFC_LEAF.items():
            # SONiC counts pause in microseconds, OpenConfig's pfc-on-total-rx-time (and fabricd's tx) in nanoseconds.
            out[f"SAI_PORT_STAT_PFC_{p}_{what}"] = (leaf, str(p), 1000 if what.endswith("_PAUSE_DURATION_US") else 1)
    return out


PORT_FIELDS = _port_fields()


def _port_counters(port: str, row: Mapping[str, object]) -> Iterator[Row]:
    for field, v in row.items():
        spec = PORT_FIELDS.get(field)
        if spec is not None and (n := _count(v)) is not None:
            yield port, spec[0], spec[1], n * spec[2]
    for leaf, parts in PACKET_SUMS.items():
        counts = [_count(row.get(f)) for f in parts]
        if all(c is not None for c in counts):
            yield port, leaf, None, sum(c for c in counts if c is not None) % (1 << 64)


def _ber(v: object) -> float | None:
    """RATES' BER: a string holding a float ("1.23e-08")."""
    try:
        f = float(v) if isinstance(v, str | int | float) and not isinstance(v, bool) else None
    except ValueError:
        return None
    return f if f is not None and math.isfinite(f) and f >= 0 else None


def _level(v: object) -> float | None:
    """A DOM reading: a decimal string in dBm or C; SONiC writes `-inf` for a dark lane, read as no light (-40 dBm,
    what an EOS switch reports)."""
    if not isinstance(v, str):
        return None
    word = v.strip().lower()
    if word in ("-inf", "n/a"):
        return -40.0 if word == "-inf" else None
    try:
        f = float(v)
    except ValueError:
        return None
    return f if math.isfinite(f) else None


def _dom(port: str, row: Mapping[str, object]) -> Iterator[Row]:
    if (t := _level(row.get("temperature"))) is not None:
        yield port, "optics.temperature", None, t
    for field, v in row.items():
        m = _LANE_POWER.match(field)
        if m is not None and (dbm := _level(v)) is not None:
            yield port, "optics.input-power", str(int(m.group(1)) - 1), dbm
