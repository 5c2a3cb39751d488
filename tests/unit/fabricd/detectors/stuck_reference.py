"""The stuck-queue rule as it was written before `stuck_queues` vectorised it: one queue at a time through
`Snapshot.find`. Kept as the oracle the vectorised tracker must agree with, field for field."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from fabricd.detectors.stuck_queues import Queue, StuckConfig
from fabricd.telemetry import NEVER, Snapshot

NS = 1_000_000_000


@dataclass
class RefQueue:
    last_ts: int = 0
    count: int = 0
    onset: int = 0
    pause_fraction: float = 0.0
    frames_per_s: float = 0.0
    tx_delta: float = 0.0
    pause_ts: int = 0
    stuck_ts: int = 0
    watchdog: bool = False
    declared_ts: int = 0


def _candidates(snapshot: Snapshot, queues: dict[Queue, RefQueue], since: int) -> set[Queue]:
    out = set(queues)
    for leaf in ("pfc.pfc-on-total-rx-time", "pfc.in-frames", "wd.stuck-count"):
        rows = snapshot.select(leaf=leaf)
        moved = np.nan_to_num(snapshot.delta(rows), nan=0.0) > 0
        if leaf == "wd.stuck-count":  # a declaration since `since` (an old one says nothing now)
            moved &= snapshot.ts[rows] > since
        for i in rows[moved].tolist():
            device, port, _, index = snapshot.key(i)
            if index is not None and index.isdigit():
                out.add((device, port, int(index)))
    return out


def _judge(snapshot: Snapshot, q: Queue, qs: RefQueue, cfg: StuckConfig, grace: set[tuple[str, str]]) -> None:
    device, port, prio = q
    pause = snapshot.find(device, port, "pfc.pfc-on-total-rx-time", prio)
    frames = snapshot.find(device, port, "pfc.in-frames", prio)
    tx = snapshot.find(device, port, "queue.transmit-pkts", prio)
    wd = snapshot.find(device, port, "wd.stuck-count", prio)
    lead = pause if pause is not None else frames
    if lead is None or tx is None:
        qs.count = 0
        return
    ts = int(snapshot.ts[lead])
    if wd is not None and int(snapshot.ts[wd]) > max(ts, qs.last_ts):
        # declared by the switch's watchdog after the last pause sample: stuck from the declaration
        qs.last_ts = qs.declared_ts = int(snapshot.ts[wd])
        rose = bool(np.nan_to_num(snapshot.delta(np.array([wd], dtype=np.int64)), nan=0.0)[0] > 0)
        oper = snapshot.find(device, port, "oper-status")
        status = None if oper is None else snapshot.text(oper)
        if not rose or (status is not None and status != "UP") or (device, port) in grace:
            qs.count = 0
            return
        if qs.count == 0:
            qs.onset = ts
        qs.count += 1
        qs.stuck_ts = qs.last_ts
        qs.watchdog = True
        return
    if ts <= qs.last_ts:
        return
    start = int(snapshot.prev_ts[lead])
    if start != NEVER and int(snapshot.ts[tx]) - start <= (ts - start) // 2:
        return  # this round's egress count has not arrived yet (last round's is nearer the start): a later pass
    if (
        start != NEVER
        and wd is not None
        and -((ts - start) // 2) < int(snapshot.ts[wd]) - start <= (ts - start) // 2
        and int(snapshot.ts[wd]) != qs.declared_ts
    ):
        return  # last round's watchdog count (taken near the interval's start): this round's is on its way
    qs.last_ts = ts
    first = snapshot.delta(np.array([lead], dtype=np.int64))[0]
    if first > 0:  # paused at all (NaN: no)
        qs.pause_ts = ts
    oper = snapshot.find(device, port, "oper-status")
    status = None if oper is None else snapshot.text(oper)
    if (status is not None and status != "UP") or (device, port) in grace:
        qs.count = 0
        return
    rows = {"lead": lead, "tx": tx} | ({"frames": frames} if frames is not None else {})
    d = dict(zip(rows, snapshot.delta(np.array(list(rows.values()), dtype=np.int64)).tolist(), strict=True))
    dt = ts - int(snapshot.prev_ts[lead])
    if any(np.isnan(v) for v in d.values()) or dt <= 0:
        qs.count = 0
        return
    frames_d = d.get("frames", 0.0)
    qs.pause_fraction = d["lead"] / dt if pause is not None else 0.0
    qs.frames_per_s = frames_d * NS / dt
    qs.tx_delta = d["tx"]
    pausing = qs.pause_fraction >= cfg.pause_fraction if pause is not None else frames_d > 0
    declared = False
    if wd is not None:
        d_wd = snapshot.delta(np.array([wd], dtype=np.int64))[0]
        wd_ts = int(snapshot.ts[wd])
        in_interval = int(snapshot.prev_ts[lead]) < wd_ts <= ts  # an older rise says nothing about this interval
        declared = bool(d_wd > 0) and d["lead"] > 0 and in_interval  # NaN > 0 is False
    qs.watchdog = declared and not (pausing and qs.tx_delta == 0)
    if (pausing and qs.tx_delta == 0) or declared:
        if qs.count == 0:
            qs.onset = int(snapshot.prev_ts[lead])
        qs.count += 1
        qs.stuck_ts = ts
    else:
        qs.count = 0


def track(snapshot: Snapshot, queues: dict[Queue, RefQueue], cfg: StuckConfig, now_ns: int) -> None:
    grace = {
        (e.device, e.port)
        for e in snapshot.events_since(now_ns - int(cfg.grace_s * NS))
        if e.leaf == "oper-status" and e.previous is not None
    }
    interval = int(cfg.sample_interval_s * NS)
    for q in sorted(_candidates(snapshot, queues, now_ns - interval)):
        if snapshot.stale(q[0], now_ns, interval):
            continue
        _judge(snapshot, q, queues.setdefault(q, RefQueue()), cfg, grace)
    for q in [q for q, qs in queues.items() if qs.count == 0 and qs.pause_ts < now_ns - 60 * NS]:
        del queues[q]
