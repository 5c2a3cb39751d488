"""stuck_queues: the PFC watchdog rule judged over every candidate queue at once, shared by pfc_storm and pfc_deadlock.

Per (device, port, priority) and per new sample, the watchdog rule (reference/platforms.md, SONiC Mellanox/VS): the
port received pause for >= 99% of the interval (or, without the pause-time leaf, PFC frames rose) while the egress
queue's `transmit-pkts` did not move; held for `hold_samples` consecutive samples (the detection time: one full
interval at 1-s sampling). The switch's own PFC watchdog also counts: a queue whose `stuck-count` rose in a sample
while pause still arrived is stuck in that sample, though it sent packets before the onset. The switch polls every
~200 ms and declares a queue stuck after its detection time (both from fabricd's policy), so a storm that starts
just after a sample is seen at the next one, not a whole interval later.

No decision (and a hold ends) on a down port, within `grace_s` of an oper-status change, on a first sample or one
after a counter reset; a stale device is not judged at all. Candidates are the queues whose peer sent pause in their
last sample plus those already tracked (to update or clear); a queue not paused for a minute is forgotten.

One `StuckQueues` per Runner (`share`): pfc_storm and pfc_deadlock read the same judgement, so a cycle and a storm
are told apart on one state, and `track` judges a snapshot once however many detectors read it.
"""

from __future__ import annotations

import itertools
import weakref
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

import numpy as np
import numpy.typing as npt

from fabricd.telemetry import NEVER, Snapshot
from topology.fabric import Fabric
from topology.units import NS

FORGET_NS = 60 * NS
Queue = tuple[str, str, int]  # (device, port, priority)
PAUSE, FRAMES, TX, OPER = "pfc.pfc-on-total-rx-time", "pfc.in-frames", "queue.transmit-pkts", "oper-status"
WD_STUCK = "wd.stuck-count"  # the switch's PFC watchdog: times it declared the egress queue stuck
QUEUE_LEAVES = (TX, PAUSE, FRAMES, WD_STUCK)  # what judging an egress queue of one priority reads

I64 = npt.NDArray[np.int64]
F64 = npt.NDArray[np.float64]
B = npt.NDArray[np.bool_]
Codes = dict[tuple[str, str | None], int]  # (leaf, index) -> code


@dataclass(frozen=True)
class StuckConfig:
    pause_fraction: float = 0.99  # SONiC (Mellanox): rx pause > 0.99 x poll time
    # SONiC's detection time defaults to 200 ms (platforms.md); a whole 1-s interval paused with nothing sent is
    # five times that, so one such sample is enough. A second one only made every finding a full interval later.
    hold_samples: int = 1
    # Known false storms right after a flap (platforms.md): no decision for this long after an oper-status change.
    grace_s: float = 5.0
    sample_interval_s: float = 1.0  # for staleness: a device silent for 3 intervals is not judged


@dataclass(frozen=True)
class QueueState:
    """One tracked queue's judgement, as findings report it."""

    last_ts: int = 0  # timestamp of the last sample judged (a sample is judged once)
    count: int = 0  # consecutive stuck samples
    onset: int = 0
    pause_fraction: float = 0.0
    frames_per_s: float = 0.0
    tx_delta: float = 0.0
    pause_ts: int = 0  # the last sample in which the port received any pause (a minute after it: forgotten)
    stuck_ts: int = 0  # the last sample judged stuck (pfc_storm: was the peer stuck while this one was?)
    watchdog: bool = False  # the last sample was judged stuck because the switch's watchdog declared it
    declared_ts: int = 0  # the watchdog count last taken as a declaration between pause samples (ON_CHANGE)

    def evidence(self) -> dict[str, float | int | bool]:
        """What a finding shows of this queue (pfc_storm and pfc_deadlock alike)."""
        return {
            "pause_fraction": round(self.pause_fraction, 4),
            "pfc_frames_per_s": round(self.frames_per_s, 1),
            "tx_pkts_delta": self.tx_delta,
            "held_samples": self.count,
            "watchdog": self.watchdog,
        }


