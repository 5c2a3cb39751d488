"""As-built loaders: a blueprint written out as LLDP tables, containerlab and cabling files, loaded back."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from topology.blueprint import generate_blueprint
from topology.cabling_io import dump_cabling
from topology.errors import CablingError
from topology.labels import complete_labels
from topology.loaders import load_cabling, load_clab, load_lldp_dir
from topology.model import Cabling, Device, Endpoint, Role
from topology.spec import FabricSpec
from topology.validate import validate

TINY: dict[str, Any] = {
    "name": "tiny",
    "rails": 2,
    "aggregation_groups": 2,
    "servers_per_group": 2,
    "spines_per_rail": 1,
    "superspines": 1,
}
WITH_DCI: dict[str, Any] = {
    **TINY,
    "dci": [{"name": "campus-b", "distance_km": 120, "dr_switches": 1, "links_per_dr": 2}],
}
EOS_DESCRIPTION = "Arista Networks EOS version 4.32.0F running on an Arista cEOSLab"

# ---- helpers: a Cabling written out the way each source would show it --------------------------


def spec_of(data: dict[str, Any]) -> FabricSpec:
    return FabricSpec.model_validate(data)


def undirected(cabling: Cabling, rename: dict[str, str] | None = None) -> set[frozenset[Endpoint]]:
    r = rename or {}
    return {frozenset(Endpoint(r.get(ep.device, ep.device), ep.port) for ep in (ln.a, ln.b)) for ln in cabling.links}


def roles(cabling: Cabling) -> dict[str, Role]:
    return {d.name: d.role for d in cabling.devices}


def to_lldp(cabling: Cabling, rename: dict[str, str] | None = None) -> dict[str, dict[str, list[dict[str, Any]]]]:
    """napalm get_lldp_neighbors_detail() of each campus switch; servers answer like lldpd."""
    r = rename or {}
    devices = {d.name: d for d in cabling.devices}
    tables: dict[str, dict[str, list[dict[str, Any]]]] = {
        d.name: {} for d in cabling.devices if d.is_switch and not d.is_remote
    }
    for n, link in enumerate(cabling.links):
        for near, far in ((link.a, link.b), (link.b, link.a)):
            if near.device not in tables:
                continue
            peer = devices[far.device]
            server = peer.role is Role.SERVER
            entry = {
                "parent_interface": "",
                "remote_port": f"02:00:00:00:{n // 256:02x}:{n % 256:02x}" if server else far.port,
                "remote_port_description": far.port if server else "",
                "remote_chassis_id": f"02:00:00:01:{n // 256:02x}:{n % 256:02x}",
                "remote_system_name": r.get(far.device, far.device),
                "remote_system_description": "Ubuntu 22.04 Linux" if server else EOS_DESCRIPTION,
                "remote_system_capab": ["station"] if server else ["bridge", "router"],
                "remote_system_enable_capab": ["station"] if server else ["bridge", "router"],
            }
            tables[near.device].setdefault(near.port, []).append(entry)
    return {r.get(name, name): table for name, table in tables.items()}


def write_lldp(directory: Path, tables: dict[str, Any], *, wrap: bool = False) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    for name, table in tables.items():
        body = {"lldp_neighbors_detail": table} if wrap else table
        (directory / f"{name}.json").write_text(json.dumps(body, indent=1), encoding="utf-8")
    return directory


def clab_port(dev: Device, port: str, labels: bool) -> str:
    if dev.role is Role.SERVER:
        return port if labels else f"eth{int(port.removeprefix('nic')) + 1}"
    m = re.fullmatch(r"Ethernet(\d+(?:/\d+)*)", port)
    assert m is not None
    return "eth" + m.group(1).replace("/", "_")


def to_clab(cabling: Cabling, *, labels: bool = True, extended: bool = False) -> dict[str, Any]:
    nodes: dict[str, Any] = {}
    for d in cabling.devices:
        node: dict[str, Any] = {"kind": "linux", "image": "alpine:3"} if d.role is Role.SERVER else {"kind": "ceos"}
        if labels:
            node["labels"] = {f"fabricd.{k}": str(v) for k, v in d.to_dict().items() if k != "name"}
        nodes[d.name] = node
    devices = {d.name: d for d in cabling.devices}
    links: list[Any] = []
    for ln in cabling.links:
        ends = [(ep.device, clab_port(devices[ep.device], ep.port, labels)) for ep in (ln.a, ln.b)]
        if extended:
            links.append({"type": "veth", "endpoints": [{"node": n, "interface": i} for n, i in ends]})
        else:
            links.append({"endpoints": [f"{n}:{i}" for n, i in ends]})
    return {
        "name": "tiny",
        "topology": {"kinds": {"ceos": {"image": "ceos:4.32.0F"}}, "nodes": nodes, "links": links},
    }


def write_yaml(path: Path, data: object) -> Path:
    path.write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")
    return path


def error_codes(spec: FabricSpec, cabling: Cabling) -> set[str]:
    return {v.code.value for v in validate(spec, cabling).violations if v.severity == "error"}


# ---- LLDP -----------------------------------------------------------------------------------------


@pytest.mark.parametrize("data", [TINY, WITH_DCI], ids=["tiny", "dci"])
def test_lldp_round_trip(tmp_path: Path, data: dict[str, Any]) -> None:
    spec = spec_of(data)
    blueprint = generate_blueprint(spec)
    loaded = load_cabling(write_lldp(tmp_path / "lldp", to_lldp(blueprint)))

    assert undirected(loaded) == undirected(blueprint)
    assert len(loaded.links) == len(blueprint.links)  # both sides of a cable make one link
    assert roles(loaded) == roles(blueprint)
    assert all(ln.speed_gbps is None and ln.length_m is None for ln in loaded.links)
    by_name = {d.name: d for d in loaded.devices}
    for d in blueprint.devices:
        assert by_name[d.name].site == d.site
        assert by_name[d.name].platform == (d.platform if d.is_switch and not d.is_remote else None)
    assert loaded.inferred == []  # every name follows fabricd naming
    # LLDP carries no cable length: a long-haul link cannot show its length; nothing else is wrong.
    assert error_codes(spec, loaded) <= {"DCI_LENGTH_MISSING"}
    if not spec.dci:
        assert validate(spec, loaded).violations == []


def test_lldp_wrapped_fqdn_one_sided_and_management(tmp_path: Path) -> None:
    blueprint = generate_blueprint(spec_of(TINY))
    tables = to_lldp(blueprint)
    # the spine no longer reports its leaf-g0-r0 cable: the leaf's side alone still makes the link
    leaf_up = next(p for p, ns in tables["leaf-g0-r0"].items() if ns[0]["remote_system_name"] == "spine-r0-0")
    spine_port = tables["leaf-g0-r0"][leaf_up][0]["remote_port"]
    del tables["spine-r0-0"][spine_port]
    # neighbours named by FQDN; a management-network switch on Management1
    for table in tables.values():
        for neighbours in table.values():
            for nb in neighbours:
                nb["remote_system_name"] += ".pod-a.example.net"
    tables["leaf-g0-r0"]["Management1"] = [
        {"remote_system_name": "oob-sw-7", "remote_port": "Ethernet12", "remote_port_description": ""}
    ]
    loaded = load_lldp_dir(write_lldp(tmp_path / "lldp", tables, wrap=True))
    assert undirected(loaded) == undirected(blueprint)
    assert roles(loaded) == roles(blueprint)


LEAVES_SPINES = {
    **{f"leaf-g{g}-r{r}": f"tor{g}{r}" for g in range(2) for r in range(2)},
    "spine-r0-0": "agg-a",
    "spine-r1-0": "agg-b",
}
ALL_SWITCHES = {**LEAVES_SPINES, "ssp-0": "core1", "dr-campus-b-0": "edge-dr1"}


@pytest.mark.parametrize("rename", [LEAVES_SPINES, ALL_SWITCHES], ids=["leaves-spines", "all-switches"])
def test_lldp_roles_from_graph(tmp_path: Path, rename: dict[str, str]) -> None:
    spec = spec_of(WITH_DCI)
    blueprint = generate_blueprint(spec)
    loaded = load_cabling(write_lldp(tmp_path / "lldp", to_lldp(blueprint, rename)))

    assert undirected(loaded) == undirected(blueprint, rename)
    assert roles(loaded) == {rename.get(n, n): r for n, r in roles(blueprint).items()}
    graph_notes = {(n["device"], n["value"]) for n in loaded.inferred if n["field"] == "role"}
    assert graph_notes == {(new, roles(blueprint)[old].value) for old, new in rename.items()}
    assert all(n["from"] == "graph" for n in loaded.inferred)

    completed = complete_labels(loaded)
    by_name = {d.name: d for d in completed.devices}
    for d in blueprint.devices:
        got = by_name[rename.get(d.name, d.name)]
        assert (got.role, got.rail, got.group) == (d.role, d.rail, d.group), d.name
    label_notes = {(n["device"], n["field"]) for n in completed.inferred if n["from"] == "graph"}
    assert {
        (rename[f"leaf-g{g}-r{r}"], f) for g in range(2) for r in range(2) for f in ("rail", "group")
    } <= label_notes
    assert {(rename["spine-r0-0"], "rail"), (rename["spine-r1-0"], "rail")} <= label_notes
    if rename is LEAVES_SPINES:
        # leaves and spines are placed by their labels, so the wiring checks out against the spec
        # (superspines and DRs are placed by name: renaming them is reported as missing links).
        assert error_codes(spec, loaded) <= {"DCI_LENGTH_MISSING"}


def test_lldp_servers_without_fabricd_names(tmp_path: Path) -> None:
    blueprint = generate_blueprint(spec_of(TINY))
    rename = {d.name: f"host{i}" for i, d in enumerate(blueprint.devices) if d.role is Role.SERVER}
    loaded = load_lldp_dir(write_lldp(tmp_path / "lldp", to_lldp(blueprint, rename)))
    assert {n["device"] for n in loaded.inferred if n["from"] == "port"} == set(rename.values())
    assert roles(loaded) == {rename.get(n, n): r for n, r in roles(blueprint).items()}


# ---- containerlab ---------------------------------------------------------------------------------


@pytest.mark.parametrize("extended", [False, True], ids=["brief", "extended"])
def test_clab_round_trip_with_labels(tmp_path: Path, extended: bool) -> None:
    spec = spec_of(WITH_DCI)
    blueprint = generate_blueprint(spec)
    path = write_yaml(tmp_path / "tiny.clab.yml", to_clab(blueprint, extended=extended))
    loaded = load_cabling(path)

    assert undirected(loaded) == undirected(blueprint)
    assert [d for d in loaded.devices] == blueprint.devices  # labels carried as written
    assert loaded.inferred == []
    assert error_codes(spec, loaded) <= {"DCI_LENGTH_MISSING"}  # containerlab has no cable lengths


def test_clab_without_labels(tmp_path: Path) -> None:
    spec = spec_of(TINY)
    blueprint = generate_blueprint(spec)
    # a plain .yaml name: recognised by its top-level `topology` key
    path = write_yaml(tmp_path / "lab.yaml", to_clab(blueprint, labels=False, extended=True))
    loaded = load_cabling(path)
    assert undirected(loaded) == undirected(blueprint)  # eth1_1 -> Ethernet1/1, server eth1 -> nic0
    assert roles(loaded) == roles(blueprint)
    assert {d.platform for d in loaded.devices if d.is_switch} == {"eos"}
    assert validate(spec, loaded).violations == []


def test_clab_roles_from_graph_and_aliases(tmp_path: Path) -> None:
    blueprint = generate_blueprint(spec_of(TINY))
    servers = {d.name: f"h{i}" for i, d in enumerate(blueprint.devices) if d.role is Role.SERVER}
    switches = {"leaf-g0-r0": "a1", "leaf-g0-r1": "a2", "leaf-g1-r0": "a3", "leaf-g1-r1": "a4"}
    switches |= {"spine-r0-0": "b1", "spine-r1-0": "b2", "ssp-0": "c1"}
    rename = servers | switches
    data = to_clab(blueprint, labels=False)
    topo = data["topology"]
    topo["nodes"] = {rename.get(n, n): v for n, v in topo["nodes"].items()}
    for ln in topo["links"]:
        ln["endpoints"] = [":".join((rename[n], i)) for n, i in (e.split(":") for e in ln["endpoints"])]
    # an EOS-style alias is kept; single-ended links and links to the host are not fabric cabling
    first = topo["links"][0]["endpoints"]
    first[1] = first[1].replace("eth1_1", "Ethernet1/1")
    topo["links"] += [
        {"type": "host", "endpoint": {"node": "a1", "interface": "eth99"}, "host-interface": "a1-99"},
        {"endpoints": ["a1:eth98", "host:a1-98"]},
    ]
    loaded = load_clab(write_yaml(tmp_path / "renamed.clab.yaml", data))

    assert undirected(loaded) == undirected(blueprint, rename)
    assert len(loaded.links) == len(blueprint.links)
    assert roles(loaded) == {rename[n]: r for n, r in roles(blueprint).items()}
    assert {n["device"] for n in loaded.inferred if n["from"] == "graph"} == set(switches.values())
    assert {n["device"] for n in loaded.inferred if n["from"] == "kind"} == set(servers.values())


# ---- cabling files --------------------------------------------------------------------------------


@pytest.mark.parametrize("suffix", [".yaml", ".json"])
def test_cabling_file_round_trip(tmp_path: Path, suffix: str) -> None:
    blueprint = generate_blueprint(spec_of(WITH_DCI))
    path = tmp_path / f"asbuilt{suffix}"
    dump_cabling(blueprint, path)
    loaded = load_cabling(path)
    assert loaded.devices == blueprint.devices
    assert loaded.links == blueprint.links
    assert loaded.source == str(path)


# ---- bad input ------------------------------------------------------------------------------------


def expect_error(path: Path, *needles: str, line: int | None = None) -> CablingError:
    with pytest.raises(CablingError) as info:
        load_cabling(path)
    text = str(info.value)
    assert str(path) in text
    if line is not None:
        assert text.startswith(f"{path}:{line}:"), text
    for needle in needles:
        assert needle in text, text
    return info.value


def test_missing_path(tmp_path: Path) -> None:
    expect_error(tmp_path / "nope.yaml", "file not found; check the path")


def test_lldp_empty_directory(tmp_path: Path) -> None:
    d = tmp_path / "lldp"
    d.mkdir()
    (d / "notes.txt").write_text("x", encoding="utf-8")
    expect_error(d, "no .json files", "get_lldp_neighbors_detail")


def test_lldp_invalid_json_names_file_and_line(tmp_path: Path) -> None:
    d = write_lldp(tmp_path / "lldp", to_lldp(generate_blueprint(spec_of(TINY))))
    bad = d / "leaf-g0-r0.json"
    bad.write_text('{\n "Ethernet1/1": [\n  {"remote_system_name": "x",}\n ]\n}\n', encoding="utf-8")
    with pytest.raises(CablingError) as info:
        load_cabling(d)
    assert str(info.value).startswith(f"{bad}:3:"), str(info.value)
    assert "invalid JSON" in str(info.value)


@pytest.mark.parametrize(
    ("body", "needles"),
    [
        (["Ethernet1/1"], ["expected the result of napalm get_lldp_neighbors_detail()", "got list"]),
        ({"Ethernet1/1": {"remote_system_name": "x"}}, ["field 'Ethernet1/1'", "list of neighbours"]),
        ({"Ethernet1/1": ["spine"]}, ["field 'Ethernet1/1[0]'", "mapping"]),
        (
            {"Ethernet1/1": [{"remote_port": "Ethernet2/1"}]},
            ["field 'Ethernet1/1[0].remote_system_name'", "missing or empty"],
        ),
        (
            {"Ethernet1/1": [{"remote_system_name": "spine"}]},
            ["field 'Ethernet1/1[0].remote_port'", "missing"],
        ),
        (
            {"Ethernet1/1": [{"remote_system_name": 7, "remote_port": "x"}]},
            ["remote_system_name'", "must be a string"],
        ),
    ],
    ids=["list", "port-not-list", "neighbour-not-mapping", "no-system-name", "no-port", "name-not-string"],
)
def test_lldp_wrong_shape(tmp_path: Path, body: object, needles: list[str]) -> None:
    d = tmp_path / "lldp"
    d.mkdir()
    path = d / "leaf-g0-r0.json"
    path.write_text(json.dumps(body), encoding="utf-8")
    err = expect_error(d, *needles)
    assert err.source == str(path)


def test_lldp_role_not_inferable(tmp_path: Path) -> None:
    tables = {"sw1": {"Ethernet1": [{"remote_system_name": "sw2", "remote_port": "Ethernet1"}]}}
    expect_error(write_lldp(tmp_path / "lldp", tables), "cannot tell the role of 'sw1'", "fabricd naming")


CLAB_OK = """\
name: lab
topology:
  nodes:
    leaf-g0-r0: {kind: ceos}
    gpu-g0-000: {kind: linux}
  links:
    - endpoints: ["gpu-g0-000:eth1", "leaf-g0-r0:eth1_1"]
