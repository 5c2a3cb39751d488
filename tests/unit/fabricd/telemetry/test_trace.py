from __future__ import annotations

import io
import json
from pathlib import Path

import pytest

from fabricd.telemetry import CounterStore, Ingestor, TraceError, TraceWriter, replay
from topology.errors import InputError

from . import IF, QOS, T0, S, notification

DEV = "leaf-g0-r3"
PORT = "Ethernet18/1"


def _stream(ing: Ingestor) -> None:
    for k in range(4):
        ts = T0 + k * S
        pfc = ("/ethernet/pfc/priorities/priority[index=3]/state/in-frames", 1000 * k)
        ing.ingest(
            notification(DEV, ts, IF.format(port=PORT), [pfc, ("/state/counters/in-fcs-errors", [7, 9, 2, 4][k])]), DEV
        )
        ing.ingest(
            notification(DEV, ts, QOS.format(port=PORT), [("/output/queues/queue[name=3]/state/transmit-pkts", 5 * k)]),
            DEV,
        )
        ing.ingest(
            notification(DEV, ts, IF.format(port=PORT), [("/state/oper-status", "UP" if k != 2 else "DOWN")]), DEV
        )
    ing.flush()


def test_record_then_replay_gives_the_same_store(tmp_path: Path) -> None:
    buf = io.StringIO()
    live = Ingestor(CounterStore(), recorder=TraceWriter(buf))
    _stream(live)
    trace = tmp_path / "trace.jsonl"
    trace.write_text(buf.getvalue())
    first = json.loads(buf.getvalue().splitlines()[0])
    assert first == {
        "ts": T0,
        "device": DEV,
        "path": "/interfaces/interface[name=Ethernet18/1]/ethernet/pfc/priorities/priority[index=3]/state/in-frames",
        "value": 0,
    }
    replayed = Ingestor(CounterStore())
    assert replay(trace, replayed) == 16
    a, b = live.snapshot(), replayed.snapshot()
    assert sorted(a.path(i) for i in range(len(a))) == sorted(b.path(i) for i in range(len(b)))
    for i in range(len(a)):
        j = b.find(*a.key(i))
        assert j is not None
        assert (a.current(i), a.ts[i], str(a.rate[i])) == (b.current(j), b.ts[j], str(b.rate[j]))
    assert [(e.value, e.ts) for e in a.events_since(0)] == [(e.value, e.ts) for e in b.events_since(0)]
    assert a.stats.tolist() != [] and a.stats[:, 2:].tolist() == b.stats[:, 2:].tolist()


def test_blank_lines_are_fine(tmp_path: Path) -> None:
    line = {"ts": T0, "device": DEV, "path": IF.format(port=PORT) + "/state/oper-status", "value": "UP"}
    trace = tmp_path / "t.jsonl"
    trace.write_text("\n" + json.dumps(line) + "\n\n   \n")
    ing = Ingestor(CounterStore())
    assert replay(trace, ing) == 1
    assert len(ing.snapshot().events_since(0)) == 1


GOOD = {"ts": T0, "device": DEV, "path": IF.format(port=PORT) + "/state/counters/in-pkts", "value": 1}
BAD_LINES = {
    "not json": ("{nope", "not JSON"),
    "value missing": (
        json.dumps({k: v for k, v in GOOD.items() if k != "value"}),
        "'value' missing; each line needs ts, device, path, value",
    ),
    "ts not integer": (json.dumps(GOOD | {"ts": "yesterday"}), "'ts' must be a positive integer"),
    "value is a list": (json.dumps(GOOD | {"value": [1]}), "'value' must be a number or a string"),
    "path not a path": (json.dumps(GOOD | {"path": "interfaces"}), "'path' must be a gNMI path"),
    "unbalanced key": (json.dumps(GOOD | {"path": "/interfaces/interface[name=x/state"}), "'path':"),
    "not an object": ("[1, 2]", "not a JSON object"),
}


@pytest.mark.parametrize(("bad", "message"), BAD_LINES.values(), ids=BAD_LINES.keys())
def test_malformed_line_names_file_and_line(tmp_path: Path, bad: str, message: str) -> None:
    trace = tmp_path / "trace.jsonl"
    trace.write_text(json.dumps(GOOD) + "\n\n" + bad + "\n")
    with pytest.raises(TraceError) as err:
        replay(trace, Ingestor(CounterStore()))
    assert isinstance(err.value, InputError)
    assert str(err.value).startswith(f"{trace}:3: ")
    assert message in str(err.value)


def test_missing_file_is_an_input_error(tmp_path: Path) -> None:
    with pytest.raises(TraceError, match="cannot read the trace"):
        replay(tmp_path / "nope.jsonl", Ingestor(CounterStore()))
