"""Every violation code, each triggered by one minimal perturbation of a generated blueprint."""

from __future__ import annotations

from dataclasses import replace

import pytest

from tests.conftest import EXAMPLES
from tests.unit.topology.cabling_edits import add, drop, find, links_between, rewire, swap_far_ends
from topology.blueprint import generate_blueprint
from topology.labels import complete_labels
from topology.model import Cabling, Device, Endpoint, Link, Role
from topology.rules.violation import Code, Violation
from topology.spec import FabricSpec, load_spec
from topology.validate import validate


def codes(result_violations: list[Violation]) -> list[str]:
    return [v.code.value for v in result_violations]


@pytest.mark.parametrize("example", ["small-pod.yaml", "dci-120km.yaml", "pod-16k.yaml"])
def test_generated_blueprint_of_each_example_is_clean(example: str) -> None:
    spec = load_spec(EXAMPLES / example)
    result = validate(spec, generate_blueprint(spec))
    assert result.violations == []
    assert result.ok
    devices = result.summary["devices"]
    assert isinstance(devices, dict)
    assert devices["leaf"] == spec.leaves
    assert devices["server"] * spec.rails == spec.gpus


def test_16k_example_has_the_published_switch_count() -> None:
    # domain.md: 16,384 GPUs = 512 leaves + 256 spines + 64 superspines = 832 switches
    spec = load_spec(EXAMPLES / "pod-16k.yaml")
    bp = generate_blueprint(spec)
    roles = [d.role for d in bp.devices]
    assert spec.gpus == 16384
    assert (roles.count(Role.LEAF), roles.count(Role.SPINE), roles.count(Role.SUPERSPINE)) == (512, 256, 64)


def test_rail_mismatch_single_cable_names_right_leaf_and_port(small_spec: FabricSpec, small_blueprint: Cabling) -> None:
    # gpu-g0-001:nic1 moved to a free port of the rail-2 leaf
    bad = rewire(small_blueprint, "gpu-g0-001:nic1", "leaf-g0-r2:Ethernet30/1")
    [v] = validate(small_spec, bad).violations
    assert v.code is Code.RAIL_MISMATCH
    assert "gpu-g0-001:nic1" in v.ports and "leaf-g0-r2:Ethernet30/1" in v.ports
    assert v.fix == "move the cable from leaf-g0-r2:Ethernet30/1 to leaf-g0-r1:Ethernet2/1 (that port is free)"


def test_two_swapped_cables_are_one_swap(small_spec: FabricSpec, small_blueprint: Cabling) -> None:
    bad = swap_far_ends(small_blueprint, "gpu-g1-003:nic0", "gpu-g1-003:nic3")
    [v] = validate(small_spec, bad).violations
    assert v.code is Code.RAIL_MISMATCH
    assert v.fix == "swap the cables on leaf-g1-r3:Ethernet4/1 and leaf-g1-r0:Ethernet4/1"
    assert set(v.ports[:2]) == {"leaf-g1-r0:Ethernet4/1", "leaf-g1-r3:Ethernet4/1"}
    assert "swapped" in v.message


def test_swap_between_servers_of_two_groups_is_group_split(small_spec: FabricSpec, small_blueprint: Cabling) -> None:
    bad = swap_far_ends(small_blueprint, "gpu-g0-000:nic2", "gpu-g1-000:nic2")
    [v] = validate(small_spec, bad).violations
    assert v.code is Code.GROUP_SPLIT
    assert v.fix == "swap the cables on leaf-g1-r2:Ethernet1/1 and leaf-g0-r2:Ethernet1/1"


def test_group_split_single_cable(small_spec: FabricSpec, small_blueprint: Cabling) -> None:
    bad = rewire(small_blueprint, "gpu-g0-002:nic3", "leaf-g1-r3:Ethernet30/1")
    [v] = validate(small_spec, bad).violations
    assert v.code is Code.GROUP_SPLIT
    assert "group 1" in v.message and "group 0" in v.message
    assert v.fix.startswith("move the cable from leaf-g1-r3:Ethernet30/1 to leaf-g0-r3:Ethernet3/1")


