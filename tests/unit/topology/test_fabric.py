"""Fabric accessors and ECMP path enumeration."""

from __future__ import annotations

import pytest

from topology.errors import FabricdError
from topology.fabric import Fabric
from topology.model import Cabling, Endpoint, Role


def test_accessors(small_blueprint: Cabling) -> None:
    f = Fabric(small_blueprint)
    assert [d.name for d in f.devices(Role.LEAF, rail=2)] == ["leaf-g0-r2", "leaf-g1-r2"]
    assert len(f.devices(Role.SERVER, group=1)) == 4
    assert f.peer("gpu-g0-001", "nic3") == Endpoint("leaf-g0-r3", "Ethernet2/1")
    link = f.link_of("leaf-g0-r3", "Ethernet2/1")
    assert link is not None and link.other("leaf-g0-r3", "Ethernet2/1") == Endpoint("gpu-g0-001", "nic3")
    assert set(f.neighbors("spine-r1-0")) == {"leaf-g0-r1", "leaf-g1-r1", "ssp-0", "ssp-1"}
    assert f.graph.number_of_edges() == len(small_blueprint.links)
    assert f.graph.number_of_edges("leaf-g0-r0", "spine-r0-0") == 2  # parallel links stay parallel
    with pytest.raises(FabricdError, match="unknown device 'nope'"):
        f.device("nope")


def test_same_rail_paths_go_through_the_rail_spines(small_blueprint: Cabling) -> None:
    f = Fabric(small_blueprint)
    paths = f.ecmp_paths("gpu-g0-001:nic3", "gpu-g1-002:nic3")
    assert sorted(paths) == [
        ["leaf-g0-r3", "spine-r3-0", "leaf-g1-r3"],
        ["leaf-g0-r3", "spine-r3-1", "leaf-g1-r3"],
    ]
    assert f.ecmp_paths("gpu-g0-001:nic3", "gpu-g0-002:nic3") == [["leaf-g0-r3"]]


def test_cross_rail_paths_climb_to_the_superspines(small_blueprint: Cabling) -> None:
    f = Fabric(small_blueprint)
    paths = f.ecmp_paths("gpu-g0-000:nic0", "gpu-g1-000:nic1")
    assert len(paths) == 2 * 2 * 2  # spines of rail 0 x superspines x spines of rail 1
    for p in paths:
        assert p[0] == "leaf-g0-r0" and p[-1] == "leaf-g1-r1"
        assert p[2].startswith("ssp-")
    with pytest.raises(FabricdError, match="server:nicK"):
        f.ecmp_paths("gpu-g0-000", "gpu-g1-000:nic1")
