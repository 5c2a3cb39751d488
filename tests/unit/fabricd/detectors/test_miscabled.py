"""miscabled over recorded LLDP traces of the small pod, table-driven: a swapped pair of server cables is one finding
with `fabricd validate`'s own message and fix (compared with validate on the same as-built), a swap inside one
leaf-spine bundle is a warning (the layout holds), an unknown system is named, a neighbour that was wrong for less
than the settle time is nothing, and the blueprint as LLDP shows it is nothing."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from fabricd.detectors import run_trace
from fabricd.detectors.finding import Finding
from fabricd.detectors.miscabled import MiscabledState, detect, same_end
from fabricd.detectors.runner import Detector
from fabricd.telemetry import CounterStore, Ingestor, render
from fabricd.telemetry.trace import replay
from tests.conftest import EXAMPLES
from topology.load import load_fabric
from topology.model import Cabling, Endpoint, Link
from topology.spec import load_spec
from topology.validate import validate

from .tracegen import at

SPEC = load_spec(EXAMPLES / "small-pod.yaml")
FABRIC = load_fabric(EXAMPLES / "small-pod.yaml", None)[1]
A, B = Endpoint("leaf-g0-r0", "Ethernet1/1"), Endpoint("leaf-g0-r1", "Ethernet1/1")  # gpu-g0-000's nic0 and nic1
U1, U2 = Endpoint("leaf-g0-r0", "Ethernet5/1"), Endpoint("leaf-g0-r0", "Ethernet6/1")  # both to spine-r0-0
DETECTOR = [Detector("miscabled", detect, lambda: MiscabledState(SPEC))]


def alias(ep: Endpoint) -> str:
    """A SONiC switch's vendor alias of a port (`Ethernet3/1` -> `etp3`), what its LLDP advertises."""
    return "etp" + ep.port.removeprefix("Ethernet").split("/")[0]


def trace(
    tmp: Path, heard: dict[Endpoint, Endpoint], from_s: float = 2.0, until_s: float = 99.0, sonic: bool = False
) -> Path:
    """Every switch port's LLDP neighbour each second for 8 s; `heard` overrides some between from_s and until_s.
    `sonic`: every switch streams its ports' aliases and advertises them as LLDP port ids (as SONiC's lldpmgrd)."""
    lines = []
    for k in range(8):
        for d in FABRIC.switches():
            for port in FABRIC.ports(d.name):
                here = Endpoint(d.name, port)
                peer = FABRIC.peer(d.name, port)
                assert peer is not None
                nbr = heard.get(here, peer) if from_s <= k < until_s else peer
                pid = alias(nbr) if sonic and FABRIC.device(nbr.device).is_switch else nbr.port
                for leaf, value in (("lldp.system-name", nbr.device), ("lldp.port-id", pid)):
                    lines.append({"ts": at(k), "device": d.name, "path": render(port, leaf, "1"), "value": value})
                if sonic:
                    lines.append({"ts": at(k), "device": d.name, "path": render(port, "port.alias", None),
                                  "value": alias(here)})  # fmt: skip
    path = tmp / "lldp.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in lines))
    return path


def peer(ep: Endpoint) -> Endpoint:
    got = FABRIC.peer(ep.device, ep.port)
    assert got is not None
    return got


def swapped(a: Endpoint, b: Endpoint) -> dict[Endpoint, Endpoint]:
    """Two cables' far ends swapped, as LLDP shows it on every switch end."""
    pa, pb = peer(a), peer(b)
    out = {a: pb, b: pa}
    if FABRIC.device(pa.device).is_switch:
        out |= {pa: b, pb: a}
    return out


def test_a_swapped_pair_is_one_finding_with_validates_words(tmp_path: Path) -> None:
    (f,) = run_trace(trace(tmp_path, swapped(A, B)), FABRIC, detectors=DETECTOR)
    # what `fabricd validate --cabling` says of the same as-built
    links = [lk for lk in FABRIC.links if A not in (lk.a, lk.b) and B not in (lk.a, lk.b)]
    links += [Link(A, peer(B), 400), Link(B, peer(A), 400)]
    (v,) = validate(SPEC, Cabling(list(FABRIC.cabling.devices), links)).violations
    assert f.kind == "miscabled" and f.summary == v.message and f.evidence["fix"] == v.fix
    assert f.evidence["code"] == "RAIL_MISMATCH" and v.fix == f"swap the cables on {A} and {B}"
    assert set(f.ports) >= {str(A), str(B)} and (f.device, f.port) == (A.device, A.port)
    assert f.evidence["lldp"] == {str(A): str(peer(B)), str(B): str(peer(A))}
    assert f.severity == "critical" and f.start_ts == at(2)


@pytest.mark.parametrize(
    ("heard", "until_s", "want"),
    [
        pytest.param({}, 99, [], id="blueprint"),
        pytest.param(swapped(A, B), 2.5, [], id="wrong-for-less-than-the-settle-time"),
        pytest.param(swapped(U1, U2), 99, [("BLUEPRINT_DIFF", "warning")], id="swap-inside-a-bundle"),
        pytest.param({A: Endpoint("rogue-host", "eth2")}, 99, [("UNKNOWN_NEIGHBOR", "critical")], id="unknown"),
    ],
)
def test_cases(heard: dict[Endpoint, Endpoint], until_s: float, want: list[tuple[str, str]], tmp_path: Path) -> None:
    found = run_trace(trace(tmp_path, heard, until_s=until_s), FABRIC, detectors=DETECTOR)
    assert sorted((f.evidence["code"], f.severity) for f in found) == sorted(want)