def test_cross_rail_uplink_names_the_spine_it_belongs_on(small_spec: FabricSpec, small_blueprint: Cabling) -> None:
    i = links_between(small_blueprint, "leaf-g0-r0", "spine-r0-0")[0]
    link = small_blueprint.links[i]
    bad = rewire(small_blueprint, str(link.a), "spine-r1-0:Ethernet40/1")
    result = validate(small_spec, bad)
    assert Code.CROSS_RAIL_UPLINK in codes(result.violations)
    v = next(v for v in result.violations if v.code is Code.CROSS_RAIL_UPLINK)
    assert v.fix == f"move the cable from spine-r1-0:Ethernet40/1 to spine-r0-0:{link.b.port}"
    # The missing rail-0 link is what the fix restores: not reported twice.
    assert Code.MISSING_LINK not in codes(result.violations)


def test_tier_violation_leaf_to_leaf(small_spec: FabricSpec, small_blueprint: Cabling) -> None:
    bad = add(
        small_blueprint,
        Link(Endpoint("leaf-g0-r0", "Ethernet40/1"), Endpoint("leaf-g1-r0", "Ethernet40/1"), 400, 3),
    )
    [v] = validate(small_spec, bad).violations
    assert v.code is Code.TIER_VIOLATION
    assert v.ports == ["leaf-g0-r0:Ethernet40/1", "leaf-g1-r0:Ethernet40/1"]
    assert "leaf-leaf" in v.message


def test_tier_violation_server_on_spine(small_spec: FabricSpec, small_blueprint: Cabling) -> None:
    bad = rewire(small_blueprint, "gpu-g0-000:nic0", "spine-r0-0:Ethernet40/1")
    result = validate(small_spec, bad)
    assert codes(result.violations).count("TIER_VIOLATION") == 1
    # the NIC is no longer on its leaf: the spine link is the problem to fix, and the NIC counts as cabled
    v = result.violations[0]
    assert "server-spine" in v.message
    assert v.fix == "move gpu-g0-000:nic0 from spine-r0-0:Ethernet40/1 to leaf-g0-r0:Ethernet1/1"


def test_missing_server_nic(small_spec: FabricSpec, small_blueprint: Cabling) -> None:
    bad = drop(small_blueprint, find(small_blueprint, "gpu-g1-002:nic1"))
    [v] = validate(small_spec, bad).violations
    assert v.code is Code.MISSING_LINK
    assert v.fix == "cable gpu-g1-002:nic1 to leaf-g1-r1:Ethernet3/1"


def test_missing_leaf_spine_link_names_both_ends(small_spec: FabricSpec, small_blueprint: Cabling) -> None:
    i = links_between(small_blueprint, "leaf-g1-r2", "spine-r2-1")[1]
    gone = small_blueprint.links[i]
    result = validate(small_spec, drop(small_blueprint, i))
    missing = [v for v in result.violations if v.code is Code.MISSING_LINK]
    assert len(missing) == 1
    assert missing[0].ports == [str(gone.a), str(gone.b)]
    assert "1 of 2 links" in missing[0].message
    # one uplink less: the leaf is now oversubscribed, and says by how much
    over = [v for v in result.violations if v.code is Code.OVERSUBSCRIBED]
    assert [v.devices for v in over] == [["leaf-g1-r2"]]
    assert "1.33:1" in over[0].message


def test_port_reuse(small_spec: FabricSpec, small_blueprint: Cabling) -> None:
    bad = add(
        small_blueprint,
        Link(Endpoint("spine-r0-0", "Ethernet1/1"), Endpoint("ssp-1", "Ethernet60/1"), 400, 150),
    )
    result = validate(small_spec, bad)
    reuse = [v for v in result.violations if v.code is Code.PORT_REUSE]
    assert len(reuse) == 1
    assert reuse[0].ports[0] == "spine-r0-0:Ethernet1/1"


