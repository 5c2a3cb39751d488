"""The change from a SONiC switch's running config_db to the intended one, as an RFC 6902 JSON patch for
`config apply-patch` (SONiC's Generic Config Updater), restricted to what fabricd owns.

What fabricd owns (everything else, e.g. BGP_NEIGHBOR, DEVICE_METADATA, PORT `lanes`/`description`, the
lossy PG 0 and the scheduler of a queue, is out of scope and never appears in a patch):
- the fields it renders on entries of the ports it manages (PORT, PORT_QOS_MAP, PFC_WD, QUEUE `wred_profile`,
  BUFFER_PG `profile` of PGs 1-7, which only lossless TCs use; see TC_TO_PRIORITY_GROUP_MAP in render.py),
- `PFC_WD|GLOBAL` `POLL_INTERVAL`, the AZURE QoS maps,
- every profile named FABRICD_* and every binding to one, even on a port it no longer manages, so leftovers
  of a removed port are cleaned up.
The managed ports are the PORT keys of the intended config.
"""

from __future__ import annotations

import copy
import json
import shlex
from collections.abc import Iterable, Mapping
from typing import Any

from drivers.sonic.render import MAP_NAME, PREFIX
from topology.errors import FabricdError

Doc = dict[str, Any]
Op = dict[str, Any]

_PORT_FIELDS: dict[str, frozenset[str]] = {
    "PORT": frozenset({"admin_status", "alias", "fec", "mtu", "speed"}),
    "PORT_QOS_MAP": frozenset(
        {"pfc_enable", "pfcwd_sw_enable", "dscp_to_tc_map", "tc_to_queue_map", "tc_to_pg_map", "pfc_to_queue_map"}
    ),
    "PFC_WD": frozenset({"action", "detection_time", "restoration_time"}),
}
_GLOBAL_WD = ("GLOBAL", frozenset({"POLL_INTERVAL"}))  # BIG_RED_SWITCH stays the operator's
_BINDINGS = {"QUEUE": "wred_profile", "BUFFER_PG": "profile"}  # keys "<port>|<queue or PG range>"
_MAPS = ("DSCP_TO_TC_MAP", "TC_TO_QUEUE_MAP", "TC_TO_PRIORITY_GROUP_MAP", "MAP_PFC_PRIORITY_TO_QUEUE")
_PROFILES = ("WRED_PROFILE", "BUFFER_PROFILE")

PATCH_FILE = "/tmp/fabricd-config-patch.json"
# Ends the heredoc that writes a patch; no line of a JSON patch written one op per line can equal it.
HEREDOC_END = "FABRICD_PATCH_END"


class PatchError(FabricdError):
    """A JSON patch does not apply to the document (a path is missing or an op is unknown)."""


def owned_tables() -> tuple[str, ...]:
    """The config_db tables fabricd writes to (only part of some of them is owned; see the module doc)."""
    return tuple(sorted({*_PORT_FIELDS, *_BINDINGS, *_MAPS, *_PROFILES}))


def _owned_fields(table: str, key: str, entry: Mapping[str, Any], ports: set[str] | None) -> set[str]:
    def managed(port: str) -> bool:
        return ports is None or port in ports

    if table in _PORT_FIELDS:
        if table == "PFC_WD" and key == _GLOBAL_WD[0]:
            return set(entry) & _GLOBAL_WD[1]
        return set(entry) & _PORT_FIELDS[table] if managed(key) else set()
    if table in _BINDINGS:
        field = _BINDINGS[table]
        value = entry.get(field)
        if isinstance(value, str) and value.startswith(PREFIX):
            return {field}
        port, _, index = key.partition("|")
        # PG 0 ("0" or "0-2") is SONiC's lossy PG, configured by its buffer templates; fabricd never renders it.
        if table == "BUFFER_PG" and index.split("-")[0] == "0":
            return set()
        return {field} & set(entry) if managed(port) else set()
    if table in _MAPS:
        return set(entry) if key == MAP_NAME else set()
    if table in _PROFILES:
        return set(entry) if key.startswith(PREFIX) else set()
    return set()


def owned_view(config_db: Mapping[str, Any], ports: Iterable[str] | None = None) -> Doc:
    """Only the tables, entries and fields fabricd owns (empty entries and tables dropped).

    `ports`: the ports fabricd manages on this switch (default: every port the document names).
    """
    scope = None if ports is None else set(ports)
    view: Doc = {}
    for table in owned_tables():
        entries = config_db.get(table)
        if not isinstance(entries, Mapping):
            continue
        for key in sorted(entries):
            entry = entries[key]
            if not isinstance(entry, Mapping):
                continue
            fields = _owned_fields(table, key, entry, scope)
            if fields:
                view.setdefault(table, {})[key] = {f: entry[f] for f in sorted(fields)}
    return view


def _escape(token: str) -> str:
    # RFC 6901: "~" -> "~0" first, then "/" -> "~1" (SONiC keys keep "|" as is, e.g. /BUFFER_PG/Ethernet0|3).
    return token.replace("~", "~0").replace("/", "~1")


def json_pointer(*tokens: str) -> str:
    return "".join("/" + _escape(t) for t in tokens)


