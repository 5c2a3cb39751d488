"""The twin under workloads: congested lossless queues answer to their load and their running config through the
congestion model, and every counter surface stays consistent. Pure: a Twin on a fixed clock, no sockets."""

from __future__ import annotations

import numpy as np
import pytest

from lab import nics
from lab.counters import COL
from lab.model import PortConfig, Twin
from lab.workloads import WorkloadError, WorkloadRunner
from tests.conftest import EXAMPLES
from tests.unit.lab.test_twin_physics import OUT_IN, Clock, moved_over
from topology.blueprint import generate_blueprint
from topology.fabric import Fabric
from topology.labels import complete_labels
from topology.model import Cabling
from topology.spec import load_spec

TARGET = ("leaf-g0-r0", "Ethernet1/1")
# fabricd's campus ECN at 400G (policies EcnPolicy: 12-120 us, 5 %)
ECN = {3: (600_000, 6_000_000, 5)}


def _twin(cabling: Cabling, clock: Clock, ecn: dict[int, tuple[int, int, int]]) -> Twin:
    twin = Twin(Fabric(complete_labels(cabling)), clock=clock)
    for name, sw in twin.switches.items():
        for port in sw.ports:
            twin.set_port_config(name, port, PortConfig(pfc_enabled=True, no_drop=frozenset({3}), ecn=dict(ecn)))
    twin.advance(clock.t)
    return twin


def _rate(moved: dict[str, np.ndarray], twin: Twin, column: str, seconds: int = 10) -> float:
    sw = twin.switches[TARGET[0]]
    return float(moved[TARGET[0]][sw.index[TARGET[1]], COL[column]] / seconds)


def test_an_incast_is_held_to_line_rate_and_marked(small_blueprint: Cabling) -> None:
    clock = Clock()
    twin = _twin(small_blueprint, clock, ECN)
    quiet = moved_over(twin, clock, 10)
    runner = WorkloadRunner(twin)
    rec = runner.start("incast", {"port": ":".join(TARGET), "fan_in": 6}, clock.t)
    assert len(rec.senders) == 6 and rec.receivers == ["gpu-g0-000:nic0"]
    busy = moved_over(twin, clock, 10)
    line = 400e9 / 8
    assert _rate(quiet, twin, "if.out-octets") < 0.7 * line
    assert _rate(busy, twin, "if.out-octets") == pytest.approx(line, rel=0.02)  # full, and no more than full
    view = twin.congested[TARGET]
    assert view.outcome.offered_bps > 5 * 400e9 and view.outcome.mark_share > 0
    marks = _rate(busy, twin, "q3.ecn-marked-pkts")
    assert marks == pytest.approx(_rate(busy, twin, "q3.transmit-pkts") * view.outcome.mark_share, rel=1e-6)
    sw = twin.switches[TARGET[0]]
    assert sw.queue_watermark[sw.index[TARGET[1]], 3] >= view.outcome.queue_mean_bytes > 0
    # every cable still carries to one end what the other sent, pause frames included
    for a, b in twin.links:
        if twin.is_switch(a.device) and twin.is_switch(b.device):
            ra, rb = twin.switches[a.device].index[a.port], twin.switches[b.device].index[b.port]
            for out, into in OUT_IN:
                sent, got = busy[a.device][ra, COL[out]], busy[b.device][rb, COL[into]]
                assert got == pytest.approx(sent, rel=1e-9, abs=2), (a, out)
    runner.clear(rec.id, clock.t)
    after = moved_over(twin, clock, 10)
    assert not twin.congested
    assert _rate(after, twin, "if.out-octets") == pytest.approx(_rate(quiet, twin, "if.out-octets"), rel=1e-9)


@pytest.mark.slow  # a model run of a second or more: CI runs it, `pytest tests/unit -m "not slow"` not
def test_the_queue_answers_to_its_ecn_thresholds(small_blueprint: Cabling) -> None:
    """The same incast under fabricd's thresholds and under thresholds ten times higher: higher thresholds hold a
    deeper queue; with ECN off nothing is marked and only PFC is left."""
    outcomes = {}
    for name, ecn in {"policy": ECN, "high": {3: (6_000_000, 60_000_000, 5)}, "off": {}}.items():
        clock = Clock()
        twin = _twin(small_blueprint, clock, ecn)
        WorkloadRunner(twin).start("incast", {"port": ":".join(TARGET), "fan_in": 6}, clock.t)
        outcomes[name] = twin.congested[TARGET].outcome
    assert outcomes["high"].queue_mean_bytes > 3 * outcomes["policy"].queue_mean_bytes
    assert outcomes["off"].mark_share == 0
    assert outcomes["off"].queue_max_bytes > outcomes["policy"].queue_max_bytes


