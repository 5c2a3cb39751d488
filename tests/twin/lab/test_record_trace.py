"""Recording the twin's gNMI stream into a trace, and reading it back through the trace reader."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from drivers.inventory import load_inventory
from fabricd.telemetry.ingest import Ingestor
from fabricd.telemetry.record import record_trace
from fabricd.telemetry.store import CounterStore
from fabricd.telemetry.trace import read_trace, replay
from tests.twin.lab.twin_thread import TwinThread
from topology.spec import FabricSpec


@pytest.fixture(scope="module")
def twin(small_spec: FabricSpec, tmp_path_factory: pytest.TempPathFactory) -> Iterator[TwinThread]:
    t = TwinThread(small_spec, tmp_path_factory.mktemp("twin-rec")).start()
    yield t
    t.stop()


def test_record_then_replay(twin: TwinThread, tmp_path: Path) -> None:
    inventory = load_inventory(twin.inventory)
    out = tmp_path / "trace.jsonl"
    lines, errors = record_trace([inventory.access("leaf-g0-r0")], seconds=2.5, interval_s=1.0, output=out)
    assert errors == []
    records = list(read_trace(out))
    assert len(records) == lines > 0
    paths = {r.path for r in records}
    assert "/interfaces/interface[name=Ethernet1/1]/state/oper-status" in paths
    assert "/interfaces/interface[name=Ethernet1/1]/ethernet/pfc/priorities/priority[index=3]/state/in-frames" in paths
    assert {r.device for r in records} == {"leaf-g0-r0"}
    pkts = [r.value for r in records if r.path.endswith("Ethernet1/1]/state/counters/in-pkts")]
    assert len(pkts) >= 2 and pkts == sorted(pkts)  # cumulative counters, sampled at least twice
    store = CounterStore()
    ingestor = Ingestor(store)
    assert replay(out, ingestor) == lines
    snap = ingestor.snapshot()
    row = snap.find("leaf-g0-r0", "Ethernet1/1", "if.in-pkts")
    assert row is not None and snap.rate[row] > 0


def test_an_unreachable_switch_is_named_and_the_trace_still_written(tmp_path: Path) -> None:
    from pydantic import SecretStr

    from drivers.inventory import DeviceAccess, EapiAccess, GnmiAccess, SshAccess
    from tests.conftest import free_port

    dead = DeviceAccess("leaf-x", "127.0.0.1", "eos", "admin", SecretStr("pw"), GnmiAccess(port=free_port(), tls=False),
                        EapiAccess(), SshAccess())  # fmt: skip
    out = tmp_path / "trace.jsonl"
    lines, errors = record_trace([dead], seconds=1.0, interval_s=1.0, output=out)
    assert (lines, errors) == (0, ["leaf-x: gNMI stream ended: UNAVAILABLE"])
    assert out.read_text() == ""
