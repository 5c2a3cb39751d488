"""Detector shards: which part of the fabric one shard watches, and which findings are its to report.

Past one store (docs/telemetry-scale-out.md), `fabricd shard` processes each run the detectors over a range of
aggregation groups: shard k of n takes the k-th of n contiguous, as-even-as-possible ranges of the fabric's groups,
their leaves, and every switch above the leaves (spines, superspines, DR routers), since a group's traffic and pause
cross them. The service merges what the shards report and acts on it alone (the leader, with a hot standby).

Every finding is reported by exactly one shard, so merging is a union:
- a finding that involves a leaf belongs to the shard of that leaf's group (the finding's own device when it is a
  leaf, else the first leaf among the ports it names): a link flap between leaf-g0 and a spine is shard 0's, though
  the shard of group 1 sees the spine's end too;
- a finding of the layers above alone (a spine-superspine link, a DR port) belongs to shard 0.
A PFC storm is traced by the shard that sees its origin: a shard's trace that reaches a switch outside its view
stops there (no telemetry: never an origin), so the shard of the storming NIC names the origin and the others name
none. A deadlock cycle through the leaves of two shards is seen by neither (a limit: docs/telemetry-scale-out.md).
"""

from __future__ import annotations

from dataclasses import dataclass

from topology.fabric import Fabric
from topology.model import Role

from .finding import Finding


class ShardError(ValueError):
    """A shard setting the fabric cannot meet (e.g. more shards than aggregation groups)."""


@dataclass(frozen=True)
class ShardView:
    index: int
    count: int
    groups: tuple[int, ...]  # the aggregation groups this shard watches
    switches: frozenset[str]  # whose telemetry it reads: its groups' leaves and every switch above the leaves
    group_of: dict[str, int]  # leaf -> its aggregation group, for every leaf of the fabric
    shard_of_group: dict[int, int]

    def owner(self, f: Finding) -> int:
        """The shard that reports `f`."""
        leaves = [f.device] if f.device in self.group_of else []
        leaves += sorted({p.rsplit(":", 1)[0] for p in f.ports} & self.group_of.keys())
        leaves += sorted(set(f.devices) & self.group_of.keys())
        return self.shard_of_group[self.group_of[leaves[0]]] if leaves else 0

    def owns(self, f: Finding) -> bool:
        return self.owner(f) == self.index


def shard_view(fabric: Fabric, index: int, count: int) -> ShardView:
    """Shard `index` of `count` over `fabric`'s aggregation groups."""
    if count < 1 or not 0 <= index < count:
        raise ShardError(f"shard {index} of {count}: the index must be in 0..count-1")
    group_of = {d.name: d.group for d in fabric.devices() if d.role is Role.LEAF and d.group is not None}
    groups = sorted(set(group_of.values()))
    if count > len(groups):
        raise ShardError(f"{count} shards for {len(groups)} aggregation groups: use at most {len(groups)}")
    # contiguous ranges, the first len % count of them one group longer
    base, extra = divmod(len(groups), count)
    shard_of_group: dict[int, int] = {}
    start = 0
    for k in range(count):
        size = base + (1 if k < extra else 0)
        for g in groups[start : start + size]:
            shard_of_group[g] = k
        start += size
    mine = tuple(g for g in groups if shard_of_group[g] == index)
    above = {d.name for d in fabric.switches() if d.role is not Role.LEAF and not d.is_remote}
    switches = frozenset({leaf for leaf, g in group_of.items() if shard_of_group[g] == index} | above)
    return ShardView(index, count, mine, switches, group_of, shard_of_group)
