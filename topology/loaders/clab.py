"""As-built cabling from a containerlab topology file (`*.clab.yml`).

- Nodes are devices. Labels `fabricd.role`, `fabricd.rail`, `fabricd.group`, `fabricd.platform` (and
  `fabricd.site` for a far-end DR) carry fabricd's labels, as the containerlab export writes them;
  labels merge as containerlab does: `topology.defaults` < `kinds.<kind>` < `groups.<group>` < node.
- Role without a label: fabricd naming, else kind `linux` is a server (noted "from": "kind"), else the
  graph (`topology.loaders.roles`, noted "from": "graph").
- Links: brief `endpoints: ["a:eth1", "b:eth1"]` or extended `{type: veth, endpoints: [{node, interface}]}`.
  Single-ended links (host, mgmt-net, macvlan, ...) and links to `host`/`mgmt-net`/`macvlan` or to
  bridge nodes are not fabric cabling: skipped.
- Ports: on cEOS (`ceos`, `arista_ceos`) containerlab's `ethX` / `etX` is EOS `EthernetX` and `ethX_Y`
  is `EthernetX/Y` (`eth2_1_1` is `Ethernet2/1/1`); names already in EOS form are kept. A `linux`
  server without fabricd labels has its `ethN` renamed to NIC names: `eth1` is `nic0` (eth0 is
  containerlab's management port), or `eth0` is `nic0` when the node cables eth0. Other ports as given.
- containerlab has no speed or cable length: both None. Platform of a switch node without fabricd
  labels: "eos" for cEOS, "sonic" for SONiC kinds; a labelled node has the platform its label says.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from topology.errors import CablingError
from topology.loaders.roles import infer_roles, role_from_name, site_from_name
from topology.model import Cabling, Device, Endpoint, Link, Role
from topology.sourcefile import dotted, load_document, yaml_line

_CEOS_KINDS = frozenset({"ceos", "arista_ceos"})
_KIND_PLATFORM = {"ceos": "eos", "arista_ceos": "eos", "sonic-vs": "sonic", "sonic-vm": "sonic"}
_BRIDGE_KINDS = frozenset({"bridge", "ovs-bridge"})
_PSEUDO_NODES = frozenset({"host", "mgmt-net", "macvlan"})
_CEOS_PORT = re.compile(r"^eth?([1-9]\d*(?:_\d+)*)$")
_LINUX_ETH = re.compile(r"^eth(\d+)$")
_PREFIX = "fabricd."

Loc = Sequence[int | str]


@dataclass(slots=True)
class _Node:
    name: str
    kind: str
    labels: dict[str, object] = field(default_factory=dict)

    @property
    def labeled(self) -> bool:
        return any(k.startswith(_PREFIX) for k in self.labels)


class _Reader:
    def __init__(self, path: Path):
        self.path = path
        self.source = str(path)

    def error(self, problem: str, loc: Loc) -> CablingError:
        return CablingError(self.source, problem, line=yaml_line(self.path, loc), field=dotted(loc) or None)


def load_clab(path: Path) -> Cabling:
    """Devices and links of a containerlab topology file (see the module docstring)."""
    p = Path(path)
    return clab_from_data(load_document(p, CablingError), p)


def clab_from_data(data: object, path: Path) -> Cabling:
    """A containerlab topology already parsed from `path` (named in errors, with lines)."""
    r = _Reader(path)
    if not isinstance(data, dict):
        raise CablingError(r.source, "a containerlab file must be a mapping with 'name' and 'topology'")
    topo = data.get("topology")
    if not isinstance(topo, dict):
        raise r.error("missing or not a mapping; write topology: {nodes: ..., links: ...}", ["topology"])
    nodes = _nodes(r, topo)
    raw = _links(r, topo, nodes)
    names = [n for n in nodes if nodes[n].kind not in _BRIDGE_KINDS]
    known: dict[str, Role] = {}
    notes: list[dict[str, object]] = []
    for name in names:
        role = _label_role(r, nodes[name]) or role_from_name(name)
        if role is None and nodes[name].kind == "linux":
            role = Role.SERVER
            notes.append({"device": name, "field": "role", "value": role.value, "from": "kind"})
        if role is not None:
            known[name] = role
    roles, graph_notes = infer_roles(names, known, raw, r.source)
    devices = [_device(r, nodes[n], roles[n]) for n in names]
    servers = [n for n in names if roles[n] is Role.SERVER and not nodes[n].labeled]
    rename = {n: _server_ports(nodes[n], raw) for n in servers}

    def port(ep: Endpoint) -> Endpoint:
        return Endpoint(ep.device, rename.get(ep.device, {}).get(ep.port) or _port(nodes[ep.device], ep.port))

    links = [Link(port(ln.a), port(ln.b)) for ln in raw]
    return Cabling(devices=devices, links=links, source=r.source, inferred=notes + graph_notes)


def _mapping(value: object) -> dict[str, object]:
    return {str(k): v for k, v in value.items()} if isinstance(value, dict) else {}


def _nodes(r: _Reader, topo: dict[str, object]) -> dict[str, _Node]:
    nodes = topo.get("nodes")
    if not isinstance(nodes, dict) or not nodes:
        raise r.error("missing or empty; list the lab's nodes under topology.nodes", ["topology", "nodes"])
    defaults, kinds, groups = (_mapping(topo.get(k)) for k in ("defaults", "kinds", "groups"))
    out: dict[str, _Node] = {}
    for name, spec in nodes.items():
        if spec is None:
            spec = {}
        if not isinstance(spec, dict):
            raise r.error("a node must be a mapping (kind, image, labels, ...)", ["topology", "nodes", name])
        group = _mapping(groups.get(str(spec.get("group", ""))))
        kind = str(spec.get("kind") or group.get("kind") or defaults.get("kind") or "")
        labels: dict[str, object] = {}
        for layer in (defaults, _mapping(kinds.get(kind)), group, spec):
            labels.update(_mapping(layer.get("labels")))
        out[str(name)] = _Node(str(name), kind, labels)
    return out


def _links(r: _Reader, topo: dict[str, object], nodes: dict[str, _Node]) -> list[Link]:
    links = topo.get("links") or []
    if not isinstance(links, list):
        raise r.error("must be a list of links", ["topology", "links"])
    out: list[Link] = []
    for i, ln in enumerate(links):
        loc: list[int | str] = ["topology", "links", i]
        if not isinstance(ln, dict):
            raise r.error('a link must be a mapping like {endpoints: ["a:eth1", "b:eth1"]}', loc)
        eps = ln.get("endpoints")
        if eps is None and "endpoint" in ln:
            continue  # single-ended (host, mgmt-net, macvlan, ...): not fabric cabling
        if not isinstance(eps, list) or len(eps) != 2:
            raise r.error('a link needs two endpoints, like endpoints: ["a:eth1", "b:eth1"]', [*loc, "endpoints"])
        ends = [_endpoint(r, ep, [*loc, "endpoints", j]) for j, ep in enumerate(eps)]
        if any(e.device in _PSEUDO_NODES and e.device not in nodes for e in ends):
            continue
        for j, e in enumerate(ends):
            if e.device not in nodes:
                raise r.error(
                    f"link refers to node '{e.device}', which is not in topology.nodes; add it there or fix the name",
                    [*loc, "endpoints", j],
                )
        if any(nodes[e.device].kind in _BRIDGE_KINDS for e in ends):
            continue
        if ends[0] == ends[1]:
            raise r.error(f"link connects {ends[0]} to itself", loc)
        out.append(Link(ends[0], ends[1]))
    return out


def _endpoint(r: _Reader, ep: object, loc: Loc) -> Endpoint:
    if isinstance(ep, str):
        node, sep, iface = ep.partition(":")
        if sep and node and iface:
            return Endpoint(node, iface)
        raise r.error(f"endpoint '{ep}' is not node:interface; write it like \"leaf1:eth1\"", loc)
    if isinstance(ep, dict):
        name, port = ep.get("node"), ep.get("interface")
        if isinstance(name, str) and name and isinstance(port, str) and port:
            return Endpoint(name, port)
        raise r.error("an endpoint needs 'node' and 'interface', like {node: leaf1, interface: eth1}", loc)
    raise r.error('an endpoint is "node:interface" or {node: ..., interface: ...}', loc)


def _label_role(r: _Reader, node: _Node) -> Role | None:
    value = node.labels.get(_PREFIX + "role")
    if value is None:
        return None
    try:
        return Role(str(value))
    except ValueError:
        roles = ", ".join(x.value for x in Role)
        raise r.error(f"'{value}' is not a role; use one of {roles}", _label_loc(node, "role")) from None


def _int_label(r: _Reader, node: _Node, key: str) -> int | None:
    value = node.labels.get(_PREFIX + key)
    if value is None:
        return None
    text = str(value).strip()
    if not text.isdigit():
        raise r.error(f"'{value}' is not a {key} number; use an integer >= 0", _label_loc(node, key))
    return int(text)


def _label_loc(node: _Node, key: str) -> Loc:
    return ["topology", "nodes", node.name, "labels", _PREFIX + key]


def _device(r: _Reader, node: _Node, role: Role) -> Device:
    def text(key: str) -> str | None:
        value = node.labels.get(_PREFIX + key)
        return str(value) if value is not None else None

    platform = text("platform")
    if platform is None and role is not Role.SERVER and not node.labeled:
        platform = _KIND_PLATFORM.get(node.kind)
    return Device(
        node.name,
        role,
        rail=_int_label(r, node, "rail"),
        group=_int_label(r, node, "group"),
        platform=platform,
        site=text("site") or site_from_name(node.name, role),
    )


def _port(node: _Node, iface: str) -> str:
    if node.kind in _CEOS_KINDS and (m := _CEOS_PORT.match(iface)):
        return "Ethernet" + m.group(1).replace("_", "/")
    return iface


def _server_ports(node: _Node, links: list[Link]) -> dict[str, str]:
    """ethN -> nicK for a label-less linux server (eth1 is nic0, or eth0 is when eth0 is cabled)."""
    if node.kind != "linux":
        return {}
    ports = {ep.port for ln in links for ep in (ln.a, ln.b) if ep.device == node.name}
    numbers = {p: int(m.group(1)) for p in ports if (m := _LINUX_ETH.match(p))}
    base = 0 if 0 in numbers.values() else 1
    return {p: f"nic{n - base}" for p, n in numbers.items()}
