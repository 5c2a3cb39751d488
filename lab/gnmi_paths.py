"""The twin's gNMI data tree: EOS paths (reference/platforms.md) mapped onto twin state, and fast encoding.

Every leaf the twin serves is one entry of `CATALOG`: a tree (interfaces, qos, transceiver components, lldp),
a path relative to that tree's per-interface root, and where its value comes from (a counter column, or a
state kind such as oper-status). Requests are matched against the catalog once (not per port), then expanded
over a switch's ports with numpy, so a subscription is a pair of index arrays.

Notifications are written as protobuf bytes directly: one per (interface, tree), prefix = the interface root,
updates = the relative paths. The path bytes of every update are fixed per leaf, so only the counter values
need encoding, which `encode_counters` does for a whole switch at once (vectorised varints) instead of building
one protobuf object per update. State leaves (strings, doubles) are few and encoded per update.
"""

from __future__ import annotations

import functools
import json
import struct
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

import numpy as np

from .counters import (
    COL,
    ETHERNET_COUNTERS,
    FEC_COUNTERS,
    INTERFACE_COUNTERS,
    PFC_COUNTERS,
    PRIORITIES,
    QUEUE_COUNTERS,
    QUEUE_GAUGES,
    WATCHDOG_COUNTERS,
)
from .model import Switch, Twin
from .sonic_config import lldp_port_id

Keys = tuple[tuple[str, str], ...]
Elem = tuple[str, Keys]

ORIGINS = frozenset({"", "openconfig", "eos_native"})
PORT = "\x00port"  # placeholder for the interface name inside a root template
# Placeholders for a port's underlay addresses (topology/underlay.py): trees keyed by them serve only the ports that
# carry a BGP session, keyed by the address instead of the port.
LOCAL = "\x00local"
PEER = "\x00peer"
ADDRESS = "\x00addr="  # a constraint naming a row by one of its addresses (a path asking for one neighbour)
XCVR_SUFFIX = " transceiver"
LLDP_NEIGHBOR_ID = "1"  # the twin has one LLDP neighbour per port

COUNTER = "counter"
STATE_KINDS = ("oper-status", "admin-status")  # the leaves ON_CHANGE covers

# Per-interface roots of the four trees, in the order notifications are sent.
TREES: dict[str, tuple[Elem, ...]] = {
    "if": (("interfaces", ()), ("interface", (("name", PORT),))),
    "qos": (("qos", ()), ("interfaces", ()), ("interface", (("interface-id", PORT),))),
    "xcvr": (("components", ()), ("component", (("name", PORT + XCVR_SUFFIX),))),
    "lldp": (("lldp", ()), ("interfaces", ()), ("interface", (("name", PORT),))),
    # openconfig-interfaces: the routed port's address (fabricd maps a BGP neighbour to its port by it)
    "ipv4": (
        ("interfaces", ()), ("interface", (("name", PORT),)), ("subinterfaces", ()),
        ("subinterface", (("index", "0"),)), ("ipv4", ()), ("addresses", ()), ("address", (("ip", LOCAL),)),
    ),
    # openconfig-network-instance BGP neighbours (reference/platforms.md "BGP underlay")
    "bgp": (
        ("network-instances", ()), ("network-instance", (("name", "default"),)), ("protocols", ()),
        ("protocol", (("identifier", "BGP"), ("name", "BGP"))), ("bgp", ()), ("neighbors", ()),
        ("neighbor", (("neighbor-address", PEER),)),
    ),
}  # fmt: skip
ADDRESS_TREES = frozenset({"ipv4", "bgp"})
TREE_INDEX = {t: i for i, t in enumerate(TREES)}


class PathError(ValueError):
    """A malformed path or request (gRPC INVALID_ARGUMENT)."""


class PathNotFound(LookupError):
    """A well-formed path that names nothing on this switch (gRPC NOT_FOUND)."""