"""


@pytest.mark.parametrize(
    ("text", "line", "needles"),
    [
        ("name: lab\ntopology:\n  links: []\n", 2, ["topology.nodes", "list the lab's nodes"]),
        (CLAB_OK.replace('"leaf-g0-r0:eth1_1"', '"leaf-g0-r0-eth1_1"'), 7, ["is not node:interface"]),
        (
            CLAB_OK.replace('"leaf-g0-r0:eth1_1"', '"leaf-g9:eth1"'),
            7,
            ["node 'leaf-g9'", "not in topology.nodes"],
        ),
        (
            CLAB_OK.replace("{kind: ceos}", "{kind: ceos, labels: {fabricd.role: tor}}"),
            4,
            ["'tor' is not a role"],
        ),
        (
            CLAB_OK.replace("{kind: ceos}", "{kind: ceos, labels: {fabricd.rail: x}}"),
            4,
            ["not a rail number"],
        ),
        (CLAB_OK.replace("  links:\n", "  links:\n    - endpoints: [a]\n"), 7, ["two endpoints"]),
        (CLAB_OK.replace("{kind: linux}", "{kind: linux"), 6, ["invalid YAML"]),
    ],
    ids=["no-nodes", "endpoint", "unknown-node", "bad-role", "bad-rail", "one-endpoint", "syntax"],
)
def test_clab_errors_name_file_and_line(tmp_path: Path, text: str, line: int, needles: list[str]) -> None:
    path = tmp_path / "lab.clab.yml"
    path.write_text(text, encoding="utf-8")
    expect_error(path, *needles, line=line)


def test_clab_ok_fixture_loads(tmp_path: Path) -> None:
    path = tmp_path / "lab.clab.yml"
    path.write_text(CLAB_OK, encoding="utf-8")
    loaded = load_cabling(path)
    assert undirected(loaded) == {frozenset({Endpoint("gpu-g0-000", "nic0"), Endpoint("leaf-g0-r0", "Ethernet1/1")})}


def test_cabling_yaml_syntax_error_has_line(tmp_path: Path) -> None:
    path = tmp_path / "asbuilt.yaml"
    path.write_text("devices:\n  - {name: a, role: leaf\nlinks: []\n", encoding="utf-8")
    expect_error(path, "invalid YAML", line=3)


def test_cabling_json_syntax_error_has_line(tmp_path: Path) -> None:
    path = tmp_path / "asbuilt.json"
    path.write_text('{"devices": [],\n "links": [,]}\n', encoding="utf-8")
    expect_error(path, "invalid JSON", line=2)