@pytest.mark.parametrize(
    ("kind", "params", "error"),
    [
        ("storm", {}, "unknown workload 'storm'"),
        ("incast", {"port": "leaf-g0-r0:Ethernet5/1"}, "not a switch port facing a server NIC"),
        ("incast", {"port": "leaf-g0-r0:Ethernet1/1", "fan_in": 0}, "fan_in must be between 1 and 4096"),
        ("alltoall", {"rail": 9}, "rail 9: fewer than two NICs"),
        ("allreduce", {"group": "x"}, "group must be aggregation group numbers"),
        ("dci-bulk", {}, "dci must be one of (none: this fabric has no DCI)"),
        ("incast", {"port": "leaf-g0-r0:Ethernet1/1", "on_ms": "soon"}, "on_ms must be a number"),
    ],
)
def test_bad_workloads_are_refused_with_the_field_named(
    small_blueprint: Cabling, kind: str, params: dict[str, object], error: str
) -> None:
    twin = Twin(Fabric(complete_labels(small_blueprint)), clock=Clock())
    with pytest.raises(WorkloadError, match=error.replace("(", r"\(").replace(")", r"\)")):
        WorkloadRunner(twin).start(kind, params)


def test_collective_phases_switch_the_rates(small_blueprint: Cabling) -> None:
    """alltoall on rail 0 with 200 ms on / 300 ms off: the rail's downlinks carry the collective only while on."""
    clock = Clock()
    twin = _twin(small_blueprint, clock, ECN)
    sw = twin.switches[TARGET[0]]
    row = sw.index[TARGET[1]]
    base = float(sw.rate[row, COL["if.out-octets"]])
    WorkloadRunner(twin).start("alltoall", {"rail": 0, "on_ms": 200, "off_ms": 300}, clock.t)
    on = float(sw.rate[row, COL["if.out-octets"]])
    twin.advance(clock.t + 250_000_000)
    off = float(sw.rate[row, COL["if.out-octets"]])
    twin.advance(clock.t + 550_000_000)
    again = float(sw.rate[row, COL["if.out-octets"]])
    assert on > base * 1.3 and off == pytest.approx(base, rel=1e-9) and again == pytest.approx(on, rel=1e-9)


def test_a_phase_seen_before_reads_as_when_first_solved(small_blueprint: Cabling) -> None:
    """An incast switching 200 ms on / 300 ms off: the twin remembers what it derived per traffic state (the hot
    queues, the model's answer, the throttled rates, the NICs' counters); every counter rate of the third on-phase is
    the first's, and every congested queue's answer too, while only the offered traffic is recomputed at an edge."""
    clock = Clock()
    twin = _twin(small_blueprint, clock, ECN)
    WorkloadRunner(twin).start("incast", {"port": ":".join(TARGET), "fan_in": 6, "on_ms": 200, "off_ms": 300}, clock.t)
    first = {name: sw.rate.copy() for name, sw in twin.switches.items()}
    answers = {k: v.outcome for k, v in twin.congested.items()}
    solves = twin._solver.solves
    twin.advance(clock.t + 250_000_000)
    assert not twin.congested
    twin.advance(clock.t + 1_050_000_000)  # on again, the third time
    assert {k: v.outcome for k, v in twin.congested.items()} == answers and twin._solver.solves == solves
    for name, sw in twin.switches.items():
        assert np.array_equal(sw.rate, first[name]), name


@pytest.mark.slow
def test_allreduce_and_dci_bulk_run(small_blueprint: Cabling) -> None:
    dci = complete_labels(generate_blueprint(load_spec(EXAMPLES / "small-dci.yaml")))
    clock = Clock()
    twin = Twin(Fabric(dci), clock=clock)
    runner = WorkloadRunner(twin)
    ring = runner.start("allreduce", {"group": "0,1"}, clock.t)
    bulk = runner.start("dci-bulk", {"senders": 8}, clock.t)
    assert len(ring.senders) == len(ring.receivers) > 2
    assert len(bulk.senders) == 8 and bulk.receivers == []
    assert [r.id for r in runner.clear(now_ns=clock.t)] == [ring.id, bulk.id]


