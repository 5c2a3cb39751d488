"""link_corruption: CorrOpt buckets, fault-end attribution from optics, and the noise that must stay quiet."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from fabricd.cli import main
from fabricd.detectors import Finding, default_detectors, run_trace
from fabricd.detectors.link_corruption import attribute, bucket
from fabricd.telemetry import render
from lab.faults import FaultInjector
from lab.model import Twin
from tests.conftest import EXAMPLES
from topology.fabric import Fabric

from .tracegen import NS, T0, TraceGen, at

LEAF_END = ("leaf-g0-r0", "Ethernet5/1")
SPINE_END = ("spine-r0-0", "Ethernet1/1")
LEAF, SPINE = "leaf-g0-r0:Ethernet5/1", "spine-r0-0:Ethernet1/1"
Port = tuple[str, str]
U64 = 1 << 64

# key -> (trace leaf, index); every error counter counts the same corrupted frames, symbols two per frame
LEAVES = {
    "pkts": ("if.in-pkts", None),
    "fcs": ("if.in-fcs-errors", None),
    "crc": ("eth.in-crc-errors", None),
    "errors": ("if.in-errors", None),
    "symbol": ("eth.in-symbol-error", None),
    "fec_unc": ("fec.uncorrected-codewords", "1"),
    "fec_corr": ("fec.corrected-codewords", "1"),
}
HEALTHY_CORRECTED = 400e9 * 2e-8  # corrected codewords/s of a healthy 400G link (pre-FEC BER 2e-8)


@dataclass
class Scenario:
    loss: dict[Port, float] = field(default_factory=dict)  # frames received at the port that are corrupted
    pps: float = 5_000_000
    rx_dbm: dict[Port, float] = field(default_factory=dict)  # default -2 dBm: a healthy receiver
    seconds: int = 16


class CorruptionGen(TraceGen):
    """TraceGen's ports and oper events, sampling the counters link_corruption reads instead of PFC ones."""

    def __init__(self, fabric: Fabric, sc: Scenario) -> None:
        super().__init__(fabric, {"leaf-g0-r0", "spine-r0-0"})
        self.sc = sc
        self.k: dict[Port, dict[str, float]] = {p: dict.fromkeys(LEAVES, 0.0) for p in self.ports}
        self.base: dict[Port, dict[str, int]] = {p: dict.fromkeys(LEAVES, 0) for p in self.ports}
        self.silent: set[str] = set()  # devices whose stream is cut
        self.extra: dict[Port, dict[str, float]] = {}  # one-off additions at the next sample
        self.fec_every = 1  # FEC counters are written every this many samples (telemetry.intervals.fec)
        self.samples = 0

    def reset(self, device: str) -> None:
        for p in self.ports:
            if p[0] == device:
                self.k[p] = dict.fromkeys(LEAVES, 0.0)
                self.base[p] = dict.fromkeys(LEAVES, 0)

    def sample(self, ts: int, paused: object = None) -> None:
        self.samples += 1
        for p in self.ports:
            c = self.k[p]
            pkts = self.sc.pps if self.up[p] else 0.0
            bad = pkts * self.sc.loss.get(p, 0.0)
            c["pkts"] += pkts
            for key in ("fcs", "crc", "errors", "fec_unc"):
                c[key] += bad
            c["symbol"] += 2 * bad
            c["fec_corr"] += HEALTHY_CORRECTED if self.up[p] else 0.0
            for key, v in self.extra.pop(p, {}).items():
                c[key] += v
            if p[0] in self.silent:
                continue
            for key, (leaf, index) in LEAVES.items():
                if key.startswith("fec") and self.samples % self.fec_every:
                    continue
                self._line(ts, *p, leaf, index, (self.base[p][key] + int(c[key])) % U64)
            rx = self.sc.rx_dbm.get(p, -2.0) if self.up[p] else -40.0
            self._line(ts, *p, "optics.input-power", "0", rx)


def build(sc: Scenario, step: Callable[[CorruptionGen, int], None] | None = None) -> Callable[[Fabric, Path], Path]:
    def make(fabric: Fabric, path: Path) -> Path:
        g = CorruptionGen(fabric, sc)
        g.run(sc.seconds, (lambda k: step(g, k)) if step else None)
        return g.write(path)

    return make


def corruption(fabric: Fabric, trace: Path) -> list[Finding]:
    only = [d for d in default_detectors() if d.name == "link_corruption"]
    return run_trace(trace, fabric, detectors=only)


# --- noise: each must give no finding ---------------------------------------------------------------------------
def reboot(g: CorruptionGen, k: int) -> None:
    """The leaf reboots at 10 s: its counters (1000 old FCS errors among them) restart at 0; no oper events."""
    if k == 0:
        g.base[LEAF_END]["fcs"] = g.base[LEAF_END]["errors"] = 1000
    if k == 10:
        g.reset("leaf-g0-r0")


