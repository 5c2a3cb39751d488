"""Host probes between server NICs of one rail, with their hop lists: how silent corruption becomes visible.

Each probe takes one of the ECMP paths (as a flow hash would pick it) and sends `sent` packets; the number
corrupted follows the corruption inside the switches it crosses (silent faults) and on the links between
them (which port counters also show). Output is the probe-result JSON Lines record of docs/formats.md.
"""

from __future__ import annotations

import random
from typing import Any

from topology.model import Role

from .model import Twin


class ProbeGenerator:
    def __init__(self, twin: Twin, seed: int = 7, per_rail: int = 8, sent: int = 1000):
        self.twin = twin
        self.rng = random.Random(seed)
        self.sent = sent
        self.per_rail = per_rail
        self._path_cache: dict[tuple[str, str], tuple[tuple[str, ...], ...]] = {}
        fabric = twin.fabric
        self.nics: dict[int, list[str]] = {}
        for server in fabric.devices(Role.SERVER):
            for port in fabric.ports(server.name):
                if port.startswith("nic") and port[3:].isdigit():
                    self.nics.setdefault(int(port[3:]), []).append(f"{server.name}:{port}")

    def _paths(self, src: str, dst: str) -> tuple[tuple[str, ...], ...]:
        key = (src, dst)
        if key not in self._path_cache:
            self._path_cache[key] = tuple(tuple(p) for p in self.twin.fabric.ecmp_paths(src, dst))
        return self._path_cache[key]

    def _loss(self, hops: tuple[str, ...]) -> float:
        clean = 1.0
        for hop in hops:
            clean *= 1.0 - self.twin.silent.get(hop, 0.0)
        for (device, port), rate in self.twin.corruption.items():
            peer = self.twin.peer(device, port)
            if device in hops and peer is not None and peer.device in hops:
                clean *= 1.0 - rate
        return 1.0 - clean

    def round(self, now_ns: int) -> list[dict[str, Any]]:
        """One round of probes: `per_rail` random NIC pairs in every rail."""
        out: list[dict[str, Any]] = []
        for _rail, nics in sorted(self.nics.items()):
            if len(nics) < 2:
                continue
            for _ in range(self.per_rail):
                src, dst = self.rng.sample(nics, 2)
                paths = self._paths(src, dst)
                if not paths:
                    continue
                hops = paths[self.rng.randrange(len(paths))]
                p = self._loss(hops)
                corrupted = _binomial(self.rng, self.sent, p)
                record = {"ts": now_ns, "src": src, "dst": dst, "hops": list(hops)}
                out.append(record | {"sent": self.sent, "corrupted": corrupted})
        return out


def _binomial(rng: random.Random, n: int, p: float) -> int:
    if p <= 0.0:
        return 0
    if p >= 1.0:
        return n
    # Exact for the small n of a probe; n is ~1000.
    return sum(1 for _ in range(n) if rng.random() < p)