def test_switches_report_the_congestion_as_eos_and_sonic_name_it() -> None:
    """An incast on a SONiC leaf: the queue's watermark in USER_WATERMARKS by the OID COUNTERS_QUEUE_NAME_MAP gives
    `EthernetN:3`, the PG watermarks, and the port row's pause counters decode into fabricd's leaves; the same queue's
    OpenConfig max-queue-len (what EOS serves) holds the same watermark."""
    from fabricd.telemetry import sonic as fabricd_sonic
    from lab import sonic_gnmi

    cabling = complete_labels(generate_blueprint(load_spec(EXAMPLES / "small-sonic.yaml")))
    clock = Clock()
    twin = _twin(cabling, clock, ECN)
    WorkloadRunner(twin).start("incast", {"port": ":".join(TARGET), "fan_in": 3}, clock.t)
    clock.t += 10 * 10**9
    twin.advance(clock.t)
    sw = twin.switches[TARGET[0]]
    row = sw.index[TARGET[1]]
    [(_, names)] = sonic_gnmi.rows(twin, sw, "COUNTERS_DB", ["COUNTERS_QUEUE_NAME_MAP"], clock.t)
    queue_oid = names["Ethernet0:3"]
    [(path, wm)] = sonic_gnmi.rows(twin, sw, "COUNTERS_DB", ["USER_WATERMARKS", queue_oid], clock.t)
    assert path == ["USER_WATERMARKS", queue_oid]
    assert int(wm["SAI_QUEUE_STAT_SHARED_WATERMARK_BYTES"]) == int(sw.queue_watermark[row, 3]) > 0
    assert sw.value(TARGET[1], "q3.max-queue-len", clock.t) == int(sw.queue_watermark[row, 3])
    pgs = sonic_gnmi.rows(twin, sw, "COUNTERS_DB", ["PERSISTENT_WATERMARKS", "*"], clock.t)
    assert max(int(r["SAI_INGRESS_PRIORITY_GROUP_STAT_SHARED_WATERMARK_BYTES"]) for _, r in pgs if len(r) == 2) > 0
    with pytest.raises(sonic_gnmi.DbPathError, match="not a queue or priority-group OID"):
        sonic_gnmi.rows(twin, sw, "COUNTERS_DB", ["USER_WATERMARKS", "oid:0x99"], clock.t)
    [(path, port_row)] = sonic_gnmi.rows(twin, sw, "COUNTERS_DB", ["COUNTERS", "Ethernet0"], clock.t)
    leaves = {(leaf, index) for _, leaf, index, _ in fabricd_sonic.decode("COUNTERS_DB", path, port_row)}
    assert {("pfc.pfc-on-total-tx-time", "3"), ("pfc.pfc-on-total-rx-time", "3")} <= leaves


