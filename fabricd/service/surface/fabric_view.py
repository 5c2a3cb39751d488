"""The fabric page's model: every switch's health and the rails x aggregation-groups grid, as a pure function of
the fabric, the active findings, the ports fabricd holds down and the ports telemetry sees down.

Health of a switch: `critical` with an active critical finding on it, `warning` with any other active finding or a
port held down by fabricd, `degraded` with a cabled switch-to-switch port down, else `ok`; `stale` when its
telemetry is stale and nothing worse is known. A grid cell (rail r, group g) is the leaf of that rail in that group;
spines are drawn per rail, superspines and DRs on their own rows.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from topology.fabric import Fabric
from topology.model import Endpoint, Role

Health = Literal["ok", "degraded", "stale", "warning", "critical"]
RANK: dict[Health, int] = {"ok": 0, "stale": 1, "degraded": 2, "warning": 3, "critical": 4}


@dataclass
class SwitchView:
    name: str
    role: str
    rail: int | None
    group: int | None
    health: Health = "ok"
    findings: list[str] = field(default_factory=list)  # "kind: summary" of active findings on it
    held: list[str] = field(default_factory=list)  # ports fabricd holds down
    down: list[str] = field(default_factory=list)  # cabled switch ports telemetry sees down


@dataclass
class FabricView:
    rails: list[int]
    groups: list[int]
    cells: dict[tuple[int, int], SwitchView]  # (rail, group) -> its leaf
    spines: dict[int, list[SwitchView]]  # rail -> its spines
    top: list[SwitchView]  # superspines, DRs and anything without a rail
    switches: dict[str, SwitchView]

    def counts(self) -> dict[str, int]:
        out: dict[str, int] = {h: 0 for h in RANK}
        for s in self.switches.values():
            out[s.health] += 1
        return out


def _worse(a: Health, b: Health) -> Health:
    return a if RANK[a] >= RANK[b] else b


def build(
    fabric: Fabric,
    findings: Iterable[Mapping[str, Any]],
    held: Collection[Endpoint],
    oper_down: Collection[Endpoint],
    stale: Collection[str] = (),
) -> FabricView:
    switches: dict[str, SwitchView] = {}
    for d in fabric.switches():
        if d.is_remote:
            continue
        switches[d.name] = SwitchView(d.name, d.role.value, d.rail, d.group)
    for f in findings:
        names = [str(x) for x in (f.get("devices") or [f.get("device")]) if x]
        for name in names:
            sw = switches.get(name)
            if sw is None:
                continue
            sw.findings.append(f"{f.get('kind')}: {f.get('summary', '')}")
            sw.health = _worse(sw.health, "critical" if f.get("severity") == "critical" else "warning")
    for ep in held:
        if (sw := switches.get(ep.device)) is not None:
            sw.held.append(ep.port)
            sw.health = _worse(sw.health, "warning")
    for ep in oper_down:
        sw = switches.get(ep.device)
        far = fabric.peer(ep.device, ep.port)
        if sw is None or far is None or far.device not in switches:
            continue  # a server-facing or uncabled port down is not the fabric's health
        sw.down.append(ep.port)
        sw.health = _worse(sw.health, "degraded")
    for name in stale:
        if (sw := switches.get(name)) is not None:
            sw.health = _worse(sw.health, "stale")
    for sw in switches.values():
        sw.held.sort()
        sw.down.sort()
    cells = {(s.rail, s.group): s for s in switches.values() if s.role == Role.LEAF and s.rail is not None
             and s.group is not None}  # fmt: skip
    spines: dict[int, list[SwitchView]] = {}
    top: list[SwitchView] = []
    for s in sorted(switches.values(), key=lambda x: x.name):
        if s.role == Role.SPINE and s.rail is not None:
            spines.setdefault(s.rail, []).append(s)
        elif s.role != Role.LEAF or s.rail is None or s.group is None:
            top.append(s)
    rails = sorted({r for r, _ in cells} | set(spines))
    groups = sorted({g for _, g in cells})
    return FabricView(rails, groups, cells, spines, top, switches)