@dataclass(frozen=True)
class Leaf:
    code: int
    tree: str
    rel: tuple[Elem, ...]
    kind: str  # COUNTER or a state kind
    column: int = -1

    @property
    def text(self) -> str:
        return "/" + "/".join(elem_text(e) for e in self.rel)


def _e(elem_name: str, /, **keys: str) -> Elem:
    return (elem_name, tuple(sorted((k.replace("_", "-"), v) for k, v in keys.items())))


def _catalog() -> tuple[Leaf, ...]:
    out: list[tuple[str, tuple[Elem, ...], str, int]] = []

    def counter(tree: str, rel: tuple[Elem, ...], column: str) -> None:
        out.append((tree, rel, COUNTER, COL[column]))

    st = _e("state")
    out.append(("if", (st, _e("oper-status")), "oper-status", -1))
    out.append(("if", (st, _e("admin-status")), "admin-status", -1))
    out.append(("if", (st, _e("description")), "description", -1))
    for c in INTERFACE_COUNTERS:
        counter("if", (st, _e("counters"), _e(c)), f"if.{c}")
    eth = _e("ethernet")
    for c in ETHERNET_COUNTERS:
        counter("if", (eth, st, _e("counters"), _e(c)), f"eth.{c}")
    fec = (eth, _e("phys"), _e("phy", index="1"), _e("ingress"), _e("fec"), st)
    for c in FEC_COUNTERS:
        counter("if", (*fec, _e(c)), f"fec.{c}")
    out.append(("if", (*fec, _e("pre-fec-ber")), "pre-fec-ber", -1))
    for p in PRIORITIES:
        for c in PFC_COUNTERS:
            counter("if", (eth, _e("pfc"), _e("priorities"), _e("priority", index=str(p)), st, _e(c)), f"pfc{p}.{c}")
    for q in PRIORITIES:
        txq = _e("tx-queue", index=str(q), queue_type="UNICAST")
        for c in WATCHDOG_COUNTERS:
            counter("if", (eth, _e("pfc"), _e("watchdog"), _e("tx-queues"), txq, st, _e(c)), f"wd{q}.{c}")
    for q in PRIORITIES:
        for c in (*QUEUE_COUNTERS, *QUEUE_GAUGES):
            counter("qos", (_e("output"), _e("queues"), _e("queue", name=str(q)), st, _e(c)), f"q{q}.{c}")
    chan = (_e("transceiver"), _e("physical-channels"), _e("channel", index="0"), st)
    out.append(("xcvr", (*chan, _e("input-power"), _e("instant")), "rx-power", -1))
    out.append(("xcvr", (st, _e("temperature"), _e("instant")), "temperature", -1))
    nbr = (_e("neighbors"), _e("neighbor", id=LLDP_NEIGHBOR_ID), st)
    out.append(("lldp", (*nbr, _e("system-name")), "lldp-system-name", -1))
    out.append(("lldp", (*nbr, _e("port-id")), "lldp-port-id", -1))
    out.append(("ipv4", (st, _e("ip")), "ipv4-ip", -1))
    out.append(("ipv4", (st, _e("prefix-length")), "ipv4-prefix-length", -1))
    for leaf in ("session-state", "established-transitions", "last-established", "peer-as", "local-as"):
        out.append(("bgp", (st, _e(leaf)), f"bgp-{leaf}", -1))
    prefixes = (_e("afi-safis"), _e("afi-safi", afi_safi_name="IPV4_UNICAST"), st, _e("prefixes"))
    for leaf in ("received", "sent", "installed"):
        out.append(("bgp", (*prefixes, _e(leaf)), f"bgp-prefixes-{leaf}", -1))
    out.sort(key=lambda leaf: TREE_INDEX[leaf[0]])  # codes grouped by tree: sorting by code groups notifications
    return tuple(Leaf(i, tree, rel, kind, col) for i, (tree, rel, kind, col) in enumerate(out))


