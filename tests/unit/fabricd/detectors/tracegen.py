"""Writes small docs/formats.md telemetry traces for a fabric: 1 s samples of the leaves the detectors read."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

from fabricd.telemetry import render
from topology.fabric import Fabric

NS = 1_000_000_000
T0 = 1_700_000_000 * NS
PRIO = 3
TX_PER_S = 50_000
FRAMES_PER_S = 23_000  # a fully paused 400G port
Port = tuple[str, str]

LEAVES = {
    "tx": ("queue.transmit-pkts", str(PRIO)),
    "pause": ("pfc.pfc-on-total-rx-time", str(PRIO)),
    "frames": ("pfc.in-frames", str(PRIO)),
    "carrier": ("if.carrier-transitions", None),
}
WATCHDOG = ("wd.stuck-count", str(PRIO))  # written only by a TraceGen(watchdog=True)
WD_TIMEOUT_S = 0.2  # the switch's watchdog detection time (fabricd's policy default)


def ts_of(line: dict[str, object]) -> int:
    """A written line's timestamp."""
    ts = line["ts"]
    assert isinstance(ts, int)
    return ts


def at(seconds: float) -> int:
    return T0 + int(seconds * NS)


class TraceGen:
    """Counters of every switch port; `sample(t, ...)` advances them one second and writes a sample."""

    def __init__(self, fabric: Fabric, devices: set[str] | None = None, watchdog: bool = False) -> None:
        self.ports: list[Port] = [
            (d.name, p) for d in fabric.switches() if devices is None or d.name in devices for p in fabric.ports(d.name)
        ]
        self.c = {p: dict.fromkeys(LEAVES, 0) for p in self.ports}
        self.watchdog = watchdog  # the switches stream their PFC watchdogs' stuck-count
        self.stuck_count = dict.fromkeys(self.ports, 0)
        self.extra_frames: dict[Port, int] = {}  # PFC frames a port receives each sample on top (XON, refreshes)
        self.up = dict.fromkeys(self.ports, True)
        self.lines: list[dict[str, object]] = []
        for dev, port in self.ports:
            self._line(T0 - NS // 2, dev, port, "oper-status", None, "UP")

    def _line(self, ts: int, dev: str, port: str, leaf: str, index: str | None, value: object) -> None:
        self.lines.append({"ts": ts, "device": dev, "path": render(port, leaf, index), "value": value})

    def oper(self, ts: int, port: Port, up: bool) -> None:
        """An oper-status change (ON_CHANGE event) on one end."""
        self.up[port] = up
        self.c[port]["carrier"] += 1
        self._line(ts, *port, "oper-status", None, "UP" if up else "DOWN")

    def flap(self, ts: int, ends: list[Port], down_s: float = 0.3) -> None:
        for p in ends:
            self.oper(ts, p, False)
        for p in ends:
            self.oper(ts + int(down_s * NS), p, True)

    def reset(self, device: str) -> None:
        for p in self.ports:
            if p[0] == device:
                self.c[p] = dict.fromkeys(LEAVES, 0)

    def sample(self, ts: int, paused: dict[Port, tuple[float, int]] | None = None) -> None:
        """One second passes: `paused` maps a port to (fraction of the second paused, egress packets sent)."""
        self.sample_device(ts, paused)

    def sample_device(
        self, ts: int, paused: dict[Port, tuple[float, int]] | None = None, device: str | None = None
    ) -> None:
        """`sample` of one device's ports only (switches that sample at different moments); None: every device."""
        for p in self.ports:
            if device is not None and p[0] != device:
                continue
            frac, tx = (paused or {}).get(p, (0.0, TX_PER_S if self.up[p] else 0))
            c = self.c[p]
            c["pause"] += int(frac * NS)
            c["frames"] += int(frac * FRAMES_PER_S) + self.extra_frames.get(p, 0)
            c["tx"] += tx
            for key, (leaf, index) in LEAVES.items():
                self._line(ts, *p, leaf, index, c[key])
            if self.watchdog:
                self._line(ts, *p, *WATCHDOG, self.stuck_count[p])

    def run(self, seconds: int, step: Callable[[int], dict[Port, tuple[float, int]] | None] | None = None) -> None:
        """Samples at T0 + 0..seconds-1 s; `step(k)` runs before sample k (events, resets) and returns its pauses."""
        for k in range(seconds):
            self.sample(at(k), step(k) if step else None)

    def run_phased(
        self, seconds: int, phases: dict[str, float], windows: list[tuple[list[Port], float, float]]
    ) -> None:
        """Each device samples at T0 + k + its phase (k = 1..seconds-1); a port of `windows` is paused with nothing
        sent from t0 to t1 (seconds), so a sample whose interval holds part of that is partly paused and sends the
        rest of the second's packets. `phases` must name every device sampled. With `watchdog`, each port's switch
        declares it stuck (stuck-count + 1) once a window has held it for WD_TIMEOUT_S."""
        declared: set[tuple[Port, float]] = set()
        for k in range(1, seconds):
            for dev, phase in sorted(phases.items(), key=lambda x: x[1]):
                t = k + phase
                paused: dict[Port, tuple[float, int]] = {}
                for ports, t0, t1 in windows:
                    overlap = max(0.0, min(t, t1) - max(t - 1, t0))
                    if overlap > 0:
                        sent = 0 if overlap >= 1 else int(TX_PER_S * (1 - overlap))
                        paused.update({p: (min(overlap, 1.0), sent) for p in ports if p[0] == dev})
                    for p in ports:
                        if p[0] == dev and min(t, t1) - t0 >= WD_TIMEOUT_S and (p, t0) not in declared:
                            declared.add((p, t0))
                            self.stuck_count[p] += 1
                self.sample_device(at(t), paused, device=dev)

    def write(self, path: Path) -> Path:
        self.lines.sort(key=ts_of)
        path.write_text("".join(json.dumps(r) + "\n" for r in self.lines))
        return path


# trace leaf (fabricd.telemetry.paths) -> twin counter column (lab.counters.COL)
COLUMNS = {
    ("pfc.in-frames", "3"): "pfc3.in-frames",
    ("pfc.pfc-on-total-rx-time", "3"): "pfc3.pfc-on-total-rx-time",
    ("queue.transmit-pkts", "3"): "q3.transmit-pkts",
    ("if.carrier-transitions", None): "if.carrier-transitions",
}
