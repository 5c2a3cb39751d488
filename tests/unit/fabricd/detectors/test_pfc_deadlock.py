"""pfc_deadlock over synthetic traces (cycles, storms, microbursts) and over a deadlock the twin forms from failures."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest

from fabricd.cli import main
from fabricd.detectors import Detector, Finding, pfc_deadlock, run_trace
from fabricd.detectors.runner import SETTLE_S
from fabricd.telemetry import Snapshot, render
from lab.faults import FaultError, FaultInjector
from lab.model import PortConfig, Twin
from tests.conftest import EXAMPLES
from topology.fabric import Fabric

from .test_pfc_storm import STUCK, _silent_after, pauses, storm
from .tracegen import COLUMNS, NS, T0, TX_PER_S, Port, TraceGen, at

RAIL0 = {"leaf-g0-r0", "leaf-g1-r0", "spine-r0-0", "spine-r0-1"}
# leaf-g0-r0 -> spine-r0-0 -> leaf-g1-r0 -> spine-r0-1 -> leaf-g0-r0: each egress waits on the next switch.
CYCLE: list[Port] = [
    ("leaf-g0-r0", "Ethernet5/1"),
    ("spine-r0-0", "Ethernet3/1"),
    ("leaf-g1-r0", "Ethernet7/1"),
    ("spine-r0-1", "Ethernet2/1"),
]
CYCLE_PORTS = tuple(f"{d}:{p}" for d, p in CYCLE)
# The same cycle over both parallel cables of every hop.
BOTH_CABLES: list[Port] = [
    *CYCLE[:1],
    ("leaf-g0-r0", "Ethernet6/1"),
    *CYCLE[1:2],
    ("spine-r0-0", "Ethernet4/1"),
    *CYCLE[2:3],
    ("leaf-g1-r0", "Ethernet8/1"),
    *CYCLE[3:],
    ("spine-r0-1", "Ethernet1/1"),
]
# The other way round: leaf-g0-r0 -> spine-r0-1 -> leaf-g1-r0 -> spine-r0-0 -> leaf-g0-r0.
REVERSE: list[Port] = [
    ("leaf-g0-r0", "Ethernet7/1"),
    ("spine-r0-1", "Ethernet3/1"),
    ("leaf-g1-r0", "Ethernet5/1"),
    ("spine-r0-0", "Ethernet1/1"),
]
Build = Callable[[TraceGen], None]


def stuck(ports: list[Port], start: int = 2, end: int = 8) -> Build:
    return pauses({k: dict.fromkeys(ports, STUCK) for k in range(start, end)})


CASES: list[tuple[str, Build, list[tuple[str, ...]], int]] = [
    # name, trace, the deadlocks' ports (cycle order), storms
    ("deadlock cycle", stuck(CYCLE), [CYCLE_PORTS], 0),
    (
        "deadlock over both parallel cables",
        stuck(BOTH_CABLES),
        [
            (
                *("leaf-g0-r0:Ethernet5/1", "leaf-g0-r0:Ethernet6/1", "spine-r0-0:Ethernet3/1"),
                *("spine-r0-0:Ethernet4/1", "leaf-g1-r0:Ethernet7/1", "leaf-g1-r0:Ethernet8/1"),
                *("spine-r0-1:Ethernet1/1", "spine-r0-1:Ethernet2/1"),
            )
        ],
        0,
    ),
    (
        "two cycles, both ways round",
        stuck(CYCLE + REVERSE),
        sorted([CYCLE_PORTS, tuple(f"{d}:{p}" for d, p in REVERSE)]),
        0,
    ),
    ("storm from a NIC", storm(), [], 1),
    ("open chain: a storm from a switch, not a cycle", stuck(CYCLE[:3]), [], 1),
    ("stuck both ways on one link is no cycle", stuck([CYCLE[0], ("spine-r0-0", "Ethernet1/1")]), [], 2),
    ("microburst on the cycle", pauses({3: dict.fromkeys(CYCLE, (0.3, TX_PER_S))}), [], 0),
    ("cycle stuck one full interval", stuck(CYCLE, 3, 4), [CYCLE_PORTS], 0),  # past the 200 ms detection time
    ("cycle paused most of one interval, nothing sent", pauses({3: dict.fromkeys(CYCLE, (0.9, 0))}), [], 0),
    ("paused all the time but draining", pauses({k: dict.fromkeys(CYCLE, (1.0, 100)) for k in range(2, 8)}), [], 0),
]


@pytest.mark.parametrize(("name", "build", "cycles", "storms"), CASES, ids=[c[0] for c in CASES])
def test_pfc_deadlock_cases(
    name: str, build: Build, cycles: list[tuple[str, ...]], storms: int, small_fabric: Fabric, tmp_path: Path
) -> None:
    g = TraceGen(small_fabric, RAIL0)
    build(g)
    found = run_trace(g.write(tmp_path / "t.jsonl"), small_fabric)
    deadlocks = sorted((f for f in found if f.kind == "pfc_deadlock"), key=lambda f: f.ports)
    assert [f.ports for f in deadlocks] == cycles, [f.summary for f in found]
    assert sum(f.kind == "pfc_storm" for f in found) == storms, [f.summary for f in found]
    assert {f.kind for f in found} <= {"pfc_deadlock", "pfc_storm"}


def _deadlock(fabric: Fabric, tmp_path: Path) -> Finding:
    g = TraceGen(fabric, RAIL0)
    stuck(CYCLE)(g)
    (f,) = run_trace(g.write(tmp_path / "t.jsonl"), fabric)
    return f


def test_deadlock_finding_fields(small_fabric: Fabric, tmp_path: Path) -> None:
    f = _deadlock(small_fabric, tmp_path)
    assert (f.kind, f.device, f.port, f.priority, f.severity) == (
        "pfc_deadlock",
        "leaf-g0-r0",
        "Ethernet5/1",
        3,
        "critical",
    )
    assert f.devices == ("leaf-g0-r0", "leaf-g1-r0", "spine-r0-0", "spine-r0-1")
    assert f.evidence["cycle"] == ["leaf-g0-r0", "spine-r0-0", "leaf-g1-r0", "spine-r0-1"]
    assert f.evidence["hops"][0] == {"from": "leaf-g0-r0", "to": "spine-r0-0", "ports": ["Ethernet5/1"]}
    for q in CYCLE_PORTS:
        assert f.evidence["queues"][q]["pause_fraction"] >= 0.99 and f.evidence["queues"][q]["tx_pkts_delta"] == 0
    assert "leaf-g0-r0 -> spine-r0-0 -> leaf-g1-r0 -> spine-r0-1 -> leaf-g0-r0" in f.summary
    # onset: the interval ending at the first stuck sample (k=2); found within two sample intervals of it
    assert f.start_ts == at(1)
    assert f.detected_ts == at(2) + int(SETTLE_S * NS)  # the pass right after the first stuck samples (k=2)


def test_deadlock_clears_when_the_cycle_drains(small_fabric: Fabric, tmp_path: Path) -> None:
    g = TraceGen(small_fabric, RAIL0)
    stuck(CYCLE, 2, 5)(g)  # stuck k=2..4, then traffic flows again until k=7
    path = g.write(tmp_path / "t.jsonl")
    found = run_trace(path, small_fabric)
    assert [f.kind for f in found] == ["pfc_deadlock"]  # one incident, merged over the ticks it lasted


# --- the twin forms a deadlock from failed links -----------------------------------------------------------
SPLIT = "spine-r0-0--ssp-1,spine-r0-1--ssp-1,spine-r1-0--ssp-0,spine-r1-1--ssp-0"


def _twin(fabric: Fabric) -> Twin:
    twin = Twin(fabric, clock=lambda: T0)
    for name, sw in twin.switches.items():
        for port in sw.ports:
            twin.set_port_config(name, port, PortConfig(pfc_enabled=True, no_drop=frozenset({3})))
    return twin


def test_twin_refuses_a_failure_that_forms_no_cycle(small_fabric: Fabric) -> None:
    faults = FaultInjector(_twin(small_fabric))
    with pytest.raises(FaultError, match="no deadlock risk"):
        faults.inject("pfc_deadlock", {"failed": "leaf-g0-r0--spine-r0-0"}, T0)
    with pytest.raises(FaultError, match="no device 'leaf-g9-r0'"):
        faults.inject("pfc_deadlock", {"failed": "leaf-g9-r0--spine-r0-0"}, T0)
    assert faults.log == []


def test_twin_deadlock_from_failed_links_is_found(
    small_fabric: Fabric, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    twin = _twin(small_fabric)
    faults = FaultInjector(twin)
    lines: list[dict[str, object]] = []
    last: dict[Port, str] = {}
    for k in range(0, 6):
        ts = T0 + k * NS
        if k == 2:  # the failure at 1 s: the interval ending at 2 s is the first one stuck
            rec = faults.inject("pfc_deadlock", {"failed": SPLIT}, T0 + NS)
        twin.advance(ts)
        for name, sw in twin.switches.items():
            for row, port in enumerate(sw.ports):
                up = "UP" if sw.oper_up[row] else "DOWN"
                if last.get((name, port)) != up:  # ON_CHANGE
                    last[(name, port)] = up
                    lines.append({"ts": ts, "device": name, "path": render(port, "oper-status"), "value": up})
                for (leaf, index), col in COLUMNS.items():
                    value = sw.value(port, col, ts)
                    lines.append({"ts": ts, "device": name, "path": render(port, leaf, index), "value": value})
    trace = tmp_path / "twin.jsonl"
    trace.write_text("".join(json.dumps(r) + "\n" for r in lines))
    rc = main(["detect", "--spec", str(EXAMPLES / "small-pod.yaml"), "--trace", str(trace), "--format", "json"])
    findings = json.loads(capsys.readouterr().out)["findings"]
    assert rc == 1
    assert [(f["kind"], f["device"], f["port"], f["priority"]) for f in findings] == [
        ("pfc_deadlock", "spine-r2-0", "Ethernet5/1", 3)
    ]
    (f,) = findings
    assert rec.params["cycle"] == ["spine-r2-0", "ssp-0", "spine-r3-0", "ssp-1"]
    assert rec.ports == ["spine-r2-0:Ethernet5/1", "ssp-0:Ethernet13/1", "spine-r3-0:Ethernet7/1", "ssp-1:Ethernet9/1"]
    assert f["ports"] == rec.ports  # the cycle the failure formed, in the same order
    assert f["start_ts"] == T0 + NS
    assert f["detected_ts"] <= T0 + 4 * NS  # stuck from the sample at 2 s: two intervals later
    faults.clear(rec.id, now_ns=T0 + 7 * NS)
    assert not twin.link_down and not twin.pause_sources


def test_twin_counts_links_already_down(small_fabric: Fabric) -> None:
    twin = _twin(small_fabric)
    faults = FaultInjector(twin)
    for port in ("Ethernet7/1", "Ethernet8/1"):  # rail 0's spines lose ssp-1, cable by cable
        for spine in ("spine-r0-0", "spine-r0-1"):
            faults.inject("link_down", {"port": f"{spine}:{port}"}, T0)
    rec = faults.inject("pfc_deadlock", {"failed": ["spine-r1-0--ssp-0", "spine-r1-1--ssp-0"]}, T0)
    assert rec.params["failed"] == ["spine-r1-0--ssp-0", "spine-r1-1--ssp-0"]
    assert rec.params["bounces"] == ["ssp-0>spine-r3-0>ssp-1", "ssp-1>spine-r2-0>ssp-0"]
    assert len(twin.link_down) == 8
    faults.clear(rec.id, now_ns=T0 + NS)
    assert len(twin.link_down) == 4  # only what this fault took down comes back


def test_deadlock_that_starts_and_ends_between_samples_is_no_storm(small_fabric: Fabric, tmp_path: Path) -> None:
    """The cycle stands from 2.5 s to 6.5 s; its switches sample at different moments. At the start leaf-g0-r0's
    whole stuck interval (to 3.9 s) is in while spine-r0-0's (to 4.1 s) is not; at the end spine-r0-1's last held
    sample (6.3 s) waits on leaf-g0-r0, already clear at 6.9 s. Neither is a storm from the next switch."""
    phases = {"leaf-g0-r0": 0.9, "spine-r0-0": 0.1, "leaf-g1-r0": 0.5, "spine-r0-1": 0.3}
    g = TraceGen(small_fabric, RAIL0)
    g.run_phased(10, phases, [(CYCLE, 2.5, 6.5)])
    found = run_trace(g.write(tmp_path / "t.jsonl"), small_fabric)
    assert [(f.kind, f.ports) for f in found] == [("pfc_deadlock", CYCLE_PORTS)], [f.summary for f in found]
    # The last switch's first whole stuck interval ends at 4.3 s (spine-r0-1): the pass SETTLE_S after that sample.
    assert found[0].detected_ts == at(4.3) + int(SETTLE_S * NS)
    # Ticks only (no sample-driven passes): the tick boundary after it.
    (slow,) = run_trace(tmp_path / "t.jsonl", small_fabric, pass_gap_s=0)
    assert slow.detected_ts == at(5)


def test_a_cycle_through_a_stale_switch_is_not_reported_once_it_is_stale(small_fabric: Fabric, tmp_path: Path) -> None:
    """The cycle holds; then spine-r0-1 stops reporting after k=5. Its kept hold is old news: the cycle is reported
    while every switch of it reports, and no longer once spine-r0-1 is stale (3 intervals after its last sample)."""
    state = pfc_deadlock.PfcDeadlockState()
    reported: list[int] = []

    def recording(snapshot: Snapshot, fabric: Fabric, st: object, now: int) -> list[Finding]:
        out = pfc_deadlock.detect(snapshot, fabric, state, now)
        if out:
            reported.append(now)
        return out

    g = TraceGen(small_fabric, RAIL0)
    _silent_after(5, "spine-r0-1", {k: dict.fromkeys(CYCLE, STUCK) for k in range(2, 14)}, 14)(g)
    found = run_trace(g.write(tmp_path / "t.jsonl"), small_fabric, detectors=[Detector("d", recording, object)])
    assert [f.ports for f in found] == [CYCLE_PORTS]
    assert reported and max(reported) <= at(8)
