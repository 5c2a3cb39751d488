"""Exports (Slurm topology, hostfile, containerlab, JSON) read back and checked against the fabric."""

from __future__ import annotations

import itertools
import json
from dataclasses import replace
from pathlib import Path

import pytest
import yaml
from hypothesis import given
from hypothesis import strategies as st
from jsonschema import Draft7Validator

from tests.conftest import EXAMPLES
from topology.blueprint import generate_blueprint
from topology.cabling_io import cabling_from_data
from topology.errors import FabricdError
from topology.exports import (
    EXPORT_FORMATS,
    clab_to_eos_iface,
    clab_topology,
    eos_to_clab_iface,
    export,
    fabric_json,
    host_order,
    parse_slurm_topology,
    slurm_topology,
)
from topology.exports.hostlist import compress_hostlist, expand_hostlist
from topology.exports.schedulers import k8s_labels, slurm_blocks, volcano_hypernodes
from topology.fabric import Fabric
from topology.model import Cabling, Device, Endpoint, Role
from topology.spec import FabricSpec, load_spec

CLAB_SCHEMA = Path(__file__).resolve().parents[4] / "shared" / "schemas" / "clab.schema.json"

# Two tiers, 3 AGs of 12 servers (so ranges cross a decade: 000-011), 2 rails.
TINY = FabricSpec.model_validate(
    {"name": "tiny", "rails": 2, "aggregation_groups": 3, "servers_per_group": 12, "spines_per_rail": 2}
)


def _spec(which: str) -> FabricSpec:
    return TINY if which == "tiny" else load_spec(EXAMPLES / which)


SPECS = ["tiny", "small-pod.yaml", "dci-120km.yaml"]


@pytest.fixture(params=SPECS)
def case(request: pytest.FixtureRequest) -> tuple[FabricSpec, Fabric]:
    spec = _spec(request.param)
    return spec, Fabric(generate_blueprint(spec))


def _with_odd_servers(spec: FabricSpec) -> Fabric:
    """The blueprint minus gpu-g0-001, plus a server without a group label."""
    bp = generate_blueprint(spec)
    devices = [d for d in bp.devices if d.name != "gpu-g0-001"] + [Device("stray-7", Role.SERVER)]
    links = [ln for ln in bp.links if "gpu-g0-001" not in (ln.a.device, ln.b.device)]
    return Fabric(Cabling(devices=devices, links=links))


# ---- hostlist ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("expr", "names"),
    [
        ("gpu-g0-[000-002,010]", ["gpu-g0-000", "gpu-g0-001", "gpu-g0-002", "gpu-g0-010"]),
        ("ag-g[9-11]", ["ag-g9", "ag-g10", "ag-g11"]),
        ("r-[1-2],b, c[07]", ["r-1", "r-2", "b", "c07"]),
        ("x[1-2]y[0-1]", ["x1y0", "x1y1", "x2y0", "x2y1"]),
        ("", []),
    ],
)
def test_expand_hostlist(expr: str, names: list[str]) -> None:
    assert expand_hostlist(expr) == names


# Slurm 22.05.8 answers `Invalid hostlist` to text after the last bracket, and pads `n[ 1-2]` to n01, n02
@pytest.mark.parametrize("bad", ["a[1-2", "a]1[", "a[2-1]", "a[x-3]", "a[-3]", "r[1-2]-a", "x[1-2]y", "n[ 1-2]"])
def test_expand_hostlist_rejects_malformed(bad: str) -> None:
    with pytest.raises(FabricdError):
        expand_hostlist(bad)


def test_compress_hostlist_ranges() -> None:
    names = [f"gpu-g0-{i:03d}" for i in [*range(32), 40, 100]]
    assert compress_hostlist(names) == "gpu-g0-[000-031,040,100]"
    assert compress_hostlist([f"ag-g{i}" for i in range(64)]) == "ag-g[0-63]"
    assert compress_hostlist(["solo", "n5"]) == "solo,n5"
    with pytest.raises(FabricdError):
        compress_hostlist(["bad,name"])


