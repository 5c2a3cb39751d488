"""silent_corruption: probe results in, the culprit switch or link out (path tomography), through `fabricd detect`."""

from __future__ import annotations

import json
import random
from collections.abc import Iterator
from itertools import combinations, pairwise
from pathlib import Path
from typing import Any

import pytest

from fabricd.cli import main
from fabricd.detectors.probes import Probe, ProbeError, read_probes
from fabricd.detectors.silent_corruption import localize
from fabricd.telemetry import render
from lab.faults import FaultInjector
from lab.model import Twin
from lab.probes import ProbeGenerator
from tests.conftest import EXAMPLES
from topology.blueprint import generate_blueprint
from topology.fabric import Fabric
from topology.labels import complete_labels
from topology.model import Role
from topology.spec import load_spec

from .tracegen import NS, T0

# Four leaves and three spines per rail: a spine and each of its links carry different sets of probes.
TOMO_SPEC = """\
name: tomo-pod
rails: 2
aggregation_groups: 4
servers_per_group: 2
spines_per_rail: 3
superspines: 0
server_link_gbps: 400
fabric_link_gbps: 400
oversubscription: 1.0
cable_m: {server: 3, leaf_spine: 30, spine_superspine: 150}
platforms: {leaf: eos, spine: eos, superspine: eos, dr: eos}
"""