class StuckQueues:
    """The tracked queues: names in `keys`, their judgement in parallel arrays (one numpy pass judges them all)."""

    def __init__(self, config: StuckConfig | None = None) -> None:
        self.config = StuckConfig() if config is None else config
        self.keys: list[Queue] = []
        self.index: dict[Queue, int] = {}
        self.port: I64 = np.zeros(0, dtype=np.int64)  # port row in `rows_of`'s snapshots; -1: not known there
        self.prio: I64 = np.zeros(0, dtype=np.int64)
        self.last_ts: I64 = np.zeros(0, dtype=np.int64)
        self.count: I64 = np.zeros(0, dtype=np.int64)
        self.onset: I64 = np.zeros(0, dtype=np.int64)
        self.pause_fraction: F64 = np.zeros(0)
        self.frames_per_s: F64 = np.zeros(0)
        self.tx_delta: F64 = np.zeros(0)
        self.pause_ts: I64 = np.zeros(0, dtype=np.int64)
        self.stuck_ts: I64 = np.zeros(0, dtype=np.int64)
        self.declared_ts: I64 = np.zeros(0, dtype=np.int64)
        self.watchdog: B = np.zeros(0, dtype=bool)
        self.rows_of: object | None = None  # the store's port index that `port` was looked up in
        self.judged: tuple[weakref.ref[Snapshot], int] | None = None  # the last (snapshot, now) judged

    def __len__(self) -> int:
        return len(self.keys)

    def get(self, q: Queue) -> QueueState:
        i = self.index[q]
        return QueueState(
            int(self.last_ts[i]),
            int(self.count[i]),
            int(self.onset[i]),
            float(self.pause_fraction[i]),
            float(self.frames_per_s[i]),
            float(self.tx_delta[i]),
            int(self.pause_ts[i]),
            int(self.stuck_ts[i]),
            bool(self.watchdog[i]),
            int(self.declared_ts[i]),
        )

    def at_least(self, samples: int) -> list[Queue]:
        """The queues stuck for `samples` consecutive samples or more (1: stuck now; hold_samples: held)."""
        return [self.keys[i] for i in np.flatnonzero(self.count >= samples).tolist()]

    def _add(self, queues: Sequence[Queue], ports: Sequence[int]) -> None:
        n = len(queues)
        for q in queues:
            self.index[q] = len(self.keys)
            self.keys.append(q)
        self.port = np.concatenate([self.port, np.array(ports, dtype=np.int64)])
        self.prio = np.concatenate([self.prio, np.array([q[2] for q in queues], dtype=np.int64)])
        self.last_ts, self.count, self.onset, self.pause_ts, self.stuck_ts, self.declared_ts = (
            np.concatenate([a, np.zeros(n, np.int64)]) for a in self._state()
        )
        self.pause_fraction, self.frames_per_s, self.tx_delta = (np.concatenate([a, np.zeros(n)]) for a in self._rule())
        self.watchdog = np.concatenate([self.watchdog, np.zeros(n, dtype=bool)])

    def _keep(self, keep: B) -> None:
        self.keys = [q for q, k in zip(self.keys, keep.tolist(), strict=True) if k]
        self.index = {q: i for i, q in enumerate(self.keys)}
        self.port, self.prio = self.port[keep], self.prio[keep]
        self.last_ts, self.count, self.onset, self.pause_ts, self.stuck_ts, self.declared_ts = (
            a[keep] for a in self._state()
        )
        self.pause_fraction, self.frames_per_s, self.tx_delta = (a[keep] for a in self._rule())
        self.watchdog = self.watchdog[keep]

    def _state(self) -> tuple[I64, I64, I64, I64, I64, I64]:
        return self.last_ts, self.count, self.onset, self.pause_ts, self.stuck_ts, self.declared_ts

    def _rule(self) -> tuple[F64, F64, F64]:
        return self.pause_fraction, self.frames_per_s, self.tx_delta


@runtime_checkable
class TracksStuckQueues(Protocol):
    tracker: StuckQueues