def test_speed_mismatch(small_spec: FabricSpec, small_blueprint: Cabling) -> None:
    i = find(small_blueprint, "gpu-g0-003:nic2")
    links = list(small_blueprint.links)
    links[i] = replace(links[i], speed_gbps=200)
    [v] = validate(small_spec, Cabling(small_blueprint.devices, links)).violations
    assert v.code is Code.SPEED_MISMATCH
    assert "200G" in v.message and "400G" in v.message


def test_unknown_device(small_spec: FabricSpec, small_blueprint: Cabling) -> None:
    stray = Device("leaf-g7-r0", Role.LEAF, rail=0, group=7, platform="eos")
    bad = add(
        small_blueprint,
        Link(Endpoint("leaf-g7-r0", "Ethernet1/1"), Endpoint("spine-r0-0", "Ethernet50/1"), 400, 30),
        [stray],
    )
    result = validate(small_spec, bad)
    v = next(v for v in result.violations if v.code is Code.UNKNOWN_DEVICE)
    assert v.devices == ["leaf-g7-r0"]
    assert v.severity == "warning"
    assert "group 7" in v.message


@pytest.mark.parametrize("name", ["gpu-g0-004", "gpu-extra"])
def test_a_fifth_server_in_a_group_of_four_is_unknown(
    small_spec: FabricSpec, small_blueprint: Cabling, name: str
) -> None:
    # as-built from the field: a server the spec does not have, cabled NIC k to the group's rail-k leaf (a free port);
    # labels are completed from the graph as for any as-built
    links = [Link(Endpoint(name, f"nic{r}"), Endpoint(f"leaf-g0-r{r}", "Ethernet9/1"), 400, 3) for r in range(4)]
    bad = Cabling([*small_blueprint.devices, Device(name, Role.SERVER)], [*small_blueprint.links, *links])
    result = validate(small_spec, complete_labels(bad))
    (v,) = [v for v in result.violations if v.code is Code.UNKNOWN_DEVICE]
    assert v.devices == [name] and v.severity == "warning"
    assert "aggregation group 0 holds 5 servers where the spec 'small-pod' has 4" in v.message


def test_a_group_of_foreign_names_over_its_size_names_the_candidates(
    small_spec: FabricSpec, small_blueprint: Cabling
) -> None:
    # LLDP-style names for every server: which one is extra cannot be told, so one violation names the candidates
    rename = {f"gpu-g0-00{i}": f"node{i}" for i in range(4)}
    devices = [replace(d, name=rename.get(d.name, d.name)) for d in small_blueprint.devices]
    links = [replace(ln, a=Endpoint(rename.get(ln.a.device, ln.a.device), ln.a.port)) for ln in small_blueprint.links]
    devices.append(Device("node4", Role.SERVER, group=0))
    links += [Link(Endpoint("node4", f"nic{r}"), Endpoint(f"leaf-g0-r{r}", "Ethernet9/1"), 400, 3) for r in range(4)]
    result = validate(small_spec, complete_labels(Cabling(devices, links)))
    (v,) = [v for v in result.violations if v.code is Code.UNKNOWN_DEVICE]
    assert v.devices == ["node0", "node1", "node2", "node3", "node4"]
    assert v.message.startswith("1 of node0, node1, node2, node3, node4 (servers) are not part of the spec")


def test_oversubscribed_by_slow_uplinks(small_spec: FabricSpec, small_blueprint: Cabling) -> None:
    links = [
        replace(ln, speed_gbps=100) if ln.a.device == "leaf-g0-r1" and ln.b.device.startswith("spine") else ln
        for ln in small_blueprint.links
    ]
    result = validate(small_spec, Cabling(small_blueprint.devices, links))
    over = [v for v in result.violations if v.code is Code.OVERSUBSCRIBED]
    assert [v.devices for v in over] == [["leaf-g0-r1"]]
    assert "4.00:1" in over[0].message


