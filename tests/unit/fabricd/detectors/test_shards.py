"""Detector shards: ranges of aggregation groups, what each shard reads, and which shard reports a finding."""

from __future__ import annotations

import pytest

from fabricd.detectors.finding import Finding
from fabricd.detectors.shards import ShardError, shard_view
from tests.conftest import EXAMPLES
from topology.load import load_fabric

FABRIC = load_fabric(EXAMPLES / "small-pod.yaml", None)[1]  # 2 groups x 4 rails, 8 spines


def _finding(device: str, ports: tuple[str, ...] = (), devices: tuple[str, ...] = ()) -> Finding:
    return Finding("link_flap", device, None, devices or (device,), ports, 1, 2, "warning", 0.9, "x")


def test_ranges_cover_every_group_once_and_each_shard_reads_the_layers_above() -> None:
    one, two = shard_view(FABRIC, 0, 2), shard_view(FABRIC, 1, 2)
    assert (one.groups, two.groups) == ((0,), (1,))
    spines = {d.name for d in FABRIC.switches() if d.name.startswith("spine")}
    assert spines <= one.switches and spines <= two.switches
    assert {s for s in one.switches if s.startswith("leaf")} == {f"leaf-g0-r{r}" for r in range(4)}
    assert not {s for s in two.switches if s.startswith("leaf-g0")}
    whole = shard_view(FABRIC, 0, 1)
    assert whole.groups == (0, 1) and whole.switches == {d.name for d in FABRIC.switches()}


@pytest.mark.parametrize(
    ("finding", "owner"),
    [
        (_finding("leaf-g1-r2", ("leaf-g1-r2:Ethernet1/1", "gpu-g1-000:nic2")), 1),  # a server link in group 1
        # a leaf-spine link, raised from the spine's end: the leaf's shard reports it
        (_finding("spine-r0-0", ("spine-r0-0:Ethernet1/1", "leaf-g0-r0:Ethernet5/1")), 0),
        (_finding("spine-r1-1", ("spine-r1-1:Ethernet2/1", "leaf-g1-r1:Ethernet6/1")), 1),
        (_finding("spine-r0-0", ("spine-r0-0:Ethernet9/1",)), 0),  # above the leaves alone: shard 0
        # a storm traced from group 1's NIC that reached a spine: its origin leaf decides
        (_finding("leaf-g1-r0", ("leaf-g1-r0:Ethernet1/1", "spine-r0-0:Ethernet2/1")), 1),
        (_finding("spine-r0-1", (), ("leaf-g1-r0", "spine-r0-1")), 1),  # named only in devices
    ],
)
def test_every_finding_has_one_owner(finding: Finding, owner: int) -> None:
    views = [shard_view(FABRIC, k, 2) for k in range(2)]
    assert [v.owns(finding) for v in views] == [k == owner for k in range(2)]


@pytest.mark.parametrize(("index", "count", "message"), [(2, 2, "0..count-1"), (0, 3, "at most 2"), (0, 0, "0..")])
def test_impossible_shards_are_refused(index: int, count: int, message: str) -> None:
    with pytest.raises(ShardError, match=message):
        shard_view(FABRIC, index, count)


def test_uneven_ranges_are_contiguous() -> None:
    fabric = load_fabric(EXAMPLES / "pod-16k.yaml", None)[1]
    views = [shard_view(fabric, k, 3) for k in range(3)]
    groups = [v.groups for v in views]
    assert sum(len(g) for g in groups) == len({g for v in views for g in v.groups})
    assert all(list(g) == list(range(g[0], g[-1] + 1)) for g in groups)
    assert max(map(len, groups)) - min(map(len, groups)) <= 1