@given(
    st.sets(
        st.tuples(
            st.sampled_from(["gpu-g0-", "gpu-g1-", "n", "ag-g"]),
            st.integers(0, 1200),
            st.sampled_from([0, 3]),
        )
    )
)
def test_compress_then_expand_gives_the_same_names(parts: set[tuple[str, int, int]]) -> None:
    names = {f"{p}{n:0{w}d}" for p, n, w in parts}
    assert sorted(expand_hostlist(compress_hostlist(names))) == sorted(names)


# ---- Slurm -------------------------------------------------------------------------------------


def test_slurm_every_server_under_its_own_ag(case: tuple[FabricSpec, Fabric]) -> None:
    spec, fabric = case
    parsed = parse_slurm_topology(slurm_topology(fabric, spec))
    servers = fabric.devices(Role.SERVER)
    groups = sorted({s.group for s in servers if s.group is not None})
    ag_names = [f"ag-g{g}" for g in groups]
    assert sorted(parsed) == sorted([*ag_names, spec.name])
    top = parsed[spec.name]
    assert top == {"nodes": [], "switches": ag_names}
    home: dict[str, list[str]] = {}
    for switch in ag_names:
        assert parsed[switch]["switches"] == []
        for node in parsed[switch]["nodes"]:
            home.setdefault(node, []).append(switch)
    assert sorted(home) == sorted(s.name for s in servers)
    for server in servers:
        assert home[server.name] == [f"ag-g{server.group}"]


def test_slurm_text_of_small_pod(small_spec: FabricSpec, small_blueprint: Cabling) -> None:
    text = slurm_topology(Fabric(small_blueprint), small_spec)
    lines = text.splitlines()
    assert "SwitchName=ag-g0 Nodes=gpu-g0-[000-003]" in lines
    assert "SwitchName=small-pod Switches=ag-g[0-1]" in lines
    assert "# ag-g1: aggregation group 1, rail leaves leaf-g1-r0 leaf-g1-r1 leaf-g1-r2 leaf-g1-r3" in lines
    assert lines[0].startswith("#") and "fabricd" in lines[1]
    assert all(len(line) <= 1024 for line in lines)


def test_slurm_tiny_ranges_and_missing_and_ungrouped_servers() -> None:
    fabric = _with_odd_servers(TINY)
    text = slurm_topology(fabric, TINY)
    assert "SwitchName=ag-g0 Nodes=gpu-g0-[000,002-011]" in text.splitlines()
    parsed = parse_slurm_topology(text)
    placed = [n for sw in parsed.values() for n in sw["nodes"]]
    assert "stray-7" not in placed and "gpu-g0-001" not in placed
    assert len(placed) == 3 * 12 - 1
    [comment] = [ln for ln in text.splitlines() if "stray-7" in ln]
    assert comment.startswith("#")


def test_parse_slurm_topology_reads_slurm_syntax() -> None:
    text = "# c\nswitchname=s0 nodes=tux[0-1] LinkSpeed=100 # tail\nSwitchName=top \\\n  Switches=s[0]\n"
    assert parse_slurm_topology(text) == {
        "s0": {"nodes": ["tux0", "tux1"], "switches": []},
        "top": {"nodes": [], "switches": ["s0"]},
    }
    with pytest.raises(FabricdError, match="twice"):
        parse_slurm_topology("SwitchName=a Nodes=x\nSwitchName=a Nodes=y\n")
    with pytest.raises(FabricdError, match="SwitchName"):
        parse_slurm_topology("Nodes=x\n")


# ---- hostfile ----------------------------------------------------------------------------------


def test_hostfile_order_groups_and_slots(case: tuple[FabricSpec, Fabric]) -> None:
    spec, fabric = case
    text = host_order(fabric, spec)
    entries = [ln.split() for ln in text.splitlines() if ln and not ln.startswith("#")]
    servers = {s.name: s for s in fabric.devices(Role.SERVER)}
    assert len(entries) == len(servers)
    assert all(slots == f"slots={spec.rails}" for _, slots in entries)
    names = [name for name, _ in entries]
    assert sorted(names) == sorted(servers)
    keys = [(servers[n].group, int(n.rsplit("-", 1)[1])) for n in names]
    assert keys == sorted(keys)  # groups contiguous and ascending, servers by index inside each
    groups = [g for g, _ in keys]
    assert sum(1 for a, b in itertools.pairwise(groups) if a != b) == spec.aggregation_groups - 1
    assert f"# aggregation group 0: leaves {' '.join(f'leaf-g0-r{r}' for r in range(spec.rails))}" in text


