"""miscabled: the live LLDP neighbours against the blueprint, judged by the same rules and words as `fabricd validate`.

Every switch streams its LLDP neighbours (ON_CHANGE; SONiC from APPL_DB's LLDP_ENTRY_TABLE). A SONiC neighbour is
named by the port id it advertises, its alias or SONiC name, read back to the topology's (`heard`). A port whose
neighbour is not the blueprint's (another system, or another port of it), once no wrong neighbour of the same cables
is newer than `settle_s` (both ends of a moved cable update within about a second), makes the as-built cabling differ
from the blueprint there: the blueprint with those ports' links replaced by what LLDP shows is run through
`topology.validate`, and each violation touching a wrong port becomes one finding with validate's message and fix (a
swapped pair is one finding naming both ports). A wrong neighbour the rules still accept (two cables of one
leaf-spine bundle swapped) is a warning: the layout holds, the records do not. Ports without LLDP are not judged.
The rules run only when the set of wrong neighbours changes.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from fabricd.telemetry import Snapshot
from fabricd.telemetry.sonic import advertised_port
from topology.fabric import Fabric
from topology.model import Cabling, Endpoint, Link
from topology.spec import FabricSpec
from topology.units import NS
from topology.validate import validate

from .finding import Finding

KIND = "miscabled"
NAME = "lldp.system-name"
PORT_ID = "lldp.port-id"
ALIAS = "port.alias"
_MAC = re.compile(r"^[0-9a-fA-F]{2}([:-][0-9a-fA-F]{2}){5}$")


def same_end(got: Endpoint, want: Endpoint) -> bool:
    """LLDP's neighbour is the intended one: the same system (its DNS domain aside) and port; a host that sends its
    MAC as port id (lldpd's default) is judged by its name alone."""
    if got.device.split(".", 1)[0] != want.device.split(".", 1)[0]:
        return False
    return got.port == want.port or _MAC.match(got.port) is not None


@dataclass
class MiscabledState:
    spec: FabricSpec
    settle_s: float = 1.0
    wrong_since: dict[Endpoint, tuple[Endpoint, int]] = field(default_factory=dict)  # port -> (heard, since)
    # the settled wrong neighbours last judged and the findings; key None: findings carried while cables moved (held),
    # never the answer for a later pass (its settled set may be empty too, with nothing wrong at all)
    last: tuple[frozenset[tuple[Endpoint, Endpoint]] | None, list[Finding]] | None = None
    seen: tuple[bytes, dict[Endpoint, tuple[Endpoint, int]]] | None = None  # LLDP values last read, what was wrong


def aliases(snapshot: Snapshot, device: str) -> dict[str, str]:
    """A SONiC switch's port aliases as it streams them (APPL_DB PORT_TABLE): alias -> topology port."""
    out = {}
    for i in snapshot.select(device=device, leaf=ALIAS).tolist():
        text = snapshot.text(i)
        if text:
            out[text] = snapshot.key(i)[1]
    return out


def heard(snapshot: Snapshot, name: str, port_id: str, known: dict[str, dict[str, str]] | None = None) -> Endpoint:
    """The neighbour an LLDP (system name, port id) names, in the topology's port names: a SONiC neighbour
    advertises its port's alias or SONiC name (`Ethernet8`), read back through the aliases it streams. `known`
    caches the aliases per neighbour within one pass."""
    device = name.split(".", 1)[0]
    cache = {} if known is None else known
    if device not in cache:
        cache[device] = aliases(snapshot, device)
    # a switch that streams aliases is a SONiC one; any other's port id is its port's name already
    return Endpoint(device, advertised_port(port_id, cache[device]) if port_id and cache[device] else port_id)


def observed(snapshot: Snapshot, fabric: Fabric) -> dict[Endpoint, tuple[Endpoint, int]]:
    """Per switch port of the blueprint: the neighbour LLDP hears on it now, and when that was sampled."""
    out: dict[Endpoint, tuple[Endpoint, int]] = {}
    known: dict[str, dict[str, str]] = {}
    for i in snapshot.select(leaf=NAME).tolist():
        name = snapshot.text(i)
        device, port, _, index = snapshot.key(i)
        if not name or fabric.peer(device, port) is None:
            continue
        j = snapshot.find(device, port, PORT_ID, index)
        pid = snapshot.text(j) if j is not None else None
        out[Endpoint(device, port)] = (heard(snapshot, name, pid or "", known), int(snapshot.ts[i]))
    return out


def _wrong(snapshot: Snapshot, fabric: Fabric, state: MiscabledState) -> dict[Endpoint, tuple[Endpoint, int]]:
    """The ports facing another neighbour than the blueprint's, re-read only when some LLDP value changed (a fabric
    of 16k GPUs has ~50k LLDP series; a pass compares two arrays of their value ids instead)."""
    names, ids, als = snapshot.select(leaf=NAME), snapshot.select(leaf=PORT_ID), snapshot.select(leaf=ALIAS)
    mark = b"".join(x.tobytes() for x in (names, snapshot.value[names], ids, snapshot.value[ids], als,
                                           snapshot.value[als]))  # fmt: skip
    if state.seen is not None and state.seen[0] == mark:
        return state.seen[1]
    wrong: dict[Endpoint, tuple[Endpoint, int]] = {}
    for here, (got, ts) in observed(snapshot, fabric).items():
        want = fabric.peer(here.device, here.port)
        if want is not None and not same_end(got, want):
            wrong[here] = (got, ts)
    state.seen = (mark, wrong)
    return wrong


def detect(snapshot: Snapshot, fabric: Fabric, state: MiscabledState, now: int) -> list[Finding]:
    wrong = _wrong(snapshot, fabric, state)
    state.wrong_since = {
        here: (got, since if old == got else ts)
        for here, (got, ts) in wrong.items()
        for old, since in [state.wrong_since.get(here, (got, ts))]
    }
    # Judged once no wrong neighbour of the same cables is newer than the settle time: the ends of a moved cable
    # update a moment apart, and half a swap is not a fault of its own. Cables that share no end with one still
    # moving are judged meanwhile (three swaps a second apart do not wait for the last); for the ones held, the last
    # judgement stands.
    held = _moving(fabric, state.wrong_since, now - int(state.settle_s * NS))
    settled = {h: g for h, (g, _) in state.wrong_since.items() if h not in held}
    key = frozenset(settled.items())
    if state.last is not None and state.last[0] == key and not held:
        return state.last[1]
    found = _judge(fabric, state, settled, now) if settled else []
    if held and state.last is not None:
        names = {str(h) for h in held}
        found += [f for f in state.last[1] if names.intersection(f.ports)]
    state.last = (None if held else key, found)
    return found


def _moving(fabric: Fabric, wrong: dict[Endpoint, tuple[Endpoint, int]], settled_before: int) -> set[Endpoint]:
    """The wrong ports still moving: those heard wrong since `settled_before` or later, and every wrong port that shares
    an end (itself, what it hears, what it should hear) with one of them, transitively."""
    ends = {h: {h, got, *filter(None, [fabric.peer(h.device, h.port)])} for h, (got, _) in wrong.items()}
    held = {h for h, (_, since) in wrong.items() if since >= settled_before}
    touched = set().union(*(ends[h] for h in held)) if held else set()
    grew = bool(held)
    while grew:
        more = {h for h in ends if h not in held and ends[h] & touched}
        grew = bool(more)
        held |= more
        for h in more:
            touched |= ends[h]
    return held


def _judge(fabric: Fabric, state: MiscabledState, wrong: dict[Endpoint, Endpoint], now: int) -> list[Finding]:
    known = {d.name for d in fabric.cabling.devices}
    strange = {h: g for h, g in wrong.items() if g.device not in known}
    moved = {h: g for h, g in wrong.items() if h not in strange}
    links = [lk for lk in fabric.links if lk.a not in moved and lk.b not in moved]
    seen = {frozenset((lk.a, lk.b)) for lk in links}
    for here, got in moved.items():
        if frozenset((here, got)) not in seen:
            seen.add(frozenset((here, got)))
            links.append(Link(here, got, speed_gbps=_speed(fabric, here)))
    as_built = Cabling(devices=list(fabric.cabling.devices), links=links, source="LLDP (live)")
    result = validate(state.spec, as_built)
    names = {str(h): h for h in moved}
    out: list[Finding] = []
    covered: set[Endpoint] = set()
    for v in result.violations:
        hit = [names[p] for p in v.ports if p in names]
        if not hit:
            continue
        covered.update(hit)
        out.append(_finding(state, hit, wrong, v.message, v.fix, v.code.value, v.severity, v.devices, v.ports, now))
    for group in _cables(fabric, {h: g for h, g in moved.items() if h not in covered}):
        what = "; ".join(f"{h} faces {moved[h]}, not {fabric.peer(h.device, h.port)}" for h in group)
        out.append(_finding(
            state, group, wrong, f"not cabled as the blueprint has it (the layout rules still hold): {what}",
            "move the cables back as the blueprint has them, or record the as-built cabling if the change was intended",
            "BLUEPRINT_DIFF", "warning", sorted({h.device for h in group}), [str(h) for h in group], now,
        ))  # fmt: skip
    for here, got in sorted(strange.items(), key=lambda x: str(x[0])):
        want = fabric.peer(here.device, here.port)
        out.append(_finding(
            state, [here], wrong, f"{here} faces {got}, a system the blueprint does not have (expected {want})",
            f"check what is plugged into {here}; it belongs to {want}", "UNKNOWN_NEIGHBOR", "error",
            [here.device], [str(here)], now,
        ))  # fmt: skip
    return out


def _cables(fabric: Fabric, wrong: dict[Endpoint, Endpoint]) -> list[list[Endpoint]]:
    """The wrong ends grouped by the cables they share (the four switch ends of two swapped leaf-spine cables are one
    group), each sorted."""
    parent: dict[Endpoint, Endpoint] = {}

    def root(x: Endpoint) -> Endpoint:
        while parent.setdefault(x, x) != x:
            x = parent[x]
        return x

    for here, got in wrong.items():
        for other in (got, fabric.peer(here.device, here.port)):
            if other is not None:
                parent[root(here)] = root(other)
    groups: dict[Endpoint, list[Endpoint]] = {}
    for here in wrong:
        groups.setdefault(root(here), []).append(here)
    return sorted((sorted(g, key=str) for g in groups.values()), key=lambda g: str(g[0]))


def _speed(fabric: Fabric, here: Endpoint) -> int | None:
    link = fabric.link_of(here.device, here.port)
    return link.speed_gbps if link is not None else None


def _finding(
    state: MiscabledState, hit: list[Endpoint], wrong: dict[Endpoint, Endpoint], message: str, fix: str, code: str,
    severity: str, devices: list[str], ports: list[str], now: int,
) -> Finding:  # fmt: skip
    first = sorted(hit, key=str)[0]
    start = min(state.wrong_since[h][1] for h in hit)
    return Finding(
        kind=KIND, device=first.device, port=first.port, devices=tuple(sorted(devices)), ports=tuple(sorted(ports)),
        start_ts=start, detected_ts=now, severity="critical" if severity == "error" else "warning", confidence=0.95,
        summary=message,
        evidence={"code": code, "fix": fix, "lldp": {str(h): str(wrong[h]) for h in sorted(hit, key=str)}},
    )  # fmt: skip