def share(states: Iterable[object]) -> None:
    """Hand every state that tracks stuck queues under one rule the same tracker (pfc_storm's and pfc_deadlock's)."""
    first: dict[StuckConfig, StuckQueues] = {}
    for s in states:
        if isinstance(s, TracksStuckQueues) and isinstance(s.tracker, StuckQueues):
            s.tracker = first.setdefault(s.tracker.config, s.tracker)


def track(snapshot: Snapshot, sq: StuckQueues, now_ns: int) -> None:
    """Judge each candidate queue's new sample with the watchdog rule (updates `sq` in place; once per snapshot)."""
    if sq.judged is not None and sq.judged[0]() is snapshot and sq.judged[1] == now_ns:
        return  # the other detector of the pair already judged this snapshot
    cfg = sq.config
    interval = int(cfg.sample_interval_s * NS)
    last_seen = np.array(snapshot.last_seen, dtype=np.int64)
    dev_stale = (last_seen == NEVER) | (last_seen < now_ns - 3 * interval)
    _resolve(snapshot, sq)
    known = {(r, p) for r, p in zip(sq.port.tolist(), sq.prio.tolist(), strict=True) if r >= 0}
    paused = [c for c in sorted(_paused(snapshot) | _declared(snapshot, now_ns - interval)) if c not in known]
    fresh = [(r, p) for r, p in paused if not dev_stale[snapshot.port_dev[r]]]  # a stale device is not judged
    devices, names, port_dev = snapshot.devices, snapshot.port_names, snapshot.port_dev
    sq._add([(devices[port_dev[r]], names[r], p) for r, p in fresh], [r for r, _ in fresh])
    rows = sq.port
    stale = np.zeros(len(sq), dtype=bool)
    stale[rows >= 0] = dev_stale[port_dev[rows[rows >= 0]]]
    for i in np.flatnonzero(rows < 0).tolist():  # the port is not in this snapshot; its device may not be either
        stale[i] = snapshot.stale(sq.keys[i][0], now_ns, interval)
    _judge(snapshot, sq, np.flatnonzero(~stale), _grace_rows(snapshot, cfg, now_ns))
    # Not paused for a minute: forget it. (By the last sample judged, a queue of a reporting switch never went.)
    sq._keep(~((sq.count == 0) & (sq.pause_ts < now_ns - FORGET_NS)))
    sq.judged = (weakref.ref(snapshot), now_ns)


def _resolve(snapshot: Snapshot, sq: StuckQueues) -> None:
    """Point `sq.port` at this snapshot's port rows. A store never renumbers its ports, so rows found in an earlier
    snapshot of the same store still hold: only the ones not found then (or newer than this snapshot) are looked up."""
    same = snapshot.live_ports is not None and snapshot.live_ports is sq.rows_of
    redo = (sq.port < 0) | (sq.port >= len(snapshot.port_dev)) if same else np.ones(len(sq), dtype=bool)
    for i in np.flatnonzero(redo).tolist():
        sq.port[i] = _row(snapshot, sq.keys[i][0], sq.keys[i][1])
    sq.rows_of = snapshot.live_ports


def _row(snapshot: Snapshot, device: str, port: str) -> int:
    row = snapshot.port_row(device, port)
    return -1 if row is None else row


def _paused(snapshot: Snapshot) -> set[tuple[int, int]]:
    """(port row, priority) of the queues whose peer sent pause in their last sample."""
    out: set[tuple[int, int]] = set()
    for c, (leaf, index) in enumerate(snapshot.codes):
        if leaf in (PAUSE, FRAMES) and index is not None and index.isdigit():
            ports, series = _column(snapshot, c)
            moved = ports[snapshot.delta(series) > 0]  # NaN (first sample, reset) is no pause
            out.update(zip(moved.tolist(), itertools.repeat(int(index)), strict=False))
    return out