def test_hostfile_keeps_ungrouped_servers_last() -> None:
    lines = [ln for ln in host_order(_with_odd_servers(TINY), TINY).splitlines() if not ln.startswith("#")]
    assert lines[0] == "gpu-g0-000 slots=2" and lines[1] == "gpu-g0-002 slots=2"
    assert lines[-1] == "stray-7 slots=2"
    assert len(lines) == 3 * 12


# ---- containerlab ------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def clab_validator() -> Draft7Validator:
    if not CLAB_SCHEMA.exists():
        pytest.skip(f"containerlab schema not found at {CLAB_SCHEMA}")
    return Draft7Validator(json.loads(CLAB_SCHEMA.read_text()))


def test_clab_topology_validates_and_matches_switch_links(
    case: tuple[FabricSpec, Fabric], clab_validator: Draft7Validator
) -> None:
    spec, fabric = case
    doc = yaml.safe_load(clab_topology(fabric, spec))
    errors = [e.message for e in clab_validator.iter_errors(doc)]
    assert errors == []
    assert doc["name"] == spec.name
    assert doc["topology"]["kinds"] == {"arista_ceos": {"image": "ceos:4.33.1F"}}
    nodes = doc["topology"]["nodes"]
    local_switches = {d.name for d in fabric.devices() if d.is_switch and not d.is_remote}
    assert set(nodes) == local_switches
    for name, node in nodes.items():
        dev = fabric.device(name)
        assert node["kind"] == "arista_ceos"
        assert all(isinstance(v, str) for v in node["labels"].values())
        assert node["labels"]["fabricd.role"] == dev.role.value
        assert node["labels"].get("fabricd.rail") == (None if dev.rail is None else str(dev.rail))
        assert node["labels"].get("fabricd.group") == (None if dev.group is None else str(dev.group))
    expected = sorted(
        sorted([str(ln.a), str(ln.b)])
        for ln in fabric.links
        if ln.a.device in local_switches and ln.b.device in local_switches
    )
    got = []
    for link in doc["topology"]["links"]:
        ends = []
        for ep in link["endpoints"]:
            device, iface = ep.split(":")
            ends.append(f"{device}:{clab_to_eos_iface(iface)}")
        got.append(sorted(ends))
    assert sorted(got) == expected
    assert len(doc["topology"]["links"]) == len(expected) > 0


def test_clab_leaves_out_remote_dci_routers(dci_spec: FabricSpec) -> None:
    doc = yaml.safe_load(clab_topology(Fabric(generate_blueprint(dci_spec)), dci_spec))
    nodes = doc["topology"]["nodes"]
    assert {"dr-campus-b-0", "dr-campus-b-1"} <= set(nodes)
    assert not any(n.startswith("remote-") for n in nodes)
    assert not any("remote-" in ep for link in doc["topology"]["links"] for ep in link["endpoints"])


def test_clab_first_leaf_uplink_is_written_as_eth_underscore(small_spec: FabricSpec) -> None:
    text = clab_topology(Fabric(generate_blueprint(small_spec)), small_spec)
    # small-pod: 4 servers per leaf, so leaf-g0-r0's first uplink is Ethernet5/1, to spine-r0-0 Ethernet1/1.
    assert '    - endpoints: ["leaf-g0-r0:eth5_1", "spine-r0-0:eth1_1"]' in text.splitlines()


@pytest.mark.parametrize(
    ("eos", "clab"),
    [
        ("Ethernet5/1", "eth5_1"),
        ("Ethernet12", "eth12"),
        ("Ethernet2/1/1", "eth2_1_1"),
        ("Ethernet128/1", "eth128_1"),
    ],
)
def test_interface_names(eos: str, clab: str) -> None:
    assert eos_to_clab_iface(eos) == clab
    assert clab_to_eos_iface(clab) == eos