@pytest.mark.parametrize(
    ("heard", "want"),
    [
        pytest.param({}, [], id="blueprint"),
        pytest.param(swapped(U1, U2), [("BLUEPRINT_DIFF", "warning")], id="swap-inside-a-bundle"),
        pytest.param(swapped(A, B), [("RAIL_MISMATCH", "critical")], id="swapped-server-cables"),
    ],
)
def test_sonic_neighbours_are_read_back_through_their_aliases(
    heard: dict[Endpoint, Endpoint], want: list[tuple[str, str]], tmp_path: Path
) -> None:
    """Neighbours that advertise their ports by alias (`etp5`, as SONiC does) are the same neighbours: the blueprint
    is nothing, and a swap names the topology's ports."""
    found = run_trace(trace(tmp_path, heard, sonic=True), FABRIC, detectors=DETECTOR)
    assert sorted((f.evidence["code"], f.severity) for f in found) == sorted(want)
    if heard:
        (f,) = found
        assert f.evidence["lldp"] == {str(h): str(e) for h, e in heard.items() if str(h) in f.evidence["lldp"]}


def test_same_end_ignores_the_domain_and_a_hosts_mac_port_id() -> None:
    want = Endpoint("gpu-g0-000", "nic0")
    assert same_end(Endpoint("gpu-g0-000.example.net", "nic0"), want)
    assert same_end(Endpoint("gpu-g0-000", "0c:42:a1:00:00:01"), want)
    assert not same_end(Endpoint("gpu-g0-000", "nic1"), want)
    assert not same_end(Endpoint("gpu-g0-001", "nic0"), want)


def staged(tmp: Path, moves: list[tuple[float, dict[Endpoint, Endpoint]]]) -> Path:
    """As `trace`, each override from its own time on (seconds)."""
    lines = []
    for k in range(8):
        heard: dict[Endpoint, Endpoint] = {}
        for start, move in moves:
            if k >= start:
                heard |= move
        for d in FABRIC.switches():
            for port in FABRIC.ports(d.name):
                nbr = heard.get(Endpoint(d.name, port), peer(Endpoint(d.name, port)))
                for leaf, value in (("lldp.system-name", nbr.device), ("lldp.port-id", nbr.port)):
                    lines.append({"ts": at(k), "device": d.name, "path": render(port, leaf, "1"), "value": value})
    path = tmp / "lldp.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in lines))
    return path


C, D = Endpoint("leaf-g0-r2", "Ethernet1/1"), Endpoint("leaf-g0-r3", "Ethernet1/1")  # gpu-g0-000's nic2 and nic3


def test_a_swap_is_judged_without_waiting_for_an_unrelated_one_still_moving(tmp_path: Path) -> None:
    # Three swaps a second apart on cables that share no end: each is judged one settle time after its own move.
    E, F = Endpoint("leaf-g1-r0", "Ethernet1/1"), Endpoint("leaf-g1-r1", "Ethernet1/1")
    found = run_trace(staged(tmp_path, [(2, swapped(A, B)), (3, swapped(C, D)), (4, swapped(E, F))]), FABRIC,
                      detectors=DETECTOR)  # fmt: skip
    delays = {(f.device, f.port): (f.detected_ts - f.start_ts) / 1e9 for f in found}
    assert sorted(delays) == sorted((x.device, x.port) for x in (A, C, E))
    assert max(delays.values()) <= 1.5, delays  # each a settle time after its own move: no chain


def test_a_cable_sharing_an_end_with_one_still_moving_waits_for_it(tmp_path: Path) -> None:
    # A's cable lands on B's port first, then B's on A's a second later: one swap in two steps, judged once, whole.
    pa, pb = peer(A), peer(B)
    found = run_trace(staged(tmp_path, [(2, {A: pb}), (3, {B: pa})]), FABRIC, detectors=DETECTOR)
    (f,) = found
    assert f.evidence["code"] == "RAIL_MISMATCH" and f.evidence["fix"] == f"swap the cables on {A} and {B}"
    assert f.detected_ts > at(4)  # after B's half settled too, not on A's half alone at 3 s


def test_a_finding_carried_while_a_cable_moved_ends_when_every_cable_is_right_again(tmp_path: Path) -> None:
    """Found with issue 37's repair-on-the-wrong-cable run: B's port heard A's server (a finding); then A's port came
    up hearing B's server (a move sharing ends with B's: the finding is carried while it settles); then both cables
    were put right. The carried finding stayed forever (its judgement had the same empty key as "nothing wrong"),
    so the repair's resolve was refused as miscabled long after the cable was back."""
    state = MiscabledState(SPEC)
    ing = Ingestor(CounterStore())

    def second(k: int, heard: dict[Endpoint, Endpoint]) -> list[Finding]:
        lines = []
        for d in FABRIC.switches():
            for port in FABRIC.ports(d.name):
                nbr = heard.get(Endpoint(d.name, port), peer(Endpoint(d.name, port)))
                for leaf, value in (("lldp.system-name", nbr.device), ("lldp.port-id", nbr.port)):
                    lines.append({"ts": at(k), "device": d.name, "path": render(port, leaf, "1"), "value": value})
        path = tmp_path / f"k{k}.jsonl"
        path.write_text("".join(json.dumps(r) + "\n" for r in lines))
        replay(path, ing)
        return detect(ing.snapshot(), FABRIC, state, at(k) + 10**8)

    for k in range(2):
        assert second(k, {}) == []
    half = {B: peer(A)}
    for k in range(2, 5):
        found = second(k, half)
    assert "RAIL_MISMATCH" in {f.evidence["code"] for f in found}  # settled: judged
    assert [f.summary for f in second(5, half | {A: peer(B)})] == [f.summary for f in found]  # carried while moving
    assert second(6, {}) == []  # every cable right: nothing is wrong
    assert second(7, {}) == []
