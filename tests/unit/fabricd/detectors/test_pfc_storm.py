from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest

from fabricd.detectors import Detector, Finding, pfc_storm, run_trace
from fabricd.detectors.runner import PASS_GAP_S, SETTLE_S
from fabricd.telemetry import Snapshot, render
from topology.fabric import Fabric

from .tracegen import NS, TX_PER_S, WATCHDOG, Port, TraceGen, at, ts_of

SETTLE = int(SETTLE_S * NS)  # a pass runs this long after new samples arrive

NIC_PORT = ("leaf-g0-r0", "Ethernet1/1")  # faces gpu-g0-000:nic0
SPINE_PORTS = [
    ("spine-r0-0", "Ethernet1/1"),
    ("spine-r0-0", "Ethernet2/1"),
    ("spine-r0-1", "Ethernet1/1"),
    ("spine-r0-1", "Ethernet2/1"),
]
STUCK = (1.0, 0)
Pauses = dict[Port, tuple[float, int]]
Build = Callable[[TraceGen], None]


def storm(start: int = 2, seconds: int = 8) -> Build:
    """The NIC pauses its leaf port for good; one sample later the leaf pauses both spines (their ports to it)."""

    def build(g: TraceGen) -> None:
        def step(k: int) -> Pauses:
            out: Pauses = {}
            if k >= start:
                out[NIC_PORT] = STUCK
            if k >= start + 1:
                out.update(dict.fromkeys(SPINE_PORTS, STUCK))
            return out

        g.run(seconds, step)

    return build


def pauses(
    schedule: dict[int, Pauses], seconds: int = 8, before: Callable[[TraceGen, int], None] | None = None
) -> Build:
    def build(g: TraceGen) -> None:
        def step(k: int) -> Pauses:
            if before is not None:
                before(g, k)
            return schedule.get(k, {})

        g.run(seconds, step)

    return build


def reset_leaf_at(k0: int) -> Callable[[TraceGen, int], None]:
    def before(g: TraceGen, k: int) -> None:
        if k == k0:
            g.reset("leaf-g0-r0")

    return before


def down_at(k0: int, port: Port = NIC_PORT) -> Callable[[TraceGen, int], None]:
    def before(g: TraceGen, k: int) -> None:
        if k == k0:
            g.oper(at(k - 0.5), port, False)

    return before


def flap_at(k0: int, port: Port = NIC_PORT) -> Callable[[TraceGen, int], None]:
    def before(g: TraceGen, k: int) -> None:
        if k == k0:
            g.flap(at(k - 0.9), [port], down_s=0.2)

    return before


