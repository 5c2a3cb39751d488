"""A SONiC switch as its operator reads it over SSH: sonic-utilities' show tables (`show interfaces description`,
`show lldp table`, `show ip bgp summary`), text in, the same `PortObs` an EOS switch's eAPI answers give. Pure: no
sockets (observe.py runs the commands).

SONiC names a port `EthernetM` (its first lane); the blueprint, and so every other part of the checker, names it
`EthernetN/1`. The twin and fabricd's SONiC driver map the two the same way (lab/sonic_config.py `sonic_port`), and a
neighbour's LLDP names a SONiC port by its alias when it has one (lldpmgrd advertises the alias): `names` maps both
back to the blueprint's name, per SONiC switch, learnt from the blueprint and each switch's own Alias column."""

from __future__ import annotations

import re
from collections.abc import Iterable

from lab.sonic_config import sonic_port

from .facts import FabricFacts
from .history import PortObs

SHOW = ("show interfaces description", "show lldp table", "show ip bgp summary")
NOT_SET = "N/A"  # what intfutil prints for a field APPL_DB's PORT_TABLE does not have (a port with no description)

Names = dict[str, dict[str, str]]  # SONiC switch -> {its SONiC port name or alias -> the blueprint's port name}


def table(text: str) -> list[dict[str, str]]:
    """The rows of a tabulate "simple" table (a header, a rule of dashes per column, rows), cut at the rule's
    dashes: a cell may hold spaces (`Idle (Admin)`, a description with fabricd's mark). The rows end at a blank line
    or another rule (lldpshow's closing rule and count); what comes before the header (FRR's summary lines, the
    capability legend) is not part of the table."""
    lines = text.splitlines()
    for i in range(1, len(lines)):
        rule = lines[i].strip()
        if not rule or set(rule) - {"-", " "} or not lines[i - 1].strip():
            continue
        spans = [m.span() for m in re.finditer(r"-+", lines[i])]
        spans[-1] = (spans[-1][0], max(spans[-1][1], *(len(x) for x in lines[i + 1 :]), 0))
        header = lines[i - 1]
        names = [header[a:b].strip() for a, b in spans]
        rows = []
        for line in lines[i + 1 :]:
            if not line.strip() or not set(line.strip()) - {"-"}:
                break
            rows.append({n: line[a:b].strip() for n, (a, b) in zip(names, spans, strict=True)})
        return rows
    return []


def blueprint_names(facts: FabricFacts, devices: Iterable[str]) -> Names:
    """Each SONiC switch's blueprint ports under their SONiC names (before any alias is read)."""
    wanted = set(devices)
    out: Names = {d: {} for d in wanted}
    for key in facts.peer:
        device, port = key.split(":", 1)
        if device in wanted:
            out[device][sonic_port(port)] = port
    return out


def with_aliases(known: dict[str, str], desc: str) -> dict[str, str]:
    """`known` (SONiC name -> blueprint name) plus each port's alias from `show interfaces description`'s Alias
    column: what a neighbour's LLDP calls the port."""
    out = dict(known)
    for row in table(desc):
        port = known.get(row.get("Interface", ""))
        alias = row.get("Alias", "")
        if port is not None and alias and alias != NOT_SET:
            out[alias] = port
    return out


def far_end(device: str, port: str, names: Names) -> str:
    """`device:port` of what LLDP heard, in the blueprint's names (a SONiC neighbour's alias or SONiC name mapped)."""
    return f"{device}:{names.get(device, {}).get(port, port)}"


def parse_sonic_ports(
    device: str, desc: str, lldp: str, bgp: str, facts: FabricFacts, names: Names
) -> dict[str, PortObs]:
    """One SONiC switch's blueprint ports from its three show tables. Admin, oper and description from `show
    interfaces description` (N/A: no description); the LLDP neighbour from `show lldp table` (RemoteDevice,
    RemotePortID); the BGP session from `show ip bgp summary`, placed on its port by the blueprint's underlay address
    (else by NeighborName, when one port of the switch faces that device): a number under State/PfxRcd is
    Established, a word (Active, Idle (Admin)...) is not."""
    mine = names.get(device, {})
    neighbors = {}
    for row in table(lldp):
        port = mine.get(row.get("LocalPort", ""))
        if port is not None and row.get("RemoteDevice"):
            neighbors[port] = far_end(row["RemoteDevice"], row.get("RemotePortID", ""), names)
    bgp_up: dict[str, bool] = {}
    toward: dict[str, list[str]] | None = None
    for row in table(bgp):
        key = facts.bgp_port.get(f"{device} {row.get('Neighbor', '')}")
        if key is None:
            if toward is None:
                toward = {}
                for p, far in facts.peer.items():
                    if p.startswith(device + ":"):
                        toward.setdefault(far.split(":", 1)[0], []).append(p)
            ports = toward.get(row.get("NeighborName", ""), [])
            key = ports[0] if len(ports) == 1 else None
        if key is not None:
            bgp_up[key] = row.get("State/PfxRcd", "").isdigit()
    out = {}
    for row in table(desc):
        port = mine.get(row.get("Interface", ""))
        key = f"{device}:{port}"
        if port is None or key not in facts.peer:
            continue
        description = row.get("Description", "")
        out[key] = PortObs(
            admin_up=row.get("Admin") == "up",
            oper_up=row.get("Oper") == "up",
            description="" if description == NOT_SET else description,
            neighbor=neighbors.get(port),
            bgp_up=bgp_up.get(key),
        )
    return out