def _declared(snapshot: Snapshot, since: int) -> set[tuple[int, int]]:
    """(port row, priority) of the queues the switch's watchdog declared stuck after `since` (its stuck-count rose:
    streamed ON_CHANGE, the declaration lands between two pause samples)."""
    out: set[tuple[int, int]] = set()
    for c, (leaf, index) in enumerate(snapshot.codes):
        if leaf == WD_STUCK and index is not None and index.isdigit():
            ports, series = _column(snapshot, c)
            rose = (snapshot.delta(series) > 0) & (snapshot.ts[series] > since)
            out.update(zip(ports[rose].tolist(), itertools.repeat(int(index)), strict=False))
    return out


def _column(snapshot: Snapshot, code: int) -> tuple[I64, I64]:
    """The port rows that have a series of `code`, and those series."""
    if code >= snapshot.slots.shape[1]:
        return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
    col = snapshot.slots[:, code].astype(np.int64)
    ports = np.flatnonzero((col >= 0) & (col < len(snapshot)))
    return ports, col[ports]


def _series(snapshot: Snapshot, rows: I64, code: int | None) -> I64:
    """The series of `code` at each port row (as `Snapshot.find` gives it), -1 where there is none."""
    out = np.full(len(rows), -1, dtype=np.int64)
    if code is None or code >= snapshot.slots.shape[1]:
        return out
    ok = rows >= 0
    s = snapshot.slots[rows[ok], code].astype(np.int64)
    out[ok] = np.where((s >= 0) & (s < len(snapshot)), s, -1)
    return out


def _queue_series(snapshot: Snapshot, rows: I64, prios: I64, leaf: str, codes: Codes) -> I64:
    out = np.full(len(rows), -1, dtype=np.int64)
    for p in np.unique(prios).tolist():  # usually one lossless priority
        m = prios == p
        out[m] = _series(snapshot, rows[m], codes.get((leaf, str(p))))
    return out


