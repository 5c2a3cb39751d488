"""`fabricd detect`: exit codes, the JSON shape, and one-line errors naming file:line."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from fabricd.cli import main
from tests.conftest import DATA, EXAMPLES

SMALL = str(EXAMPLES / "small-pod.yaml")
TRACES = DATA / "traces"
FIELDS = {
    "kind",
    "device",
    "port",
    "priority",
    "devices",
    "ports",
    "start_ts",
    "detected_ts",
    "severity",
    "confidence",
    "evidence",
    "summary",
    "jobs",
}


def detect(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(["detect", "--spec", SMALL, *args])
    out, err = capsys.readouterr()
    return code, out, err


@pytest.mark.parametrize(
    ("trace", "code", "kinds"),
    [("quiet", 0, []), ("flap", 1, ["link_flap"]), ("storm", 1, ["pfc_storm"])],
)
def test_exit_codes_and_json(capsys: pytest.CaptureFixture[str], trace: str, code: int, kinds: list[str]) -> None:
    rc, out, _ = detect(capsys, "--trace", str(TRACES / f"{trace}.jsonl"), "--format", "json")
    assert rc == code
    doc = json.loads(out)
    assert list(doc) == ["findings"]
    assert [f["kind"] for f in doc["findings"]] == kinds
    for f in doc["findings"]:
        assert set(f) == FIELDS
        assert all(":" in p for p in f["ports"]) and 0 <= f["confidence"] <= 1


def test_storm_json_names_the_origin(capsys: pytest.CaptureFixture[str]) -> None:
    _, out, _ = detect(capsys, "--trace", str(TRACES / "storm.jsonl"), "--format", "json")
    (f,) = json.loads(out)["findings"]
    assert (f["device"], f["port"], f["priority"]) == ("leaf-g0-r0", "Ethernet1/1", 3)
    assert "spine-r0-0:Ethernet1/1" in f["ports"] and "spine-r0-1:Ethernet2/1" in f["ports"]


def test_pass_gap_zero_detects_on_tick_boundaries_only(capsys: pytest.CaptureFixture[str]) -> None:
    trace = str(TRACES / "storm.jsonl")
    _, out, _ = detect(capsys, "--trace", trace, "--format", "json")
    (soon,) = json.loads(out)["findings"]
    _, out, _ = detect(capsys, "--trace", trace, "--format", "json", "--pass-gap", "0")
    (ticked,) = json.loads(out)["findings"]
    assert ticked["detected_ts"] % 1_000_000_000 == 0  # a whole-second tick
    assert soon["detected_ts"] < ticked["detected_ts"] and soon["ports"] == ticked["ports"]
    rc, _, err = detect(capsys, "--trace", trace, "--pass-gap", "-1")
    assert rc == 2 and "--pass-gap must be 0 or a positive number of seconds, got -1" in err


def test_table_output(capsys: pytest.CaptureFixture[str]) -> None:
    rc, out, _ = detect(capsys, "--trace", str(TRACES / "flap.jsonl"))
    assert rc == 1 and "link_flap" in out and "1 finding(s)" in out
    rc, out, _ = detect(capsys, "--trace", str(TRACES / "quiet.jsonl"))
    assert rc == 0 and "no findings" in out


def test_malformed_trace_line_exits_2_naming_file_and_line(capsys: pytest.CaptureFixture[str]) -> None:
    bad = TRACES / "malformed.jsonl"
    rc, out, err = detect(capsys, "--trace", str(bad), "--format", "json")
    assert rc == 2 and out == ""
    assert f"{bad}:4: 'path' missing" in err
    assert len(err.strip().splitlines()) == 1


def test_not_json_line_exits_2(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    bad = tmp_path / "t.jsonl"
    bad.write_text((TRACES / "quiet.jsonl").read_text().splitlines()[0] + "\n{oops\n")
    rc, _, err = detect(capsys, "--trace", str(bad))
    assert rc == 2 and f"{bad}:2: not JSON" in err


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ([], "live detection runs in the service; pass --trace"),
        (["--trace", str(TRACES / "quiet.jsonl"), "--probes", "p.jsonl"], "cannot read the probe results"),
        (["--trace", "/nonexistent/t.jsonl"], "cannot read the trace"),
    ],
)
def test_trouble_exits_2(capsys: pytest.CaptureFixture[str], args: list[str], message: str) -> None:
    rc, _, err = detect(capsys, *args)
    assert rc == 2 and message in err


def test_recorded_dci_trace_names_the_skewed_and_dropping_ports(capsys: pytest.CaptureFixture[str]) -> None:
    # traces/dci.jsonl: the twin of examples/small-dci.yaml recorded 32 s (DR long-haul ports' egress leaves kept);
    # `fabricd lab inject dci_imbalance --dci campus-b --skew 0.2` and `dci_drops --port dr-campus-b-1:Ethernet6/1
    # --rate 1e-4` about 8 s in
    trace = TRACES / "dci.jsonl"
    code = main(["detect", "--spec", str(EXAMPLES / "small-dci.yaml"), "--trace", str(trace), "--format", "json"])
    doc = json.loads(capsys.readouterr()[0])
    assert code == 1
    by_kind = {f["kind"]: f for f in doc["findings"]}
    assert sorted(by_kind) == ["dci_drops", "dci_imbalance"] and len(doc["findings"]) == 2
    imb, drops = by_kind["dci_imbalance"], by_kind["dci_drops"]
    assert imb["evidence"]["cause"] == "hash_polarization" and 0.17 <= imb["evidence"]["skew"] <= 0.25
    assert set(imb["ports"]) == {f"dr-campus-b-{d}:Ethernet{p}/1" for d in (0, 1) for p in (5, 7)}
    assert drops["ports"] == ["dr-campus-b-1:Ethernet6/1"] and drops["evidence"]["cause"] == "port"
    first = min(json.loads(line)["ts"] for line in trace.read_text().splitlines())
    for f in (imb, drops):
        assert 8 <= (f["detected_ts"] - first) / 1e9 <= 25


def test_findings_name_the_jobs_they_hit(capsys: pytest.CaptureFixture[str]) -> None:
    # the flap is on leaf-g0-r0 <-> spine-r0-0: only job-b spans both groups and so uses the spines
    jobs = str(EXAMPLES / "small-pod-jobs.yaml")
    rc, out, _ = detect(capsys, "--trace", str(TRACES / "flap.jsonl"), "--jobs", jobs, "--format", "json")
    (f,) = json.loads(out)["findings"]
    assert rc == 1 and f["jobs"] == [{"id": "job-b", "name": "llama-70b-pretrain", "priority": "high", "gpus": 16}]
    rc, out, _ = detect(capsys, "--trace", str(TRACES / "flap.jsonl"), "--jobs", jobs)
    assert "llama-70b-pretrain (16 GPUs)" in out


def test_a_bad_jobs_file_is_one_line(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    bad = tmp_path / "jobs.yaml"
    bad.write_text("jobs:\n  - id: a\n")
    rc, _, err = detect(capsys, "--trace", str(TRACES / "flap.jsonl"), "--jobs", str(bad))
    assert rc == 2 and f"{bad}:2: field 'jobs[0].nodes': required field is missing" in err