def test_flowlets_reorder_on_a_dlb_group_only_when_the_gap_is_below_its_skew(small_blueprint: Cabling) -> None:
    """A leaf with DLB whose two uplinks differ by 3 km (15 us one way): SONiC's default 256 us gap never lets a flow
    move (no reorder, the hash's placement stays); a 5 us gap moves flowlets and reorders some; the members' ARS
    counters count the flowlets; the members' loads are the flowlet model's shares (its ECMP weights in the traffic
    model), and the even hash split again once DLB is off."""
    import dataclasses as dc

    leaf = "leaf-g0-r0"
    far = {("spine-r0-0", leaf)}
    links = [
        dc.replace(lk, length_m=3030.0)
        if (lk.a.device, lk.b.device) in far or (lk.b.device, lk.a.device) in far
        else lk
        for lk in small_blueprint.links
    ]
    clock = Clock()
    twin = Twin(Fabric(complete_labels(dc.replace(small_blueprint, links=links))), clock=clock)
    twin.set_dlb(leaf, True)
    twin.advance(clock.t)
    long_gap = twin.flowlets[leaf]
    assert long_gap.skew_us == pytest.approx(15.15, rel=0.01)
    assert long_gap.reorders_ps == 0 and long_gap.moves_ps == 0
    # the members carry what the flowlet model gives them (their ECMP weights in the traffic model), uneven here
    sw = twin.switches[leaf]
    sent = sw.rate[[sw.index[p] for p in long_gap.members], COL["if.out-octets"]]
    assert (sent / sent.sum()).tolist() == pytest.approx(list(long_gap.shares), rel=1e-9)
    assert max(long_gap.shares) - min(long_gap.shares) > 0.05
    twin.congestion.flowlet_gap_us = 5.0
    twin.touch()
    twin.advance(clock.t)
    short_gap = twin.flowlets[leaf]
    assert short_gap.reorders_ps > 0 and short_gap.moves_ps > short_gap.reorders_ps
    rows = [sw.index[p] for p in short_gap.members]
    assert sw.rate[rows, COL["ars.flowlets"]].sum() == pytest.approx(short_gap.flowlets_ps)
    sent = sw.rate[rows, COL["if.out-octets"]]
    assert (sent / sent.sum()).tolist() == pytest.approx(list(short_gap.shares), rel=1e-9)
    # every cable still carries to one end what the other sent
    for a, b in twin.links:
        if twin.is_switch(a.device) and twin.is_switch(b.device):
            ra, rb = twin.switches[a.device].index[a.port], twin.switches[b.device].index[b.port]
            got = twin.switches[b.device].rate[rb, COL["if.in-octets"]]
            assert got == pytest.approx(twin.switches[a.device].rate[ra, COL["if.out-octets"]], rel=1e-9, abs=1)
    twin.set_dlb(leaf, False)  # DLB off: the hash's even split again
    twin.advance(clock.t)
    sent = sw.rate[rows, COL["if.out-octets"]]
    assert leaf not in twin.flowlets and sent.max() == pytest.approx(sent.min(), rel=1e-9)
    assert max(short_gap.shares) - min(short_gap.shares) < max(long_gap.shares) - min(long_gap.shares)


@pytest.mark.slow
def test_a_dr_generates_cnps_for_the_long_haul_traffic_it_marks() -> None:
    """dci-bulk on small-dci congests the DRs' long-haul ports; an EOS DR generates CNPs itself (CongestionSettings.
    dr_cnp: seed 004's DR-CNP) and counts them; told not to, the CNPs come from the far receivers (none counted) and
    the loop spans the long haul."""
    cabling = complete_labels(generate_blueprint(load_spec(EXAMPLES / "small-dci.yaml")))
    clock = Clock()
    twin = _twin(cabling, clock, ECN)
    WorkloadRunner(twin).start("dci-bulk", {"senders": 12}, clock.t)
    long_haul = {(ep.device, ep.port) for eps in twin.dci_ports.values() for ep in eps}
    hot = long_haul & twin.congested.keys()
    assert hot and all(twin.congested[k].dr_cnp for k in hot)
    device, port = sorted(hot)[0]
    sw = twin.switches[device]
    cnps = twin.congested[(device, port)].outcome.cnp_ps
    assert cnps > 0 and sw.rate[sw.index[port], COL["cnp.sent"]] == pytest.approx(cnps)
    twin.congestion.dr_cnp = frozenset()
    twin.touch()
    twin.advance(clock.t)
    assert not twin.congested[(device, port)].dr_cnp
    assert sw.rate[sw.index[port], COL["cnp.sent"]] == 0


def _nic_rates(twin: Twin) -> dict[tuple[str, str], dict[str, float]]:
    """Each server port's NIC counter rates (per second) now."""
    out = {}
    for name, sw in twin.switches.items():
        for row, port in enumerate(sw.ports):
            v = {n: float(sw.rate[row, COL[f"nic.{n}"]]) for n in nics.NAMES}
            if any(v.values()):
                out[(name, port)] = v
    return out


