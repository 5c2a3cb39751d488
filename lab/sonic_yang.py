"""What the twin checks before a SONiC config change goes in: a small, table-driven stand-in for the SONiC YANG
models the Generic Config Updater validates a whole target config against (sonic-port, sonic-port-qos-map,
sonic-pfcwd, sonic-buffer-*, sonic-queue, sonic-wred-profile and the QoS map models).

Only the tables fabricd writes are modelled; others pass unchecked. Messages follow libyang's wording
(`Value "x" does not satisfy the constraint "up|down" (range, length, or pattern).`), which the updater wraps as
`Given patch will produce invalid config. Error: Data Loading Failed` + the message.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from typing import Any

Check = Callable[[str, Mapping[str, Any]], str | None]  # (value, whole config) -> error or None


def _constraint(value: str, shown: str) -> str:
    return f'Value "{value}" does not satisfy the constraint "{shown}" (range, length, or pattern).'


def enum(*values: str) -> Check:
    shown = "|".join(values)
    return lambda v, _db: None if v in values else _constraint(v, shown)


def int_range(lo: int, hi: int) -> Check:
    def check(v: str, _db: Mapping[str, Any]) -> str | None:
        ok = re.fullmatch(r"-?\d+", v) is not None and lo <= int(v) <= hi
        return None if ok else _constraint(v, f"{lo}..{hi}")

    return check


def pattern(regex: str) -> Check:
    compiled = re.compile(regex)
    return lambda v, _db: None if compiled.fullmatch(v) else _constraint(v, regex)


def leafref(table: str) -> Check:
    def check(v: str, db: Mapping[str, Any]) -> str | None:
        if v in db.get(table, {}):
            return None
        return f'Leafref "/{table}/{table}_LIST/name" of value "{v}" points to a non-existing leaf.'

    return check


ANY: Check = lambda _v, _db: None  # noqa: E731 - a field with no constraint of its own
UINT = int_range(0, 2**32 - 1)
PRIORITIES = pattern(r"([0-7](,[0-7])*)?")
PG_OR_QUEUE = r"[0-7](-[0-7])?"

_MAP_FIELDS = {f: leafref(t) for f, t in (
    ("dscp_to_tc_map", "DSCP_TO_TC_MAP"),
    ("tc_to_queue_map", "TC_TO_QUEUE_MAP"),
    ("tc_to_pg_map", "TC_TO_PRIORITY_GROUP_MAP"),
    ("pfc_to_queue_map", "MAP_PFC_PRIORITY_TO_QUEUE"),
)}  # fmt: skip

_COLOURS = ("green", "yellow", "red", "green_yellow", "green_red", "yellow_red", "all")
_ECN_MODES = ("ecn_none", *(f"ecn_{c}" for c in _COLOURS))

# table -> (fields -> check, mandatory fields)
FIELDS: dict[str, tuple[dict[str, Check], frozenset[str]]] = {
    "PORT": (
        {
            "admin_status": enum("up", "down"),
            "alias": ANY,
            "description": ANY,
            "fec": enum("rs", "fc", "none", "auto"),
            "index": UINT,
            "lanes": pattern(r"\d+(,\d+)*"),
            "mtu": int_range(68, 9216),
            "speed": int_range(1, 1_600_000),
            "autoneg": enum("on", "off"),
        },
        frozenset({"lanes"}),
    ),
    "PORT_QOS_MAP": ({**_MAP_FIELDS, "pfc_enable": PRIORITIES, "pfcwd_sw_enable": PRIORITIES}, frozenset()),
    "PFC_WD": (
        {
            "action": enum("drop", "forward", "alert"),
            "detection_time": int_range(100, 5000),
            "restoration_time": int_range(100, 60000),
            "POLL_INTERVAL": int_range(100, 1000),
            "BIG_RED_SWITCH": enum("enable", "disable"),
        },
        frozenset(),
    ),
    "WRED_PROFILE": (
        {
            **{f"{c}_{m}_threshold": UINT for c in ("green", "yellow", "red") for m in ("min", "max")},
            **{f"{c}_drop_probability": int_range(0, 100) for c in ("green", "yellow", "red")},
            **{f"wred_{c}_enable": enum("true", "false") for c in ("green", "yellow", "red")},
            "ecn": enum(*_ECN_MODES),
        },
        frozenset(),
    ),
    "QUEUE": ({"scheduler": leafref("SCHEDULER"), "wred_profile": leafref("WRED_PROFILE")}, frozenset()),
    "BUFFER_POOL": ({"mode": enum("static", "dynamic"), "size": UINT, "type": enum("ingress", "egress")}, frozenset()),
    "BUFFER_PROFILE": (
        {
            "pool": leafref("BUFFER_POOL"),
            "size": UINT,
            "xon": UINT,
            "xoff": UINT,
            "xon_offset": UINT,
            "dynamic_th": int_range(-8, 8),
            "static_th": UINT,
        },
        frozenset({"pool", "size"}),
    ),
    "BUFFER_PG": ({"profile": leafref("BUFFER_PROFILE")}, frozenset({"profile"})),
    "SCHEDULER": ({"type": enum("DWRR", "WRR", "STRICT"), "weight": int_range(0, 255)}, frozenset()),
}
# The QoS maps: keys are the map names, fields are code points (DSCP 0-63, TC or priority 0-7) to 0-7.
MAPS = {"DSCP_TO_TC_MAP": 63, "TC_TO_QUEUE_MAP": 7, "TC_TO_PRIORITY_GROUP_MAP": 7, "MAP_PFC_PRIORITY_TO_QUEUE": 7}
_TO_CLASS = int_range(0, 7)


def _key_error(table: str, key: str, db: Mapping[str, Any]) -> str | None:
    """Keys that refer to a port must name a port of the PORT table (sonic YANG leafrefs)."""
    ports = db.get("PORT", {})
    if table in ("PORT_QOS_MAP", "PFC_WD"):
        port = None if key in ("global", "GLOBAL") else key
    elif table in ("QUEUE", "BUFFER_PG"):
        port, _, index = key.partition("|")
        if not re.fullmatch(PG_OR_QUEUE, index):
            return f'{table}|{key}: "{index}" is not a queue or priority group index ({PG_OR_QUEUE})'
    else:
        return None
    if port is not None and port not in ports:
        return f'Leafref "/PORT/PORT_LIST/name" of value "{port}" points to a non-existing leaf.'
    return None


def _entry_errors(table: str, key: str, entry: Any, db: Mapping[str, Any]) -> str | None:
    if not isinstance(entry, Mapping):
        return f"{table}|{key}: an entry must be an object of fields"
    if table in MAPS:
        for code, value in entry.items():
            if not (code.isdigit() and int(code) <= MAPS[table]):
                return f'{table}|{key}: "{code}" is not a code point (0..{MAPS[table]})'
            if not isinstance(value, str) or (error := _TO_CLASS(value, db)):
                return error or f"{table}|{key}|{code}: values are strings in config_db"
        return None
    fields, mandatory = FIELDS[table]
    error = _key_error(table, key, db)
    if error:
        return error
    missing = sorted(mandatory - set(entry))
    if missing:
        return f'Missing required element "{missing[0]}" in "{table}_LIST" ({table}|{key}).'
    for name, value in entry.items():
        check = fields.get(name)
        if check is None:
            return f'Unknown element "{name}" in {table}|{key}.'
        if not isinstance(value, str):
            return f"{table}|{key}|{name}: values are strings in config_db, not {type(value).__name__}"
        error = check(value, db)
        if error:
            return error
    return None


def validate(db: Mapping[str, Any]) -> str | None:
    """The first reason `db` is not a valid config (libyang wording), or None."""
    for table, entries in db.items():
        if table not in FIELDS and table not in MAPS:
            continue  # a table the twin does not model: never refused
        if not isinstance(entries, Mapping):
            return f"{table}: a table must be an object of entries"
        for key, entry in entries.items():
            error = _entry_errors(table, key, entry, db)
            if error:
                return error
    return None


def empty_tables(db: Mapping[str, Any]) -> list[str]:
    """Tables with no entries: CONFIG_DB cannot hold them, so the updater refuses a config that has one."""
    return sorted(t for t, entries in db.items() if isinstance(entries, Mapping) and not entries)