CATALOG = _catalog()
CODE_TREE = np.array([TREE_INDEX[leaf.tree] for leaf in CATALOG], dtype=np.int64)
CODE_COLUMN = np.array([leaf.column for leaf in CATALOG], dtype=np.int64)
IS_COUNTER = np.array([leaf.kind == COUNTER for leaf in CATALOG], dtype=bool)
ON_CHANGE_CODES = frozenset(leaf.code for leaf in CATALOG if leaf.kind in STATE_KINDS)
CODE_OF_COLUMN = {leaf.column: leaf.code for leaf in CATALOG if leaf.kind == COUNTER}  # counter column -> its leaf


# --- paths -----------------------------------------------------------------------------------------
def elem_text(e: Elem) -> str:
    return e[0] + "".join(f"[{k}={v}]" for k, v in e[1])


def elems_text(elems: Sequence[Elem]) -> str:
    return "/" + "/".join(elem_text(e) for e in elems)


def parse_path_string(text: str) -> list[Elem]:
    """`/a/b[k=v]/c` -> elems; keys may contain `/` (interface names do). For clients, tests and tools."""
    elems: list[Elem] = []
    i, n = 0, len(text)
    while i < n:
        if text[i] == "/":
            i += 1
            continue
        j = i
        while j < n and text[j] not in "/[":
            j += 1
        name, keys = text[i:j], []
        while j < n and text[j] == "[":
            end = text.find("]", j)
            if end < 0 or "=" not in text[j:end]:
                raise PathError(f"unbalanced or key-less '[' in path {text!r}")
            k, v = text[j + 1 : end].split("=", 1)
            keys.append((k, v))
            j = end + 1
        elems.append((name, tuple(sorted(keys))))
        i = j
    return elems


def path_elems(path: object, what: str = "path") -> list[Elem]:
    """Validated elems of a gnmi_pb2.Path (untyped stubs, hence `object`)."""
    p: object = path
    if getattr(p, "element", None):
        raise PathError(f"{what} uses the deprecated 'element' field; send 'elem' (gNMI 0.4+)")
    origin = str(getattr(p, "origin", ""))
    if origin not in ORIGINS:
        raise PathError(f"{what} origin {origin!r} is not served; use 'openconfig', 'eos_native' or none")
    out: list[Elem] = []
    for pe in getattr(p, "elem", ()):
        name = str(pe.name)
        if ":" in name:  # module-qualified, e.g. openconfig-interfaces:interfaces
            name = name.split(":", 1)[1]
        if not name or any(ch in name for ch in "/[]= "):
            raise PathError(f"{what} has a malformed element name {pe.name!r}")
        keys = []
        for k, v in pe.key.items():
            if not k or any(ch in k for ch in "/[]= "):
                raise PathError(f"{what} element {name!r} has a malformed key name {k!r}")
            keys.append((str(k), str(v)))
        out.append((name, tuple(sorted(keys))))
    return out


Constraint = str | None  # a port name, ADDRESS + an address, or None for every port


def _match_keys(pat: Keys, tmpl: Keys, port: Constraint) -> tuple[bool, Constraint]:
    tk = dict(tmpl)
    for k, v in pat:
        if k not in tk:
            return False, port
        t = tk[k]
        if v == "*":
            continue
        if t in (LOCAL, PEER):
            port = ADDRESS + v
        elif t.startswith(PORT):
            suffix = t[len(PORT) :]
            if not v.endswith(suffix):
                return False, port
            port = v[: len(v) - len(suffix)] if suffix else v
        elif v != t:
            return False, port
    return True, port


def _match(pat: Sequence[Elem], tmpl: Sequence[Elem], port: Constraint = None) -> list[Constraint]:
    """Port constraints under which `pat` selects the leaf `tmpl` (prefix match = subtree, `*`, `...`)."""
    if not pat:
        return [port]
    if pat[0][0] == "...":
        found = []
        for skip in range(len(tmpl) + 1):
            found += _match(pat[1:], tmpl[skip:], port)
        return found
    if not tmpl:
        return []
    (pname, pkeys), (tname, tkeys) = pat[0], tmpl[0]
    if pname not in ("*", tname):
        return []
    ok, port = _match_keys(pkeys, tkeys, port)
    return _match(pat[1:], tmpl[1:], port) if ok else []