def test_dci_not_on_dr(dci_spec: FabricSpec) -> None:
    bp = generate_blueprint(dci_spec)
    i = next(k for k, ln in enumerate(bp.links) if ln.b.device == "remote-campus-b-dr-0")
    bad = rewire(bp, str(bp.links[i].b), "ssp-0:Ethernet99/1")
    result = validate(dci_spec, bad)
    v = next(v for v in result.violations if v.code is Code.DCI_NOT_ON_DR)
    assert v.ports == ["ssp-0:Ethernet99/1"]
    assert Code.MISSING_LINK in codes(result.violations)  # dr-campus-b-0 lost a long-haul link


def test_dci_length_missing(dci_spec: FabricSpec) -> None:
    bp = generate_blueprint(dci_spec)
    i = next(k for k, ln in enumerate(bp.links) if ln.b.device == "remote-campus-b-dr-1")
    links = list(bp.links)
    links[i] = replace(links[i], length_m=None)
    [v] = validate(dci_spec, Cabling(bp.devices, links)).violations
    assert v.code is Code.DCI_LENGTH_MISSING
    assert "length_m: 120000" in v.fix


def test_dci_blueprint_has_long_haul_links_with_length(dci_spec: FabricSpec) -> None:
    bp = generate_blueprint(dci_spec)
    long_haul = [ln for ln in bp.links if ln.b.device.startswith("remote-")]
    assert len(long_haul) == 2 * 4
    assert {ln.length_m for ln in long_haul} == {120000.0}
    assert {ln.a.device for ln in long_haul} == {"dr-campus-b-0", "dr-campus-b-1"}


def test_parallel_links_meet_oversubscription() -> None:
    # 16 servers x 400G down on 2 spines of 400G: 8 parallel links per leaf-spine pair at 1:1, 4 at 2:1.
    base = {"name": "p", "rails": 2, "aggregation_groups": 2, "servers_per_group": 16, "spines_per_rail": 2}
    for ratio, parallel in ((1.0, 8), (2.0, 4)):
        spec = FabricSpec.model_validate({**base, "oversubscription": ratio})
        bp = generate_blueprint(spec)
        assert len(links_between(bp, "leaf-g0-r0", "spine-r0-1")) == parallel
        assert validate(spec, bp).ok
        # one parallel link fewer is reported as missing
        bad = drop(bp, links_between(bp, "leaf-g0-r0", "spine-r0-1")[0])
        assert Code.MISSING_LINK in codes(validate(spec, bad).violations)


def test_what_only_an_unread_switch_could_show_is_not_judged() -> None:
    """`validate --inventory` with a leaf that could not be read: its server cables (servers send no LLDP tables) are
    not judged; its links to spines that were read are, from the spines' end; elsewhere everything is judged."""
    spec = load_spec(EXAMPLES / "small-pod.yaml")
    bp = generate_blueprint(spec)
    unread = "leaf-g0-r0"
    # what LLDP shows with that leaf unread: the spines still see their links to it; nobody sees its server cables
    seen = replace(bp, links=[lk for lk in bp.links if not (unread in (lk.a.device, lk.b.device)
                                                             and "gpu" in f"{lk.a.device}{lk.b.device}")])  # fmt: skip
    blind = validate(spec, seen)
    assert codes(blind.violations) == ["MISSING_LINK"] * spec.servers_per_group  # what the old validate reported
    result = validate(spec, seen, unread=[unread])
    assert result.violations == [] and result.ok and result.summary["not_judged"] == spec.servers_per_group
    # a spine link of the unread leaf that is really missing is seen from the spine: judged
    uplink = bp.links[links_between(bp, unread, "spine-r0-0")[0]]
    result = validate(spec, replace(seen, links=[lk for lk in seen.links if lk != uplink]), unread=[unread])
    assert codes(result.violations) == ["MISSING_LINK"] and result.violations[0].devices == [unread, "spine-r0-0"]
    # a server cable swapped on a leaf that was read is judged as always
    other = swap_far_ends(seen, "gpu-g1-003:nic0", "gpu-g1-003:nic3")
    assert codes(validate(spec, other, unread=[unread]).violations) == ["RAIL_MISMATCH"]
    assert "not_judged" not in validate(spec, bp).summary  # --cabling: everything is read