def test_nics_count_the_marks_they_receive_and_the_cnps_they_act_on(small_blueprint: Cabling) -> None:
    """§3.3 [mlx5-counters]: under an incast the receiving NIC counts the CE-marked packets and sends one CNP per
    CNP the model gives its queue (np_cnp_sent); the senders act on every one of them (rp_cnp_handled, none
    ignored: CC is on); only NICs on the incast's paths move. The counters are cumulative, as hw_counters are, and
    served by the control API's `GET /congestion` (no switch serves a NIC's counters)."""
    from lab.control import congestion_state

    clock = Clock()
    twin = _twin(small_blueprint, clock, ECN)
    runner = WorkloadRunner(twin)
    rec = runner.start("incast", {"port": ":".join(TARGET), "fan_in": 6}, clock.t)
    view = twin.congested[TARGET]
    rates = _nic_rates(twin)
    target = rates[TARGET]
    marked = {
        k: twin.switches[k[0]].rate[twin.switches[k[0]].index[k[1]], COL["q3.ecn-marked-pkts"]] for k in twin.congested
    }
    # CE marks of every congested hop reach the receivers (the target's own queue's all reach it)
    assert sum(r["np_ecn_marked_roce_packets"] for r in rates.values()) == pytest.approx(sum(marked.values()), rel=1e-6)
    assert target["np_ecn_marked_roce_packets"] >= marked[TARGET] > 0
    cnps = sum(v.outcome.cnp_ps for v in twin.congested.values() if not v.dr_cnp)
    assert sum(r["np_cnp_sent"] for r in rates.values()) == pytest.approx(cnps, rel=1e-6)
    assert target["np_cnp_sent"] >= view.outcome.cnp_ps * (1 - 1e-9) > 0
    handled = {k: r["rp_cnp_handled"] for k, r in rates.items() if r["rp_cnp_handled"] > 0}
    assert sum(handled.values()) == pytest.approx(cnps, rel=1e-6)  # every CNP reaches a sender
    assert all(r["rp_cnp_ignored"] == 0 for r in rates.values())
    senders = {twin.peers[k].device for k in handled}
    assert {n.split(":")[0] for n in rec.senders} <= senders  # the workload's senders are cut (and base traffic)
    clock.t += 10 * 10**9
    twin.advance(clock.t)
    state = {(n["switch"], n["port"]): n for n in congestion_state(twin)["nics"]}
    assert state[TARGET]["np_cnp_sent"] == pytest.approx(10 * target["np_cnp_sent"], rel=0.01)
    assert state[TARGET]["nic"] == "gpu-g0-000:nic0"
    runner.clear(rec.id, clock.t)
    assert not _nic_rates(twin)  # no congestion, no CNP
    after = {(n["switch"], n["port"]): n for n in congestion_state(twin)["nics"]}
    assert after[TARGET]["np_cnp_sent"] == state[TARGET]["np_cnp_sent"]  # cumulative: kept, not cleared


def test_with_dr_cnp_the_senders_count_the_drs_cnps_and_no_receiver_does() -> None:
    """DR-generated CNPs (lab/nics.py ASSUMPTION: the DR signals instead of marking CE): the local senders count them
    as handled; no NIC counts CE marks or sends CNPs for the long-haul queues (their receivers are far away)."""
    cabling = complete_labels(generate_blueprint(load_spec(EXAMPLES / "small-dci.yaml")))
    clock = Clock()
    twin = _twin(cabling, clock, ECN)
    WorkloadRunner(twin).start("dci-bulk", {"senders": 12}, clock.t)
    dr_cnps = sum(v.outcome.cnp_ps for v in twin.congested.values() if v.dr_cnp)
    others = sum(v.outcome.cnp_ps for v in twin.congested.values() if not v.dr_cnp)
    assert dr_cnps > 0
    rates = _nic_rates(twin)
    # the DR's CNPs all reach local senders; of the campus queues', those of senders on the far campus leave the twin
    handled = sum(r["rp_cnp_handled"] for r in rates.values())
    assert dr_cnps * (1 - 1e-9) <= handled <= (dr_cnps + others) * (1 + 1e-9)
    assert sum(r["np_cnp_sent"] for r in rates.values()) <= others * (1 + 1e-9)
    twin.congestion.dr_cnp = frozenset()  # told not to: the far receivers' CNPs (not in the twin) cut the senders
    twin.touch()
    twin.advance(clock.t)
    assert not any(v.dr_cnp for v in twin.congested.values())
    local = sum(r["np_cnp_sent"] for r in _nic_rates(twin).values())
    assert local < sum(v.outcome.cnp_ps for v in twin.congested.values())