@pytest.fixture(scope="module")
def tomo_spec(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("tomo") / "tomo-pod.yaml"
    path.write_text(TOMO_SPEC)
    return path


@pytest.fixture(scope="module")
def tomo(tomo_spec: Path) -> Fabric:
    return Fabric(complete_labels(generate_blueprint(load_spec(tomo_spec))))


def nics(fabric: Fabric) -> dict[int, list[str]]:
    out: dict[int, list[str]] = {}
    for server in fabric.devices(Role.SERVER):
        for port in fabric.ports(server.name):
            out.setdefault(int(port[3:]), []).append(f"{server.name}:{port}")
    return out


def synthetic(fabric: Fabric, faults: dict[frozenset[str], float], seed: int = 1, sent: int = 1000) -> list[Probe]:
    """One probe per ECMP path of every NIC pair of every rail; `faults` maps an element (a switch: {name}; a link:
    {device, device}; a NIC access link: {nic, leaf}) to the share of packets it corrupts (binomial draws)."""
    rng = random.Random(seed)
    out: list[Probe] = []
    for rail_nics in nics(fabric).values():
        for src, dst in combinations(sorted(rail_nics), 2):
            for hops in fabric.ecmp_paths(src, dst):
                elements = [frozenset({h}) for h in hops] + [frozenset(pair) for pair in pairwise(hops)]
                elements += [frozenset({src, hops[0]}), frozenset({dst, hops[-1]})]
                clean = 1.0
                for e in elements:
                    clean *= 1.0 - faults.get(e, 0.0)
                bad = sum(1 for _ in range(sent) if rng.random() < 1.0 - clean) if clean < 1.0 else 0
                out.append(Probe(T0 + len(out) * NS // 10, src, dst, tuple(hops), sent, bad))
    return out


def write(path: Path, rows: list[dict[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def _row(p: Probe) -> dict[str, Any]:
    return {"ts": p.ts, "src": p.src, "dst": p.dst, "hops": list(p.hops), "sent": p.sent, "corrupted": p.corrupted}


# --- tomography ---------------------------------------------------------------------------------------------------
CASES = [
    # name, faults, expected (kind of element, device, port or None, other ports) per finding
    ("a faulty spine among clean ones", {frozenset({"spine-r0-1"}): 2e-3}, [("switch", "spine-r0-1", None, [])]),
    (
        "a faulty link",
        {frozenset({"leaf-g1-r0", "spine-r0-2"}): 5e-3},
        [("link", "leaf-g1-r0", "Ethernet5/1", ["leaf-g1-r0:Ethernet5/1", "spine-r0-2:Ethernet2/1"])],
    ),
    ("a faulty leaf", {frozenset({"leaf-g2-r1"}): 3e-3}, [("switch", "leaf-g2-r1", None, [])]),
    (
        "a NIC's access link",
        {frozenset({"gpu-g3-001:nic0", "leaf-g3-r0"}): 1e-2},
        [("link", "leaf-g3-r0", "Ethernet2/1", ["gpu-g3-001:nic0", "leaf-g3-r0:Ethernet2/1"])],
    ),
    (
        "two faults in two rails",
        {frozenset({"spine-r0-0"}): 2e-3, frozenset({"spine-r1-2"}): 1e-3},
        [("switch", "spine-r0-0", None, []), ("switch", "spine-r1-2", None, [])],
    ),
    ("no corruption", {}, []),
]


@pytest.mark.parametrize(("name", "faults", "expected"), CASES, ids=[c[0] for c in CASES])
def test_tomography(
    name: str, faults: dict[frozenset[str], float], expected: list[tuple[str, str, str | None, list[str]]], tomo: Fabric
) -> None:
    probes = synthetic(tomo, faults)
    found = localize(probes, tomo)
    got = [(f.evidence["element"], f.device, f.port, list(f.ports)) for f in found]
    assert sorted(got) == sorted(expected), [f.summary for f in found]
    for f in found:
        assert f.kind == "silent_corruption" and f.severity == "critical"
        assert f.confidence >= 0.9, f.evidence["alternatives"]
        if f.evidence["element"] == "switch":  # the evidence counts exactly the probes through the switch
            through = [p for p in probes if f.device in p.hops]
            assert f.evidence["probes"] == len(through)
            assert f.evidence["corrupted_probes"] == sum(p.corrupted > 0 for p in through)
            assert f.evidence["corrupted"] == sum(p.corrupted for p in through) > 0
        assert 0 < f.evidence["corrupted_probes"] <= f.evidence["probes"]
        assert f.evidence["counters"] == "not checked (no telemetry trace)"
        assert f.start_ts <= f.detected_ts


def test_a_spine_explains_away_its_leaves(tomo: Fabric) -> None:
    (f,) = localize(synthetic(tomo, {frozenset({"spine-r0-1"}): 2e-3}), tomo)
    assert f.evidence["explained_share"] == 1.0
    alternatives = f.evidence["alternatives"]
    # leaves also saw the corrupted probes, but their paths through the other spines are clean
    assert all(a["posterior"] < 0.05 for a in alternatives)
    leaves = [a for a in alternatives if a["kind"] == "switch"]
    assert leaves and all(a["corruption_rate"] < f.evidence["corruption_rate"] / 2 for a in leaves)


def test_a_single_flipped_packet_names_no_one(tomo: Fabric) -> None:
    probes = synthetic(tomo, {})
    probes[5] = Probe(probes[5].ts, probes[5].src, probes[5].dst, probes[5].hops, 1000, 1)
    assert localize(probes, tomo) == []


def test_counter_visible_link_is_not_silent(tomo: Fabric) -> None:
    """With counters, a link whose ports counted errors is link_corruption; it still explains its probes."""
    faults = {frozenset({"leaf-g1-r0", "spine-r0-2"}): 5e-3, frozenset({"spine-r1-0"}): 2e-3}
    probes = synthetic(tomo, faults)
    span = (T0, T0 + 100 * NS)
    found = localize(probes, tomo, counter_errors={("spine-r0-2", "Ethernet2/1"): span})
    assert [(f.device, f.evidence["counters"]) for f in found] == [("spine-r1-0", "clean")]


def test_two_leaf_rail_ties_spine_and_links(small_fabric: Fabric) -> None:
    """With two leaves per rail, a spine and its two links carry the very same probes: the spine is named (a chip
    fault is likelier than a link that counts nothing) but the confidence says it is a guess among three."""
    (f,) = localize(synthetic(small_fabric, {frozenset({"spine-r0-1"}): 2e-3}), small_fabric)
    assert f.device == "spine-r0-1"
    assert 0.4 < f.confidence < 0.6


# --- the probe file and the CLI -----------------------------------------------------------------------------------
GOOD = {
    "ts": T0,
    "src": "gpu-g0-000:nic0",
    "dst": "gpu-g1-000:nic0",
    "hops": ["leaf-g0-r0"],
    "sent": 10,
    "corrupted": 0,
}
BAD_LINES = [
    ("not JSON", "{oops", "not JSON"),
    ("missing hops", json.dumps({k: v for k, v in GOOD.items() if k != "hops"}), "'hops' missing"),
    ("hops not a list", json.dumps(GOOD | {"hops": "leaf-g0-r0"}), "'hops' must be a list"),
    ("corrupted > sent", json.dumps(GOOD | {"corrupted": 11}), "'corrupted' (11) exceeds 'sent' (10)"),
    ("negative sent", json.dumps(GOOD | {"sent": -1}), "'sent' must be a non-negative integer"),
    ("ts as text", json.dumps(GOOD | {"ts": "now"}), "'ts' must be a positive integer"),
    ("src not a NIC", json.dumps(GOOD | {"src": "gpu-g0-000"}), "'src' must name a NIC"),
    ("an array", "[1, 2]", "not a JSON object"),
]


def detect(capsys: pytest.CaptureFixture[str], spec: Path, *args: str) -> tuple[int, str, str]:
    code = main(["detect", "--spec", str(spec), *args])
    out, err = capsys.readouterr()
    return code, out, err


@pytest.mark.parametrize(("name", "line", "message"), BAD_LINES, ids=[c[0] for c in BAD_LINES])
def test_malformed_probe_line_exits_2_naming_file_and_line(
    name: str, line: str, message: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bad = tmp_path / "p.jsonl"
    bad.write_text(json.dumps(GOOD) + "\n\n" + line + "\n")
    with pytest.raises(ProbeError):
        read_probes(bad)
    rc, out, err = detect(capsys, EXAMPLES / "small-pod.yaml", "--probes", str(bad), "--format", "json")
    assert rc == 2 and out == ""
    assert f"{bad}:3: " in err and message in err
    assert len(err.strip().splitlines()) == 1


def test_cli_probes_alone(tomo_spec: Path, tomo: Fabric, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = write(tmp_path / "p.jsonl", [_row(p) for p in synthetic(tomo, {frozenset({"spine-r1-1"}): 2e-3})])
    rc, out, _ = detect(capsys, tomo_spec, "--probes", str(path), "--format", "json")
    assert rc == 1
    (f,) = json.loads(out)["findings"]
    assert (f["kind"], f["device"], f["port"]) == ("silent_corruption", "spine-r1-1", None)
    rc, out, _ = detect(capsys, tomo_spec, "--probes", str(path))
    assert rc == 1 and "silent_corruption" in out and "spine-r1-1" in out
    clean = write(tmp_path / "clean.jsonl", [_row(p) for p in synthetic(tomo, {})])
    rc, out, _ = detect(capsys, tomo_spec, "--probes", str(clean), "--format", "json")
    assert rc == 0 and json.loads(out) == {"findings": []}


def counter_trace(path: Path, corrupt: tuple[str, str], seconds: int = 6) -> Path:
    """Error counters of two ports, one of them counting FCS errors (a link fault counters see)."""
    lines = []
    ports = [corrupt, ("spine-r1-0", "Ethernet1/1")]
    for k in range(seconds):
        for dev, port in ports:
            errors = 50 * k if (dev, port) == corrupt else 0
            for leaf, value in (("if.in-pkts", 5_000_000 * k), ("if.in-fcs-errors", errors)):
                lines.append({"ts": T0 + k * NS, "device": dev, "path": render(port, leaf), "value": value})
    path.write_text("".join(json.dumps(r) + "\n" for r in lines))
    return path


def test_cli_trace_and_probes_leave_counter_visible_links_to_link_corruption(
    tomo_spec: Path, tomo: Fabric, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    faults = {frozenset({"leaf-g1-r0", "spine-r0-2"}): 5e-3, frozenset({"spine-r1-0"}): 2e-3}
    probes = write(tmp_path / "p.jsonl", [_row(p) for p in synthetic(tomo, faults)])
    trace = counter_trace(tmp_path / "t.jsonl", ("spine-r0-2", "Ethernet2/1"))
    rc, out, _ = detect(capsys, tomo_spec, "--trace", str(trace), "--probes", str(probes), "--format", "json")
    assert rc == 1
    kinds = sorted((f["kind"], f["device"], f["port"]) for f in json.loads(out)["findings"])
    assert kinds == [("link_corruption", "spine-r0-2", "Ethernet2/1"), ("silent_corruption", "spine-r1-0", None)]


# --- end to end: the twin corrupts inside a switch; its probe generator writes probes.jsonl ----------------------
def twin_probes(fabric: Fabric, device: str, rounds: int = 12) -> Iterator[dict[str, Any]]:
    twin = Twin(fabric, clock=lambda: T0)
    FaultInjector(twin).inject("silent_corruption", {"device": device, "rate": 2e-3}, T0)
    gen = ProbeGenerator(twin, seed=3)
    for k in range(rounds):
        yield from gen.round(T0 + k * NS)


def test_twin_silent_corruption_is_localized(
    tomo_spec: Path, tomo: Fabric, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = write(tmp_path / "probes.jsonl", list(twin_probes(tomo, "spine-r0-1")))
    rc, out, _ = detect(capsys, tomo_spec, "--probes", str(path), "--format", "json")
    assert rc == 1
    (f,) = json.loads(out)["findings"]
    assert (f["kind"], f["device"], f["port"], f["devices"]) == (
        "silent_corruption",
        "spine-r0-1",
        None,
        ["spine-r0-1"],
    )
    assert f["confidence"] >= 0.9 and f["evidence"]["explained_share"] == 1.0