DRAINING = (1.0, TX_PER_S // 2)  # paused all second by the counter, yet the queue still sent packets
CASES: list[tuple[str, Build, int]] = [
    ("storm from a NIC, spread to the spines", storm(), 1),
    ("microburst: paused one sample while draining", pauses({3: {NIC_PORT: (0.3, TX_PER_S)}}), 0),
    ("full pause but traffic still drains", pauses({k: {NIC_PORT: DRAINING} for k in range(2, 8)}), 0),
    # One whole interval paused with nothing sent is five times SONiC's 200 ms detection time: a storm.
    ("stuck one full interval", pauses({3: {NIC_PORT: STUCK}}), 1),
    ("paused most of one interval, nothing sent", pauses({3: {NIC_PORT: (0.9, 0)}}), 0),
    ("stuck in the sample where counters reset", pauses({4: {NIC_PORT: STUCK}}, before=reset_leaf_at(4)), 0),
    ("counter reset during normal traffic", pauses({}, before=reset_leaf_at(4)), 0),
    ("stuck queue on a down port", pauses({k: {NIC_PORT: STUCK} for k in range(3, 14)}, 14, before=down_at(2)), 0),
    ("pause right after a flap", pauses({k: {NIC_PORT: STUCK} for k in range(3, 6)}, before=flap_at(3)), 0),
    (
        "XOFF then XON on an idle queue: frames rise, pause time does not",
        pauses({k: {NIC_PORT: (0.0, 0)} for k in range(2, 8)}),
        0,
    ),
]


@pytest.mark.parametrize(("name", "build", "expected"), CASES, ids=[c[0] for c in CASES])
def test_pfc_storm_cases(name: str, build: Build, expected: int, small_fabric: Fabric, tmp_path: Path) -> None:
    g = TraceGen(small_fabric, {"leaf-g0-r0", "spine-r0-0", "spine-r0-1"})
    if name.startswith("XOFF"):
        g.extra_frames[NIC_PORT] = 40  # XON/refresh frames without pause time
    build(g)
    found = [f for f in run_trace(g.write(tmp_path / "t.jsonl"), small_fabric) if f.kind == "pfc_storm"]
    assert len(found) == expected, [f.summary for f in found]


def _storm_finding(fabric: Fabric, tmp_path: Path) -> Finding:
    g = TraceGen(fabric, {"leaf-g0-r0", "leaf-g1-r0", "spine-r0-0", "spine-r0-1"})
    storm()(g)
    (f,) = run_trace(g.write(tmp_path / "t.jsonl"), fabric)
    return f


def test_storm_origin_and_spread(small_fabric: Fabric, tmp_path: Path) -> None:
    f = _storm_finding(small_fabric, tmp_path)
    assert (f.kind, f.device, f.port, f.priority) == ("pfc_storm", "leaf-g0-r0", "Ethernet1/1", 3)
    assert set(f.ports) == {"leaf-g0-r0:Ethernet1/1", *(f"{d}:{p}" for d, p in SPINE_PORTS)}
    assert f.devices == ("leaf-g0-r0", "spine-r0-0", "spine-r0-1")
    assert f.evidence["peer"] == "gpu-g0-000:nic0" and f.evidence["peer_role"] == "server"
    assert f.evidence["pause_fraction"] >= 0.99 and f.evidence["tx_pkts_delta"] == 0
    assert f.start_ts == at(1)  # onset: the interval ending at the first stuck sample (k=2)
    assert f.detected_ts == at(2) + SETTLE  # the pass right after that first stuck sample
    assert f.severity == "critical" and f.confidence == 0.9


def test_deadlock_cycle_is_not_a_storm(small_fabric: Fabric, tmp_path: Path) -> None:
    # leaf-g0-r0 -> spine-r0-0 -> leaf-g1-r0 -> spine-r0-1 -> leaf-g0-r0: each egress waits on the next switch.
    cycle = [
        ("leaf-g0-r0", "Ethernet5/1"),
        ("spine-r0-0", "Ethernet3/1"),
        ("leaf-g1-r0", "Ethernet7/1"),
        ("spine-r0-1", "Ethernet2/1"),
    ]
    peers = [small_fabric.peer(dev, port) for dev, port in cycle]
    assert all(peer is not None and small_fabric.get(peer.device) is not None for peer in peers)
    assert [peer.device for peer in peers if peer is not None] == [
        "spine-r0-0",
        "leaf-g1-r0",
        "spine-r0-1",
        "leaf-g0-r0",
    ]
    g = TraceGen(small_fabric, {"leaf-g0-r0", "leaf-g1-r0", "spine-r0-0", "spine-r0-1"})
    pauses({k: dict.fromkeys(cycle, STUCK) for k in range(2, 8)})(g)
    found = run_trace(g.write(tmp_path / "t.jsonl"), small_fabric)
    assert [f.kind for f in found] == ["pfc_deadlock"]  # the cycle is pfc_deadlock's (test_pfc_deadlock.py)


# --- switches that sample at different moments, switches that go silent ----------------------------------------
PHASES = {"leaf-g0-r0": 0.9, "spine-r0-0": 0.1, "spine-r0-1": 0.1}  # the leaf samples last in each tick


def test_storm_end_is_no_storm_from_the_leaf(small_fabric: Fabric, tmp_path: Path) -> None:
    """The NIC stops at 6.5 s: the leaf's sample at 6.9 s shows it, the spines' at 6.1 s were still stuck. For that
    tick their held queues wait on a leaf with nothing stuck; that is the storm ending, not a storm from the leaf."""
    g = TraceGen(small_fabric, set(PHASES))
    g.run_phased(10, PHASES, [([NIC_PORT, *SPINE_PORTS], 2.5, 6.5)])
    found = run_trace(g.write(tmp_path / "t.jsonl"), small_fabric)
    assert [(f.kind, f.device, f.port) for f in found] == [("pfc_storm", "leaf-g0-r0", "Ethernet1/1")]
    # Onset 2.5 s; the leaf's first whole stuck interval ends at 3.9 s, the pass right after it.
    assert found[0].detected_ts == at(3.9) + SETTLE


def test_the_switchs_watchdog_finds_a_storm_that_starts_just_after_a_sample_one_interval_sooner(
    small_fabric: Fabric, tmp_path: Path
) -> None:
    """The NIC starts pausing at 3.05 s, just after the switches' samples at 3.0 s. By counters alone the leaf's first
    whole stuck interval ends at 5.0 s; its watchdog declares the queue stuck at 3.25 s, and the 4.0-s sample (paused
    95% of the interval, packets sent before the onset) carries that, so the storm is found a second sooner."""
    phases = dict.fromkeys(PHASES, 0.0)

    def found(watchdog: bool, seconds: int) -> list[Finding]:
        g = TraceGen(small_fabric, set(phases), watchdog=watchdog)
        g.run_phased(seconds, phases, [([NIC_PORT], 3.05, 20), (SPINE_PORTS, 3.3, 20)])
        return run_trace(g.write(tmp_path / f"wd{watchdog}{seconds}.jsonl"), small_fabric)

    # The trace ends with the 4.0-s sample: the finding is as that sample's pass made it.
    (f,) = found(True, 5)
    assert (f.kind, f.device, f.port, f.detected_ts) == ("pfc_storm", *NIC_PORT, at(4) + SETTLE)
    assert f.evidence["watchdog"] is True and f.evidence["tx_pkts_delta"] > 0
    assert "declared stuck by its PFC watchdog (paused 95% of the last interval)" in f.summary
    assert found(False, 5) == []  # by counters, 4.0 s shows a queue that still sent packets: no decision yet
    (late,) = found(False, 10)
    assert (late.device, late.port, late.detected_ts) == (*NIC_PORT, at(5) + SETTLE)
    assert late.evidence["watchdog"] is False and "paused 100% of the time with no egress" in late.summary


def _declared(g: TraceGen, port: Port, k: int) -> Callable[[TraceGen, int], None]:
    def before(_: TraceGen, step: int) -> None:
        if step == k:
            g.stuck_count[port] += 1

    return before


WATCHDOG_NOISE: list[tuple[str, dict[int, Pauses], Callable[[TraceGen], Callable[[TraceGen, int], None]] | None]] = [
    # A declaration in an interval with no pause at all (the port paused in the one before, so it is tracked): the
    # switch's watchdog lagging behind a pause that is over, or left "stormed" by it (a field bug).
    ("declared in an interval with no pause", {3: {NIC_PORT: (0.6, 100)}}, None),
    ("declared on a down port", {k: {NIC_PORT: (0.6, 100)} for k in range(4, 6)}, lambda g: down_at(3)),
    ("declared right after a flap", {k: {NIC_PORT: (0.6, 100)} for k in range(4, 6)}, lambda g: flap_at(4)),
]


@pytest.mark.parametrize(("name", "schedule", "extra"), WATCHDOG_NOISE, ids=[c[0] for c in WATCHDOG_NOISE])
def test_a_watchdog_declaration_without_pause_or_on_a_bad_port_is_no_storm(
    name: str,
    schedule: dict[int, Pauses],
    extra: Callable[[TraceGen], Callable[[TraceGen, int], None]] | None,
    small_fabric: Fabric,
    tmp_path: Path,
) -> None:
    g = TraceGen(small_fabric, {"leaf-g0-r0", "spine-r0-0", "spine-r0-1"}, watchdog=True)
    declare = _declared(g, NIC_PORT, 4)
    also = extra(g) if extra is not None else None

    def before(gen: TraceGen, k: int) -> None:
        declare(gen, k)
        if also is not None:
            also(gen, k)

    pauses(schedule, 8, before=before)(g)
    assert run_trace(g.write(tmp_path / "t.jsonl"), small_fabric) == []


def test_a_watchdog_declaration_with_pause_is_a_storm_in_that_sample(small_fabric: Fabric, tmp_path: Path) -> None:
    """The control for the cases above: the same declaration while the port received pause 60% of the interval."""
    g = TraceGen(small_fabric, {"leaf-g0-r0", "spine-r0-0", "spine-r0-1"}, watchdog=True)
    pauses({4: {NIC_PORT: (0.6, 100)}}, 8, before=_declared(g, NIC_PORT, 4))(g)
    (f,) = run_trace(g.write(tmp_path / "t.jsonl"), small_fabric)
    assert (f.kind, f.device, f.port, f.detected_ts) == ("pfc_storm", *NIC_PORT, at(4) + SETTLE)


def _silent_after(k_last: int, device: str, schedule: dict[int, Pauses], seconds: int) -> Build:
    """Every device samples each second; `device` stops after sample k_last (a reboot, a lost stream)."""

    def build(g: TraceGen) -> None:
        for k in range(seconds):
            for dev in sorted({p[0] for p in g.ports}):
                if dev != device or k <= k_last:
                    g.sample_device(at(k), schedule.get(k, {}), device=dev)

    return build


def test_no_storm_from_a_stale_superspine(small_fabric: Fabric, tmp_path: Path) -> None:
    """A spine stuck toward a superspine that stopped reporting: nothing says whether the superspine pauses on its
    own or waits further on; the finding waits for it to report again rather than guessing it is the origin."""
    g = TraceGen(small_fabric, {"spine-r0-0", "ssp-0"})
    _silent_after(2, "ssp-0", {k: {("spine-r0-0", "Ethernet5/1"): STUCK} for k in range(6, 10)}, 10)(g)
    assert run_trace(g.write(tmp_path / "t.jsonl"), small_fabric) == []


def test_a_pass_between_a_switchs_pause_and_egress_samples_waits_for_the_egress(
    small_fabric: Fabric, tmp_path: Path
) -> None:
    """Every switch's transmit counts arrive 40 ms after its pause counts (another notification, another
    subscription): a pass in between holds the new pause sample with last round's transmit count. It must judge the
    queue when the egress count of the same round is in, not give up on that sample."""
    g = TraceGen(small_fabric, {"leaf-g0-r0", "leaf-g1-r0", "spine-r0-0", "spine-r0-1"})
    storm()(g)
    late = int(0.04 * NS)
    for line in g.lines:
        if "transmit-pkts" in str(line["path"]):
            ts = line["ts"]
            assert isinstance(ts, int)
            line["ts"] = ts + late
    (f,) = run_trace(g.write(tmp_path / "t.jsonl"), small_fabric)
    assert (f.device, f.port) == NIC_PORT
    # The pass SETTLE after the pause samples (2 s) sees last round's egress counts; the next pass (0.2 s later,
    # the default gap) decides. Judged with the old counts, the queue would have waited for the next round (3 s).
    assert f.detected_ts == at(2) + SETTLE + int(PASS_GAP_S * NS)


def test_a_switch_whose_samples_are_half_in_is_not_an_origin_yet(small_fabric: Fabric, tmp_path: Path) -> None:
    """The spines' queues toward the leaf are stuck at 3.1 s. The leaf's 3.3-s burst arrives in two parts, and a pass
    runs between them: its other ports' counters are in, those of its NIC port (stuck, where the storm comes from)
    are not. The leaf is not yet known to have nothing stuck, so it is no origin: the one storm is the NIC's."""
    phases = {"leaf-g0-r0": 0.3, "spine-r0-0": 0.1, "spine-r0-1": 0.1}
    g = TraceGen(small_fabric, set(phases))
    g.run_phased(6, phases, [([NIC_PORT, *SPINE_PORTS], 2.0, 20)])
    late = [
        r
        for r in g.lines
        if r["ts"] == at(3.3) and r["device"] == NIC_PORT[0] and f"[name={NIC_PORT[1]}]" in str(r["path"])
    ]
    assert late
    g.lines = [r for r in g.lines if all(r is not x for x in late)]
    path = g.write(tmp_path / "t.jsonl")
    # News from a spine at 3.4 s (a repeated oper-status, no change) runs the pass; then the leaf's NIC port arrives.
    news = {"ts": at(3.4), "device": "spine-r0-0", "path": render("Ethernet7/1", "oper-status"), "value": "UP"}
    lines = path.read_text().splitlines(keepends=True)
    cut = next(i for i, line in enumerate(lines) if json.loads(line)["ts"] > at(3.4))
    extra = [json.dumps(news) + "\n", *(json.dumps(r) + "\n" for r in late)]
    path.write_text("".join(lines[:cut] + extra + lines[cut:]))
    found = run_trace(path, small_fabric)
    assert [(f.kind, f.device, f.port) for f in found] == [("pfc_storm", *NIC_PORT)]
    assert found[0].detected_ts > at(3.4)


@pytest.mark.parametrize("stops_watchdog", [False, True])
def test_a_switch_that_pauses_with_nothing_stuck_is_the_origin(
    stops_watchdog: bool, small_fabric: Fabric, tmp_path: Path
) -> None:
    """The spines' queues toward the leaf are stuck from 2.0 s while none of the leaf's own egress queues is: the
    leaf itself pauses (a switch origin). Decided once the leaf's 3.3-s round is in. When the leaf stopped streaming
    its watchdog counts after 2.3 s, the 3.3-s round may still be on its way (they are 1 interval behind); at 4.3 s
    they are 2 behind, no longer streamed, and not waited for."""
    phases = {"leaf-g0-r0": 0.3, "spine-r0-0": 0.1, "spine-r0-1": 0.1}
    g = TraceGen(small_fabric, set(phases), watchdog=True)
    g.run_phased(6, phases, [(SPINE_PORTS, 2.0, 20)])
    if stops_watchdog:
        g.lines = [
            r
            for r in g.lines
            if not (r["device"] == "leaf-g0-r0" and "stuck-count" in str(r["path"]) and ts_of(r) > at(2.3))
        ]
    found = run_trace(g.write(tmp_path / "t.jsonl"), small_fabric)
    assert {(f.kind, f.device, f.evidence["peer_role"]) for f in found} == {
        ("pfc_storm", "spine-r0-0", "leaf"),
        ("pfc_storm", "spine-r0-1", "leaf"),
    }
    assert min(f.detected_ts for f in found) == at(4.3 if stops_watchdog else 3.3) + SETTLE


def test_a_stale_switchs_kept_hold_is_not_reported(small_fabric: Fabric, tmp_path: Path) -> None:
    """The leaf's NIC port is stuck in its last samples before the leaf goes silent: a storm while it reports, but
    once it is stale its kept hold is old news; reporting it every tick would keep the incident open for ever."""
    state = pfc_storm.PfcStormState()
    ticks: list[tuple[int, int]] = []

    def recording(snapshot: Snapshot, fabric: Fabric, st: object, now: int) -> list[Finding]:
        out = pfc_storm.detect(snapshot, fabric, state, now)
        ticks.append((now, len(out)))
        return out

    g = TraceGen(small_fabric, {"leaf-g0-r0", "spine-r0-0"})
    _silent_after(4, "leaf-g0-r0", {k: {NIC_PORT: STUCK} for k in range(3, 12)}, 12)(g)
    found = run_trace(g.write(tmp_path / "t.jsonl"), small_fabric, detectors=[Detector("s", recording, object)])
    assert [(f.device, f.port) for f in found] == [NIC_PORT]
    reported = [now for now, n in ticks if n]
    # Found right after the first stuck sample (k=3); not reported once stale, 3 intervals after its last (k=4).
    assert reported[0] == at(3) + SETTLE and max(reported) < at(8)


def test_a_queue_not_paused_for_a_minute_is_forgotten(small_fabric: Fabric, tmp_path: Path) -> None:
    """A short pause makes a queue a candidate; a minute later, with its switch still reporting every second, the
    tracker lets it go (it kept every queue that had ever paused: forgetting went by the last sample, not pause)."""
    state = pfc_storm.PfcStormState()
    tracked: dict[int, int] = {}  # pass time -> queues tracked

    def recording(snapshot: Snapshot, fabric: Fabric, st: object, now: int) -> list[Finding]:
        out = pfc_storm.detect(snapshot, fabric, state, now)
        tracked[now] = len(state.tracker)
        return out

    g = TraceGen(small_fabric, {"leaf-g0-r0"})
    pauses({3: {NIC_PORT: (0.3, TX_PER_S)}}, seconds=66)(g)
    run = run_trace(g.write(tmp_path / "t.jsonl"), small_fabric, detectors=[Detector("s", recording, object)])
    assert run == []
    assert tracked[at(3) + SETTLE] == 1  # the pass right after the sample that paused (k=3)
    assert list(tracked.values())[-1] == 0 and state.tracker.keys == []  # gone, though the leaf kept reporting
    gone = min(t for t, n in tracked.items() if n == 0 and t > at(3))
    assert gone == at(63) + SETTLE  # the first pass over a minute after the pause at 3 s


# --- a storm's first tick, with switches sampling at different moments --------------------------------------------
STORM_START = [("leaf-g0-r0", 0.1), ("spine-r0-0", 0.2), ("spine-r0-1", 0.2)]  # the leaf samples first
OTHER_SERVER_PORT = ("leaf-g0-r0", "Ethernet2/1")  # faces gpu-g0-001:nic0, not the storming NIC
Events = Callable[[TraceGen], None]


def one_flap(port: Port, t: float) -> Events:
    return lambda g: g.flap(at(t), [port], down_s=0.2)


STORM_START_CASES: list[tuple[str, Events | None]] = [
    ("no other event", None),
    # The leaf's oper-status event is news from the leaf but no sample of its queues: it must not pass for one.
    ("a flap on another leaf port after the spines' stuck sample", one_flap(OTHER_SERVER_PORT, 3.5)),
    ("a flap on another leaf port across the spines' stuck sample", one_flap(OTHER_SERVER_PORT, 3.12)),
]


@pytest.mark.parametrize(("name", "events"), STORM_START_CASES, ids=[c[0] for c in STORM_START_CASES])
def test_storm_start_is_from_the_nic(name: str, events: Events | None, small_fabric: Fabric, tmp_path: Path) -> None:
    """The NIC storms from 2.15 s: the spines' sample at 3.2 s is all paused, the leaf's at 3.1 s is not yet (paused
    95%). In the tick ending at 4 s the spines wait on a leaf whose queues were last sampled before they were stuck:
    its stuck sample is on its way (at 4.1 s), so no storm from the leaf, whatever else the leaf sent meanwhile.
    Passes run on the tick boundaries and soon after samples arrive."""
    phases = dict(STORM_START)
    g = TraceGen(small_fabric, set(phases))
    g.run_phased(8, phases, [([NIC_PORT, *SPINE_PORTS], 2.15, 8.0)])
    if events is not None:
        events(g)
    found = [f for f in run_trace(g.write(tmp_path / "t.jsonl"), small_fabric) if f.kind == "pfc_storm"]
    assert [(f.device, f.port) for f in found] == [NIC_PORT], [f.summary for f in found]
    assert found[0].detected_ts == at(4.1) + SETTLE  # the pass right after the leaf's first stuck sample
    assert set(found[0].ports) == {"leaf-g0-r0:Ethernet1/1", *(f"{d}:{p}" for d, p in SPINE_PORTS)}


def _on_change(g: TraceGen, port: Port, declared_s: list[float]) -> None:
    """The switch streams its watchdog's stuck-count ON_CHANGE: the first value, then one update per declaration,
    at the moment it declares (between pause samples)."""
    g._line(at(0) - NS // 4, *port, *WATCHDOG, 0)
    for n, t in enumerate(declared_s, start=1):
        g._line(at(t), *port, *WATCHDOG, n)


def test_a_declaration_streamed_on_change_is_a_storm_when_it_lands(small_fabric: Fabric, tmp_path: Path) -> None:
    """A storm from 4.05 s: the switch's watchdog declares the NIC port stuck at 4.25 s (its 200 ms detection time);
    the declaration is the evidence, so the storm is found then, not with the 5-s sample (let alone the 6-s one,
    the first whole paused interval); the pause samples that follow hold it."""
    g = TraceGen(small_fabric, {"leaf-g0-r0", "spine-r0-0", "spine-r0-1"})
    _on_change(g, NIC_PORT, [4.25])
    pauses({5: {NIC_PORT: (0.95, 300)}, 6: {NIC_PORT: STUCK}, 7: {NIC_PORT: STUCK}}, 8)(g)
    (f,) = run_trace(g.write(tmp_path / "t.jsonl"), small_fabric)
    assert (f.kind, f.device, f.port, f.detected_ts) == ("pfc_storm", *NIC_PORT, at(4.25) + SETTLE)


def _storm_passes(fabric: Fabric, trace: Path) -> list[float]:
    """The times (s from T0) of the passes that report a storm."""
    state = pfc_storm.PfcStormState()
    hits: list[float] = []

    def recording(snapshot: Snapshot, fabric: Fabric, st: object, now: int) -> list[Finding]:
        out = pfc_storm.detect(snapshot, fabric, state, now)
        if out:
            hits.append(round((now - at(0)) / NS, 3))
        return out

    run_trace(trace, fabric, detectors=[Detector("r", recording, object)])
    return hits


def test_a_declaration_on_a_down_port_is_no_storm(small_fabric: Fabric, tmp_path: Path) -> None:
    g = TraceGen(small_fabric, {"leaf-g0-r0", "spine-r0-0", "spine-r0-1"})
    _on_change(g, NIC_PORT, [4.25])
    pauses({5: {NIC_PORT: (0.3, 300)}}, 8, before=down_at(4))(g)
    assert run_trace(g.write(tmp_path / "t.jsonl"), small_fabric) == []


def test_a_declarations_storm_ends_with_the_next_sample_and_does_not_come_back(
    small_fabric: Fabric, tmp_path: Path
) -> None:
    """Declared at 1.25 s, then no pause: stuck from the declaration until the 2-s sample shows it drains. The count
    keeps its last rise (ON_CHANGE), but that old rise says nothing about the pause at 5 s: no storm then. (The tick
    at 2 s runs before the 2-s sample lands, so the hold is still there for it.)"""
    g = TraceGen(small_fabric, {"leaf-g0-r0", "spine-r0-0", "spine-r0-1"})
    _on_change(g, NIC_PORT, [1.25])
    pauses({5: {NIC_PORT: (0.3, 300)}}, 8)(g)
    assert _storm_passes(small_fabric, g.write(tmp_path / "t.jsonl")) == [1.25 + SETTLE / NS, 2.0]


def test_a_switch_one_of_whose_ports_just_came_up_is_not_the_origin_yet(small_fabric: Fabric, tmp_path: Path) -> None:
    """Chaos seed 8 (small-sonic): an operator enabled a NIC's port and the NIC stormed at once; the leaf paused its
    spines for it, and was called the origin before the NIC port's queue could be judged (no decision within 5 s of
    an oper-status change). A switch whose other port went up or down within the grace period is not an origin
    until it is over; the same pause with no such change is decided at 3.3 s (as above)."""
    phases = {"leaf-g0-r0": 0.3, "spine-r0-0": 0.1, "spine-r0-1": 0.1}
    g = TraceGen(small_fabric, set(phases), watchdog=True)
    g.oper(at(1.0), NIC_PORT, False)
    g.oper(at(1.5), NIC_PORT, True)  # the operator's `no shutdown`
    g.run_phased(9, phases, [(SPINE_PORTS, 2.0, 20)])
    found = run_trace(g.write(tmp_path / "t.jsonl"), small_fabric)
    assert {(f.kind, f.device, f.evidence["peer_role"]) for f in found} == {
        ("pfc_storm", "spine-r0-0", "leaf"),
        ("pfc_storm", "spine-r0-1", "leaf"),
    }
    assert min(f.detected_ts for f in found) >= at(1.5 + 5.0)
