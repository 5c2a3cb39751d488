from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from fabricd.detectors import Finding, run_trace
from topology.fabric import Fabric

from .tracegen import TX_PER_S, Port, TraceGen, at

NIC_PORT = ("leaf-g0-r0", "Ethernet1/1")  # faces gpu-g0-000:nic0
SPINE_PORTS = [
    ("spine-r0-0", "Ethernet1/1"),
    ("spine-r0-0", "Ethernet2/1"),
    ("spine-r0-1", "Ethernet1/1"),
    ("spine-r0-1", "Ethernet2/1"),
]
STUCK = (1.0, 0)
Pauses = dict[Port, tuple[float, int]]
Build = Callable[[TraceGen], None]


def storm(start: int = 2, seconds: int = 8) -> Build:
    """The NIC pauses its leaf port for good; one sample later the leaf pauses both spines (their ports to it)."""

    def build(g: TraceGen) -> None:
        def step(k: int) -> Pauses:
            out: Pauses = {}
            if k >= start:
                out[NIC_PORT] = STUCK
            if k >= start + 1:
                out.update(dict.fromkeys(SPINE_PORTS, STUCK))
            return out

        g.run(seconds, step)

    return build


def pauses(
    schedule: dict[int, Pauses], seconds: int = 8, before: Callable[[TraceGen, int], None] | None = None
) -> Build:
    def build(g: TraceGen) -> None:
        def step(k: int) -> Pauses:
            if before is not None:
                before(g, k)
            return schedule.get(k, {})

        g.run(seconds, step)

    return build


def reset_leaf_at(k0: int) -> Callable[[TraceGen, int], None]:
    def before(g: TraceGen, k: int) -> None:
        if k == k0:
            g.reset("leaf-g0-r0")

    return before


def down_at(k0: int, port: Port = NIC_PORT) -> Callable[[TraceGen, int], None]:
    def before(g: TraceGen, k: int) -> None:
        if k == k0:
            g.oper(at(k - 0.5), port, False)

    return before


def flap_at(k0: int, port: Port = NIC_PORT) -> Callable[[TraceGen, int], None]:
    def before(g: TraceGen, k: int) -> None:
        if k == k0:
            g.flap(at(k - 0.9), [port], down_s=0.2)

    return before


DRAINING = (1.0, TX_PER_S // 2)  # paused all second by the counter, yet the queue still sent packets
CASES: list[tuple[str, Build, int]] = [
    ("storm from a NIC, spread to the spines", storm(), 1),
    ("microburst: paused one sample while draining", pauses({3: {NIC_PORT: (0.3, TX_PER_S)}}), 0),
    ("full pause but traffic still drains", pauses({k: {NIC_PORT: DRAINING} for k in range(2, 8)}), 0),
    ("stuck for one sample only", pauses({3: {NIC_PORT: STUCK}}), 0),
    (
        "stuck, counters reset, stuck again",
        pauses({3: {NIC_PORT: STUCK}, 4: {NIC_PORT: STUCK}}, before=reset_leaf_at(4)),
        0,
    ),
    ("counter reset during normal traffic", pauses({}, before=reset_leaf_at(4)), 0),
    ("stuck queue on a down port", pauses({k: {NIC_PORT: STUCK} for k in range(3, 14)}, 14, before=down_at(2)), 0),
    ("pause right after a flap", pauses({k: {NIC_PORT: STUCK} for k in range(3, 6)}, before=flap_at(3)), 0),
    (
        "XOFF then XON on an idle queue: frames rise, pause time does not",
        pauses({k: {NIC_PORT: (0.0, 0)} for k in range(2, 8)}),
        0,
    ),
]


@pytest.mark.parametrize(("name", "build", "expected"), CASES, ids=[c[0] for c in CASES])
def test_pfc_storm_cases(name: str, build: Build, expected: int, small_fabric: Fabric, tmp_path: Path) -> None:
    g = TraceGen(small_fabric, {"leaf-g0-r0", "spine-r0-0", "spine-r0-1"})
    if name.startswith("XOFF"):
        orig = g.sample

        def sample(ts: int, paused: Pauses | None = None) -> None:
            g.c[NIC_PORT]["frames"] += 40  # XON/refresh frames without pause time
            orig(ts, paused)

        g.sample = sample  # type: ignore[method-assign]
    build(g)
    found = [f for f in run_trace(g.write(tmp_path / "t.jsonl"), small_fabric) if f.kind == "pfc_storm"]
    assert len(found) == expected, [f.summary for f in found]


def _storm_finding(fabric: Fabric, tmp_path: Path) -> Finding:
    g = TraceGen(fabric, {"leaf-g0-r0", "leaf-g1-r0", "spine-r0-0", "spine-r0-1"})
    storm()(g)
    (f,) = run_trace(g.write(tmp_path / "t.jsonl"), fabric)
    return f


def test_storm_origin_and_spread(small_fabric: Fabric, tmp_path: Path) -> None:
    f = _storm_finding(small_fabric, tmp_path)
    assert (f.kind, f.device, f.port, f.priority) == ("pfc_storm", "leaf-g0-r0", "Ethernet1/1", 3)
    assert set(f.ports) == {"leaf-g0-r0:Ethernet1/1", *(f"{d}:{p}" for d, p in SPINE_PORTS)}
    assert f.devices == ("leaf-g0-r0", "spine-r0-0", "spine-r0-1")
    assert f.evidence["peer"] == "gpu-g0-000:nic0" and f.evidence["peer_role"] == "server"
    assert f.evidence["pause_fraction"] >= 0.99 and f.evidence["tx_pkts_delta"] == 0
    assert f.start_ts == at(1)  # onset: the interval ending at the first stuck sample (k=2)
    assert f.detected_ts <= at(3) + 2 * 10**9  # held 2 samples (k=2,3), reported at that tick's end
    assert f.severity == "critical" and f.confidence == 0.9


def test_deadlock_cycle_is_not_a_storm(small_fabric: Fabric, tmp_path: Path) -> None:
    # leaf-g0-r0 -> spine-r0-0 -> leaf-g1-r0 -> spine-r0-1 -> leaf-g0-r0: each egress waits on the next switch.
    cycle = [
        ("leaf-g0-r0", "Ethernet5/1"),
        ("spine-r0-0", "Ethernet3/1"),
        ("leaf-g1-r0", "Ethernet7/1"),
        ("spine-r0-1", "Ethernet2/1"),
    ]
    for dev, port in cycle:
        peer = small_fabric.peer(dev, port)
        assert peer is not None and small_fabric.get(peer.device) is not None
    assert [small_fabric.peer(d, p).device for d, p in cycle] == [  # type: ignore[union-attr]
        "spine-r0-0",
        "leaf-g1-r0",
        "spine-r0-1",
        "leaf-g0-r0",
    ]
    g = TraceGen(small_fabric, {"leaf-g0-r0", "leaf-g1-r0", "spine-r0-0", "spine-r0-1"})
    pauses({k: dict.fromkeys(cycle, STUCK) for k in range(2, 8)})(g)
    found = run_trace(g.write(tmp_path / "t.jsonl"), small_fabric)
    assert [f.kind for f in found] == ["pfc_deadlock"]  # the cycle is pfc_deadlock's (test_pfc_deadlock.py)
