"""`fabricd dci whatif|nccl`: spec defaults, JSON fields, sweeps with a plot, and one-line errors with exit 2."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from fabricd.cli import main
from tests.conftest import DATA, EXAMPLES

DCI = str(EXAMPLES / "dci-120km.yaml")
SMALL = str(EXAMPLES / "small-pod.yaml")
JOB = ["--params", "7e9", "--gpus", "1024"]


def run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(["dci", *args])
    out, err = capsys.readouterr()
    return code, out, err


def test_whatif_takes_distance_and_bandwidth_from_the_spec(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "whatif", "--spec", DCI, *JOB, "--split", "pp", "--target-loss", "0.02", "-f", "json")
    assert code == 0
    d = json.loads(out)
    assert (d["distance_km"], d["dci_tbps"]) == (120, 3.2)  # 2 DRs x 4 x 400G
    assert 1.2 <= d["rtt_ms"] <= 1.3 and d["per_pair_gbps"] == pytest.approx(6.25)
    assert 0.02 < d["compute_loss"] < 0.04 and 3.2 < d["required_dci_tbps"] <= 5.0
    assert d["cross_dc_seconds_per_iteration"] > 0


def test_flags_override_the_spec(capsys: pytest.CaptureFixture[str]) -> None:
    args = ("whatif", "--spec", DCI, *JOB, "--split", "pp", "--distance-km", "500", "--dci-tbps", "6.4", "-f", "json")
    d = json.loads(run(capsys, *args)[1])
    assert (d["distance_km"], d["dci_tbps"]) == (500, 6.4)


def test_table_names_the_loss_and_the_bandwidth_needed(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "whatif", "--spec", DCI, *JOB, "--split", "dp", "--zero", "3", "--target-loss", "0.02")
    assert code == 0
    assert "ZeRO-3 parameter all-gather" in out and "compute loss" in out
    assert "no bandwidth is enough" in out


@pytest.mark.parametrize("suffix", [".svg", ".png"])
def test_sweep_rows_and_plot(capsys: pytest.CaptureFixture[str], tmp_path: Path, suffix: str) -> None:
    plot = tmp_path / f"loss{suffix}"
    args = ("whatif", "--spec", DCI, *JOB, "--split", "pp", "--sweep", "distance", "--plot", str(plot), "-f", "json")
    code, out, _ = run(capsys, *args)
    assert code == 0
    rows = json.loads(out)["rows"]
    assert [r["distance_km"] for r in rows] == sorted(r["distance_km"] for r in rows) and len(rows) >= 8
    assert all("pp_loss" in r and "dp_loss" in r for r in rows)
    pp = [r["pp_loss"] for r in rows]
    assert pp == sorted(pp)  # PP loss grows with distance
    head = plot.read_bytes()[:64]
    assert head.startswith(b"\x89PNG") if suffix == ".png" else b"<?xml" in head or b"<svg" in head


def test_bandwidth_sweep_falls(capsys: pytest.CaptureFixture[str]) -> None:
    args = ("whatif", "--spec", DCI, *JOB, "--split", "pp", "--sweep", "bandwidth", "-f", "json")
    rows = json.loads(run(capsys, *args)[1])
    losses = [r["pp_loss"] for r in rows["rows"]]
    assert losses == sorted(losses, reverse=True)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("--spec", DCI, *JOB, "--split", "pp", "--alpha-lb", "1.5"), "--alpha-lb must be a positive number and at"),
        (("--spec", DCI, *JOB, "--split", "pp", "--k", "0.5"), "--k must be a number >= 1"),
        (("--spec", DCI, "--params", "7e9", "--gpus", "1000", "--split", "pp"), "--gpus 1000: needs a multiple of 16"),
        (("--spec", DCI, *JOB, "--split", "pp", "--zero", "4"), "--zero must be 0, 1, 2 or 3"),
        (("--spec", SMALL, *JOB, "--split", "pp"), "the spec has no dci"),
        (("--spec", DCI, *JOB, "--split", "pp", "--dci", "mars"), "--dci mars: the spec has no such DCI"),
        (("--spec", DCI, *JOB, "--split", "pp", "--plot", "x.svg"), "--plot needs --sweep"),
        (("--spec", DCI, *JOB, "--split", "pp", "--sweep", "distance", "--plot", "x.pdf"), "name a .svg or .png"),
    ],
)
def test_bad_input_is_one_line_exit_2(capsys: pytest.CaptureFixture[str], args: tuple[str, ...], message: str) -> None:
    code, _, err = run(capsys, "whatif", *args)
    assert code == 2
    assert message in err and len(err.strip().splitlines()) == 1
    assert "Traceback" not in err


def test_nccl_plan_from_the_spec(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "nccl", "--spec", DCI, "-f", "json")
    assert code == 0
    d = json.loads(out)
    names = {s["name"]: s for s in d["settings"]}
    assert set(names) == {
        "NCCL_NCHANNELS_PER_NET_PEER",
        "NCCL_P2P_NET_CHUNKSIZE",
        "NCCL_BUFFSIZE",
        "NCCL_IB_QPS_PER_CONNECTION",
        "NCCL_IB_TIMEOUT",
    }
    assert "41.0 ms" in names["NCCL_IB_TIMEOUT"]["reason"]  # the DR's 8 GB over its 4 x 400G long-haul ports
    assert [x["bytes"] for x in d["latency_ms"]] == [2**20, 16 * 2**20, 256 * 2**20]
    assert all(x["after"] < x["before"] for x in d["latency_ms"][1:])


def test_nccl_env_lines(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "nccl", "--distance-km", "120", "--dci-tbps", "3.2", "--env")
    assert code == 0
    lines = out.strip().splitlines()
    assert len(lines) == 5 and all(line.startswith("export NCCL_") for line in lines)


TRACE = DATA / "traces" / "dci.jsonl"  # recorded on small-dci
SMALL_DCI = str(EXAMPLES / "small-dci.yaml")


def test_ports_from_a_recorded_trace(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    plot = tmp_path / "ports.png"
    code, out, err = run(capsys, "ports", "--spec", SMALL_DCI, "--trace", str(TRACE), "--plot", str(plot), "-f", "json")
    assert code == 1, err
    d = json.loads(out)
    (g,) = d["groups"]  # the trace holds the long-haul ports only
    assert g["group"] == "DCI campus-b long-haul ports" and 0.85 <= g["alpha_lb"] <= 0.92
    shares = {p["port"]: p["share"] for p in g["ports"]}
    assert all(v > 1.05 for k, v in shares.items() if k.endswith(("Ethernet5/1", "Ethernet7/1")))
    assert all(v < 0.95 for k, v in shares.items() if k.endswith(("Ethernet6/1", "Ethernet8/1")))
    dropping = [p["port"] for p in g["ports"] if p["drops"]]
    assert dropping == ["dr-campus-b-1:Ethernet6/1"]
    assert sorted(f["kind"] for f in d["findings"]) == ["dci_drops", "dci_imbalance"]
    assert plot.read_bytes().startswith(b"\x89PNG")


def test_ports_table_says_cause_and_fix(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "ports", "--spec", SMALL_DCI, "--trace", str(TRACE))
    assert code == 1
    assert "cause: hash_polarization; fix:" in out and "DLB" in out
    assert "dr-campus-b-1:Ethernet6/1" in out


def test_ports_needs_a_spec_with_a_trace_and_a_dci(capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run(capsys, "ports", "--trace", str(TRACE))
    assert code == 2 and "--trace needs --spec" in err
    code, _, err = run(capsys, "ports", "--spec", SMALL, "--trace", str(TRACE))
    # a DCI trace against a spec without the DCI: its DR switches are not devices of that fabric
    assert code == 2 and "'device': 'dr-campus-b-1' is not a device of this fabric" in err