def test_et_prefix_is_accepted() -> None:
    assert clab_to_eos_iface("et3_1") == "Ethernet3/1"


@given(st.integers(1, 4096), st.lists(st.integers(0, 8), max_size=2))
def test_interface_round_trip(port: int, sub: list[int]) -> None:
    eos = "Ethernet" + "/".join(str(n) for n in [port, *sub])
    assert clab_to_eos_iface(eos_to_clab_iface(eos)) == eos


@pytest.mark.parametrize("bad", ["Management1", "nic0", "Ethernet0/1", "Et1/1", "Ethernet1/"])
def test_eos_to_clab_rejects_non_ethernet(bad: str) -> None:
    with pytest.raises(FabricdError):
        eos_to_clab_iface(bad)


@pytest.mark.parametrize("bad", ["eth0", "Ethernet1/1", "eth1/1", "e1-1", "eth1_"])
def test_clab_to_eos_rejects_non_data_interfaces(bad: str) -> None:
    with pytest.raises(FabricdError):
        clab_to_eos_iface(bad)


def test_clab_names_the_bad_port(small_spec: FabricSpec, small_blueprint: Cabling) -> None:
    first = next(ln for ln in small_blueprint.links if ln.a.device.startswith("leaf") and "spine" in ln.b.device)
    bad = replace(first, a=Endpoint(first.a.device, "Port-Channel1"))
    links = [bad if ln is first else ln for ln in small_blueprint.links]
    with pytest.raises(FabricdError, match=f"{first.a.device}:Port-Channel1"):
        clab_topology(Fabric(Cabling(devices=small_blueprint.devices, links=links)), small_spec)


# ---- JSON --------------------------------------------------------------------------------------


def test_json_loads_back_as_the_same_cabling(case: tuple[FabricSpec, Fabric]) -> None:
    spec, fabric = case
    doc = json.loads(fabric_json(fabric, spec))
    assert doc["name"] == spec.name
    back = cabling_from_data({"devices": doc["devices"], "links": doc["links"]}, "<export>")
    assert back.devices == fabric.devices()
    assert back.links == fabric.links
    summary = doc["summary"]
    assert summary["gpus"] == spec.gpus
    assert summary["links"] == len(fabric.links)
    assert summary["devices"]["leaf"] == spec.leaves
    assert summary["devices"]["spine"] == spec.spines
    assert summary["devices"]["server"] == spec.servers
    assert summary["devices"]["dr"] == sum(d.dr_switches for d in spec.dci)
    assert summary["remote_devices"] == sum(d.dr_switches for d in spec.dci)


def test_json_keeps_long_haul_length_and_remote_site(dci_spec: FabricSpec) -> None:
    doc = json.loads(fabric_json(Fabric(generate_blueprint(dci_spec)), dci_spec))
    remote = [d for d in doc["devices"] if d.get("site")]
    assert [d["name"] for d in remote] == ["remote-campus-b-dr-0", "remote-campus-b-dr-1"]
    long_haul = [ln for ln in doc["links"] if ln["b"]["device"].startswith("remote-")]
    assert len(long_haul) == 8 and all(ln["length_m"] == 120000 for ln in long_haul)


# ---- dispatch ----------------------------------------------------------------------------------


def test_export_dispatches_every_format(small_spec: FabricSpec, small_blueprint: Cabling) -> None:
    fabric = Fabric(small_blueprint)
    direct = {
        "slurm": slurm_topology,
        "slurm-block": slurm_blocks,
        "k8s-labels": k8s_labels,
        "volcano": volcano_hypernodes,
        "hostfile": host_order,
        "clab": clab_topology,
        "json": fabric_json,
    }
    assert set(direct) == set(EXPORT_FORMATS)
    for fmt, fn in direct.items():
        assert export(fmt, fabric, small_spec) == fn(fabric, small_spec)


def test_export_unknown_format_lists_the_formats(small_spec: FabricSpec, small_blueprint: Cabling) -> None:
    with pytest.raises(FabricdError, match="slurm, slurm-block, k8s-labels, volcano, hostfile, clab, json"):
        export("dot", Fabric(small_blueprint), small_spec)