def json_patch(running: Mapping[str, Any], intended: Mapping[str, Any]) -> list[Op]:
    """The minimal RFC 6902 patch that makes the owned part of `running` equal the owned part of `intended`.

    Field-level replace/add/remove on existing entries, whole-entry add for new entries (whole-table add when
    the table is missing), whole-entry remove for owned entries no longer intended (only the owned fields when
    the entry holds foreign ones too; the whole table when nothing would be left in it). Ordered by table, key,
    field; SONiC's updater orders the changes it applies by their dependencies itself.
    """
    ports = set(intended.get("PORT", {}))
    have = owned_view(running, ports)
    want = owned_view(intended, ports)
    ops: list[Op] = []
    for table in sorted(set(have) | set(want)):
        h, w = have.get(table, {}), want.get(table, {})
        full: Mapping[str, Any] = running.get(table, {})
        if table not in running:
            ops.append({"op": "add", "path": json_pointer(table), "value": w})
            continue
        table_ops: list[Op] = []
        kept = set(full)
        for key in sorted(set(h) | set(w)):
            he, we = h.get(key, {}), w.get(key)
            if we is None:
                if set(full[key]) == set(he):
                    table_ops.append({"op": "remove", "path": json_pointer(table, key)})
                    kept.discard(key)
                else:
                    table_ops.extend({"op": "remove", "path": json_pointer(table, key, f)} for f in sorted(he))
            elif key not in full:
                table_ops.append({"op": "add", "path": json_pointer(table, key), "value": we})
                kept.add(key)
            else:
                for f in sorted(set(he) | set(we)):
                    if f not in we:
                        table_ops.append({"op": "remove", "path": json_pointer(table, key, f)})
                    elif f not in he:
                        table_ops.append({"op": "add", "path": json_pointer(table, key, f), "value": we[f]})
                    elif he[f] != we[f]:
                        table_ops.append({"op": "replace", "path": json_pointer(table, key, f), "value": we[f]})
        # The updater refuses a patch that leaves a table empty (CONFIG_DB cannot hold one): drop the table.
        ops.extend(table_ops if kept else [{"op": "remove", "path": json_pointer(table)}])
    return ops


def _tokens(path: str) -> list[str]:
    if not path.startswith("/"):
        raise PatchError(f"JSON pointer {path!r} must start with '/' (RFC 6901)")
    return [t.replace("~1", "/").replace("~0", "~") for t in path[1:].split("/")]


def apply_patch(doc: Mapping[str, Any], patch: Iterable[Mapping[str, Any]]) -> Doc:
    """A new document: `doc` with the add/remove/replace ops applied (objects only; SONiC config_db has no arrays
    in the tables fabricd owns). The input is not modified."""
    out: Doc = copy.deepcopy(dict(doc))
    for op in patch:
        *parents, last = _tokens(str(op.get("path", "")))
        node: Any = out
        for t in parents:
            if not isinstance(node, dict) or t not in node:
                raise PatchError(f"{op.get('op')} {op.get('path')}: parent {t!r} does not exist")
            node = node[t]
        if not isinstance(node, dict):
            raise PatchError(f"{op.get('op')} {op.get('path')}: parent is not an object")
        kind = op.get("op")
        if kind in ("remove", "replace") and last not in node:
            raise PatchError(f"{kind} {op.get('path')}: nothing there to {kind}")
        if kind == "remove":
            del node[last]
        elif kind in ("add", "replace"):
            node[last] = copy.deepcopy(op["value"])
        else:
            raise PatchError(f"op {kind!r} at {op.get('path')} is not supported: use add, remove or replace")
    return out


def patch_text(patch: list[Op]) -> str:
    """The patch file's text: one op per line, so no line is long (a heredoc line goes through readline)."""
    return "[\n" + ",\n".join(json.dumps(op, separators=(",", ":")) for op in patch) + "\n]\n"


def patch_commands(patch: list[Op], path: str = PATCH_FILE) -> list[str]:
    """The shell commands that apply `patch` on the switch over SSH (none when there is nothing to do):
    a quoted heredoc writes the file (nothing in it is expanded by the remote shell), then the updater."""
    if not patch:
        return []
    return [
        f"cat > {shlex.quote(path)} <<'{HEREDOC_END}'\n{patch_text(patch)}{HEREDOC_END}",
        # `config apply-patch [-f CONFIGDB|SONICYANG] [-d] [-v] PATCH_FILE_PATH` (sonic-utilities config/main.py)
        # applies an RFC 6902 patch of the config_db.json format (the default) to the running CONFIG_DB through
        # the Generic Config Updater, which validates against SONiC YANG and orders the changes; `-d` is a dry
        # run. `config save -y` persists it.
        f"sudo config apply-patch {shlex.quote(path)}",
    ]


def patch_from_commands(commands: list[str]) -> list[Op]:
    """The patch inside commands made by `patch_commands` (what a plan shows is exactly what is pushed)."""
    for command in commands:
        first, _, rest = command.partition("\n")
        if first.endswith(f"<<'{HEREDOC_END}'") and rest.endswith(HEREDOC_END):
            body = rest[: -len(HEREDOC_END)]
            try:
                patch = json.loads(body)
            except json.JSONDecodeError as e:
                raise PatchError(f"the patch in the plan is not JSON (line {e.lineno}: {e.msg})") from None
            if not isinstance(patch, list) or not all(isinstance(op, dict) and "op" in op for op in patch):
                raise PatchError("the patch in the plan is not a list of RFC 6902 operations")
            return patch
    raise PatchError("these commands hold no config patch; make them with a SONiC plan (drivers.sonic)")
