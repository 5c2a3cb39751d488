"""The EOS gNMI paths fabricd understands (reference/platforms.md), their canonical text, and the subscription profile.

A known leaf lives under a per-port root of one of four trees (interfaces, qos, transceiver components, lldp) and is
named by a short leaf id (`pfc.in-frames`, `queue.transmit-pkts`, `oper-status`, ...) plus at most one index key
(a PFC priority, queue name, phy, channel or LLDP neighbour id). Detectors ask by (device, port, leaf, index).

Canonical text (the docs/formats.md trace form): `/elem[key=value]...`, keys sorted by name, no origin, module prefixes
(`openconfig-interfaces:`) stripped, e.g.
`/interfaces/interface[name=Ethernet18/1]/ethernet/pfc/priorities/priority[index=3]/state/in-frames`.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from enum import IntEnum
from typing import Any

Keys = tuple[tuple[str, str], ...]
Elem = tuple[str, Keys]
ANY = "*"  # the index placeholder in a template
# A key that takes any value and is not an index: the series is the port's alone (a routed port's address: one per
# port, and an index per address would make a series code per address of the fabric). Rendered as "_".
FREE = "+"
FREE_TEXT = "_"
XCVR_SUFFIX = " transceiver"


class Kind(IntEnum):
    COUNTER = 0  # cumulative uint64: rate computed, resets and wraps handled
    GAUGE = 1  # float sample (dBm, BER, durations that are not cumulative)
    ENUM = 2  # string state whose changes are events (oper-status)
    TEXT = 3  # string state kept as the current value only (LLDP neighbour)


class PathSyntaxError(ValueError):
    """A path string that cannot be split into elements."""


@dataclass(frozen=True, slots=True)
class Leaf:
    name: str
    tree: str
    rel: tuple[Elem, ...]  # relative to the tree's per-port root; one key value may be ANY (the index)
    kind: Kind

    @property
    def index_key(self) -> tuple[int, str] | None:
        for pos, (_, keys) in enumerate(self.rel):
            for k, v in keys:
                if v == ANY:
                    return pos, k
        return None


@dataclass(frozen=True, slots=True)
class PathInfo:
    port: str
    leaf: str
    index: str | None


# Per-port roots: (tree, element names up to the port element, the key holding the port, suffix after the port).
# The BGP tree's "port" is the neighbour's address (fabricd maps it to the port whose ipv4 /31 holds it).
ROOTS: dict[str, tuple[tuple[str, ...], str, str]] = {
    "if": (("interfaces", "interface"), "name", ""),
    "qos": (("qos", "interfaces", "interface"), "interface-id", ""),
    "xcvr": (("components", "component"), "name", XCVR_SUFFIX),
    "lldp": (("lldp", "interfaces", "interface"), "name", ""),
    "bgp": (
        ("network-instances", "network-instance", "protocols", "protocol", "bgp", "neighbors", "neighbor"),
        "neighbor-address",
        "",
    ),
}
# Keys fixed on a root's inner elements (by position): the default network instance's BGP protocol.
ROOT_KEYS: dict[str, dict[int, Keys]] = {
    "bgp": {1: (("name", "default"),), 3: (("identifier", "BGP"), ("name", "BGP"))},
}


def _e(elem_name: str, /, **keys: str) -> Elem:
    return (elem_name, tuple(sorted((k.replace("_", "-"), v) for k, v in keys.items())))


def _leaves() -> tuple[Leaf, ...]:
    st = _e("state")
    out = [Leaf("oper-status", "if", (st, _e("oper-status")), Kind.ENUM)]
    out.append(Leaf("admin-status", "if", (st, _e("admin-status")), Kind.ENUM))
    out.append(Leaf("description", "if", (st, _e("description")), Kind.TEXT))
    # no OpenConfig leaf: a SONiC port's alias (APPL_DB PORT_TABLE), what a SONiC neighbour's LLDP names it by
    out.append(Leaf("port.alias", "if", (st, _e("alias")), Kind.TEXT))
    for c in (
        *("in-pkts", "out-pkts", "in-octets", "out-octets", "in-unicast-pkts", "out-unicast-pkts"),
        *("in-multicast-pkts", "out-multicast-pkts", "in-broadcast-pkts", "out-broadcast-pkts"),
        *("in-errors", "out-errors", "in-fcs-errors", "in-discards", "out-discards", "carrier-transitions"),
    ):
        out.append(Leaf(f"if.{c}", "if", (st, _e("counters"), _e(c)), Kind.COUNTER))
    eth = _e("ethernet")
    for c in ("in-crc-errors", "in-mac-pause-frames", "out-mac-pause-frames", "in-symbol-error"):
        out.append(Leaf(f"eth.{c}", "if", (eth, st, _e("counters"), _e(c)), Kind.COUNTER))
    prio = (eth, _e("pfc"), _e("priorities"), _e("priority", index=ANY), st)
    for c in ("in-frames", "out-frames", "pfc-on-total-rx-time", "rx-transitions", "dropped-pkts"):
        out.append(Leaf(f"pfc.{c}", "if", (*prio, _e(c)), Kind.COUNTER))
    # PFC pause time a port asked of its peer (ns): SONiC's SAI_PORT_STAT_PFC_<n>_TX_PAUSE_DURATION_US. OpenConfig has
    # no such leaf: its path here only names it, under a container no EOS subscription covers (never expected there)
    no_oc = (*prio[:-1], _e("sonic-counters"))
    out.append(Leaf("pfc.pfc-on-total-tx-time", "if", (*no_oc, _e("pfc-on-total-tx-time")), Kind.COUNTER))
    out.append(Leaf("pfc.pfc-on-max-rx-time", "if", (*prio, _e("pfc-on-max-rx-time")), Kind.GAUGE))
    txq = _e("tx-queue", index=ANY, queue_type="UNICAST")
    for c in ("stuck-count", "recovery-count"):
        wd = (eth, _e("pfc"), _e("watchdog"), _e("tx-queues"), txq, st, _e(c))
        out.append(Leaf(f"wd.{c}", "if", wd, Kind.COUNTER))
    # Arista FEC model; pre-fec-ber's encoding is UNVERIFIED (platforms.md), so it accepts any numeric encoding.
    fec = (eth, _e("phys"), _e("phy", index=ANY), _e("ingress"), _e("fec"), st)
    for c in ("corrected-codewords", "uncorrected-codewords"):
        out.append(Leaf(f"fec.{c}", "if", (*fec, _e(c)), Kind.COUNTER))
    out.append(Leaf("fec.pre-fec-ber", "if", (*fec, _e("pre-fec-ber")), Kind.GAUGE))
    queue = (_e("output"), _e("queues"), _e("queue", name=ANY), st)
    for c in (
        *("transmit-pkts", "transmit-octets", "dropped-pkts", "dropped-octets"),
        *("ecn-marked-pkts", "wred-dropped-pkts"),
    ):
        out.append(Leaf(f"queue.{c}", "qos", (*queue, _e(c)), Kind.COUNTER))
    # the queue's watermark in bytes (openconfig-qos max-queue-len, reference/congestion-tuning.md §3.2)
    out.append(Leaf("queue.max-queue-len", "qos", (*queue, _e("max-queue-len")), Kind.GAUGE))
    # an ingress priority group's watermarks in bytes: shared buffer, and headroom (XOFF room) used (SONiC
    # PERSISTENT_WATERMARKS by PG OID, reference/congestion-tuning.md §3.1). OpenConfig has no such leaf: the path
    # only names it, under a container no EOS subscription covers (never expected there)
    pg = (_e("input"), _e("sonic-priority-groups"), _e("priority-group", index=ANY), st)
    for c in ("shared-watermark", "headroom-watermark"):
        out.append(Leaf(f"pg.{c}", "qos", (*pg, _e(c)), Kind.GAUGE))
    chan = (_e("transceiver"), _e("physical-channels"), _e("channel", index=ANY), st)
    out.append(Leaf("optics.input-power", "xcvr", (*chan, _e("input-power"), _e("instant")), Kind.GAUGE))
    # openconfig-platform: a component's temperature (the transceiver module's, for "<port> transceiver")
    out.append(Leaf("optics.temperature", "xcvr", (st, _e("temperature"), _e("instant")), Kind.GAUGE))
    nbr = (_e("neighbors"), _e("neighbor", id=ANY), st)
    for c in ("system-name", "port-id"):
        out.append(Leaf(f"lldp.{c}", "lldp", (*nbr, _e(c)), Kind.TEXT))
    # a routed port's address (the value of `ip`) and its prefix length, one of each per port (the key is FREE)
    addr = (_e("subinterfaces"), _e("subinterface", index="0"), _e("ipv4"), _e("addresses"), _e("address", ip=FREE), st)
    out.append(Leaf("ipv4.ip", "if", (*addr, _e("ip")), Kind.TEXT))
    out.append(Leaf("ipv4.prefix-length", "if", (*addr, _e("prefix-length")), Kind.GAUGE))
    # the BGP neighbour (port = its address): state changes are events, the rest current values
    out.append(Leaf("bgp.session-state", "bgp", (st, _e("session-state")), Kind.ENUM))
    out.append(Leaf("bgp.established-transitions", "bgp", (st, _e("established-transitions")), Kind.COUNTER))
    out.append(Leaf("bgp.peer-as", "bgp", (st, _e("peer-as")), Kind.GAUGE))
    v4 = (_e("afi-safis"), _e("afi-safi", afi_safi_name="IPV4_UNICAST"), st, _e("prefixes"))
    out.append(Leaf("bgp.prefixes-received", "bgp", (*v4, _e("received")), Kind.GAUGE))
    return tuple(out)


LEAVES: tuple[Leaf, ...] = _leaves()
LEAF: dict[str, Leaf] = {leaf.name: leaf for leaf in LEAVES}


def _shape(rel: Sequence[Elem]) -> tuple[tuple[str, tuple[str, ...]], ...]:
    return tuple((name, tuple(k for k, _ in keys)) for name, keys in rel)


# (tree, shape of the relative path) -> leaf; built once, read-only.
_BY_SHAPE: dict[tuple[str, tuple[tuple[str, tuple[str, ...]], ...]], Leaf] = {
    (leaf.tree, _shape(leaf.rel)): leaf for leaf in LEAVES
}


# --- text <-> elements ---------------------------------------------------------------------------------
def elem_text(e: Elem) -> str:
    return e[0] + "".join(f"[{k}={v}]" for k, v in e[1])


def path_text(elems: Iterable[Elem]) -> str:
    return "/" + "/".join(elem_text(e) for e in elems)


def _clean_name(name: str) -> str:
    return name.split(":", 1)[1] if ":" in name else name


@functools.lru_cache(maxsize=1 << 16)
def parse_path(text: str) -> tuple[Elem, ...]:
    """`/a/b[k=v]/c` -> elements with sorted keys; key values may contain `/` (interface names do). Cached: a trace
    or a profile names the same few thousand paths over and over, and the answer is an immutable tuple."""
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
            eq = text.find("=", j, end)
            if end < 0 or eq < 0:
                raise PathSyntaxError(f"unbalanced or key-less '[' in path {text!r}")
            keys.append((text[j + 1 : eq], text[eq + 1 : end]))
            j = end + 1
        if (j < n and text[j] != "/") or not name:
            raise PathSyntaxError(f"malformed element in path {text!r}")
        elems.append((_clean_name(name), tuple(sorted(keys))))
        i = j
    return tuple(elems)


def pb_elems(path: Any) -> tuple[Elem, ...]:
    """Elements of a gnmi_pb2.Path (untyped stubs); module prefixes stripped, keys sorted."""
    return tuple((_clean_name(str(pe.name)), tuple(sorted(pe.key.items()))) for pe in path.elem)


# --- classification --------------------------------------------------------------------------------------
def split_root(elems: Sequence[Elem]) -> tuple[str, str, int] | None:
    """(tree, port, length of the root) when `elems` starts with a complete per-port root, else None."""
    for tree, (names, key, suffix) in ROOTS.items():
        k = len(names)
        if len(elems) < k or any(elems[i][0] != names[i] for i in range(k)):
            continue
        fixed = ROOT_KEYS.get(tree, {})
        if any(elems[i][1] != fixed.get(i, ()) for i in range(k - 1)):
            return None
        keys = dict(elems[k - 1][1])
        port = keys.get(key)
        if len(keys) != 1 or not port or port == ANY or not port.endswith(suffix):
            return None
        return tree, port[: len(port) - len(suffix)] if suffix else port, k
    return None


def match_rel(tree: str, rel: Sequence[Elem]) -> tuple[Leaf, str | None] | None:
    """The leaf and index value a path relative to a per-port root names, or None if fabricd does not know it."""
    leaf = _BY_SHAPE.get((tree, _shape(rel)))
    if leaf is None:
        return None
    index: str | None = None
    for (_, want), (_, got) in zip(leaf.rel, rel, strict=True):
        for (_, w), (_, g) in zip(want, got, strict=True):
            if w == ANY:
                if not g or g == ANY:
                    return None
                index = g
            elif w == FREE:
                if not g:
                    return None
            elif w != g:
                return None
    return leaf, index


def leaves_in_subtree(tree: str, rel: Sequence[Elem]) -> list[tuple[Leaf, str | None]]:
    """The known leaves (and index values) inside a subtree a path relative to a per-port root names: what a delete
    of that subtree removes (an LLDP neighbour entry: its system name and port id). A list entry must be named by
    its key (a path that leaves an indexed list's key out removes none of its leaves here)."""
    out = []
    for leaf in LEAVES:
        if leaf.tree != tree or len(leaf.rel) < len(rel):
            continue
        index: str | None = None
        for (want_name, want), (got_name, got) in zip(leaf.rel, rel, strict=False):
            if want_name != got_name:
                break
            given = dict(got)
            if any(k not in (kk for kk, _ in want) for k in given):
                break
            if any(w not in (ANY, FREE) and k in given and given[k] != w for k, w in want):
                break
            if any(w == ANY and k not in given for k, w in want):
                break
            index = next((given[k] for k, w in want if w == ANY and k in given), index)
        else:
            if not any(w == ANY for _, keys in leaf.rel[len(rel) :] for _, w in keys):
                out.append((leaf, index))
    return out


def classify(elems: Sequence[Elem]) -> PathInfo | None:
    root = split_root(elems)
    if root is None:
        return None
    tree, port, k = root
    found = match_rel(tree, elems[k:])
    return None if found is None else PathInfo(port, found[0].name, found[1])


def parse(text: str) -> PathInfo | None:
    """`/interfaces/interface[name=Ethernet1/1]/state/oper-status` -> PathInfo("Ethernet1/1", "oper-status", None)."""
    try:
        return classify(parse_path(text))
    except PathSyntaxError:
        return None


def root_elems(tree: str, port: str) -> tuple[Elem, ...]:
    names, key, suffix = ROOTS[tree]
    fixed = ROOT_KEYS.get(tree, {})
    return (*((n, fixed.get(i, ())) for i, n in enumerate(names[:-1])), (names[-1], ((key, port + suffix),)))


def leaf_rel(leaf: Leaf, index: str | None) -> tuple[Elem, ...]:
    if index is None and not any(v == FREE for _, keys in leaf.rel for _, v in keys):
        return leaf.rel

    def value(v: str) -> str:
        if v == ANY and index is not None:
            return index
        return FREE_TEXT if v == FREE else v

    return tuple((n, tuple((k, value(v)) for k, v in keys)) for n, keys in leaf.rel)


def render(port: str, leaf: str, index: str | None = None) -> str:
    """Canonical path text of a known leaf (the inverse of `parse`)."""
    spec = LEAF[leaf]
    return path_text(root_elems(spec.tree, port) + leaf_rel(spec, index))


# --- subscription profile --------------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class Subscription:
    path: str
    mode: str  # "on_change" | "sample"
    sample_interval_ns: int = 0
    target: str = ""  # the prefix target (SONiC: the database, e.g. COUNTERS_DB); "" for OpenConfig paths


BGP_NEIGHBORS = (
    "/network-instances/network-instance[name=default]/protocols/protocol[identifier=BGP][name=BGP]"
    "/bgp/neighbors/neighbor[neighbor-address=*]"
)

# SAMPLE groups whose interval can be set apart from the base interval. PFC and queue counters stay in one group:
# the watchdog rule compares pause time with the egress queue's transmit count over the same interval.
SAMPLE_GROUPS = ("counters", "pfc", "fec", "optics")


def eos_profile(
    sample_interval_s: float = 10.0,
    lossless: Sequence[int] = (3,),
    intervals: Mapping[str, float] | None = None,
) -> list[Subscription]:
    """EOS: ON_CHANGE for oper/admin status and the PFC watchdog's counts, SAMPLE for counters; PFC and watchdog only
    for the lossless priorities.
    `intervals` sets a SAMPLE group (SAMPLE_GROUPS) apart from `sample_interval_s`, e.g. optics every 30 s."""
    unknown = set(intervals or {}) - set(SAMPLE_GROUPS)
    if unknown:
        raise ValueError(f"unknown sample group(s) {sorted(unknown)}; known: {', '.join(SAMPLE_GROUPS)}")

    def ns(group: str) -> int:
        return int((intervals or {}).get(group, sample_interval_s) * 1e9)

    intf = "/interfaces/interface[name=*]"
    subs = [
        Subscription(f"{intf}/state/oper-status", "on_change"),
        Subscription(f"{intf}/state/admin-status", "on_change"),
        # what the operator wrote on the port: fabricd's mark goes beside it (drivers/marks.py) without a read of it
        # on the action path
        Subscription(f"{intf}/state/description", "on_change"),
        Subscription(f"{intf}/state/counters", "sample", ns("counters")),
        Subscription(f"{intf}/ethernet/state/counters", "sample", ns("counters")),
        Subscription(f"{intf}/ethernet/phys/phy[index=*]/ingress/fec/state", "sample", ns("fec")),
        Subscription(
            "/qos/interfaces/interface[interface-id=*]/output/queues/queue[name=*]/state", "sample", ns("pfc")
        ),
        Subscription(
            "/components/component[name=*]/transceiver/physical-channels/channel[index=*]/state/input-power",
            "sample",
            ns("optics"),
        ),
        Subscription("/components/component[name=*]/state/temperature", "sample", ns("optics")),
        Subscription("/lldp/interfaces/interface[name=*]/neighbors/neighbor[id=*]/state", "on_change"),
        # the underlay: each leaf bgp_session reads, not whole containers (EOS's carry dozens it does not)
        *(
            Subscription(
                f"{intf}/subinterfaces/subinterface[index=0]/ipv4/addresses/address[ip=*]/state/{leaf}", "on_change"
            )
            for leaf in ("ip", "prefix-length")
        ),
        *(
            Subscription(f"{BGP_NEIGHBORS}/state/{leaf}", "on_change")
            for leaf in ("session-state", "established-transitions", "peer-as")
        ),
        Subscription(
            f"{BGP_NEIGHBORS}/afi-safis/afi-safi[afi-safi-name=IPV4_UNICAST]/state/prefixes/received", "on_change"
        ),
    ]
    for p in lossless:
        subs.append(Subscription(f"{intf}/ethernet/pfc/priorities/priority[index={p}]/state", "sample", ns("pfc")))
        # The watchdog's counts move only when it declares a queue stuck (or recovered): ON_CHANGE brings the
        # declaration when it happens (~200 ms into a storm) instead of with the next sample, up to an interval later.
        wd = f"{intf}/ethernet/pfc/watchdog/tx-queues/tx-queue[index={p}][queue-type=UNICAST]/state"
        subs.append(Subscription(wd, "on_change"))
    return subs


def pygnmi_subscribe(subs: Sequence[Subscription]) -> dict[str, Any]:
    """The `subscribe` dict of pygnmi's `subscribe2` (stream mode)."""
    out: list[dict[str, Any]] = []
    for s in subs:
        out.append({"path": s.path, "mode": s.mode})
        if s.sample_interval_ns:
            out[-1]["sample_interval"] = s.sample_interval_ns
    return {
        "subscription": out,
        "mode": "stream",
        "encoding": "proto",
    }


def subscribe_request(
    subs: Sequence[Subscription], target: str = "", once: bool = False, json_ietf: bool = False
) -> Any:
    """A gnmi_pb2.SubscribeRequest (STREAM, or ONCE; PROTO encoding, or JSON_IETF) for grpc.aio clients."""
    from pygnmi.spec.v080 import gnmi_pb2  # untyped stubs; imported here so paths stays cheap to import

    mode = gnmi_pb2.SubscriptionList.ONCE if once else gnmi_pb2.SubscriptionList.STREAM
    sl = gnmi_pb2.SubscriptionList(mode=mode, encoding=gnmi_pb2.JSON_IETF if json_ietf else gnmi_pb2.PROTO)
    if target:
        sl.prefix.target = target
    for s in subs:
        sub = sl.subscription.add()
        for name, keys in parse_path(s.path):
            pe = sub.path.elem.add(name=name)
            for k, v in keys:
                pe.key[k] = v
        sub.mode = gnmi_pb2.ON_CHANGE if s.mode == "on_change" else gnmi_pb2.SAMPLE
        sub.sample_interval = s.sample_interval_ns
    return gnmi_pb2.SubscribeRequest(subscribe=sl)


def _covers(sub: Sequence[Elem], full: Sequence[Elem]) -> bool:
    """Does subscription path `sub` (a prefix, `*` key values) select the leaf template `full` (ANY keys)?"""
    if len(sub) > len(full):
        return False
    for (sname, skeys), (fname, fkeys) in zip(sub, full, strict=False):
        if sname != fname:
            return False
        want = dict(fkeys)
        for k, v in skeys:
            if k not in want or not (v == ANY or want[k] in (ANY, FREE) or want[k] == v):
                return False
    return True


def leaves_under(sub_path: str) -> frozenset[str]:
    """The known leaves a subscription path selects, e.g. `/interfaces/interface[name=*]/ethernet/state/counters`
    -> {"eth.in-crc-errors", ...}. The per-port root's key matches any port (its value may be `*`)."""
    try:
        sub = parse_path(sub_path)
    except PathSyntaxError:
        return frozenset()
    return frozenset(name for name, full in _TEMPLATES.items() if _covers(sub, full))


_TEMPLATES: dict[str, tuple[Elem, ...]] = {leaf.name: root_elems(leaf.tree, ANY) + leaf.rel for leaf in LEAVES}
