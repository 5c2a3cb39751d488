"""counter_wrap: the twin's 64-bit counters pass 2**64 on cue, and fabricd takes the wrap as an ordinary delta."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from fabricd.cli import main
from fabricd.telemetry import CounterStore, Ingestor, Stat, render, replay
from lab.counters import COL
from lab.faults import FaultInjector
from lab.model import Twin
from tests.conftest import EXAMPLES
from topology.fabric import Fabric
from topology.model import Cabling
from topology.units import NS

T0 = 1_700_000_000 * NS
U64 = 1 << 64
LEAF = "leaf-g0-r0"
# trace leaf -> twin column: moving counters (packets, queue) and still ones (errors, carrier)
COLUMNS = {
    ("if.in-pkts", None): "if.in-pkts",
    ("if.in-octets", None): "if.in-octets",
    ("if.in-fcs-errors", None): "if.in-fcs-errors",
    ("if.carrier-transitions", None): "if.carrier-transitions",
    ("queue.transmit-pkts", "3"): "q3.transmit-pkts",
}


def test_moving_counters_wrap_after_the_given_seconds(small_blueprint: Cabling) -> None:
    twin = Twin(Fabric(small_blueprint), clock=lambda: T0)
    sw = twin.switch(LEAF)
    errors_before = sw.value("Ethernet1/1", "if.in-fcs-errors", T0)
    rec = FaultInjector(twin).inject("counter_wrap", {"device": LEAF, "seconds": 5}, T0)
    assert (rec.kind, rec.devices, rec.params["seconds"]) == ("counter_wrap", [LEAF], 5.0)
    before = sw.value("Ethernet1/1", "if.in-octets", T0 + 4 * NS)
    after = sw.value("Ethernet1/1", "if.in-octets", T0 + 6 * NS)
    per_s = (after - before) % U64 / 2
    assert before > U64 - 2 * per_s  # about a second short of 2**64
    assert after < 2 * per_s  # past it
    assert per_s == pytest.approx(sw.rate[sw.index["Ethernet1/1"], COL["if.in-octets"]], rel=1e-6)  # same rate
    assert sw.value("Ethernet1/1", "if.in-fcs-errors", T0 + 6 * NS) == errors_before  # still counters stay


def test_a_wrap_is_a_delta_not_a_reset_and_no_finding(
    small_blueprint: Cabling, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    twin = Twin(Fabric(small_blueprint), clock=lambda: T0)
    FaultInjector(twin).inject("counter_wrap", {"device": LEAF, "seconds": 4.5}, T0)
    sw = twin.switch(LEAF)
    lines = []
    for k in range(1, 9):
        ts = T0 + k * NS
        twin.advance(ts)
        for port in sw.ports:
            for (leaf, index), col in COLUMNS.items():
                lines.append(
                    {"ts": ts, "device": LEAF, "path": render(port, leaf, index), "value": sw.value(port, col, ts)}
                )
    trace = tmp_path / "wrap.jsonl"
    trace.write_text("".join(json.dumps(r) + "\n" for r in lines))
    store = CounterStore()
    replay(trace, Ingestor(store))
    dev = store.device_id(LEAF)
    assert store.stats[dev, Stat.WRAPS] > 0
    assert store.stats[dev, Stat.RESETS] == 0
    rc = main(["detect", "--spec", str(EXAMPLES / "small-pod.yaml"), "--trace", str(trace), "--format", "json"])
    assert json.loads(capsys.readouterr().out)["findings"] == []
    assert rc == 0