def reboot_with_training(g: CorruptionGen, k: int) -> None:
    """A reboot that takes the link down; link training right after it is up again leaves errors."""
    if k == 10:
        g.oper(at(9.5), LEAF_END, False)
        g.reset("leaf-g0-r0")
    if k == 13:
        g.oper(at(12.5), LEAF_END, True)
        g.extra[LEAF_END] = {"fcs": 40, "crc": 40, "errors": 40, "symbol": 500}
    if k == 14:
        g.extra[LEAF_END] = {"fcs": 8, "crc": 8, "errors": 8, "symbol": 50}


def wrap(g: CorruptionGen, k: int) -> None:
    """64-bit counters (packets, FEC codewords) wrap a few seconds in."""
    if k == 0:
        for key in ("pkts", "fec_corr"):
            g.base[LEAF_END][key] = g.base[SPINE_END][key] = U64 - 3 * 5_000_000


def stale(g: CorruptionGen, k: int) -> None:
    """The leaf's stream stops for 10 s; the first sample after it carries a burst from the outage."""
    if k == 5:
        g.silent.add("leaf-g0-r0")
    if k == 15:
        g.silent.discard("leaf-g0-r0")
        g.extra[LEAF_END] = {"fcs": 50, "crc": 50, "errors": 50}


def down(g: CorruptionGen, k: int) -> None:
    """The link is down from 5 s to 15 s: no packets, while the dark receiver counts symbol and FCS errors."""
    if k == 5:
        for p in (LEAF_END, SPINE_END):
            g.oper(at(4.5), p, False)
    if 5 <= k < 15:
        g.extra[LEAF_END] = {"fcs": 10, "crc": 10, "errors": 10, "symbol": 1000}
    if k == 15:
        for p in (LEAF_END, SPINE_END):
            g.oper(at(14.5), p, True)


def blip(g: CorruptionGen, k: int) -> None:
    """One sample with 20 FCS errors, then nothing: a blip, not a corrupting link."""
    if k == 10:
        g.extra[LEAF_END] = {"fcs": 20, "crc": 20, "errors": 20}


NOISE = [
    ("clean", build(Scenario())),
    ("counter reset (reboot)", build(Scenario(), reboot)),
    ("reboot with link training errors", build(Scenario(seconds=20), reboot_with_training)),
    ("64-bit wrap", build(Scenario(), wrap)),
    ("stale telemetry", build(Scenario(seconds=20), stale)),
    ("port down", build(Scenario(), down)),
    ("one blip", build(Scenario(), blip)),
    ("5e-9: below CorrOpt's floor", build(Scenario(loss={LEAF_END: 5e-9}, pps=100_000_000, seconds=30))),
]


@pytest.mark.parametrize(("name", "make"), NOISE, ids=[c[0] for c in NOISE])
def test_noise_gives_no_finding(
    name: str, make: Callable[[Fabric, Path], Path], small_fabric: Fabric, tmp_path: Path
) -> None:
    found = corruption(small_fabric, make(small_fabric, tmp_path / "t.jsonl"))
    assert found == [], [f.summary for f in found]


# --- buckets ----------------------------------------------------------------------------------------------------
BUCKETS = [
    # name, scenario, CorrOpt bucket, severity
    ("3e-8 at 100M pps", Scenario(loss={LEAF_END: 3e-8}, pps=100_000_000, seconds=20), 1e-8, "warning"),
    ("1e-6", Scenario(loss={LEAF_END: 1e-6}), 1e-8, "warning"),
    ("1e-6 at 200k pps", Scenario(loss={LEAF_END: 1e-6}, pps=200_000, seconds=45), 1e-8, "warning"),
    ("3e-5", Scenario(loss={LEAF_END: 3e-5}), 1e-5, "critical"),
    ("3e-4", Scenario(loss={LEAF_END: 3e-4}), 1e-4, "critical"),
    ("3e-3", Scenario(loss={LEAF_END: 3e-3}), 1e-3, "critical"),
    ("2e-5 while packets wrap 64 bits", Scenario(loss={LEAF_END: 2e-5}), 1e-5, "critical"),
]