def sampled_round(snapshot: Snapshot, device: str, prio: int, away_from: str, fabric: Fabric, interval_ns: int) -> int:
    """When `device` last sampled, in full, its egress queues of `prio` that traffic from `away_from` could wait on
    (every port not back toward it): the oldest of the latest transmit, pause, frames and watchdog samples of those
    queues. A switch sends them in several notifications and a pass may land between two; only when all are in is
    "none of them is stuck" known. A series more than 1.5 intervals older than the newest is no longer streamed and
    is not waited for. NEVER if it streams none. Not its `last_seen`: an on-change event (an oper-status change) is
    news from the device but no sample of its queues, so it says nothing about whether they are stuck."""
    d = snapshot.devices.index(device) if device in snapshot.devices else -1
    rows = [
        r
        for r in np.flatnonzero(snapshot.port_dev == d).tolist()
        if (peer := fabric.peer(device, snapshot.port_names[r])) is None or peer.device != away_from
    ]
    rows_a = np.array(rows, dtype=np.int64)
    codes: Codes = {key: c for c, key in enumerate(snapshot.codes)}
    series = np.concatenate([_series(snapshot, rows_a, codes.get((leaf, str(prio)))) for leaf in QUEUE_LEAVES])
    ts = snapshot.ts[series[series >= 0]]
    if not len(ts):
        return NEVER
    return int(ts[ts >= ts.max() - 3 * interval_ns // 2].min())


def _grace_rows(snapshot: Snapshot, cfg: StuckConfig, now_ns: int) -> I64:
    """Port rows whose oper-status changed within the grace period (the first value seen is no change)."""
    since = now_ns - int(cfg.grace_s * NS)
    rows = {_row(snapshot, e.device, e.port) for e in snapshot.events_since(since, leaf=OPER, changes_only=True)}
    return np.array(sorted(rows), dtype=np.int64)


def _judge(snapshot: Snapshot, sq: StuckQueues, j: I64, grace: I64) -> None:
    """The watchdog rule over queues `j` (indexes into `sq`); every step narrows `j` to the queues still in play."""
    codes: Codes = {key: c for c, key in enumerate(snapshot.codes)}
    r, p = sq.port[j], sq.prio[j]
    # Traffic class N -> tx-queue N (EOS default map): the paused priority's egress queue has its index.
    pause, frames, tx, wd = (_queue_series(snapshot, r, p, leaf, codes) for leaf in (PAUSE, FRAMES, TX, WD_STUCK))
    lead = np.where(pause >= 0, pause, frames)  # pause time decides where it is streamed; frames otherwise
    ok = (lead >= 0) & (tx >= 0)
    sq.count[j[~ok]] = 0
    j, r, pause, frames, tx, wd, lead = j[ok], r[ok], pause[ok], frames[ok], tx[ok], wd[ok], lead[ok]
    ts = snapshot.ts[lead]
    # A sample is judged once, and only with its egress count: pause and transmit counts come in different
    # notifications, and a pass in the middle of a switch's burst may hold the new pause sample with last round's
    # transmit count. A transmit sample taken nearer the pause interval's start than its end is that one: the
    # queue waits for a later pass. So does a watchdog count taken near the start (last round's); one older than
    # that (the switch stopped streaming it) is not waited for.
    tx_ts, start_ts = snapshot.ts[tx], snapshot.prev_ts[lead]
    half = (ts - start_ts) // 2
    same_round = (start_ts == NEVER) | (tx_ts - start_ts > half)
    wd_ts = _ts_of(snapshot, wd)
    wd_last_round = (wd >= 0) & (start_ts != NEVER) & (wd_ts - start_ts <= half) & (start_ts - wd_ts < half)
    wd_last_round &= wd_ts != sq.declared_ts[j]  # a declaration already taken (ON_CHANGE) is not last round's count
    # The switch's watchdog declared it stuck after the last pause sample (stuck-count streams ON_CHANGE): paused with
    # nothing sent for its detection time is the rule's evidence, so it is stuck from that declaration on, without
    # waiting up to an interval for the next pause sample (which then holds or ends it as usual).
    declared = (wd >= 0) & (wd_ts > ts) & (wd_ts > sq.last_ts[j])
    if declared.any():
        _declare(snapshot, sq, j[declared], r[declared], wd[declared], ts[declared], wd_ts[declared], grace, codes)
    new = (ts > sq.last_ts[j]) & same_round & ~wd_last_round
    j, r, pause, frames, tx, wd, lead, ts = (a[new] for a in (j, r, pause, frames, tx, wd, lead, ts))
    sq.last_ts[j] = ts
    moved = snapshot.delta(lead) > 0  # NaN (first sample, reset) is no pause
    sq.pause_ts[j[moved]] = ts[moved]
    ok = _in_play(snapshot, r, grace, codes)
    sq.count[j[~ok]] = 0
    j, pause, frames, tx, wd, lead, ts = j[ok], pause[ok], frames[ok], tx[ok], wd[ok], lead[ok], ts[ok]
    d_lead, d_tx = snapshot.delta(lead), snapshot.delta(tx)
    has_frames = frames >= 0
    d_frames = np.zeros(len(j))
    d_frames[has_frames] = snapshot.delta(frames[has_frames])
    start = snapshot.prev_ts[lead]
    dt = ts - start  # meaningless where start is NEVER, but then d_lead is NaN and the queue is dropped here
    ok = ~(np.isnan(d_lead) | np.isnan(d_tx) | np.isnan(d_frames)) & (dt > 0)
    sq.count[j[~ok]] = 0  # counter reset or first sample: no decision, and a reboot ends any hold
    j, pause, wd, d_lead, d_tx, d_frames, start, ts = (
        j[ok],
        pause[ok],
        wd[ok],
        d_lead[ok],
        d_tx[ok],
        d_frames[ok],
        start[ok],
        ts[ok],
    )
    dt_f = dt[ok].astype(np.float64)
    has_pause = pause >= 0
    fraction = np.where(has_pause, d_lead / dt_f, 0.0)
    # With the pause-time leaf, pausing means paused nearly all the interval: frames alone would also count the
    # XON that ends a pause (the XOFF->XON false storm). Frames are the rule only where pause time is missing.
    pausing = np.where(has_pause, fraction >= sq.config.pause_fraction, d_frames > 0)
    by_counters = pausing & (d_tx == 0)
    # The switch declared the queue stuck during this interval and pause still arrived in it. Only a new
    # declaration counts: a queue the switch leaves "stormed" after the pause ended (a known field bug) does not.
    d_wd = np.zeros(len(j))
    d_wd[wd >= 0] = np.nan_to_num(snapshot.delta(wd[wd >= 0]), nan=0.0)  # a reset watchdog count declares nothing
    # ...declared in this interval: an ON_CHANGE count keeps its last rise until the next one, and that old rise says
    # nothing about this interval.
    wd_at = _ts_of(snapshot, wd)
    by_watchdog = (d_wd > 0) & (d_lead > 0) & ~by_counters & (wd_at > start) & (wd_at <= ts)
    stuck = by_counters | by_watchdog
    count = sq.count[j]
    sq.onset[j[stuck & (count == 0)]] = start[stuck & (count == 0)]
    sq.count[j] = np.where(stuck, count + 1, 0)
    sq.stuck_ts[j[stuck]] = ts[stuck]
    sq.pause_fraction[j] = fraction
    sq.frames_per_s[j] = d_frames * NS / dt_f
    sq.tx_delta[j] = d_tx
    sq.watchdog[j] = by_watchdog


def _ts_of(snapshot: Snapshot, series: I64) -> I64:
    """Each series' last sample time; NEVER where there is no series (-1)."""
    out: I64 = np.where(series >= 0, snapshot.ts[np.maximum(series, 0)], NEVER)
    return out


def _in_play(snapshot: Snapshot, r: I64, grace: I64, codes: Codes) -> B:
    """Port rows that may be judged: not down, and not within the grace period after an oper-status change (known
    false storms)."""
    oper = _series(snapshot, r, codes.get((OPER, None)))
    o = np.maximum(oper, 0)
    up = snapshot.strings.index("UP") if "UP" in snapshot.strings else -1
    down = (oper >= 0) & (snapshot.ts[o] != NEVER) & (snapshot.value[o] != up)
    out: B = ~(down | np.isin(r, grace))
    return out


def _declare(
    snapshot: Snapshot, sq: StuckQueues, j: I64, r: I64, wd: I64, lead_ts: I64, wd_ts: I64, grace: I64, codes: Codes
) -> None:
    """Queues `j` whose watchdog count rose after their last pause sample: stuck at the declaration, on an up port
    out of the grace period (a reset count, or its first value, declares nothing). Each declaration is judged once."""
    sq.last_ts[j] = sq.declared_ts[j] = wd_ts
    rose = np.nan_to_num(snapshot.delta(wd), nan=0.0) > 0
    ok = rose & _in_play(snapshot, r, grace, codes)
    sq.count[j[~ok]] = 0
    j, lead_ts, wd_ts = j[ok], lead_ts[ok], wd_ts[ok]
    count = sq.count[j]
    sq.onset[j[count == 0]] = lead_ts[count == 0]  # it began after the last pause sample, which had no storm yet
    sq.count[j] = count + 1
    sq.stuck_ts[j] = wd_ts
    sq.watchdog[j] = True


def by_switch(queues: Iterable[Queue]) -> dict[tuple[str, int], list[Queue]]:
    """Queues grouped by (device, priority), for `waits_on`."""
    out: dict[tuple[str, int], list[Queue]] = {}
    for q in sorted(queues):
        out.setdefault((q[0], q[2]), []).append(q)
    return out


def waits_on(q: Queue, stuck: dict[tuple[str, int], list[Queue]], fabric: Fabric) -> list[Queue]:
    """The stuck egress queues of q's peer switch that q waits on: same priority, not back toward q's switch
    (traffic does not turn back on the link it came in on). Empty when the peer is an endpoint, unknown to the
    cabling, or has nothing stuck: then the pause reaching q starts at the peer."""
    device, port, prio = q
    peer = fabric.peer(device, port)
    peer_dev = None if peer is None else fabric.get(peer.device)
    if peer is None or peer_dev is None or not peer_dev.is_switch:
        return []
    out = []
    for s in stuck.get((peer.device, prio), ()):
        back = fabric.peer(s[0], s[1])
        if back is None or back.device != device:
            out.append(s)
    return out
