"""Workloads: traffic patterns laid over the twin's steady traffic, started and cleared like faults.

Each workload is an overlay of the traffic model (lab/traffic.py `overlay`): which NICs send, at what rate, to which
switches' servers, and which NICs take it. The congestion model (lab/congestion/) then finds the queues that
cannot carry what is offered and throttles, marks and pauses them as DCQCN and PFC would.

Kinds (docs/lab.md "Workloads"):
- incast: `fan_in` NICs (other switches' first, then the target's own) send at line rate to the NIC on `port`;
- alltoall: every NIC of rail `rail` sends to every other NIC of the rail, evenly;
- allreduce: a ring over the servers of the aggregation groups `group` (comma-separated), per rail: each NIC sends
  to the next server's NIC of the same rail (NCCL's rail-local ring; over two groups the ring crosses the spines);
- dci-bulk: `senders` NICs send at line rate to the far campus of `dci`.
Collective phases: `on_ms` of sending then `off_ms` of silence, repeated (off_ms 0: always on); phases of 100 ms or
longer switch the twin's rates at each edge, shorter ones are averaged (the twin's counters are read at >= 0.1 s).
`message_kb` is each message's size: it sets how often a flow can start a new flowlet (DLB counters).
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from topology.model import Device

from . import traffic
from .faults import number
from .model import Recompute, Twin

KINDS = ("incast", "alltoall", "allreduce", "dci-bulk")
# Phases shorter than this are averaged into a duty cycle instead of switched (ASSUMPTION: the twin's rates are read
# at 0.1 s or more; switching faster costs a recompute per edge for nothing a reader could see).
MIN_SWITCHED_PHASE_MS = 100.0


class WorkloadError(ValueError):
    """A workload request the twin cannot carry out (unknown kind, port, rail, group, bad value)."""


@dataclass
class WorkloadRecord:
    id: str
    kind: str
    params: dict[str, Any]
    start_ns: int
    senders: list[str]  # server:nic
    receivers: list[str]
    cleared_ns: int | None = None
    overlay: traffic.Structure | None = field(default=None, repr=False)
    duty: float = 1.0
    switched: bool = False  # on/off phases switch the rates (else averaged into `duty`)
    on: bool = True

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "kind": self.kind,
            "params": self.params,
            "start_ts": self.start_ns,
            "cleared_ts": self.cleared_ns,
            "senders": self.senders,
            "receivers": self.receivers,
            "on": self.on,
        }


@dataclass(frozen=True)
class _Nic:
    node: int  # switch index in the traffic model
    row: int  # the switch port it is cabled to
    name: str  # server:nic
    speed_bps: float  # bytes/s


class WorkloadRunner:
    def __init__(self, twin: Twin):
        self.twin = twin
        self.log: list[WorkloadRecord] = []
        self._ids = itertools.count(1)

    def active(self) -> list[WorkloadRecord]:
        return [r for r in self.log if r.cleared_ns is None]

    # --- public --------------------------------------------------------------------------------
    def start(self, kind: str, params: dict[str, Any], now_ns: int | None = None) -> WorkloadRecord:
        builders: dict[str, Callable[[dict[str, Any]], tuple[list[tuple[_Nic, _Nic, float]], dict[str, Any]]]] = {
            "incast": self._incast,
            "alltoall": self._alltoall,
            "allreduce": self._allreduce,
            "dci-bulk": self._dci_bulk,
        }
        if kind not in builders:
            raise WorkloadError(f"unknown workload '{kind}': use one of {', '.join(KINDS)}")
        now = self.twin.advance(now_ns)
        params = dict(params)
        on_ms = _number(params, "on_ms", 100.0, 0.001, 3_600_000)
        off_ms = _number(params, "off_ms", 0.0, 0.0, 3_600_000)
        message_kb = _number(params, "message_kb", 1024.0, 1.0, 1_048_576)
        pairs, extra = builders[kind](params)
        params.update(extra, on_ms=on_ms, off_ms=off_ms, message_kb=message_kb)
        rec = WorkloadRecord(
            f"w{next(self._ids)}",
            kind,
            params,
            now,
            sorted({s.name for s, _, _ in pairs}),
            sorted({r.name for _, r, _ in pairs if r.node >= 0}),
        )
        rec.overlay = self._overlay(pairs)
        rec.switched = off_ms > 0 and min(on_ms, off_ms) >= MIN_SWITCHED_PHASE_MS
        rec.duty = 1.0 if off_ms == 0 or rec.switched else on_ms / (on_ms + off_ms)
        self.log.append(rec)
        self.twin.workloads[rec.id] = rec
        if rec.switched:
            self._phase(rec, now + int(on_ms * 1e6), on=False)
        self.twin.touch()
        self.twin.advance(now)
        return rec

    def clear(self, workload_id: str | None = None, now_ns: int | None = None) -> list[WorkloadRecord]:
        now = self.twin.advance(now_ns)
        active = self.active()
        if workload_id is not None:
            active = [r for r in active if r.id == workload_id]
            if not active:
                raise WorkloadError(f"no active workload '{workload_id}' (see `fabricd lab workload list`)")
        for rec in active:
            rec.cleared_ns = now
            self.twin.workloads.pop(rec.id, None)
        self.twin.touch()
        self.twin.advance(now)
        return active

    # --- phases --------------------------------------------------------------------------------
    def _phase(self, rec: WorkloadRecord, at: int, on: bool) -> None:
        def edge(t: int) -> None:
            if rec.cleared_ns is not None:
                return
            rec.on = on  # only the offered traffic changes: the twin solves the rates again, not the ports
            length = rec.params["on_ms"] if on else rec.params["off_ms"]
            self._phase(rec, t + int(length * 1e6), on=not on)

        self.twin.schedule(at, edge, Recompute.TRAFFIC)

    # --- kinds ---------------------------------------------------------------------------------
    def _dev(self, nic: _Nic) -> Device:
        return self.twin.fabric.device(self.twin.traffic.names[nic.node])

    def _nics(self) -> list[_Nic]:
        out = []
        for x, (name, t) in enumerate(zip(self.twin.traffic.names, self.twin.traffic.ports, strict=True)):
            sw = self.twin.switches[name]
            for row in np.nonzero(t.kind == traffic.Kind.SERVER)[0]:
                peer = self.twin.peers[(name, sw.ports[row])]
                out.append(_Nic(x, int(row), f"{peer.device}:{peer.port}", sw.speeds[row] * 1e9 / 8))
        return out

    def _incast(self, params: dict[str, Any]) -> tuple[list[tuple[_Nic, _Nic, float]], dict[str, Any]]:
        port = params.get("port")
        if not isinstance(port, str) or ":" not in port:
            raise WorkloadError(f"port must be 'switch:port' facing a server NIC, got {port!r}")
        device, name = port.split(":", 1)
        nics = self._nics()
        target = next(
            (n for n in nics if (self.twin.traffic.names[n.node], _port(self.twin, n)) == (device, name)), None
        )
        if target is None:
            raise WorkloadError(f"port '{port}' is not a switch port facing a server NIC")
        fan_in = int(_number(params, "fan_in", 8, 1, 4096))
        rail = self.twin.fabric.device(device).rail
        others = [n for n in nics if n != target and self._dev(n).rail == rail]
        # other switches' NICs first (the incast crosses the fabric), then the target's own switch's
        others.sort(key=lambda n: (n.node == target.node, n.name))
        if len(others) < fan_in:
            raise WorkloadError(f"fan_in {fan_in}: only {len(others)} other NICs on rail {rail} can reach {port}")
        return [(s, target, s.speed_bps) for s in others[:fan_in]], {"port": port, "fan_in": fan_in}

    def _alltoall(self, params: dict[str, Any]) -> tuple[list[tuple[_Nic, _Nic, float]], dict[str, Any]]:
        rail = int(_number(params, "rail", 0, 0, 1024))
        nics = [n for n in self._nics() if self._dev(n).rail == rail]
        if len(nics) < 2:
            raise WorkloadError(f"rail {rail}: fewer than two NICs (check the spec's rails)")
        per = 1.0 / (len(nics) - 1)
        return [(s, r, s.speed_bps * per) for s in nics for r in nics if r != s], {"rail": rail}

    def _allreduce(self, params: dict[str, Any]) -> tuple[list[tuple[_Nic, _Nic, float]], dict[str, Any]]:
        raw = str(params.get("group", "0"))
        try:
            groups = [int(g) for g in raw.split(",") if g.strip()]
        except ValueError:
            raise WorkloadError(f"group must be aggregation group numbers, comma-separated, got {raw!r}") from None
        pairs = []
        by_rail: dict[int | None, list[_Nic]] = {}
        for n in self._nics():
            dev = self._dev(n)
            if dev.group in groups:
                by_rail.setdefault(dev.rail, []).append(n)
        for ring in by_rail.values():
            ring.sort(key=lambda n: (groups.index(self._dev(n).group or 0), n.name))
            if len(ring) > 1:
                pairs += [(a, b, a.speed_bps) for a, b in zip(ring, ring[1:] + ring[:1], strict=True)]
        if not pairs:
            raise WorkloadError(f"group {raw}: no aggregation group with two or more servers")
        return pairs, {"group": ",".join(str(g) for g in groups)}

    def _dci_bulk(self, params: dict[str, Any]) -> tuple[list[tuple[_Nic, _Nic, float]], dict[str, Any]]:
        sites = sorted(self.twin.dci_ports)
        dci = params.get("dci") or (sites[0] if sites else None)
        if dci not in sites:
            known = ", ".join(sites) or "(none: this fabric has no DCI)"
            raise WorkloadError(f"dci must be one of {known}, got {dci!r}")
        senders = int(_number(params, "senders", 4, 1, 4096))
        nics = sorted(self._nics(), key=lambda n: n.name)[:senders]
        far = _Nic(-1 - sites.index(dci), -1, f"{dci} (far campus)", 0.0)
        return [(s, far, s.speed_bps) for s in nics], {"dci": dci, "senders": len(nics)}

    # --- overlay -------------------------------------------------------------------------------
    def _overlay(self, pairs: list[tuple[_Nic, _Nic, float]]) -> traffic.Structure:
        s = self.twin.traffic
        sends = [np.zeros(len(p.kind)) for p in s.ports]
        receives = [np.zeros(len(p.kind)) for p in s.ports]
        share = np.zeros((len(s.names), len(s.sinks)))
        owners = int((s.sink_of >= 0).sum())
        for src, dst, rate in pairs:
            sends[src.node][src.row] += rate
            sink = int(s.sink_of[dst.node]) if dst.node >= 0 else owners + (-1 - dst.node)
            share[src.node, sink] += rate
            if dst.node >= 0:
                receives[dst.node][dst.row] += rate
        total = share.sum(axis=1, keepdims=True)
        share = np.where(total > 0, share / np.where(total > 0, total, 1.0), 0.0)
        return traffic.overlay(s, sends, share, receives)


def _port(twin: Twin, nic: _Nic) -> str:
    return twin.switches[twin.traffic.names[nic.node]].ports[nic.row]


def _number(params: dict[str, Any], key: str, default: float, low: float, high: float) -> float:
    return number(params, key, default, low, high, WorkloadError)