@pytest.mark.parametrize(("name", "sc", "expected", "severity"), BUCKETS, ids=[c[0] for c in BUCKETS])
def test_buckets(name: str, sc: Scenario, expected: float, severity: str, small_fabric: Fabric, tmp_path: Path) -> None:
    make = build(sc, wrap if "wrap" in name else None)
    (f,) = corruption(small_fabric, make(small_fabric, tmp_path / "t.jsonl"))
    loss = sc.loss[LEAF_END]
    assert (f.device, f.port) == LEAF_END
    assert f.ports == (LEAF, SPINE) and f.devices == ("leaf-g0-r0", "spine-r0-0")
    assert f.evidence["bucket"] == expected and f.severity == severity
    assert f.evidence["loss_rate"] == pytest.approx(loss, rel=0.35)  # integer counters round small rates
    assert f.evidence["receiving_ends"] == [LEAF]
    # 1e-6 must be found within 60 s of its start (here corruption starts with the trace)
    assert f.detected_ts - T0 <= 60 * NS
    assert T0 <= f.start_ts <= f.detected_ts


def test_bucket_bounds() -> None:
    assert [bucket(x) for x in (5e-9, 1e-8, 9e-6, 1e-5, 2e-4, 1e-3, 0.5)] == [None, 1e-8, 1e-8, 1e-5, 1e-4, 1e-3, 1e-3]


def test_both_directions_make_one_finding_with_both_ends(small_fabric: Fabric, tmp_path: Path) -> None:
    sc = Scenario(loss={LEAF_END: 2e-5, SPINE_END: 4e-5})
    (f,) = corruption(small_fabric, build(sc)(small_fabric, tmp_path / "t.jsonl"))
    assert (f.device, f.port) == SPINE_END  # the worse direction
    assert f.evidence["receiving_ends"] == [LEAF, SPINE]
    ev = f.evidence
    assert set(ev["counters"]) == {LEAF, SPINE} and set(ev["optics"]) == {LEAF, SPINE}
    leaf = ev["counters"][LEAF]
    assert leaf["frame_errors"] > 0 and leaf["in_pkts"] > 0
    assert {"in-fcs-errors", "in-crc-errors", "in-errors", "in-symbol-error", "uncorrected-codewords"} <= set(leaf)
    assert ev["pre_fec_ber"][LEAF]["from_corrected_codewords"]["last"] == pytest.approx(2e-8, rel=0.01)
    assert {"loss_rate", "bucket", "bucket_range", "repair", "suspect", "rule", "low_rx_dbm"} <= set(ev)


def test_fec_sampled_apart_is_counted_with_its_own_interval(small_fabric: Fabric, tmp_path: Path) -> None:
    """FEC every 5 s, the rest every second: with the FEC interval known its 5-s gaps are normal samples; without
    it they look like gaps that may hide a reboot and are left out."""
    g = CorruptionGen(small_fabric, Scenario(loss={LEAF_END: 2e-5}, seconds=20))
    g.fec_every = 5
    g.run(20, None)
    trace = g.write(tmp_path / "t.jsonl")

    def leaf_evidence(fec_interval_s: float | None = None) -> dict[str, Any]:
        only = [d for d in default_detectors(1.0, fec_interval_s=fec_interval_s) if d.name == "link_corruption"]
        (f,) = run_trace(trace, small_fabric, detectors=only)
        return dict(f.evidence["counters"][LEAF]) | {"ber": f.evidence.get("pre_fec_ber", {}).get(LEAF)}

    apart = leaf_evidence(fec_interval_s=5.0)
    assert apart["uncorrected-codewords"] > 0
    assert apart["ber"]["from_corrected_codewords"]["last"] == pytest.approx(2e-8, rel=0.01)
    unknown = leaf_evidence()
    assert "uncorrected-codewords" not in unknown and unknown["frame_errors"] == apart["frame_errors"]


def test_far_end_counters_join_the_evidence(small_fabric: Fabric, tmp_path: Path) -> None:
    (f,) = corruption(small_fabric, build(Scenario(loss={LEAF_END: 1e-5}))(small_fabric, tmp_path / "t.jsonl"))
    spine = f.evidence["counters"][SPINE]
    assert spine["frame_errors"] == 0 and spine["in_pkts"] > 0
    assert f.evidence["optics"] == {
        LEAF: {"rx_power_dbm": -2.0, "low": False},
        SPINE: {"rx_power_dbm": -2.0, "low": False},
    }


# --- which end, which repair --------------------------------------------------------------------------------------
ATTRIBUTION = [
    # name, rx power (leaf, spine), suspect, words of the repair
    ("power normal: the receiving optic", (-2.0, -2.5), f"{LEAF} optic", f"replace the optic at {LEAF}"),
    ("low at the receiver only: fibre or far transmitter", (-9.5, -2.5), f"fibre or {SPINE} transmitter",
     f"replace the optic at {SPINE} (its transmitter)"),
    ("low at both ends: the cable", (-9.5, -8.8), "cable", "replace the fibre/cable"),
]  # fmt: skip