def match(elems: Sequence[Elem]) -> list[tuple[int, Constraint]]:
    """Catalog codes a path selects, each with its port constraint (independent of the switch)."""
    return list(_catalog_match(tuple(elems)))


@functools.lru_cache(maxsize=4096)
def _catalog_match(elems: tuple[Elem, ...]) -> tuple[tuple[int, Constraint], ...]:
    """`match`, remembered: every collector asks each switch the same few paths, and walking them against the whole
    catalog was half of what a subscription cost the twin (a takeover subscribes dozens of switches at once)."""
    out: list[tuple[int, Constraint]] = []
    for leaf in CATALOG:
        for c in dict.fromkeys(_match(elems, TREES[leaf.tree] + leaf.rel)):
            out.append((leaf.code, c))
    return tuple(out)


def addresses(twin: Twin, sw: Switch) -> dict[int, tuple[str, str]]:
    """Row -> (local, peer) underlay address of each port of `sw` that carries a BGP session."""
    out = {}
    for row, port in enumerate(sw.ports):
        s = twin.bgp.underlay.session(sw.name, port)
        if s is not None:
            out[row] = (s.local_address, s.peer_address)
    return out


def select(
    sw: Switch, matches: Iterable[tuple[int, Constraint]], routed: dict[int, tuple[str, str]] | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """(rows, codes) of a switch's leaves, sorted by (tree, row, code); PathNotFound if nothing matches. `routed`
    (`addresses`) are the ports that serve the trees keyed by an underlay address."""
    rows_l: list[np.ndarray] = []
    codes_l: list[np.ndarray] = []
    all_rows = np.arange(len(sw.ports), dtype=np.int64)
    routed = routed or {}
    routed_rows = np.array(sorted(routed), dtype=np.int64)
    missing: set[str] = set()
    for code, port in matches:
        by_address = CATALOG[code].tree in ADDRESS_TREES
        if port is not None and port.startswith(ADDRESS):
            want = port[len(ADDRESS) :]
            rows = np.array([r for r, a in routed.items() if want in a], dtype=np.int64)
            if not len(rows):
                missing.add(want)
                continue
        elif by_address:
            rows = routed_rows if port is None else routed_rows[routed_rows == sw.index.get(port, -1)]
            if not len(rows):
                continue
        elif port is None:
            rows = all_rows
        elif port in sw.index:
            rows = np.array([sw.index[port]], dtype=np.int64)
        else:
            missing.add(port)
            continue
        rows_l.append(rows)
        codes_l.append(np.full(len(rows), code, dtype=np.int64))
    if not rows_l:
        if missing:
            raise PathNotFound(f"{sw.name} has no interface {', '.join(sorted(missing))}")
        raise PathNotFound(f"{sw.name} serves nothing at that path")
    return sort_unique(np.concatenate(rows_l), np.concatenate(codes_l))


def sort_unique(rows: np.ndarray, codes: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Leaves ordered by (tree, row, code) without duplicates, so each notification is one contiguous run."""
    key = np.unique((CODE_TREE[codes] * (1 << 20) + rows) * 4096 + codes)
    return (key // 4096) % (1 << 20), key % 4096


# --- protobuf wire helpers ---------------------------------------------------------------------------
def varint(n: int) -> bytes:
    out = bytearray()
    while n > 0x7F:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def field_bytes(tag: int, body: bytes) -> bytes:
    return bytes((tag,)) + varint(len(body)) + body


def encode_path(elems: Iterable[Elem], target: str = "", origin: str = "") -> bytes:
    """gnmi Path message body: origin=2, elem=3 (name=1, key map=2), target=4."""
    out = bytearray()
    if origin:
        out += field_bytes(0x12, origin.encode())
    for name, keys in elems:
        body = field_bytes(0x0A, name.encode())
        for k, v in keys:
            body += field_bytes(0x12, field_bytes(0x0A, k.encode()) + field_bytes(0x12, v.encode()))
        out += field_bytes(0x1A, body)
    if target:
        out += field_bytes(0x22, target.encode())
    return bytes(out)


def root_elems(tree: str, port: str, local: str = "", peer: str = "") -> tuple[Elem, ...]:
    return tuple(
        (n, tuple((k, v.replace(PORT, port).replace(LOCAL, local).replace(PEER, peer)) for k, v in keys))
        for n, keys in TREES[tree]
    )


def full_path_text(tree: str, port: str, code: int, local: str = "", peer: str = "") -> str:
    return "/" + "/".join(elem_text(e) for e in root_elems(tree, port, local, peer) + CATALOG[code].rel)


# Update.path field (tag 1) per code, padded into a matrix so a switch's updates are gathered by code.
_REL = [field_bytes(0x0A, encode_path(leaf.rel)) for leaf in CATALOG]
REL_LEN = np.array([len(b) for b in _REL], dtype=np.int64)
REL_BYTES = np.zeros((len(CATALOG), int(REL_LEN.max())), dtype=np.uint8)
for _i, _b in enumerate(_REL):
    REL_BYTES[_i, : len(_b)] = np.frombuffer(_b, dtype=np.uint8)
_SHIFTS = [np.uint64(7 * k) for k in range(10)]
_LIMITS = [np.uint64(1 << (7 * k)) for k in range(1, 10)]


def encode_counters(codes: np.ndarray, values: np.ndarray) -> tuple[bytes, np.ndarray]:
    """Repeated `Notification.update` fields (tag 4) for uint counters, all at once; also each one's length.

    Update = 0x22 len | 0x0a len path | 0x1a len TypedValue (val=3)(0x18 varint). Only the value varint and the two
    lengths that depend on it vary, so rows are laid out in a byte matrix and the used bytes kept by a mask.
    """
    n = len(values)
    nb = np.ones(n, dtype=np.int64)
    for lim in _LIMITS:
        nb += values >= lim
    plen = REL_LEN[codes]
    ulen = plen + 3 + nb
    two = ulen >= 128  # update length needs a 2-byte varint (paths are < 16 kB)
    width = 3 + REL_BYTES.shape[1] + 3 + 10
    buf = np.zeros((n, width), dtype=np.uint8)
    buf[:, 0] = 0x22
    buf[:, 1] = np.where(two, (ulen & 0x7F) | 0x80, ulen)
    buf[:, 2] = ulen >> 7  # overwritten by the path on 1-byte rows
    rel = REL_BYTES[codes]
    one = ~two
    wr = REL_BYTES.shape[1]
    buf[one, 2 : 2 + wr] = rel[one]
    buf[two, 3 : 3 + wr] = rel[two]
    at = 2 + two + plen
    ar = np.arange(n)
    buf[ar, at] = 0x1A
    buf[ar, at + 1] = 1 + nb
    buf[ar, at + 2] = 0x18
    at = at + 3
    for k, shift in enumerate(_SHIFTS):
        byte = ((values >> shift) & np.uint64(0x7F)).astype(np.uint8)
        buf[ar, at + k] = byte | ((k < nb - 1).astype(np.uint8) << 7)
    total = at + nb
    return buf[np.arange(width) < total[:, None]].tobytes(), total


def typed_value(value: str | float | int, json_ietf: bool = False) -> bytes:
    """TypedValue body: string_val=1, uint_val=3, double_val=14, json_ietf_val=11."""
    if json_ietf:
        # RFC 7951: 64-bit integers are JSON strings.
        text = json.dumps(str(value) if isinstance(value, int) else value)
        return field_bytes(0x5A, text.encode())
    if isinstance(value, str):
        return field_bytes(0x0A, value.encode())
    if isinstance(value, float):
        return b"\x71" + struct.pack("<d", value)
    return b"\x18" + varint(value)


def encode_update(code: int, value: str | float | int, json_ietf: bool = False) -> bytes:
    return field_bytes(0x22, _REL[code] + field_bytes(0x1A, typed_value(value, json_ietf)))


def state_value(twin: Twin, sw: Switch, row: int, kind: str) -> str | float | None:
    if kind == "oper-status":
        return "UP" if sw.oper_up[row] else "DOWN"
    if kind == "admin-status":
        return "UP" if sw.config[row].admin_up else "DOWN"
    if kind == "description":
        return sw.config[row].description  # "" when the port has none (never absent: a removal must show)
    if kind == "pre-fec-ber":
        return float(sw.pre_fec_ber[row])
    if kind == "rx-power":
        return round(twin.rx_power(sw, row), 2)
    if kind == "temperature":
        return round(twin.temperature(sw, row), 1)
    if kind.startswith("bgp-") or kind.startswith("ipv4-"):
        return bgp_value(twin, sw, row, kind)
    peer = twin.lldp_heard(sw, row)
    if peer is None:
        return None
    return peer.device if kind == "lldp-system-name" else lldp_port_id(twin, peer)


# openconfig-bgp session-state per EOS peer state
OC_SESSION_STATE = {"Established": "ESTABLISHED", "Idle": "IDLE", "Active": "ACTIVE", "Connect": "CONNECT",
                    "OpenSent": "OPENSENT", "OpenConfirm": "OPENCONFIRM"}  # fmt: skip


def bgp_value(twin: Twin, sw: Switch, row: int, kind: str) -> str | int | None:
    """A BGP neighbour's or a routed port's address leaf (lab/bgp.py)."""
    got = twin.bgp.view(sw.name, sw.ports[row])
    if got is None:
        return None
    s, st = got
    if kind == "ipv4-ip":
        return s.local_address
    if kind == "ipv4-prefix-length":
        return 31
    if kind == "bgp-session-state":
        return OC_SESSION_STATE[twin.bgp.peer_state(s, st)]
    if kind == "bgp-established-transitions":
        return st.transitions
    if kind == "bgp-last-established":
        return st.since_ns if st.up else None
    if kind == "bgp-peer-as":
        return s.peer_asn
    if kind == "bgp-local-as":
        return s.local_asn
    if kind == "bgp-prefixes-sent":
        return twin.bgp.sent(sw.name, s.local.port)
    return twin.bgp.received(sw.name, s.local.port)  # received, installed: every route received is installed


def notification(ts_varint: bytes, prefix: bytes, updates: bytes) -> bytes:
    """SubscribeResponse.update / GetResponse.notification (both field 1) holding one Notification."""
    body = b"\x08" + ts_varint + prefix + updates
    return b"\x0a" + varint(len(body)) + body


SYNC_RESPONSE = b"\x18\x01"  # SubscribeResponse{sync_response: true}
# Notification.delete (field 5) of the port's neighbour entry, relative to the per-port LLDP prefix
LLDP_NEIGHBOR_DELETE = field_bytes(0x2A, encode_path((("neighbors", ()), ("neighbor", (("id", LLDP_NEIGHBOR_ID),)))))


# --- per-switch sampling plans -----------------------------------------------------------------------
@dataclass
class Prefixes:
    """Prefix field bytes per (tree, row, target), built on first use (startup stays cheap)."""

    sw: Switch
    routed: dict[int, tuple[str, str]] = field(default_factory=dict)  # `addresses` of the switch
    cache: dict[tuple[int, int, str], bytes] = field(default_factory=dict)

    def get(self, tree: int, row: int, target: str) -> bytes:
        key = (tree, row, target)
        b = self.cache.get(key)
        if b is None:
            t = list(TREES)[tree]
            local, peer = self.routed.get(row, ("", ""))
            b = field_bytes(0x12, encode_path(root_elems(t, self.sw.ports[row], local, peer), target))
            self.cache[key] = b
        return b


class Plan:
    """What one subscription (or Get) reads from one switch, ready to sample as notification bytes."""

    def __init__(self, twin: Twin, sw: Switch, rows: np.ndarray, codes: np.ndarray, prefixes: Prefixes, target: str):
        self.twin, self.sw = twin, sw
        self.rows, self.codes = rows, codes
        self.size = len(rows)
        counter = IS_COUNTER[codes]
        self.c_rows, self.c_codes = rows[counter], codes[counter]
        self.c_cols = CODE_COLUMN[self.c_codes]
        group_key = CODE_TREE[codes] * (1 << 20) + rows
        starts = np.flatnonzero(np.r_[True, group_key[1:] != group_key[:-1]])
        ends = np.r_[starts[1:], len(rows)]
        # Counter entries of group g are c_rows[c_start[g]:c_start[g+1]] (they keep the sorted order).
        c_before = np.r_[0, np.cumsum(counter)]
        self.c_start = c_before[np.r_[starts, len(rows)]]
        self.groups: list[tuple[bytes, int, list[tuple[int, str]]]] = []
        self.lldp_groups: set[int] = set()  # groups of the LLDP tree: a neighbour that goes away is deleted
        for s, e in zip(starts.tolist(), ends.tolist(), strict=True):
            row = int(rows[s])
            states = [(int(c), CATALOG[int(c)].kind) for c in codes[s:e] if not IS_COUNTER[c]]
            if int(CODE_TREE[codes[s]]) == TREE_INDEX["lldp"]:
                self.lldp_groups.add(len(self.groups))
            self.groups.append((prefixes.get(int(CODE_TREE[codes[s]]), row, target), row, states))

    def sample(self, now_ns: int, json_ietf: bool = False, oper: str | None = None) -> list[bytes]:
        """One encoded notification per (interface, tree), timestamped `now_ns`; `oper` (an ON_CHANGE event's state)
        replaces the current oper-status."""
        ts = varint(now_ns)
        return [notification(ts, self.groups[g][0], u) for g, u in self._updates(now_ns, json_ietf, oper)]

    def changes(self, now_ns: int, json_ietf: bool, sent: dict[int, bytes]) -> list[bytes]:
        """ON_CHANGE for leaves without a twin listener: the notifications of the (interface, tree) groups whose
        values differ from those in `sent` (group -> its updates as last sent; updated here)."""
        ts = varint(now_ns)
        out = []
        present = set()
        for g, u in self._updates(now_ns, json_ietf, None):
            present.add(g)
            if sent.get(g) != u:
                sent[g] = u
                out.append(notification(ts, self.groups[g][0], u))
        for g in [g for g in sent if g not in present and g in self.lldp_groups]:
            # The port's neighbour is gone (link down: 802.1AB deletes it): the list entry is deleted, as EOS does.
            del sent[g]
            out.append(notification(ts, self.groups[g][0], LLDP_NEIGHBOR_DELETE))
        return out

    def _updates(self, now_ns: int, json_ietf: bool, oper: str | None) -> list[tuple[int, bytes]]:
        """(group, its encoded updates) for every group with at least one value."""
        sw = self.sw
        values = sw.values(now_ns)[self.c_rows, self.c_cols] if len(self.c_rows) else np.zeros(0, np.uint64)
        if json_ietf:
            vals = values.tolist()
            parts = [encode_update(int(c), v, True) for c, v in zip(self.c_codes.tolist(), vals, strict=True)]
            offsets = np.r_[0, np.cumsum([len(p) for p in parts], dtype=np.int64)]
            blob = b"".join(parts)
        else:
            blob, lengths = encode_counters(self.c_codes, values)
            offsets = np.r_[0, np.cumsum(lengths)]
        starts = offsets[self.c_start].tolist()
        out = []
        for g, (_prefix, row, states) in enumerate(self.groups):
            updates = blob[starts[g] : starts[g + 1]]
            if states:
                for code, kind in states:
                    v = oper if oper is not None and kind == "oper-status" else state_value(self.twin, sw, row, kind)
                    if v is not None:
                        updates += encode_update(code, v, json_ietf)
            if updates:
                out.append((g, updates))
        return out
