"""The twin on a simulated clock: days of a fabric in seconds of CPU, sampled into a docs/formats.md telemetry trace
(what `fabricd detect --trace` replays). The twin's model is the same one its gNMI servers stream; only the clock
is stepped here instead of read from the wall, so a slow fault (an optic losing 0.25 dB an hour) and a long healthy
run (a day of temperature wander) can be checked in a test.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Iterator, Sequence
from pathlib import Path

from topology.units import NS

from .counters import COL
from .gnmi_paths import CATALOG, full_path_text, state_value
from .model import Twin

Event = tuple[float, Callable[[int], object]]  # (seconds after start, called with the twin time then)
STATES = ("oper-status", "rx-power", "pre-fec-ber", "temperature")
COUNTERS = ("if.in-pkts", "if.in-fcs-errors", "fec.corrected-codewords", "fec.uncorrected-codewords")


def _codes() -> dict[str, int]:
    out = {}
    for leaf in CATALOG:
        if leaf.kind in STATES:
            out[leaf.kind] = leaf.code
        elif leaf.column >= 0:
            for name in COUNTERS:
                if COL[name] == leaf.column:
                    out[name] = leaf.code
    return out


CODES = _codes()


def simulate(
    twin: Twin,
    start_ns: int,
    seconds: float,
    step_s: float,
    *,
    devices: Sequence[str] | None = None,
    events: Iterable[Event] = (),
    counters: Sequence[str] = COUNTERS,
    gauges: Sequence[str] = ("rx-power", "pre-fec-ber", "temperature"),
) -> Iterator[dict[str, object]]:
    """Trace records (ts, device, path, value) of `devices` (default: every switch) every `step_s` of twin time;
    `events` run at their times (fault injections and clears). oper-status is sent at the start and on change."""
    names = list(devices) if devices is not None else sorted(twin.switches)
    pending = sorted(events, key=lambda e: e[0])
    last_oper: dict[tuple[str, int], str] = {}
    steps = int(seconds / step_s)
    for k in range(steps + 1):
        now = start_ns + int(k * step_s * NS)
        while pending and start_ns + int(pending[0][0] * NS) <= now:
            at, fn = pending.pop(0)
            fn(start_ns + int(at * NS))
        twin.advance(now)
        for name in names:
            sw = twin.switch(name)
            values = sw.values(now)
            for row, port in enumerate(sw.ports):
                oper = str(state_value(twin, sw, row, "oper-status"))
                if last_oper.get((name, row)) != oper:
                    last_oper[(name, row)] = oper
                    yield _rec(now, name, port, "oper-status", oper)
                if oper != "UP":
                    continue
                for kind in gauges:
                    value = state_value(twin, sw, row, kind)
                    if value is not None:
                        yield _rec(now, name, port, kind, value)
                for counter in counters:
                    yield _rec(now, name, port, counter, int(values[row, COL[counter]]))


def _rec(ts: int, device: str, port: str, what: str, value: object) -> dict[str, object]:
    leaf = CATALOG[CODES[what]]
    return {"ts": ts, "device": device, "path": full_path_text(leaf.tree, port, leaf.code), "value": value}


def write_trace(records: Iterable[dict[str, object]], path: Path) -> int:
    n = 0
    with path.open("w", encoding="utf-8") as f:
        for r in records:
            f.write(json.dumps(r, separators=(",", ":")) + "\n")
            n += 1
    return n