@pytest.mark.parametrize(("name", "rx", "suspect", "repair"), ATTRIBUTION, ids=[c[0] for c in ATTRIBUTION])
def test_fault_end_from_optics(
    name: str, rx: tuple[float, float], suspect: str, repair: str, small_fabric: Fabric, tmp_path: Path
) -> None:
    sc = Scenario(loss={LEAF_END: 1e-4}, rx_dbm={LEAF_END: rx[0], SPINE_END: rx[1]})
    (f,) = corruption(small_fabric, build(sc)(small_fabric, tmp_path / "t.jsonl"))
    assert f.evidence["suspect"] == suspect
    assert repair in f.evidence["repair"] and repair in f.summary
    assert f.evidence["optics"][LEAF]["rx_power_dbm"] == rx[0]


def test_attribution_without_readings() -> None:
    assert attribute(LEAF, None, SPINE, -2.0, -7.0)["suspect"] == "unknown"
    # a server NIC streams nothing: a low receiver still points at the far transmitter or the fibre
    assert attribute(LEAF, -9.0, "gpu-g0-000:nic0", None, -7.0)["suspect"] == "fibre or gpu-g0-000:nic0 transmitter"


# --- end to end: the twin's corruption, sampled into a trace, through `fabricd detect` ----------------------------
TWIN_LEAVES = {
    ("if.in-pkts", None): "if.in-pkts",
    ("if.in-fcs-errors", None): "if.in-fcs-errors",
    ("eth.in-crc-errors", None): "eth.in-crc-errors",
    ("if.in-errors", None): "if.in-errors",
    ("eth.in-symbol-error", None): "eth.in-symbol-error",
    ("fec.corrected-codewords", "1"): "fec.corrected-codewords",
    ("fec.uncorrected-codewords", "1"): "fec.uncorrected-codewords",
}


def twin_trace(fabric: Fabric, path: Path, fault: tuple[str, dict[str, object]], seconds: int = 5) -> Path:
    twin = Twin(fabric, clock=lambda: T0)
    lines = []
    for k in range(seconds + 1):
        ts = T0 + k * NS
        if k == 2:
            FaultInjector(twin).inject(*fault, T0 + int(1.5 * NS))
        twin.advance(ts)
        for name, sw in twin.switches.items():
            if "r0" not in name:
                continue  # rail 0's switches (the faulty link's) are enough to show the others stay quiet
            for row, port in enumerate(sw.ports):
                if k == 0:
                    up = "UP" if sw.oper_up[row] else "DOWN"
                    lines.append({"ts": ts, "device": name, "path": render(port, "oper-status"), "value": up})
                for (leaf, index), col in TWIN_LEAVES.items():
                    value = sw.value(port, col, ts)
                    lines.append({"ts": ts, "device": name, "path": render(port, leaf, index), "value": value})
                for leaf, index, v in (
                    ("optics.input-power", "0", round(float(sw.rx_power[row]), 2)),
                    ("fec.pre-fec-ber", "1", float(sw.pre_fec_ber[row])),
                ):
                    lines.append({"ts": ts, "device": name, "path": render(port, leaf, index), "value": v})
    path.write_text("".join(json.dumps(r) + "\n" for r in lines))
    return path


TWIN_CASES = [
    ("link_corruption rx at the leaf", ("link_corruption", {"port": LEAF, "rate": 2e-5}), LEAF_END, 1e-5,
     f"{LEAF} optic"),
    ("optics: 11 dB lost toward the spine", ("optics", {"port": SPINE, "loss_db": 11}), SPINE_END, 1e-4,
     f"fibre or {LEAF} transmitter"),
]  # fmt: skip


@pytest.mark.parametrize(("name", "fault", "origin", "expected", "suspect"), TWIN_CASES, ids=[c[0] for c in TWIN_CASES])
def test_twin_corruption_is_found_with_its_repair(
    name: str,
    fault: tuple[str, dict[str, object]],
    origin: Port,
    expected: float,
    suspect: str,
    small_fabric: Fabric,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    trace = twin_trace(small_fabric, tmp_path / "twin.jsonl", fault)
    rc = main(["detect", "--spec", str(EXAMPLES / "small-pod.yaml"), "--trace", str(trace), "--format", "json"])
    findings = json.loads(capsys.readouterr().out)["findings"]
    assert rc == 1
    assert [(f["kind"], f["device"], f["port"]) for f in findings] == [("link_corruption", *origin)]
    (f,) = findings
    assert f["ports"] == [LEAF, SPINE]
    assert f["evidence"]["bucket"] == expected and f["evidence"]["suspect"] == suspect
    assert f["evidence"]["pre_fec_ber"][f"{origin[0]}:{origin[1]}"]["reported"] > 2e-8
    assert T0 + NS <= f["start_ts"] <= T0 + 3 * NS and f["detected_ts"] <= T0 + 5 * NS
